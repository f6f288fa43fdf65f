"""Pictures of a run: latency histograms with log-scale counts, variants
overlaid (the plot vendor and OSADL reports show), and an HTML report that
puts them beside the comparison table. Plain SVG: no plotting library, and
GitLab and every browser render it as an artifact.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..core.fsutil import read_text_bounded, result_max_bytes
from ..core.model import Histogram, RunResult
from .runpage import host_noise_html, page_head, regression_table, tables_html, verdict_html
from .snapshot import SNAPSHOT_FILE, summary_lines

#: distinct, colour-blind-safe line colours (Okabe-Ito)
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def _nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    ticks, v = [], start
    while v <= hi + 1e-9:
        ticks.append(round(v, 9))
        v += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 or v == 0 else f"{v:g}"


def _svg_open(width: int, height: int, title: str, *, cls: str = "", title_y: int = 18,
              title_size: int = 13) -> list[str]:
    """The opening of every plot: the svg element, a white ground and the
    title (escaped) centred at the top; the caller appends and closes."""
    klass = f' class="{cls}"' if cls else ""
    return [f'<svg xmlns="http://www.w3.org/2000/svg"{klass} width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{width / 2}" y="{title_y}" text-anchor="middle" font-size="{title_size}">'
            f'{html.escape(title)}</text>']


def histogram_svg(series: list[tuple[str, Histogram]], title: str,
                  budget_us: Optional[float] = None, width: int = 760, height: int = 360,
                  marks: Optional[list[tuple[str, float]]] = None, *, x_max: Optional[float] = None,
                  max_us: Optional[float] = None, cls: str = "", compact: bool = False,
                  legend: bool = True) -> str:
    """One step line per series; x: latency (µs, linear), y: samples (log10).
    ``marks``: (label, µs) thresholds drawn as grey dashed lines where they
    fall inside the data's range (a far threshold would squash the data).
    ``x_max``: the x-range, shared by small multiples (else the data's);
    ``max_us``: the observed maximum, marked (an arrow at the edge when it
    lies beyond the range: overflows of the histogram)."""
    series = [(label, h) for label, h in series if h is not None and h.counts]
    left, right, top, bottom = (44, 18, 26, 32) if compact else (70, 20, 40, 50)
    pw, ph = width - left - right, height - top - bottom
    out = _svg_open(width, height, title, cls=cls, **({"title_y": 14, "title_size": 12} if compact else {}))
    if not series:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no histogram</text></svg>')
        return "\n".join(out)
    xmax = max((max(h.counts) + 1) * h.bucket_us for _, h in series) * 1.05
    budget_on_scale = bool(budget_us) and budget_us <= 2 * xmax
    if budget_on_scale:  # a far-away budget would squash the data to a sliver
        xmax = max(xmax, budget_us * 1.05)
    if x_max:
        xmax, budget_on_scale = x_max, bool(budget_us) and budget_us <= x_max
    ymax = max(max(h.counts.values()) for _, h in series)
    ytop = 10 ** math.ceil(math.log10(max(ymax, 1) * 1.01))

    def x(v):
        return left + pw * v / xmax

    def y(c):  # counts of 0 sit on the axis; log scale from 1
        return top + ph * (1 - (math.log10(c) / math.log10(ytop) if c >= 1 else 0)) if ytop > 1 else top + ph

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    for t in _nice_ticks(0, xmax, 4 if compact else 6):
        out.append(f'<line x1="{x(t):.1f}" y1="{top + ph}" x2="{x(t):.1f}" y2="{top + ph + 4}" stroke="#888"/>'
                   f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{_fmt(t)}</text>')
    decade = 1
    while decade <= ytop:
        out.append(f'<line x1="{left}" y1="{y(decade):.1f}" x2="{left + pw}" y2="{y(decade):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y(decade) + 4:.1f}" text-anchor="end">1e{int(math.log10(decade))}</text>')
        decade *= 10
    out.append(f'<text x="{left + pw / 2}" y="{height - (4 if compact else 10)}" text-anchor="middle">'
               f'latency (µs)</text>')
    if not compact:
        out.append(f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
                   f'samples (log scale)</text>')
    if budget_on_scale:
        out.append(f'<line class="budget" x1="{x(budget_us):.1f}" y1="{top}" x2="{x(budget_us):.1f}" '
                   f'y2="{top + ph}" stroke="#c00" stroke-dasharray="5,3"/><text x="{x(budget_us) - 4:.1f}" '
                   f'y="{top + ph - 6}" text-anchor="end" fill="#c00">budget {_fmt(budget_us)} µs</text>')
    elif budget_us:
        out.append(f'<text class="budget" x="{left + pw - 4}" y="{top + ph - 6}" text-anchor="end" fill="#c00">'
                   f'budget {_fmt(budget_us)} µs (off scale) →</text>')
    if max_us is not None and max_us <= xmax:
        out.append(f'<line class="max" x1="{x(max_us):.1f}" y1="{top}" x2="{x(max_us):.1f}" y2="{top + ph}" '
                   f'stroke="#000" stroke-width="1.5"/><text x="{x(max_us) + 3:.1f}" y="{top + 11}" '
                   f'text-anchor="{"end" if x(max_us) > left + pw * 0.6 else "start"}" '
                   f'dx="{-6 if x(max_us) > left + pw * 0.6 else 0}">max {_fmt(max_us)}</text>')
    elif max_us is not None:
        out.append(f'<text class="max" x="{left + pw - 4}" y="{top + 11}" text-anchor="end">'
                   f'max {_fmt(max_us)} µs (off scale) →</text>')
    for j, (label, at) in enumerate(marks or []):
        if 0 < at <= xmax:
            right = x(at) > left + pw * 0.7  # label left of the line near the right edge
            out.append(f'<line x1="{x(at):.1f}" y1="{top}" x2="{x(at):.1f}" y2="{top + ph}" '
                       f'stroke="#777" stroke-dasharray="2,3"/><text x="{x(at) + (-3 if right else 3):.1f}" '
                       f'y="{top + ph - 24 - 12 * (j % 3)}" text-anchor="{"end" if right else "start"}" '
                       f'fill="#555">{html.escape(label)}</text>')
    for i, (label, h) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        # a step line: drops to the axis only where buckets are empty
        pts, prev = [], None
        base = top + ph
        for idx in sorted(h.counts):
            x0, x1, yy = x(idx * h.bucket_us), x((idx + 1) * h.bucket_us), y(h.counts[idx])
            if prev is None or idx != prev + 1:
                if prev is not None:
                    pts.append(f"{x((prev + 1) * h.bucket_us):.1f},{base:.1f}")
                pts.append(f"{x0:.1f},{base:.1f}")
            pts.append(f"{x0:.1f},{yy:.1f} {x1:.1f},{yy:.1f}")
            prev = idx
        pts.append(f"{x((prev + 1) * h.bucket_us):.1f},{base:.1f}")
        out.append(f'<polyline class="hist" fill="none" stroke="{colour}" stroke-width="1.2" '
                   f'points="{" ".join(pts)}"/>')
        if not legend:
            continue
        extra = f" (+{h.overflows:,} over range)" if h.overflows else ""
        out.append(f'<rect x="{left + pw - 230}" y="{top + 8 + 16 * i}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{left + pw - 215}" y="{top + 17 + 16 * i}">{html.escape(label)}{extra}</text>')
    out.append("</svg>")
    return "\n".join(out)


def run_plots(run: RunResult) -> list[tuple[str, list[tuple[str, str]]]]:
    """Small multiples: per board × suite × load, one histogram per variant
    (log counts, its budget and its observed max marked), every plot of a
    board on the same x-range so that the variants' tails compare by eye.
    Returns (title, [(variant, svg)]) in run order."""
    groups: dict[tuple[str, str, str], list[tuple[str, Histogram, Optional[float], Optional[float]]]] = {}
    for job in run.jobs:
        for m in job.measurements:
            c = m.output.combined()
            if c is None or c.histogram is None or not c.histogram.counts:
                continue
            variant = job.variant + (f" r{job.repeat}" if job.repeat else "")
            budget = m.budget.max_us if m.budget and m.budget.max_us else None
            groups.setdefault((job.board, m.key.suite, m.key.load), []).append(
                (variant, c.histogram, budget, c.max_us))
    x_range: dict[str, float] = {}
    for (board, _, _), series in groups.items():
        for _, h, budget, mx in series:
            edge = (max(h.counts) + 1) * h.bucket_us
            # the max and the budget widen the range where they lie near the data;
            # far beyond it (overflows, a generous budget) they are drawn at the edge
            for v in (mx, budget):
                if v is not None and v <= 2 * edge:
                    edge = max(edge, v)
            x_range[board] = max(x_range.get(board, 0.0), edge * 1.05)
    return [(f"{b} · {s} · {l}",
             [(variant, histogram_svg([(variant, h)], variant, budget, width=300, height=190, x_max=x_range[b],
                                      max_us=mx, cls="variant-hist", compact=True, legend=False))
              for variant, h, budget, mx in series])
            for (b, s, l), series in groups.items()]


def _block_return_periods(maxima: list[float], b: int) -> list[tuple[float, float]]:
    """(return period in samples, block maximum) of each observed block
    maximum: the i-th largest of n exceeded with i/(n+1) per block (the
    Weibull plotting position), per sample 1-(1-P)^(1/b)."""
    n = len(maxima)
    out = []
    for i, v in enumerate(sorted(maxima, reverse=True), 1):
        pb = i / (n + 1)
        p = -math.expm1(math.log1p(-pb) / b)
        out.append((1.0 / p, v))
    return out


def return_level_svg(est: dict, title: str, width: int = 760, height: int = 380) -> str:
    """The pWCET's return-level plot: x the return period (samples, log
    scale: 1/p for an exceedance probability p per sample), y the latency
    (µs); the fitted tail's return level, its bootstrap interval as a band,
    the observed block maxima (checkpoint segments) as points, the observed
    maximum dashed, and the estimate's probabilities (per sample, per hour)
    marked. A refused estimate ("cannot estimate: ...") has no curve: the
    observed points and the reason are drawn."""
    left, right, top, bottom = 70, 20, 40, 50
    pw, ph = width - left - right, height - top - bottom
    out = _svg_open(width, height, title, cls="return-level")
    curve = [c for c in est.get("curve") or [] if c[0] and c[0] > 0 and c[1] is not None]
    b = est.get("block_samples")
    points = _block_return_periods([float(v) for v in est.get("block_maxima") or []], int(b)) if b else []
    observed = est.get("observed_max_us")
    if not curve and not points:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">'
                   f'{html.escape(est.get("refused") or "no estimate")}</text></svg>')
        return "\n".join(out)
    periods = [1 / c[0] for c in curve] + [t for t, _ in points]
    levels = [c[1] for c in curve] + [c[3] for c in curve if c[3] is not None] + [v for _, v in points]
    levels += [observed] if observed is not None else []
    x_lo = 10 ** math.floor(math.log10(min(periods)))
    x_hi = 10 ** math.ceil(math.log10(max(periods)))
    if x_hi <= x_lo:
        x_hi = x_lo * 10
    y_hi = max(levels) * 1.08 or 1.0
    lg_lo, lg_hi = math.log10(x_lo), math.log10(x_hi)
    # a heavy tail's levels (and the band's top) span decades: a log latency
    # axis keeps the observed points readable beside them
    positive = [v for v in levels + [c[2] for c in curve if c[2] is not None] if v and v > 0]
    log_y = bool(positive) and max(positive) / min(positive) > 30
    if log_y:
        ly_lo, ly_hi = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))

    def x(t):
        return left + pw * (math.log10(t) - lg_lo) / (lg_hi - lg_lo)

    def y(v):
        if log_y:
            f = (math.log10(max(v, 10 ** ly_lo)) - ly_lo) / (ly_hi - ly_lo)
            return top + ph * (1 - min(f, 1.0))
        return top + ph * (1 - min(v, y_hi) / y_hi)

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    step = max(1, int(math.ceil((lg_hi - lg_lo) / 8)))
    for e in range(int(lg_lo), int(lg_hi) + 1, step):
        out.append(f'<line x1="{x(10 ** e):.1f}" y1="{top}" x2="{x(10 ** e):.1f}" y2="{top + ph}" stroke="#eee"/>'
                   f'<text x="{x(10 ** e):.1f}" y="{top + ph + 16}" text-anchor="middle">1e{e}</text>')
    yticks = [10.0 ** e for e in range(ly_lo, ly_hi + 1)] if log_y else _nice_ticks(0, y_hi)
    for t in yticks:
        label = f"1e{round(math.log10(t))}" if log_y and t >= 1e5 else _fmt(t)
        out.append(f'<line x1="{left - 4}" y1="{y(t):.1f}" x2="{left}" y2="{y(t):.1f}" stroke="#888"/>'
                   f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">'
               f'return period (samples, log scale): exceeded once in this many samples</text>')
    out.append(f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'latency (µs{", log scale" if log_y else ""})</text>')
    band = [c for c in curve if c[2] is not None and c[3] is not None]
    if len(band) > 1:
        pts = [f"{x(1 / c[0]):.1f},{y(c[3]):.1f}" for c in band] + \
              [f"{x(1 / c[0]):.1f},{y(c[2]):.1f}" for c in reversed(band)]
        out.append(f'<polygon class="band" points="{" ".join(pts)}" fill="{COLOURS[0]}" fill-opacity="0.22" '
                   f'stroke="none"><title>{est.get("level", 0.9):.0%} interval (bootstrap)</title></polygon>')
    if len(curve) > 1:
        out.append(f'<polyline class="level" fill="none" stroke="{COLOURS[0]}" stroke-width="2" points="'
                   + " ".join(f"{x(1 / c[0]):.1f},{y(c[1]):.1f}" for c in curve) + '"/>')
    if observed is not None:
        out.append(f'<line x1="{left}" y1="{y(observed):.1f}" x2="{left + pw}" y2="{y(observed):.1f}" '
                   f'stroke="#555" stroke-dasharray="5,3"/><text x="{left + 4}" y="{y(observed) - 4:.1f}" '
                   f'fill="#555">observed max {_fmt(observed)} µs</text>')
    for label, p, v in (("1e-9 per sample", est.get("probability"), est.get("per_sample_us")),
                        ("1e-9 per hour", None, est.get("per_hour_us"))):
        if v is None:
            continue
        at = next((c for c in curve if c[1] == v), None) if p is None else \
            next((c for c in curve if c[0] == p), None)
        if at is None:
            continue
        out.append(f'<line x1="{x(1 / at[0]):.1f}" y1="{top}" x2="{x(1 / at[0]):.1f}" y2="{top + ph}" '
                   f'stroke="#c00" stroke-dasharray="2,3"/><circle cx="{x(1 / at[0]):.1f}" cy="{y(v):.1f}" r="4" '
                   f'fill="#c00"/><text x="{x(1 / at[0]) - 6:.1f}" y="{y(v) - 8:.1f}" text-anchor="end" '
                   f'fill="#c00">pWCET {label}: {_fmt(v)} µs</text>')
    for t, v in points:
        out.append(f'<circle class="block-max" cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{COLOURS[1]}">'
                   f'<title>block maximum {v:g} us</title></circle>')
    legend = ([(COLOURS[0], f"return level (fitted tail), band: {est.get('level', 0.9):.0%} interval")]
              if curve else []) + ([(COLOURS[1], "block maxima (one per checkpoint)")] if points else [])
    for i, (colour, text) in enumerate(legend):  # bottom right: below the rising curve
        ly = top + ph - 12 - 16 * (len(legend) - i)
        out.append(f'<rect x="{left + pw - 290}" y="{ly}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{left + pw - 275}" y="{ly + 9}">{html.escape(text)}</text>')
    if est.get("refused"):
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle" fill="#c00">'
                   f'{html.escape(est["refused"])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def pwcet_line(est: dict) -> str:
    """One line for a soak's estimate: the pWCET beside the observed max, or why none."""
    obs = est.get("observed_max_us")
    seen = f"observed max {_fmt(obs)} µs" if obs is not None else "no observed max"
    if est.get("refused") or est.get("per_sample_us") is None:
        return f"{seen}; {est.get('refused') or 'cannot estimate'}"
    lo, hi = est.get("per_sample_ci_us") or (None, None)
    line = (f"{seen}; pWCET at {est.get('probability', 1e-9):g} per sample {_fmt(est['per_sample_us'])} µs"
            + (f" [{_fmt(lo)}-{_fmt(hi)}] at {est.get('level', 0.9):.0%}" if lo is not None else ""))
    if est.get("per_hour_us") is not None:
        hlo, hhi = est.get("per_hour_ci_us") or (None, None)
        line += (f", per hour {_fmt(est['per_hour_us'])} µs"
                 + (f" [{_fmt(hlo)}-{_fmt(hhi)}]" if hlo is not None else ""))
    fit = est.get("fit") or {}
    return line + f" ({est.get('method', '')}, {fit.get('tail_points', '?')} tail points)"


def pwcet_html(run: RunResult) -> list[str]:
    """Each soak's worst case, estimated (rtlab.soak.pwcet): the line and the return-level plot."""
    out = []
    for job in run.jobs:
        for m in job.measurements:
            est = (m.output.metrics or {}).get("pwcet")
            if not isinstance(est, dict):
                continue
            label = f"{job.board}/{job.variant}" + (f" r{job.repeat}" if job.repeat else "") + \
                f" · {m.key.suite} · {m.key.load}"
            out.append(f"<h3>{html.escape(label)}</h3><p>{html.escape(pwcet_line(est))}</p>")
            out.append(f"<div>{return_level_svg(est, label + ' · return level')}</div>")
    if not out:
        return []
    return ["<h2 id='pwcet'>Worst case, estimated (pWCET)</h2>",
            "<p>extreme value theory on the histogram tail and the per-checkpoint maxima; context, "
            "not a verdict: the gate judges the observed samples</p>", *out]


def write_html_report(run: RunResult, path: Path) -> Path:
    """report.html: the verdict first (broken budgets, infra errors, the
    regression verdict against its baseline, with evidence), then the
    variants' tables, the histograms as small multiples, and the details."""
    from ..errors import InputError
    from ..core.modelcheck import load_comparison
    path = Path(path)
    try:  # bounded, not through a symlink, checked (rtlab.core.modelcheck)
        comparison = load_comparison(path.parent)
    except InputError as e:
        comparison = {"outcome": "undecided", "problems": [f"compare.json unreadable: {e}"], "keys": []}
    title = f"rtlab run {run.run_id} — {run.verdict.value.upper()}"
    if comparison is not None:  # both verdicts in the title: a budget PASS is not the run's pass
        title = (f"rtlab run {run.run_id} — budgets {run.verdict.value.upper()}, "
                 f"regression verdict {str(comparison.get('outcome', '?')).upper()}")
    parts = [*page_head(title), f"<h1>{html.escape(title)}</h1>",
             f"<p>campaign {html.escape(run.campaign)}, started {html.escape(run.started)}"
             + (f", kernel commit {html.escape(str(run.commit.get('sha')))}" if run.commit.get("sha") else "")
             + "</p>"]
    parts += verdict_html(run, comparison)
    parts += tables_html(run)
    parts += regression_table(comparison)
    plots = run_plots(run)
    if plots:
        parts += ["<h2 id='histograms'>Latency histograms</h2>",
                  "<p class='note'>one plot per variant, samples on a log scale; red dashed: the budget, "
                  "black: the observed max; the plots of a board share their latency axis</p>"]
    for title_, svgs in plots:
        parts.append(f"<h3>{html.escape(title_)}</h3><div class='multiples'>"
                     + "".join(f"<div data-variant='{html.escape(v, quote=True)}'>{svg}</div>" for v, svg in svgs)
                     + "</div>")
    parts += pwcet_html(run)
    parts += evidence_html(run)
    parts += host_noise_html(run)
    snaps = snapshot_html(run, path.parent)
    if snaps:
        parts += [snaps[0], "<details><summary>each job's system</summary>", *snaps[1:], "</details>"]
    # a new file replacing whatever is there: never written through a symlink
    # planted in a run dir (rtlab compare / gate --baseline rewrite this page)
    from ..core.fsutil import write_replacing
    write_replacing(path, ("\n".join(parts) + "\n").encode())
    return path


def _summed(hists) -> Optional[Histogram]:
    """Histograms of several runs as one (same bucket layout only)."""
    hists = [h for h in hists if h is not None]
    if not hists or len({h.bucket_us for h in hists}) != 1:
        return None
    counts: dict[int, int] = {}
    for h in hists:
        for k, v in h.counts.items():
            counts[k] = counts.get(k, 0) + v
    return Histogram(counts=counts, bucket_us=hists[0].bucket_us,
                     size=max((h.size or 0) for h in hists) or None,
                     overflows=sum(h.overflows for h in hists))


def runs_svg(stat, width: int = 760, height: int = 150) -> str:
    """One point per run of the run-level statistic, baseline above
    candidate, medians as ticks: the spread the verdict had to see through."""
    left, right = 110, 20
    vals = stat.baseline + stat.candidate
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.08 or max(hi * 0.1, 1)
    lo, hi = max(0.0, lo - pad), hi + pad
    pw = width - left - right

    def x(v):
        return left + pw * (v - lo) / (hi - lo)

    out = _svg_open(width, height, f"{stat.name} of each run (µs)", title_y=14, title_size=12)
    for row, (label, values, colour, cens) in enumerate((
            ("baseline", stat.baseline, COLOURS[0], stat.baseline_censored),
            ("candidate", stat.candidate, COLOURS[1], stat.candidate_censored))):
        yy = 45 + row * 45
        out.append(f'<text x="{left - 8}" y="{yy + 4}" text-anchor="end">{label} ({len(values)})</text>'
                   f'<line x1="{left}" y1="{yy}" x2="{left + pw}" y2="{yy}" stroke="#eee"/>')
        for i, v in enumerate(values):
            jitter = ((i % 5) - 2) * 3
            # a run whose statistic lies beyond the histogram is drawn at
            # the range, hollow: it is at least that
            beyond = i < len(cens) and cens[i]
            fill = f'fill="white" stroke="{colour}" stroke-width="2"' if beyond else f'fill="{colour}"'
            out.append(f'<circle cx="{x(v):.1f}" cy="{yy + jitter}" r="4" {fill} fill-opacity="0.7">'
                       f'<title>{">=" if beyond else ""}{v:g} us</title></circle>')
        med = sorted(values)[len(values) // 2] if len(values) % 2 else \
            (sorted(values)[len(values) // 2 - 1] + sorted(values)[len(values) // 2]) / 2
        out.append(f'<line x1="{x(med):.1f}" y1="{yy - 12}" x2="{x(med):.1f}" y2="{yy + 12}" '
                   f'stroke="{colour}" stroke-width="2"/>')
    for t in _nice_ticks(lo, hi):
        out.append(f'<text x="{x(t):.1f}" y="{height - 8}" text-anchor="middle">{_fmt(t)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_compare_html(cmp, path: Path) -> Path:
    """The comparison report: per key, baseline and candidate histograms
    overlaid (log counts), one point per run of each gating statistic, and
    the verdict with its effect and interval."""
    colour = {"regression": "#c00", "no-regression": "#070", "undecided": "#a60", "blind": "#8a6d00"}
    parts = ["<!doctype html><meta charset='utf-8'>",
             f"<title>rtlab compare — {html.escape(cmp.outcome)}</title>",
             "<style>body{font-family:sans-serif;margin:2em} pre{background:#f6f6f6;padding:1em}"
             " h2{margin-top:2em}</style>",
             f"<h1 style='color:{colour[cmp.outcome]}'>rtlab compare — {html.escape(cmp.outcome.upper())}</h1>",
             # keys passed without being gated lead, with the lab's cure
             *(f"<p id='not-gated' style='color:{colour['blind']}'><b>{html.escape(line)}</b></p>"
               for line in cmp.not_gated_lines()),
             f"<pre>{html.escape(chr(10).join(cmp.lines()))}</pre>",
             f"<p>policy: {html.escape(str(cmp.policy.to_json()))}</p>"]
    if cmp.system_changes:  # the boards' snapshots differ: context for the verdict
        parts += ["<h2 id='system'>System changes (baseline → candidate)</h2>", "<ul>",
                  *(f"<li>{html.escape(c)}</li>" for c in cmp.system_changes), "</ul>"]
    for k in cmp.keys:
        anchor = html.escape(k.key.label().replace("/", "-"), quote=True)
        parts.append(f"<h2 id='{anchor}' style='color:{colour[k.outcome]}'>{html.escape(k.key.label())}: "
                     f"{html.escape(k.outcome.upper())}</h2><p>{html.escape(k.line())}</p>")
        base = _summed(r.histogram for r in k.baseline)
        cand = _summed(r.histogram for r in k.candidate)
        series = [(f"baseline ({len(k.baseline)} runs)", base), (f"candidate ({len(k.candidate)} runs)", cand)]
        parts.append(f"<div>{histogram_svg(series, k.key.label() + ' · all runs summed')}</div>")
        for s in k.stats:
            if s.gates:
                parts.append(f"<div>{runs_svg(s)}</div>")
        parts += looks_html(k)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
    return path


def looks_html(k) -> list[str]:
    """Every look of the sequential verdict at a key: candidate runs, the
    ratio's estimate, p against the look's level, the upper bound, decision."""
    rows = []
    for s in k.stats:
        for i, lk in enumerate(s.looks, 1):
            j = lk.to_json()
            up = "∞" if j["upper"] is None else f"{(j['upper'] - 1) * 100:+.0f} %"
            rows.append(f"<tr><td>{html.escape(s.name)}</td><td>{i}</td><td>{lk.runs}</td>"
                        f"<td>{(j['ratio'] - 1) * 100:+.0f} %</td><td>{j['p']:.2g} (&lt; {s.level or 0:.2g})</td>"
                        f"<td>{up}</td><td>{html.escape(j['decision'])}</td></tr>")
    if not rows:
        return []
    return ["<table class='looks'><tr><th>statistic</th><th>look</th><th>candidate runs</th><th>ratio</th>"
            "<th>p (level)</th><th>upper bound</th><th>decision</th></tr>", *rows, "</table>"]


def evidence_html(run: RunResult) -> list[str]:
    """The breaches' evidence: one line per measurement that broke its
    budget with a trace, linked (paths relative to the run dir)."""
    rows = []
    for job in run.jobs:
        for m in job.measurements:
            if not m.evidence:
                continue
            d = f"{job.board}/{job.variant}/{m.evidence['dir']}"
            rows.append(f"<li><b>{html.escape(m.key.label())}</b> ({m.verdict.value if m.verdict else '?'}): "
                        f"{html.escape(m.evidence.get('summary') or 'no culprit named in the trace')} — "
                        f"<a href='{html.escape(d)}/trace.txt'>trace</a>, "
                        f"<a href='{html.escape(d)}/analysis.json'>analysis</a></li>")
    if not rows:
        return []
    return ["<h2 id='evidence'>Evidence at the breach</h2>", "<ul>", *rows, "</ul>"]


def snapshot_html(run: RunResult, run_dir: Path) -> list[str]:
    """Each job's system snapshot (rtlab.report.snapshot), summarised and linked."""
    out = []
    for job in run.jobs:
        f = run_dir / job.board / job.variant / SNAPSHOT_FILE
        try:
            snap = json.loads(read_text_bounded(f, result_max_bytes(), root=run_dir))
        except (InputError, ValueError):
            continue
        rel = f"{job.board}/{job.variant}/{SNAPSHOT_FILE}"
        out.append(f"<h3>{html.escape(job.board)}/{html.escape(job.variant)} "
                   f"(<a href='{html.escape(rel)}'>snapshot.json</a>)</h3>")
        out.append("<pre>" + html.escape("\n".join(summary_lines(snap))) + "</pre>")
    return (["<h2 id='snapshot'>System snapshots</h2>"] + out) if out else []
