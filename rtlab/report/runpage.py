"""The words and tables of report.html: the verdict a reviewer reads first,
the comparison table as HTML tables, the regression verdict's keys and the
host noise in one line. The pictures are rtlab.report.plot's.

Everything from run.json or compare.json is escaped: both come from merge
requests' jobs. compare.json is read through rtlab.core.modelcheck, which
checks only what it must (newer rtlab versions add fields): every other
field is read here as optional and shown as text.
"""
from __future__ import annotations

import html
import re
from typing import Any, Optional

from ..core.model import Measurement, RunResult, Verdict
from .table import TableBlock, not_available_lines, table_blocks, verdict_counts

#: one colour per verdict and regression outcome (CSS class v-<name>)
VERDICT_CSS = (
    ".v-pass{background:#e3f4e3;color:#0a5d0a} .v-fail,.v-regression{background:#fbe0e0;color:#a00000}"
    " .v-infra{background:#fff0d0;color:#8a5300} .v-shown{background:#e4ecf7;color:#2b4d7d}"
    " .v-undecided{background:#f1e6f7;color:#6a2d8a} .v-no-regression{background:#e3f4e3;color:#0a5d0a}"
    " .v-blind{background:#fff4c2;color:#6b5300}"
)
PAGE_CSS = (
    "body{font-family:sans-serif;margin:1.5em 2em;max-width:1400px} h2{margin-top:1.6em}"
    " table{border-collapse:collapse;margin:.4em 0 1em} caption{text-align:left;font-weight:bold;padding:4px 0;white-space:nowrap}"
    " td,th{border:1px solid #ccc;padding:2px 8px;text-align:right;font-variant-numeric:tabular-nums}"
    " th:first-child,td.l{text-align:left} thead th{background:#f3f3f3}"
    " #verdict{border:2px solid #999;border-radius:6px;padding:.6em 1.2em;margin:1em 0}"
    " #verdict h2{margin:.2em 0} #verdict li{margin:.3em 0} .badge{padding:1px 8px;border-radius:4px;"
    "font-weight:bold} .multiples{display:flex;flex-wrap:wrap;gap:6px} .note{color:#555;font-size:90%}"
    " pre{background:#f6f6f6;padding:1em} details{margin:.5em 0} summary{cursor:pointer}"
    " " + VERDICT_CSS
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def css_class(word: str) -> str:
    """The CSS class of a verdict or outcome word (PASS, FAIL x3, undecided…); '' for others."""
    first = (word.split() or [""])[0].lower()
    if word.lower().startswith("not gated"):
        return "v-blind"
    return f"v-{first}" if first in ("pass", "fail", "infra", "shown", "undecided", "regression",
                                     "no-regression", "blind") else ""


def _badge(word: str) -> str:
    return f"<span class='badge {css_class(word)}'>{html.escape(word.upper())}</span>"


def _us(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}"


def _text(v: Any, depth: int = 0) -> str:
    """A field of compare.json as text: a dict as key: value pairs, a list
    joined, nesting beyond three levels cut (the file may be hostile)."""
    if depth > 3:
        return "…"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_text(x, depth + 1)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x, depth + 1) for x in v)
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def local_link(target: Any, text: str) -> str:
    """A link to a file of this run or this machine; a value with a URL
    scheme (javascript:, http:) is shown, never linked."""
    t = str(target)
    if _SCHEME.match(t):
        return html.escape(text)
    return f"<a href='{html.escape(t, quote=True)}'>{html.escape(text)}</a>"


# -- the verdict, first --------------------------------------------------------------
def _breach(job_dir: str, m: Measurement) -> str:
    """One broken budget: the key, by how much, the evidence."""
    c = m.output.combined()
    by = ""
    if c is not None and m.budget and m.budget.max_us and c.max_us >= m.budget.max_us:
        by = (f": max {_us(c.max_us)} µs against a budget of {_us(m.budget.max_us)} µs "
              f"(<b>{(c.max_us / m.budget.max_us - 1) * 100:+.0f} %</b>)")
    # the max's own reason says again what `by` says; the others (a percentile's) stay
    reasons = [r for r in m.reasons if not (by and r.startswith("max "))]
    out = f"<b>{html.escape(m.key.label())}</b>{by}" + (f" — {html.escape('; '.join(reasons))}" if reasons else "")
    if m.evidence and isinstance(m.evidence.get("dir"), str):
        d = f"{job_dir}/{m.evidence['dir']}"
        out += (f"; evidence: {html.escape(str(m.evidence.get('summary') or 'no culprit named in the trace'))} "
                f"({local_link(d + '/trace.txt', 'trace')}, {local_link(d + '/analysis.json', 'analysis')})")
    elif m.raw:
        out += f" ({local_link(job_dir + '/' + m.raw[0], 'raw output')})"
    return out


def verdict_html(run: RunResult, comparison: Optional[dict]) -> list[str]:
    """What a reviewer wants first: the run's verdict, every broken budget
    and infra error with its size and evidence, and the regression verdict
    against its baseline with the keys that regressed."""
    items = []
    for job in run.jobs:
        where = f"{job.board}/{job.variant}"
        if job.build_error:
            items.append(f"<li class='v-fail'>{_badge('fail')} {html.escape(where)}: kernel build failed — "
                         f"{html.escape(job.build_error.splitlines()[0] if job.build_error else '')}</li>")
        if job.infra_error:
            items.append(f"<li class='v-infra'>{_badge('infra')} {html.escape(where)}: "
                         f"{html.escape(job.infra_error.splitlines()[0])} (not a latency verdict)</li>")
        for m in job.measurements:
            if m.verdict == Verdict.FAIL:
                items.append(f"<li class='v-fail'>{_badge('fail')} over budget: {_breach(where, m)}</li>")
            elif m.verdict == Verdict.INFRA or m.verdict is None:
                items.append(f"<li class='v-infra'>{_badge('infra')} <b>{html.escape(m.key.label())}</b>: "
                             f"{html.escape('; '.join(m.reasons) or 'not judged')} (not a latency verdict)</li>")
    if not items:
        word = run.verdict.value
        items.append(f"<li class='{css_class(word)}'>{_badge(word)} every budget held"
                     + (" (some measurements shown, judged against nothing)" if run.verdict == Verdict.SHOWN
                        else "") + "</li>")
    items = not_gated_items(comparison) + items + regression_summary(comparison)
    return ["<section id='verdict'>",
            f"<h2>Verdict {_badge(run.verdict.value)}</h2>",
            "<ul>", *items, "</ul>",
            f"<p class='note'>{html.escape(verdict_counts(run))}</p>", "</section>"]


def not_gated_items(v: Optional[dict]) -> list[str]:
    """What leads the page where keys passed without being gated: each
    statistic not gated (it cannot see what its class asks) and the lab's
    cure, as compare.json's ``not_gated`` says it."""
    out = []
    for k in (v or {}).get("keys", []) if isinstance((v or {}).get("keys"), list) else []:
        if not isinstance(k, dict) or k.get("outcome") != "blind":
            continue
        texts = k.get("not_gated") if isinstance(k.get("not_gated"), list) else [k.get("line", "")]
        for text in texts:
            out.append(f"<li class='v-blind'>{_badge('not gated')} <b>{html.escape(str(k.get('label', '')))}</b>: "
                       f"{html.escape(str(text))}</li>")
    return out


def regression_summary(v: Optional[dict]) -> list[str]:
    """The regression verdict (compare.json) in a few lines: against which
    baseline, which keys regressed and by how much, and the report to open."""
    if v is None:
        return ["<li class='note'>no regression verdict: this run was not compared with a baseline "
                "(<code>rtlab compare</code>, <code>rtlab gate --baseline-store</code>)</li>"]
    outcome = str(v.get("outcome", "?"))
    base = v.get("baseline") if isinstance(v.get("baseline"), dict) else {}
    runs = base.get("runs") if isinstance(base.get("runs"), list) else []
    against = html.escape(str(base.get("source") or ", ".join(map(str, runs)) or "?"))
    report = (" — " + local_link(v["html"], "comparison report")) if v.get("html") else ""
    keys = [k for k in v.get("keys", []) if isinstance(k, dict)]
    out = [f"<li class='{css_class(outcome)}'>Regression verdict: {_badge(outcome)} against "
           f"<i>{against}</i>" + (f" ({len(runs)} runs)" if runs else "") + report + "</li>"]
    for k in keys:
        if k.get("outcome") in ("regression", "undecided"):
            extra = _key_extras(k)
            line = re.sub(r": (REGRESSION|UNDECIDED)$", "", str(k.get("line", "")))  # the badge says it
            out.append(f"<li class='{css_class(str(k.get('outcome')))}'>{_badge(str(k.get('outcome')))} "
                       f"{html.escape(line)}"
                       + (f" <span class='note'>({html.escape(extra)})</span>" if extra else "") + "</li>")
    problems = v.get("problems")
    for p in problems if isinstance(problems, list) else []:
        out.append(f"<li class='v-undecided'>{_badge('undecided')} {html.escape(str(p))}</li>")
    return out


def _key_extras(k: dict) -> str:
    """decided_by and detectable of a key, where compare.json has them."""
    parts = []
    if k.get("decided_by") is not None:
        parts.append(f"decided by {_text(k['decided_by'])}")
    if k.get("sees"):
        parts.append(_text(k["sees"]))
    elif isinstance(k.get("detectable"), (int, float)) and not isinstance(k.get("detectable"), bool):
        parts.append(f"detectable effect {float(k['detectable']) * 100:+.0f} %")
    if k.get("flagged"):
        parts.append(f"flagged for the lab: {_text(k['flagged'])}")
    return "; ".join(parts)


def regression_table(v: Optional[dict]) -> list[str]:
    """Every key of the regression verdict, one row each."""
    keys = [k for k in (v or {}).get("keys", []) if isinstance(k, dict)]
    if not keys:
        return []
    extras = any(k.get("decided_by") is not None or k.get("detectable") is not None for k in keys)
    head = "<tr><th>key</th><th>outcome</th><th>statistic, effect [interval], medians, runs</th>" + \
        ("<th>decided by, detectable</th>" if extras else "") + "</tr>"
    rows = []
    for k in keys:
        o = str(k.get("outcome", "?"))
        line = str(k.get("line", ""))
        label = str(k.get("label", ""))
        if label and line.startswith(label + ": "):
            line = line[len(label) + 2:]
        rows.append(f"<tr><td class='l'>{html.escape(label)}</td><td class='{css_class(o)}'>"
                    f"{html.escape(o.upper())}</td><td class='l'>{html.escape(line)}</td>"
                    + (f"<td class='l'>{html.escape(_key_extras(k))}</td>" if extras else "") + "</tr>")
    return ["<h2 id='regression'>Regression verdict per key</h2>",
            "<table class='regression'><thead>" + head + "</thead><tbody>", *rows, "</tbody></table>"]


# -- the comparison table ------------------------------------------------------------
def block_table(b: TableBlock) -> str:
    """One board × suite × load: variants as columns, the verdict row coloured."""
    head = "".join(f"<th>{html.escape(v)}</th>" for v, _ in b.columns)
    rows = []
    for r in b.rows:
        cells = []
        for _, c in b.columns:
            text = c.get(r, "-")
            cls = css_class(text) if r == "verdict" else ""
            cells.append(f"<td class='{cls}'>{html.escape(text)}</td>" if cls else f"<td>{html.escape(text)}</td>")
        rows.append(f"<tr><th>{html.escape(r)}</th>{''.join(cells)}</tr>")
    return (f"<table class='variants'><caption>{html.escape(b.title)}</caption>"
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def tables_html(run: RunResult) -> list[str]:
    out = ["<h2 id='tables'>Variants side by side</h2>", *(block_table(b) for b in table_blocks(run))]
    na = not_available_lines(run)
    if na:
        out += ["<p>Not available (not run, not judged):</p><ul>",
                *(f"<li>{html.escape(n)}</li>" for n in na), "</ul>"]
    return out


# -- host noise ----------------------------------------------------------------------
def host_noise_line(noise: dict) -> str:
    steal = noise.get("steal_ms") or {}
    per_cpu = ", ".join(f"{c} {v:g}" for c, v in steal.items())
    return (f"steal {sum(steal.values()):g} ms in {noise.get('window_s', 0):g} s ({per_cpu or 'no CPU read'}), "
            f"at most {noise.get('burst_ms', 0):g} ms from one CPU within 0.25 s; "
            f"longest host stall {noise.get('max_gap_ms', 0):g} ms"
            + (f"; {noise['error']}" if noise.get("error") else ""))


def host_noise_html(run: RunResult) -> list[str]:
    """What the host's hypervisor stole while each tool ran (rtlab.core.hostnoise),
    and the attempts the runner measured again because of it: one line, the
    details folded."""
    rows, steal, gaps, worst = [], 0.0, 0.0, ""
    for job in run.jobs:
        for m in job.measurements:
            if m.host_noise:
                where = (f"{job.board}/{job.variant}" + (f" r{job.repeat}" if job.repeat else "")
                         + f" {m.key.suite}@{m.key.load}")
                rows.append(f"<li>{html.escape(where)}: {html.escape(host_noise_line(m.host_noise))}</li>")
                s = sum((m.host_noise.get("steal_ms") or {}).values())
                if s >= steal:
                    steal, worst = s, where
                gaps = max(gaps, float(m.host_noise.get("max_gap_ms") or 0))
    again = 0
    for job in run.jobs:
        for r in job.retries:
            again += 1
            suites = r.get("measured_again")  # which suites ran again (older runs: the whole job)
            where = str(r.get("dir"))
            # a link only to a directory inside the run (run.json may be hostile: no scheme, no way out)
            link = (f"<a href='{html.escape(where)}'>{html.escape(where)}</a>"
                    if ":" not in where and not where.startswith("/") and ".." not in where.split("/")
                    else html.escape(where))
            rows.append(f"<li><b>measured again</b> {html.escape(job.board)}/{html.escape(job.variant)}"
                        + (f" {html.escape(', '.join(map(str, suites)))}" if suites else "") + ": "
                        f"{html.escape('; '.join(r.get('reasons', [])))} (raw files: {link})</li>")
    if not rows:
        return []
    n = sum(1 for j in run.jobs for m in j.measurements if m.host_noise)
    line = (f"{n} measurement{'s' * (n != 1)} watched: at most {steal:g} ms stolen"
            + (f" ({worst})" if worst else "") + f", longest host stall {gaps:g} ms; "
            f"{again} attempt{'s' * (again != 1)} measured again")
    return ["<h2 id='host-noise'>Host noise during the measurements</h2>",
            f"<p id='host-noise-summary'>{html.escape(line)}</p>",
            "<details><summary>per measurement</summary>",
            "<p class='note'>hypervisor steal (/proc/stat) and the host monitor's longest stall while each tool "
            "ran; a breach the steal explains is INFRA and measured again, as is a tool that lost its own "
            "start-up race</p>", "<ul>", *rows, "</ul></details>"]


def page_head(title: str) -> list[str]:
    return ["<!doctype html><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
            f"<style>{PAGE_CSS}</style>"]
