"""The long-term latency page: ``rtlab history --html`` without Grafana.

Per board, suite × load and variant: the max and the p99.9 per commit (or
per day) over time, the budget lines, the change points ``rtlab
regressions`` wrote, and the latest run's histogram with the earlier runs
shaded behind it, as OSADL's long-term latency plots show them.

The numbers are read by rtlab.verdict.history with the regressions and
histogram dashboards' own InfluxQL: the page and the dashboards agree, and
a test checks it. Everything from the store is escaped (run results come
from merge requests).
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from ..core.model import Histogram
from .plot import COLOURS, _fmt, _nice_ticks, _svg_open, histogram_svg
from .runpage import page_head

#: the most recent runs whose histograms are drawn (the latest on top)
HISTOGRAM_RUNS = 12
#: the change points' statistics (rtlab.verdict.changepoint.METRICS) as the page names them
METRIC_NAMES = {"p999_us": "p99.9", "p99_us": "p99", "share_over_budget": "share over budget"}


@dataclass
class Point:
    """One point of a long-term plot: a commit (its runs' max) or a day."""

    time: float  # unix seconds: the first run of the commit, or the day
    label: str   # the commit (short SHA and subject) or the day
    value: float


@dataclass
class ChangeMark:
    time: float
    metric: str
    status: str
    effect_pct: Optional[float]
    last_good: str
    commit: str


@dataclass
class SeriesPlot:
    """One board × variant × suite × load."""

    board: str
    variant: str
    suite: str
    load: str
    max: list[Point] = field(default_factory=list)
    p999: list[Point] = field(default_factory=list)
    budget_max: Optional[float] = None
    budget_p999: Optional[float] = None
    changes: list[ChangeMark] = field(default_factory=list)
    #: what the key's regression verdict could see (ratio - 1) per commit or
    #: day, and its class's limit (above it: not gated)
    detectable: list[Point] = field(default_factory=list)
    detectable_limit: Optional[float] = None
    #: (run timestamp, histogram), oldest first; the last is the latest run
    histograms: list[tuple[str, Histogram]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.board}/{self.variant}/{self.suite}/{self.load}"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- drawing ------------------------------------------------------------------------------------
def _time_frame(out: list[str], left: float, top: float, pw: float, ph: float, t_lo: float, t_hi: float,
                y_hi: float, ticks: int, label: Callable[[float], str]
                ) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """A plot's frame and value grid (0 .. *y_hi*, *ticks* lines labelled by
    *label*) appended to *out*; returns the time and value to x and y maps."""
    span = max(t_hi - t_lo, 1.0)

    def x(t: float) -> float:
        return left + pw * (t - t_lo) / span

    def y(v: float) -> float:
        return top + ph * (1 - min(v, y_hi) / y_hi)

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    for v in _nice_ticks(0, y_hi, ticks):
        out.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{label(v)}</text>')
    return x, y


def trend_svg(plot: SeriesPlot, t_lo: float, t_hi: float, per: str = "commit", width: int = 620,
              height: int = 260) -> str:
    """Max and p99.9 over time; the budgets dashed; change points as
    vertical lines labelled with their effect. Every point carries its
    time and value (data-*), the numbers the page's table lists."""
    left, right, top, bottom = 56, 14, 30, 42
    pw, ph = width - left - right, height - top - bottom
    out = _svg_open(width, height, f"{plot.variant} · max and p99.9 per {per}",
                    cls="trend", title_y=16, title_size=12)
    values = [p.value for p in plot.max + plot.p999]
    if not values:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no points</text></svg>')
        return "\n".join(out)
    y_hi = max(values)
    for b in (plot.budget_max, plot.budget_p999):
        if b is not None and b <= 2 * y_hi:  # a far-away budget would squash the data
            y_hi = max(y_hi, b)
    y_hi *= 1.08
    x, y = _time_frame(out, left, top, pw, ph, t_lo, t_hi, y_hi, 5, _fmt)
    span = max(t_hi - t_lo, 1.0)
    day = 86400.0
    step = day * max(1, math.ceil(span / day / 8))
    t = math.ceil(t_lo / day) * day
    while t <= t_hi:
        out.append(f'<line x1="{x(t):.1f}" y1="{top + ph}" x2="{x(t):.1f}" y2="{top + ph + 4}" stroke="#888"/>'
                   f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{rfc3339(t)[5:10]}</text>')
        t += step
    out.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">date (UTC)</text>'
               f'<text transform="translate(13,{top + ph / 2}) rotate(-90)" text-anchor="middle">µs</text>')
    for cls, budget, colour, label in (("budget-max", plot.budget_max, "#c00", "budget max"),
                                       ("budget-p999", plot.budget_p999, "#e07000", "budget p99.9")):
        if budget is None:
            continue
        if budget <= y_hi:
            out.append(f'<line class="{cls}" data-value="{budget:g}" x1="{left}" y1="{y(budget):.1f}" '
                       f'x2="{left + pw}" y2="{y(budget):.1f}" stroke="{colour}" stroke-dasharray="6,3"/>'
                       f'<text x="{left + pw - 4}" y="{y(budget) - 4:.1f}" text-anchor="end" fill="{colour}">'
                       f'{label} {_fmt(budget)} µs</text>')
        else:
            out.append(f'<text class="{cls}" data-value="{budget:g}" x="{left + pw - 4}" y="{top + 12}" '
                       f'text-anchor="end" fill="{colour}">{label} {_fmt(budget)} µs (off scale) ↑</text>')
    for i, c in enumerate(plot.changes):
        colour = "#7b2d8e" if c.status in ("active", "resolved") else "#888"
        eff = f" {c.effect_pct:+.0f} %" if c.effect_pct is not None else ""
        name = METRIC_NAMES.get(c.metric, c.metric)
        out.append(f'<line class="change-point" data-commit="{html.escape(c.commit, quote=True)}" '
                   f'data-metric="{html.escape(c.metric, quote=True)}" x1="{x(c.time):.1f}" y1="{top}" '
                   f'x2="{x(c.time):.1f}" y2="{top + ph}" stroke="{colour}" stroke-width="2"/>'
                   f'<text x="{x(c.time) + 4:.1f}" y="{top + 12 + 12 * (i % 6)}" fill="{colour}">'
                   f'{html.escape(name + eff + " " + c.status)}</text>')
    for cls, pts, colour in (("max-point", plot.max, COLOURS[1]), ("p999-point", plot.p999, COLOURS[0])):
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1" stroke-opacity="0.6" points="'
                       + " ".join(f"{x(p.time):.1f},{y(p.value):.1f}" for p in pts) + '"/>')
        for p in pts:
            out.append(f'<circle class="{cls}" data-time="{p.time:.0f}" data-value="{p.value!r}" '
                       f'cx="{x(p.time):.1f}" cy="{y(p.value):.1f}" r="3" fill="{colour}">'
                       f'<title>{html.escape(p.label)}: {p.value:g} µs</title></circle>')
    for i, (colour, text) in enumerate(((COLOURS[1], "max"), (COLOURS[0], "p99.9"))):
        out.append(f'<rect x="{left + 8 + 60 * i}" y="{top + ph + 24}" width="9" height="9" fill="{colour}"/>'
                   f'<text x="{left + 20 + 60 * i}" y="{top + ph + 32}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out)


def detectable_svg(plot: SeriesPlot, t_lo: float, t_hi: float, per: str = "commit", width: int = 620,
                   height: int = 170) -> str:
    """What the key's regression verdict could see over time (its
    detectable effect, %), its class's limit dashed: a board getting noisier
    rises towards it; above it the key is not gated."""
    left, right, top, bottom = 56, 14, 26, 30
    pw, ph = width - left - right, height - top - bottom
    out = _svg_open(width, height, f"{plot.variant} · what the regression verdict sees (detectable effect, %)",
                    cls="detectable", title_y=16, title_size=12)
    pts = plot.detectable
    if not pts:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no regression verdict '
                   f'published</text></svg>')
        return "\n".join(out)
    y_hi = max([p.value for p in pts] + ([plot.detectable_limit] if plot.detectable_limit is not None else []))
    y_hi = max(y_hi * 1.1, 0.1)
    x, y = _time_frame(out, left, top, pw, ph, t_lo, t_hi, y_hi, 4, lambda v: f"{v * 100:+.0f} %")
    lim = plot.detectable_limit
    if lim is not None:
        out.append(f'<line class="detectable-limit" data-value="{lim!r}" x1="{left}" y1="{y(lim):.1f}" '
                   f'x2="{left + pw}" y2="{y(lim):.1f}" stroke="#c00" stroke-dasharray="6,3"/>'
                   f'<text x="{left + pw - 4}" y="{y(lim) - 4:.1f}" text-anchor="end" fill="#c00">'
                   f'limit {lim * 100:+.0f} %: above it not gated</text>')
    if len(pts) > 1:
        out.append(f'<polyline fill="none" stroke="{COLOURS[2]}" stroke-width="1" stroke-opacity="0.6" points="'
                   + " ".join(f"{x(p.time):.1f},{y(p.value):.1f}" for p in pts) + '"/>')
    for p in pts:
        blind = lim is not None and p.value > lim
        out.append(f'<circle class="detectable-point" data-time="{p.time:.0f}" data-value="{p.value!r}" '
                   f'cx="{x(p.time):.1f}" cy="{y(p.value):.1f}" r="3" fill="{"#c00" if blind else COLOURS[2]}">'
                   f'<title>{html.escape(p.label)}: sees {p.value * 100:+.0f} % or more'
                   f'{" (not gated)" if blind else ""}</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def runs_histogram_svg(plot: SeriesPlot, width: int = 420, height: int = 260) -> str:
    """The latest run's histogram over the earlier runs' (grey)."""
    if not plot.histograms:
        return histogram_svg([], f"{plot.variant} · histogram", width=width, height=height, compact=True)
    series_ = [(run, h) for run, h in plot.histograms]
    latest_run = series_[-1][0]
    svg = histogram_svg(series_, f"{plot.variant} · latest run {latest_run} over {len(series_) - 1} earlier",
                        plot.budget_max, width=width, height=height, cls="runs-hist", compact=True, legend=False)
    # every series was drawn in its own colour: the earlier runs become grey
    # shades behind, the latest stays blue and is drawn last (on top)
    lines = svg.split("\n")
    hist_lines = [i for i, ln in enumerate(lines) if ln.startswith('<polyline class="hist"')]
    for n, i in enumerate(hist_lines):
        if n < len(hist_lines) - 1:
            lines[i] = lines[i].replace('class="hist"', 'class="earlier-hist"', 1)
            lines[i] = _recolour(lines[i], "#999", 0.35)
        else:
            lines[i] = _recolour(lines[i].replace('class="hist"', 'class="latest-hist"', 1), COLOURS[0], 1.0)
    return "\n".join(lines)


def _recolour(line: str, colour: str, opacity: float) -> str:
    start = line.index('stroke="') + len('stroke="')
    end = line.index('"', start)
    return line[:start] + colour + line[end:].replace(' stroke-width=', f' stroke-opacity="{opacity}" stroke-width=', 1)


def numbers_table(plot: SeriesPlot) -> str:
    """The plotted numbers, one row per commit or day (folded under the plots)."""
    p999 = {p.time: p.value for p in plot.p999}
    det = {p.time: p.value for p in plot.detectable}
    def cell(cls: str, v: Optional[float]) -> str:  # shown rounded, exact in data-value
        return "<td></td>" if v is None else f"<td class='{cls}' data-value='{v!r}'>{v:,.1f}</td>"

    def pct(v: Optional[float]) -> str:
        return "<td></td>" if v is None else f"<td class='detectable' data-value='{v!r}'>{v * 100:+,.0f} %</td>"
    rows_ = "".join(f"<tr><td class='l'>{html.escape(p.label)}</td><td>{rfc3339(p.time)}</td>"
                    f"{cell('max', p.value)}{cell('p999', p999.get(p.time))}{pct(det.get(p.time))}</tr>"
                    for p in plot.max)
    return (f"<details><summary>numbers ({len(plot.max)} points)</summary><table class='numbers' "
            f"data-key='{html.escape(plot.key, quote=True)}'><thead><tr><th>commit or day</th><th>time</th>"
            f"<th>max µs</th><th>p99.9 µs</th><th>sees</th></tr></thead><tbody>{rows_}</tbody></table></details>")


def write_history_html(plots: list[SeriesPlot], path: Path, days: int, per: str, store_name: str) -> Path:
    from ..core.fsutil import write_replacing
    from .runpage import css_class

    now = time.time()
    # one time axis for every plot of the page, from the first point shown
    # (a 30-day window with a week of data would squash it to the right)
    first = min((pt.time for p in plots for pt in p.max + p.p999), default=now - days * 86400.0)
    t_lo = max(now - days * 86400.0, first - 0.03 * max(now - first, 3600.0))
    title = f"rtlab history — the last {days} days"
    parts = [*page_head(title), f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>from {html.escape(store_name)} at {rfc3339(now)}, one point per "
             f"{'commit (the largest of its runs)' if per == 'commit' else 'day'}; the numbers are the "
             "regressions and histogram dashboards' queries</p>"]
    active = [(p, c) for p in plots for c in p.changes if c.status == "active"]
    summary = ["<table class='summary'><thead><tr><th>board/variant/suite/load</th><th>latest max µs</th>"
               "<th>latest p99.9 µs</th><th>budget max µs</th><th>the verdict sees</th><th>change points</th>"
               "</tr></thead><tbody>"]
    for p in plots:
        last_max = p.max[-1].value if p.max else None
        last_p = p.p999[-1].value if p.p999 else None
        over = p.budget_max is not None and last_max is not None and last_max >= p.budget_max
        changes = ", ".join(_change_text(c) for c in p.changes)
        cls = css_class("regression") if any(c.status == "active" for c in p.changes) else ""
        summary.append(f"<tr><td class='l'><a href='#{html.escape(_anchor(p), quote=True)}'>"
                       f"{html.escape(p.key)}</a></td><td class='{css_class('fail') if over else ''}'>"
                       f"{'' if last_max is None else f'{last_max:g}'}</td>"
                       f"<td>{'' if last_p is None else f'{last_p:g}'}</td>"
                       f"<td>{'' if p.budget_max is None else f'{p.budget_max:g}'}</td>"
                       f"{_sees_cell(p)}"
                       f"<td class='l {cls}'>{html.escape(changes or '-')}</td></tr>")
    summary.append("</tbody></table>")
    parts.append(f"<p>{len(plots)} series; {len(active)} active change point{'s' * (len(active) != 1)}"
                 + (": " + html.escape(", ".join(f"{p.key} {METRIC_NAMES.get(c.metric, c.metric)}" for p, c in active))
                    if active else "")
                 + "</p>")
    parts += summary
    board = suite_load = None
    for p in plots:
        if p.board != board:
            board, suite_load = p.board, None
            parts.append(f"<h2>{html.escape(p.board)}</h2>")
        if (p.suite, p.load) != suite_load:
            suite_load = (p.suite, p.load)
            parts.append(f"<h3>{html.escape(p.board)} · {html.escape(p.suite)} · {html.escape(p.load)}</h3>")
        parts.append(f"<div class='series' id='{html.escape(_anchor(p), quote=True)}' "
                     f"data-key='{html.escape(p.key, quote=True)}'><div class='multiples'>"
                     f"{trend_svg(p, t_lo, now, per)}{runs_histogram_svg(p)}"
                     + (detectable_svg(p, t_lo, now, per) if p.detectable else "")
                     + f"</div>{numbers_table(p)}</div>")
    if not plots:
        parts.append("<p>no latency points in this window: nothing published yet (rtlab publish), "
                     "or another --board / --variant / --days</p>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_replacing(path, ("\n".join(parts) + "\n").encode())
    return path


def _sees_cell(p: SeriesPlot) -> str:
    """The latest detectable effect, marked where it is above the limit."""
    if not p.detectable:
        return "<td></td>"
    d = p.detectable[-1].value
    blind = p.detectable_limit is not None and d > p.detectable_limit
    return (f"<td class='{'v-blind' if blind else ''}' data-value='{d!r}'>{d * 100:+.0f} %"
            + (" (not gated)" if blind else "") + "</td>")


def _change_text(c: ChangeMark) -> str:
    """p99.9 active +207 % at c07…: a commit's change; a drift has no commit."""
    return (f"{METRIC_NAMES.get(c.metric, c.metric)} {c.status}"
            + (f" {c.effect_pct:+.0f} %" if c.effect_pct is not None else "")
            + (f" at {c.commit[:12]}" if c.commit else ""))


def _anchor(p: SeriesPlot) -> str:
    return "s-" + "-".join((p.board, p.variant, p.suite, p.load))
