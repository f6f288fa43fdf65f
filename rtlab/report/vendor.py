"""The vendor reports' own tables, from any run: `rtlab report --vendor RUN_DIR`.

Board vendors and integrators publish latency reports that compare kernels
side by side. Their tables are always the same few things, and this module
builds them from a results directory:

* per test (board · suite · load, one block per interval), kernel variants
  as columns;
* min / avg / max per thread (cyclictest ``T: n``, the IPC tools' sender ->
  receiver pairs ``#1 -> #0``, rtbench's operations), and for all threads
  together;
* samples, in millions where large ("43.2 M", as the reports print them);
* the share of samples at or above each threshold (10, 70 and 100 µs by
  default): exact where the tool's histogram reaches the threshold, 0 where
  the maximum is below it, and "unknown" otherwise: never a guess;
* log-count histograms (text here, drawn as SVG in the HTML version).

Repeats of a board × variant (several jobs for the same pair) are merged:
per thread, min of mins, max of maxes, cycle-weighted average, histograms
added; the row "runs" lists each run's maximum so the spread stays visible.
"""
from __future__ import annotations

import html
import math
import re
import shlex
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from ..errors import InputError
from ..core.fsutil import read_bounded
from ..core.rundir import COMMAND, RunDir
from ..core.model import (
    Histogram, JobResult, Measurement, RunResult, ThreadResult, ToolOutput, Verdict, combine_verdicts,
)
from .plot import histogram_svg, return_level_svg
from ..suites import Suite

#: the reports' thresholds: 10 µs (interrupt response), 70 µs (periodic
#: jitter under stress), 100 µs (the usual "hard real-time" line)
DEFAULT_THRESHOLDS = (10.0, 70.0, 100.0)


def _tool(tool: str) -> type[Suite] | Suite:
    """What the suites say about *tool* (Suite.per_operation, .pairs,
    .interval_option); the base class's defaults for a tool no suite runs."""
    return Suite.for_tool(tool) or Suite

#: text histograms: at most this many rows (buckets are merged to fit)
TEXT_HIST_ROWS = 16
TEXT_HIST_WIDTH = 40


def parse_thresholds(text: str) -> tuple[float, ...]:
    """"10,70,100" -> (10.0, 70.0, 100.0); each > 0, finite, no duplicates."""
    out: list[float] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            v = float(part)
        except ValueError:
            raise ValueError(f"threshold {part!r} is not a number (µs)") from None
        if not math.isfinite(v) or v <= 0 or v > 1e9:
            raise ValueError(f"threshold {part!r} must be a positive number of µs (at most 1e9)")
        if v in out:
            raise ValueError(f"threshold {part} given twice")
        out.append(v)
    if not out:
        raise ValueError("no threshold given")
    return tuple(sorted(out))


# ---------------------------------------------------------------------------
# formatting

def fmt_samples(n: Optional[int]) -> str:
    """Sample counts as the reports print them: millions where large."""
    if n is None:
        return "-"
    if n >= 1_000_000:
        return f"{n / 1e6:.3g} M"
    return f"{n:,}"


def fmt_us(v: Optional[float]) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v < 1:  # rtbench's operations: tens of nanoseconds
        s = f"{v:.3f}"
    elif v < 10:
        s = f"{v:.2f}"
    elif v < 1000:
        s = f"{v:.1f}"
    else:
        return f"{v:,.0f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def fmt_threshold(t: float) -> str:
    return f"{t:g}"


def fmt_share(fraction: Optional[float]) -> str:
    """A share as a percentage with 4 significant digits, never in
    scientific notation (the reports print 0.0000833 %), "unknown" if None."""
    if fraction is None:
        return "unknown"
    if fraction == 0:
        return "0 %"
    pct = fraction * 100
    decimals = max(0, 3 - math.floor(math.log10(pct)))
    s = f"{pct:.{decimals}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return f"{s} %"


# ---------------------------------------------------------------------------
# shares

@dataclass(frozen=True)
class Share:
    """Samples at or above a threshold: fraction and count, or why unknown."""

    threshold_us: float
    fraction: Optional[float]
    count: Optional[int]
    unknown: str = ""  # why the share cannot be known (empty when known)

    def cell(self) -> str:
        if self.fraction is None:
            return "unknown"
        if self.count:
            return f"{fmt_share(self.fraction)} ({fmt_samples(self.count)})"
        return fmt_share(self.fraction)


def share_at_or_above(t: ThreadResult, threshold_us: float) -> Share:
    """The model's share (:meth:`ThreadResult.share_at_or_above`) with its
    count and, when it is unknown, the reason."""
    if t.cycles == 0:
        return Share(threshold_us, None, None, "no samples")
    if t.min_us >= threshold_us:  # every sample is: exact without a histogram
        return Share(threshold_us, 1.0, t.cycles)
    fraction = t.share_at_or_above(threshold_us)
    if fraction is not None:
        count = 0 if fraction == 0 else t.histogram.count_at_or_above(threshold_us)
        return Share(threshold_us, fraction, count)
    if t.histogram is None:
        return Share(threshold_us, None, None,
                     f"max {fmt_us(t.max_us)} µs is at or above it and the tool kept no histogram")
    h = t.histogram
    return Share(threshold_us, None, None,
                 f"max {fmt_us(t.max_us)} µs is at or above it and the histogram ends at "
                 f"{fmt_us(h.size * h.bucket_us)} µs ({h.overflows:,} samples beyond)")


# ---------------------------------------------------------------------------
# the tables' model

@dataclass
class Cell:
    """One variant's results for one test, repeats merged."""

    variant: str
    measurements: list[Measurement]
    #: thread label -> merged thread, in the tool's order
    threads: "OrderedDict[str, ThreadResult]"
    combined: Optional[ThreadResult]
    commands: list[str]
    tool: str

    @property
    def verdict(self) -> Optional[Verdict]:
        vs = [m.verdict for m in self.measurements]
        if any(v is None for v in vs):
            return None
        return combine_verdicts(vs)

    @property
    def run_maxima(self) -> list[Optional[float]]:
        out = []
        for m in self.measurements:
            c = m.output.combined()
            out.append(c.max_us if c else None)
        return out


@dataclass
class Block:
    """One test: board · suite · load (· interval), variants side by side."""

    board: str
    arch: str
    suite: str
    load: str
    tool: str
    interval_us: Optional[float]
    variants: list[str]
    #: variant -> Cell, or a string saying why there is nothing ("n/a", "INFRA")
    cells: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        parts = [f"{self.board} ({self.arch})" if self.arch else self.board, self.suite, self.load]
        if self.interval_us:
            parts.append(f"interval {fmt_interval(self.interval_us)}")
        return " · ".join(parts)


def fmt_interval(us: float) -> str:
    if us >= 1_000_000 and us % 1_000_000 == 0:
        return f"{us / 1e6:g} s"
    if us >= 1000 and us % 1000 == 0:
        return f"{us / 1000:g} ms"
    return f"{us:g} us"


_INTERVAL = re.compile(r"^(?:-i(\d+)|--interval=(\d+))$")


def command_interval(command: str) -> Optional[float]:
    """The wake-up interval (µs) a rt-tests command line asks for (-i N)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    for i, a in enumerate(argv):
        if a in ("-i", "--interval") and i + 1 < len(argv) and argv[i + 1].isdigit():
            return float(argv[i + 1])
        m = _INTERVAL.match(a)
        if m:
            return float(m.group(1) or m.group(2))
    return None


def thread_label(tool: str, t: ThreadResult) -> str:
    """How the tool itself names a thread in its output."""
    if _tool(tool).per_operation and t.extra.get("benchmark"):
        return str(t.extra["benchmark"])
    if _tool(tool).pairs:  # pair N: sender #2N+1 wakes receiver #2N
        s, r = t.extra.get("sender_cpu"), t.cpu
        where = "" if r is None else (f" CPU {r}" if s in (None, r) else f" CPU {s}->{r}")
        return f"#{2 * t.thread + 1} -> #{2 * t.thread}{where}"
    return f"T: {t.thread}" + ("" if t.cpu is None else f" CPU {t.cpu}")


def _merge(threads: list[ThreadResult], thread: int) -> ThreadResult:
    """Several runs of one thread as one (the model's all-threads rule)."""
    if len(threads) == 1:
        return threads[0]
    merged = ToolOutput(path="", tool="", threads=list(threads)).combined()
    cpus = {t.cpu for t in threads}
    merged.thread = thread
    merged.cpu = cpus.pop() if len(cpus) == 1 else None
    merged.extra = dict(threads[0].extra)
    return merged


#: a command line is short; a bigger command.txt is not one
COMMAND_MAX_BYTES = 64 * 1024

#: where a job's raw files are: one run's directory, or per job (runs merged)
RunDirs = Union[None, Path, dict]


def _read_command(run_dir: RunDirs, job: JobResult, m: Measurement) -> Optional[str]:
    base = run_dir.get(id(job)) if isinstance(run_dir, dict) else run_dir
    if base is None:
        return None
    job_dir = RunDir(Path(base)).job(job.board, job.variant, job.repeat).path
    for rel in m.raw:
        if rel.endswith(COMMAND):
            try:  # run.json's raw list and the files are the run dir's: no symlink or '..' out of the job
                data = read_bounded(job_dir / rel, COMMAND_MAX_BYTES, root=job_dir)
            except InputError:
                return None
            return data.decode(errors="replace").strip() or None
    return None


def merge_runs(runs: list[tuple[RunResult, Optional[Path]]]) -> tuple[RunResult, dict]:
    """Several runs of a campaign as one: the same board × variant in two runs
    is two repeats of it. Returns the merged run and where each job's raw
    files are (for vendor_tables' run_dir)."""
    if len(runs) == 1:
        run, d = runs[0]
        return run, {id(j): d for j in run.jobs}
    first = runs[0][0]
    jobs, dirs, na = [], {}, []
    for run, d in runs:
        for j in run.jobs:
            jobs.append(j)
            dirs[id(j)] = d
        na += [n for n in run.not_available if n not in na]
    merged = RunResult(run_id=" + ".join(r.run_id for r, _ in runs), started=first.started,
                       campaign=", ".join(dict.fromkeys(r.campaign for r, _ in runs)),
                       commit=first.commit if all(r.commit == first.commit for r, _ in runs) else {},
                       jobs=jobs, not_available=na)
    return merged, dirs


def _cell(variant: str, ms: list[tuple[Measurement, Optional[str]]]) -> Cell:
    tool = ms[0][0].output.tool
    by_label: "OrderedDict[str, list[ThreadResult]]" = OrderedDict()
    index: dict[str, int] = {}
    for m, _ in ms:
        for t in m.output.threads:
            label = thread_label(tool, t)
            by_label.setdefault(label, []).append(t)
            index.setdefault(label, t.thread)
    threads = OrderedDict((lab, _merge(ts, index[lab])) for lab, ts in by_label.items())
    combined = None
    if not _tool(tool).per_operation and threads:
        combined = ToolOutput(path="", tool=tool, threads=list(threads.values())).combined()
    commands = []
    for _, c in ms:
        if c and c not in commands:
            commands.append(c)
    return Cell(variant=variant, measurements=[m for m, _ in ms], threads=threads,
                combined=combined, commands=commands, tool=tool)


def vendor_blocks(run: RunResult, run_dir: RunDirs = None) -> list[Block]:
    """The run as the reports' blocks, in run order."""
    variants_by_board: "OrderedDict[str, list[str]]" = OrderedDict()
    arch: dict[str, str] = {}
    for job in run.jobs:
        variants_by_board.setdefault(job.board, [])
        arch.setdefault(job.board, job.arch)
        if job.variant not in variants_by_board[job.board]:
            variants_by_board[job.board].append(job.variant)
    for n in run.not_available:
        variants_by_board.setdefault(n["board"], [])
        if n["variant"] not in variants_by_board[n["board"]]:
            variants_by_board[n["board"]].append(n["variant"])

    # (board, suite, load) -> variant -> [(measurement, command)]
    found: "OrderedDict[tuple[str, str, str], dict[str, list]]" = OrderedDict()
    for job in run.jobs:
        for m in job.measurements:
            cmd = _read_command(run_dir, job, m)
            found.setdefault((job.board, m.key.suite, m.key.load), {}) \
                 .setdefault(job.variant, []).append((m, cmd))
    infra = {(j.board, j.variant): ("FAIL" if j.build_error else "INFRA")
             for j in run.jobs if (j.build_error or j.infra_error) and not j.measurements}
    unavailable = {(n["board"], n["variant"]): n.get("reason", "") for n in run.not_available}

    blocks = []
    for (board, suite, load), per_variant in found.items():
        variants = variants_by_board[board]
        cells: dict[str, object] = {}
        for v in variants:
            if v in per_variant:
                cells[v] = _cell(v, per_variant[v])
            elif (board, v) in unavailable:
                cells[v] = "n/a"
            else:
                cells[v] = infra.get((board, v), "-")
        real = [c for c in cells.values() if isinstance(c, Cell)]
        tool = real[0].tool
        intervals = []
        for c in real:
            for cmd in c.commands:
                iv = command_interval(cmd) if _tool(tool).interval_option else None
                if iv is not None and iv not in intervals:
                    intervals.append(iv)
        if not intervals and _tool(tool).pairs:
            iv = next((t.extra.get("interval_us") for c in real for t in c.threads.values()
                       if t.extra.get("interval_us")), None)
            intervals = [float(iv)] if iv else []
        b = Block(board=board, arch=arch.get(board, ""), suite=suite, load=load, tool=tool,
                  interval_us=intervals[0] if len(intervals) == 1 else None,
                  variants=variants, cells=cells)
        if len(intervals) > 1:
            b.notes.append("intervals differ between variants: "
                           + ", ".join(fmt_interval(i) for i in intervals))
        for v in variants:
            if (board, v) in unavailable:
                b.notes.append(f"{v}: not available ({unavailable[(board, v)]})")
        blocks.append(b)
    return blocks


# ---------------------------------------------------------------------------
# rows

def _mam(t: ThreadResult) -> str:
    return f"{fmt_us(t.min_us)} / {fmt_us(t.avg_us)} / {fmt_us(t.max_us)}"


def _commands(b: Block) -> list[tuple[str, str]]:
    """(variant, command line) of every measured cell of a block, in column order."""
    cells = [(v, b.cells[v]) for v in b.variants]
    return [(v, cmd) for v, c in cells if isinstance(c, Cell) for cmd in c.commands]


def block_rows(block: Block, thresholds: Iterable[float]) -> list[tuple[str, dict[str, str]]]:
    """(row label, {variant: cell}) for one block; unknown shares add notes."""
    thresholds = tuple(thresholds)
    cells = {v: c for v, c in block.cells.items() if isinstance(c, Cell)}

    def blank(v: str) -> str:
        c = block.cells[v]
        return c if isinstance(c, str) else "-"

    rows: list[tuple[str, dict[str, str]]] = []
    labels: list[str] = []
    for c in cells.values():
        labels.extend(lab for lab in c.threads if lab not in labels)
    for lab in labels:
        rows.append((f"{lab} min/avg/max", {v: (_mam(cells[v].threads[lab]) if v in cells and lab in
                                               cells[v].threads else blank(v)) for v in block.variants}))
    if not _tool(block.tool).per_operation and len(labels) > 1:
        rows.append(("all min/avg/max", {v: (_mam(cells[v].combined) if v in cells and cells[v].combined
                                             else blank(v)) for v in block.variants}))
    rows += pwcet_rows(block, cells)
    if labels:
        rows.append(("samples", {v: (fmt_samples(sum(t.cycles for t in cells[v].threads.values()))
                                     if v in cells else blank(v)) for v in block.variants}))
    if not _tool(block.tool).per_operation and labels:
        for thr in thresholds:
            row = {}
            for v in block.variants:
                c = cells.get(v)
                if c is None or c.combined is None:
                    row[v] = blank(v)
                    continue
                s = share_at_or_above(c.combined, thr)
                row[v] = s.cell()
                if s.unknown:
                    block.notes.append(f">= {fmt_threshold(thr)} us unknown for {v}: {s.unknown}")
            rows.append((f">= {fmt_threshold(thr)} us", row))
    suite = Suite.for_tool(block.tool)
    results = {}
    for v, c in cells.items():  # one per run: repeats side by side
        each = [suite.result_cell(m.output) for m in c.measurements] if suite is not None else []
        results[v] = " / ".join(r or "-" for r in each) if any(each) else None
    if any(r is not None for r in results.values()):
        rows.append(("result", {v: (results.get(v) or "-") if v in cells else blank(v)
                                for v in block.variants}))
    if any(len(c.measurements) > 1 for c in cells.values()):
        rows.append(("runs (max each)", {
            v: (f"{len(cells[v].measurements)}: " + " / ".join(fmt_us(x) for x in cells[v].run_maxima))
            if v in cells else blank(v) for v in block.variants}))
    rows.append(("verdict", {v: ((cells[v].verdict.value.upper() if cells[v].verdict else "unjudged")
                                 if v in cells else blank(v)) for v in block.variants}))
    return rows


def pwcet_rows(block: Block, cells: dict[str, "Cell"]) -> list[tuple[str, dict[str, str]]]:
    """A soak's worst case, estimated (rtlab.soak.pwcet), beside the observed
    max rows: per sample and per hour at 1e-9 with the interval, one per run;
    "cannot estimate" where a check refused it (the reason in the notes)."""
    per: dict[str, list[Optional[dict]]] = {}
    for v, c in cells.items():
        per[v] = [m.output.metrics.get("pwcet") if isinstance(m.output.metrics.get("pwcet"), dict) else None
                  for m in c.measurements]
    if not any(e for ests in per.values() for e in ests):
        return []

    def one(est: Optional[dict], key: str) -> str:
        if est is None:
            return "-"
        if est.get("refused") or est.get("per_sample_us") is None:
            return "cannot estimate"
        v = est.get(f"per_{key}_us")
        if v is None:
            return "-"
        lo, hi = est.get(f"per_{key}_ci_us") or (None, None)
        return fmt_us(v) + (f" ({fmt_us(lo)}-{fmt_us(hi)})" if lo is not None else "")

    def blank(v: str) -> str:
        c = block.cells[v]
        return c if isinstance(c, str) else "-"

    level = next((e.get("level", 0.9) for ests in per.values() for e in ests if e), 0.9)
    rows = []
    for key, label in (("sample", f"pWCET 1e-9/sample ({level:.0%})"), ("hour", f"pWCET 1e-9/hour ({level:.0%})")):
        rows.append((label, {v: (" / ".join(one(e, key) for e in per[v]) if v in per else blank(v))
                             for v in block.variants}))
    for v, ests in per.items():
        for i, e in enumerate(ests):
            if e and (e.get("refused") or e.get("per_sample_us") is None):
                run = f" run {i + 1}" if len(ests) > 1 else ""
                block.notes.append(f"pWCET {v}{run}: {e.get('refused') or 'cannot estimate'}")
    return rows


def _text_table(header: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    w0 = max([len(r[0]) for r in rows] + [len(header[0])])
    widths = [max([len(h)] + [len(r[1][i]) for r in rows]) for i, h in enumerate(header[1:])]
    out = [header[0].ljust(w0) + "  " + "  ".join(h.rjust(w) for h, w in zip(header[1:], widths))]
    for lab, vals in rows:
        out.append(lab.ljust(w0) + "  " + "  ".join(x.rjust(w) for x, w in zip(vals, widths)))
    return out


def _step(n: int, rows: int) -> int:
    """Buckets per row (1, 2, 5, 10, 20, 50 ...) so n buckets fit in rows."""
    mag = 1
    while True:
        for m in (1, 2, 5):
            if math.ceil(n / (m * mag)) <= rows:
                return m * mag
        mag *= 10


def text_histogram(h: Histogram, rows: int = TEXT_HIST_ROWS, width: int = TEXT_HIST_WIDTH) -> list[str]:
    """A histogram as text: latency ranges down, log10(count) across."""
    if not h.counts and not h.overflows:
        return ["(empty)"]
    top = (max(h.counts) + 1) if h.counts else 1  # buckets in use
    step = _step(top, rows)
    bins: dict[int, int] = {}
    for idx, c in h.counts.items():
        bins[idx // step] = bins.get(idx // step, 0) + c
    peak = max(list(bins.values()) + [h.overflows])
    scale = width / (math.log10(peak) + 1)

    def bar(c: int) -> str:
        return "#" * max(1, round((math.log10(c) + 1) * scale)) if c else ""

    lines = []
    for b in range(0, math.ceil(top / step)):
        lo, hi = b * step * h.bucket_us, (b + 1) * step * h.bucket_us
        c = bins.get(b, 0)
        where = f"{fmt_us(lo)}-{fmt_us(hi)} us".rjust(16)
        lines.append(f"{where} |{bar(c)} {c:,}" if c else f"{where} |")
    if h.overflows:
        end = (h.size or top) * h.bucket_us
        lines.append(f"{'>= ' + fmt_us(end) + ' us':>16} |{bar(h.overflows)} {h.overflows:,} "
                     f"(beyond the histogram)")
    return lines


def vendor_tables(run: RunResult, thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
                  run_dir: RunDirs = None, histograms: bool = True) -> str:
    thresholds = tuple(thresholds)
    blocks = vendor_blocks(run, run_dir)
    out = [f"Vendor tables: run {run.run_id}, campaign {run.campaign}"
           + (f", kernel commit {run.commit['sha']}" if run.commit.get("sha") else ""),
           "latencies in µs; min/avg/max per thread; samples in millions (M) where large;",
           f">= T us: share of samples at or above T ({', '.join(map(fmt_threshold, thresholds))} µs), "
           "'unknown' where the histogram does not reach T", ""]
    kernels = kernel_lines(run)
    if kernels:
        out += ["Kernels (read on the board):", *(f"  {k}" for k in kernels), ""]
    out += summary_lines(blocks)
    for b in blocks:
        rows = block_rows(b, thresholds)
        out.append(f"== {b.title}")
        out += _text_table(["", *b.variants], [(lab, [r[v] for v in b.variants]) for lab, r in rows])
        out += [f"  command ({v}): {cmd}" for v, cmd in _commands(b)]
        for n in dict.fromkeys(b.notes):
            out.append(f"  note: {n}")
        if histograms:
            for v in b.variants:
                c = b.cells[v]
                if isinstance(c, Cell) and c.combined is not None and c.combined.histogram is not None:
                    out.append(f"  histogram {v} (samples, log scale):")
                    out += [f"    {ln}" for ln in text_histogram(c.combined.histogram)]
        out.append("")
    missing = unmeasured_lines(run)
    if missing:
        out += ["Not measured:", *(f"  {m}" for m in missing), ""]
    return "\n".join(out)


def unmeasured_lines(run: RunResult) -> list[str]:
    """Jobs with no numbers in the tables, and why (nothing silently missing)."""
    out = []
    for j in run.jobs:
        if j.measurements:
            continue
        why = j.build_error or j.infra_error or "no measurement"
        out.append(f"{j.board}/{j.variant}: {'FAIL' if j.build_error else 'INFRA'}: {why.splitlines()[0]}")
    for n in run.not_available:
        out.append(f"{n['board']}/{n['variant']}: not available: {n.get('reason', '')}")
    return out


def kernel_lines(run: RunResult) -> list[str]:
    """Which kernel each column ran, as the boot test read it off the board."""
    out, seen = [], set()
    for j in run.jobs:
        if (j.board, j.variant) in seen or not j.kernel:
            continue
        seen.add((j.board, j.variant))
        k = j.kernel
        model = k.get("preempt") or k.get("config_preempt")  # None: the kernel did not say
        iso = k.get("isolated") or ""
        out.append(f"{j.board}/{j.variant}: {k.get('release', '?')}"
                   + (f", preemption {model}" if model else "")
                   + (", PREEMPT_RT" if k.get("realtime") else "")
                   + (f", isolated CPUs {iso}" if iso and iso != "(null)" else ""))
    return out


def summary_table(blocks: list[Block], no_data: str = "-") -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Max latency per test (rows) and variant (columns), the reports' bar
    charts: (variants, rows); a cell measured without data says *no_data*,
    one not measured its reason (or nothing)."""
    variants: list[str] = []
    for b in blocks:
        variants.extend(v for v in b.variants if v not in variants)
    rows = []
    for b in blocks:
        if _tool(b.tool).per_operation:
            continue
        vals = []
        for v in variants:
            c = b.cells.get(v)
            if isinstance(c, Cell):
                vals.append(fmt_us(c.combined.max_us) if c.combined else no_data)
            else:
                vals.append(c if isinstance(c, str) else "")
        rows.append((b.title, vals))
    return variants, rows


def summary_lines(blocks: list[Block]) -> list[str]:
    """The summary table as text lines (nothing when no test has one)."""
    variants, rows = summary_table(blocks)
    if not rows:
        return []
    return ["Max latency (µs) per test and variant", *_text_table(["", *variants], rows), ""]


# ---------------------------------------------------------------------------
# HTML

def _html_table(header: list[str], rows: list[tuple[str, list[str]]], cls: str = "") -> str:
    h = "".join(f"<th>{html.escape(x)}</th>" for x in header)
    body = "".join("<tr><th>" + html.escape(lab) + "</th>" + "".join(
        f"<td>{html.escape(x)}</td>" for x in vals) + "</tr>" for lab, vals in rows)
    return f"<table class='{cls}'><tr>{h}</tr>{body}</table>"


def write_vendor_html(run: RunResult, path: Path, thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
                      run_dir: RunDirs = None) -> Path:
    thresholds = tuple(thresholds)
    blocks = vendor_blocks(run, run_dir)
    parts = ["<!doctype html><meta charset='utf-8'>",
             f"<title>rtlab vendor tables {html.escape(run.run_id)}</title>",
             "<style>body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;margin:.5em 0}"
             " td,th{border:1px solid #bbb;padding:2px 8px;text-align:right} th:first-child{text-align:left}"
             " code{background:#f3f3f3} .note{color:#555;font-size:90%}</style>",
             f"<h1>Vendor tables: run {html.escape(run.run_id)}</h1>",
             f"<p>campaign {html.escape(run.campaign)}, started {html.escape(run.started)}"
             + (f", kernel commit {html.escape(str(run.commit.get('sha')))}" if run.commit.get("sha") else "")
             + ". Latencies in µs; samples in millions (M) where large; "
             f"&ge; T: share of samples at or above T ({html.escape(', '.join(map(fmt_threshold, thresholds)))} µs), "
             "<em>unknown</em> where the histogram does not reach T.</p>"]
    kernels = kernel_lines(run)
    if kernels:
        parts.append("<h2>Kernels (read on the board)</h2><ul>"
                     + "".join(f"<li>{html.escape(k)}</li>" for k in kernels) + "</ul>")
    variants, rows = summary_table(blocks, no_data="")
    if rows:
        parts += ["<h2>Max latency per test and variant (µs)</h2>", _html_table(["", *variants], rows, "summary")]
    for b in blocks:
        block = block_rows(b, thresholds)
        parts.append(f"<h2>{html.escape(b.title)}</h2>")
        parts.append(_html_table(["", *b.variants], [(lab, [r[v] for v in b.variants]) for lab, r in block],
                                 "block"))
        parts += [f"<div class='note'>{html.escape(v)}: <code>{html.escape(cmd)}</code></div>"
                  for v, cmd in _commands(b)]
        for n in dict.fromkeys(b.notes):
            parts.append(f"<div class='note'>{html.escape(n)}</div>")
        series = [(v, c.combined.histogram) for v, c in b.cells.items()
                  if isinstance(c, Cell) and c.combined is not None and c.combined.histogram is not None]
        marks = [(f">= {fmt_threshold(t)} µs", t) for t in thresholds]
        if series:
            parts.append("<div>" + histogram_svg(series, f"{b.title} · samples per µs (log scale)",
                                                  marks=marks) + "</div>")
        # one curve per thread (per CPU), as multi-core reports show them: folded
        per_thread = []
        for v, c in b.cells.items():
            if isinstance(c, Cell) and not _tool(c.tool).per_operation and len(c.threads) > 1:
                lines = [(lab, t.histogram) for lab, t in c.threads.items() if t.histogram is not None]
                if lines:
                    per_thread.append(histogram_svg(lines, f"{b.title} · {v} · per thread", marks=marks))
        for v, c in b.cells.items():  # a soak's worst case, estimated: its return-level plot
            if isinstance(c, Cell):
                for i, m in enumerate(c.measurements):
                    est = m.output.metrics.get("pwcet")
                    if isinstance(est, dict):
                        nth = f" run {i + 1}" if len(c.measurements) > 1 else ""
                        parts.append("<div>" + return_level_svg(est, f"{b.title} · {v}{nth} · pWCET return level")
                                     + "</div>")
        if per_thread:
            parts.append("<details><summary>per thread (CPU)</summary>" + "".join(
                f"<div>{svg}</div>" for svg in per_thread) + "</details>")
    missing = unmeasured_lines(run)
    if missing:
        parts.append("<h2>Not measured</h2><ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in missing)
                     + "</ul>")
    path = Path(path)
    path.write_text("\n".join(parts) + "\n")
    return path
