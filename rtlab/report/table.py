"""The comparison table: variants side by side, as vendor reports show them.

One block per board × suite × load; columns are kernel variants; rows are
min / avg / max / p99.9 (µs), the share of samples at or above the budget,
the budget and the verdict. Reasons for every non-pass follow the tables.
"""
from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from ..loads.health import load_cell
from ..soak.checkpoint import pwcet_refusal, soak_cells
from ..core.model import JobResult, Measurement, RunResult, Verdict, combine_verdicts
from ..suites import Suite


def _us(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v < 10 else f"{v:,.0f}"


def _share(v: Optional[float]) -> str:
    if v is None:
        return "?"
    if v == 0:
        return "0"
    return f"{v * 100:.3g}%"


ROWS = ("min", "avg", "max", "p99.9", ">= budget", "budget max", "cycles", "verdict")
#: rows shown (before "verdict") only in blocks where a measurement has them:
#: a tool's whole-run result (hackbench time, pi_stress inversions) and how
#: the load ran (its share of the load CPUs and its own throughput)
EXTRA_ROWS = ("result", "load", "pWCET 1e-9", "pWCET 1e-9/h", "soak")
#: extra rows shown right after "max": the estimated worst case beside the observed one
BESIDE_MAX = ("pWCET 1e-9", "pWCET 1e-9/h")


def _extra(m: Measurement) -> dict[str, str]:
    out = {}
    suite = Suite.for_tool(m.output.tool)
    r = suite.result_cell(m.output) if suite is not None else None
    if r is not None:
        out["result"] = r
    if any(str(k).startswith("load.") for k in m.output.metrics):
        out["load"] = load_cell(m.key.load, m.output.metrics)
    out.update(soak_cells(m.output.metrics))  # a soak's progress and its worst-case estimate
    return out


def _cells(m: Optional[Measurement], job: JobResult) -> dict[str, str]:
    if m is None:
        tag = "FAIL" if job.build_error else ("INFRA" if job.infra_error else "-")
        return {r: (tag if r == "verdict" else "-") for r in ROWS}
    c = m.output.combined()
    v = (m.verdict.value if m.verdict else "?").upper()
    if c is None:
        return {**{r: (v if r == "verdict" else "-") for r in ROWS}, **_extra(m)}
    budget = m.budget.max_us if m.budget else None
    return {**_extra(m),
        "min": _us(c.min_us), "avg": _us(c.avg_us), "max": _us(c.max_us),
        "p99.9": _us(c.percentiles_us.get("99.9")),
        ">= budget": _share(m.share_over_budget) if budget is not None else "-",
        "budget max": _us(budget), "cycles": f"{c.cycles:,}", "verdict": v,
    }


def _repeat_cells(pairs: list[tuple[Optional[Measurement], JobResult]]) -> dict[str, str]:
    """A campaign's repeats of one measurement in one column: the median
    across repeats with its min-max, the verdict of them all."""
    if len(pairs) == 1:
        return _cells(*pairs[0])

    first = next((m for m, _ in pairs if m is not None), None)
    cells = _cells(first, pairs[0][1])
    got: dict[str, list] = {"min": [], "avg": [], "max": [], "p99.9": [], "cycles": [], ">= budget": []}
    verdicts = []
    for m, job in pairs:
        if m is None:
            verdicts.append(Verdict.FAIL if job.build_error else Verdict.INFRA)
            continue
        verdicts.append(m.verdict or Verdict.INFRA)
        c = m.output.combined()
        if c is None:
            continue
        for row, v in (("min", c.min_us), ("avg", c.avg_us), ("max", c.max_us),
                       ("p99.9", c.percentiles_us.get("99.9")), ("cycles", c.cycles),
                       (">= budget", m.share_over_budget)):
            if v is not None:
                got[row].append(v)
    for row, vals in got.items():
        if not vals or cells.get(row) == "-":
            continue
        fmt = (lambda x: f"{x:,.0f}") if row == "cycles" else (_share if row == ">= budget" else _us)
        med = statistics.median(vals)
        cells[row] = f"{fmt(med)} ({fmt(min(vals))}-{fmt(max(vals))})"
    cells["verdict"] = f"{combine_verdicts(verdicts).value.upper()} x{len(pairs)}"
    return cells


@dataclass
class TableBlock:
    """One block of the comparison table: a board × suite × load, its
    variants as columns (name, row -> cell) and the rows shown, in order."""

    board: str
    suite: str
    load: str
    title: str
    columns: list[tuple[str, dict[str, str]]]
    rows: tuple[str, ...]


def table_blocks(run: RunResult) -> list[TableBlock]:
    """The blocks of the comparison table, in run order; the text table and
    report.html's HTML tables are both drawn from them."""
    # board -> (suite, load) -> variant -> measurement, in run order
    variants_by_board: "OrderedDict[str, list[str]]" = OrderedDict()
    for job in run.jobs:
        variants_by_board.setdefault(job.board, [])
        if job.variant not in variants_by_board[job.board]:
            variants_by_board[job.board].append(job.variant)
    suites_by_board: dict[str, list[tuple[str, str]]] = {}
    for job in run.jobs:
        for m in job.measurements:
            sl = (m.key.suite, m.key.load)
            suites_by_board.setdefault(job.board, [])
            if sl not in suites_by_board[job.board]:
                suites_by_board[job.board].append(sl)
    for n in run.not_available:  # shown as n/a columns, in plan order
        variants_by_board.setdefault(n["board"], [])
        if n["variant"] not in variants_by_board[n["board"]]:
            variants_by_board[n["board"]].append(n["variant"])
    jobs = {(j.board, j.variant): j for j in run.jobs}
    repeats: dict[tuple[str, str], list[JobResult]] = {}
    for j in run.jobs:  # a repeating campaign: one column per variant, every repeat in it
        repeats.setdefault((j.board, j.variant), []).append(j)
    blocks = []
    for board, variants in variants_by_board.items():
        sample_job = next((jobs[(board, v)] for v in variants if (board, v) in jobs), None)
        if sample_job is None or all(jobs[(board, v)].only_not_available for v in variants if (board, v) in jobs):
            continue  # nothing ran on this board: listed under "Not available"
        for suite, load in suites_by_board.get(board, [("-", "-")]):
            title = f"{board} ({sample_job.arch}, budget class {sample_job.budget_class}) · {suite} · {load} · µs"
            cols = []
            for v in variants:
                job = jobs.get((board, v))
                if job is None:
                    cols.append((v, {r: "n/a" for r in ROWS}))
                    continue
                pairs = [(next((m for m in j.measurements if (m.key.suite, m.key.load) == (suite, load)), None), j)
                         for j in repeats[(board, v)]]
                cols.append((v, _repeat_cells(pairs)))
            rows = ROWS[:-1] + tuple(r for r in EXTRA_ROWS if any(r in c for _, c in cols)) + ROWS[-1:]
            beside = tuple(r for r in BESIDE_MAX if r in rows)
            if beside:
                rest = tuple(r for r in rows if r not in beside)
                at = rest.index("max") + 1
                rows = rest[:at] + beside + rest[at:]
            blocks.append(TableBlock(board, suite, load, title, cols, rows))
    return blocks


def comparison_table(run: RunResult) -> str:
    out = []
    for b in table_blocks(run):
        cols, rows = b.columns, b.rows
        width0 = max(len(r) for r in rows)
        widths = [max(len(v), *(len(c.get(r, "-")) for r in rows)) for v, c in cols]
        out.append(b.title)
        out.append(" " * width0 + "  " + "  ".join(v.rjust(w) for (v, _), w in zip(cols, widths)))
        for r in rows:
            out.append(r.ljust(width0) + "  " + "  ".join(c.get(r, "-").rjust(w) for (_, c), w in zip(cols, widths)))
        out.append("")
    unavailable = not_available_lines(run)
    if unavailable:
        out.append("Not available (not run, not judged):")
        out.extend(f"  {u}" for u in unavailable)
        out.append("")
    refusals = [f"  {job.board}/{job.variant}{f' r{job.repeat}' if job.repeat else ''} "
                f"{m.key.suite}@{m.key.load}: {why}"
                for job in run.jobs for m in job.measurements
                for why in [pwcet_refusal(m.output.metrics or {})] if why]
    if refusals:
        out.append("pWCET n/a (worst case not estimated):")
        out.extend(refusals)
        out.append("")
    problems = problem_lines(run)
    if problems:
        out.append("Not passed:")
        out.extend(f"  {p}" for p in problems)
        out.append("")
    out.append(f"Verdict: {run.verdict.value.upper()}  ({verdict_counts(run)})")
    return "\n".join(out)


def not_available_lines(run: RunResult) -> list[str]:
    """What the plan held and nothing ran: whole jobs, then single suites."""
    return ([f"{n['board']}/{n['variant']}: {n['reason']}" for n in run.not_available]
            + [f"{job.board}/{job.variant}/{n['suite']}/{n['load']}: {n['reason']}"
               for job in run.jobs for n in job.not_available])


def problem_lines(run: RunResult) -> list[str]:
    """Every build error, infra error, broken budget and INFRA measurement, one line each."""
    problems = []
    for job in run.jobs:
        if job.build_error:
            problems.append(f"FAIL {job.board}/{job.variant}: {job.build_error}")
        if job.infra_error:
            problems.append(f"INFRA {job.board}/{job.variant}: {job.infra_error}")
        for m in job.measurements:
            if m.verdict in (Verdict.FAIL, Verdict.INFRA):
                problems.append(f"{m.verdict.value.upper()} {m.key.label()}: {'; '.join(m.reasons)}")
    return problems


def verdict_counts(run: RunResult) -> str:
    """Jobs and measurements per verdict, the text after the run's verdict."""
    counts = {v: sum(1 for j in run.jobs if j.verdict == v and not j.only_not_available) for v in Verdict}
    # measurements are counted on their own: a job's verdict is its worst one,
    # so one FAIL in a job would hide every INFRA measurement beside it
    measured = {v: sum(1 for j in run.jobs for m in j.measurements if m.verdict == v) for v in Verdict}
    infra_jobs = sum(1 for j in run.jobs if j.infra_error)
    return (f"{counts[Verdict.PASS]} jobs pass, {counts[Verdict.FAIL]} over budget, "
            f"{infra_jobs + measured[Verdict.INFRA]} infra errors; measurements: "
            f"{measured[Verdict.PASS]} pass, {measured[Verdict.FAIL]} fail, "
            f"{measured[Verdict.INFRA]} infra"
            + (f", {measured[Verdict.SHOWN]} shown, not judged" if measured[Verdict.SHOWN] else ""))
