"""The long-term series of a store, read with the Grafana dashboards' own
queries (rtlab.store.dashboard): per board × variant × suite × load, the max
and the p99.9 per commit or per day, the budgets, what the regression verdict
could see (each key's detectable effect and its class's limit), the change
points `rtlab regressions` annotated, and the recent runs' histograms.
rtlab.report.history draws them (`rtlab history --html`).
"""
from __future__ import annotations

import math
from typing import Optional

from ..core.model import Histogram
from ..report.history import HISTOGRAM_RUNS, ChangeMark, Point, SeriesPlot, rfc3339
from ..store.base import rows, series
from ..store.dashboard import DashboardQueries, Window


class History:
    """The long-term series of a store, read with the dashboards' queries."""

    def __init__(self, store, window: Window, per: str = "commit", board: Optional[str] = None,
                 variant: Optional[str] = None):
        self.store, self.window, self.per = store, window, per
        self.board, self.variant = board, variant
        self.regressions = DashboardQueries("regressions")
        self.histogram = DashboardQueries("histogram")
        self.plots: dict[tuple[str, str, str, str], SeriesPlot] = {}

    def _query(self, q: str) -> dict:
        return self.store.query(q, epoch="s")

    def _values(self, q: str) -> list[str]:
        """A template variable's values (SHOW TAG VALUES answers key, value)."""
        return sorted({str(r.get("value")) for r in rows(self.store.query(q)) if r.get("value") is not None})

    def boards(self) -> list[str]:
        found = self._values(self.regressions.fill(self.regressions.variable_query("board"), self.window))
        return [b for b in found if self.board is None or b == self.board]

    def commits(self) -> dict[float, str]:
        """Run time -> commit title, from the dashboards' Commits annotation."""
        q = self.regressions.fill(self.regressions.annotation_query("Commits"), self.window)
        return {float(r["time"]): str(r.get("title") or "") for r in rows(self._query(q))}

    def read(self) -> list[SeriesPlot]:
        titles = self.commits()
        for board in self.boards():
            vals = {"board": board, "variant": self.variant}
            for prefix, attr, budget_attr in (("Max latency per commit", "max", "budget_max"),
                                              ("p99.9 latency per commit", "p999", "budget_p999"),
                                              ("What the regression verdict can see", "detectable",
                                               "detectable_limit")):
                value_q, budget_q = self.regressions.panel_queries(prefix)
                for s in series(self._query(self.regressions.fill(value_q, self.window, vals))):
                    plot = self._plot(board, s.get("tags") or {})
                    setattr(plot, attr, self._points(s, titles))
                for s in series(self._query(self.regressions.fill(budget_q, self.window, vals))):
                    plot = self._plot(board, s.get("tags") or {})
                    budgets = [v[1] for v in s.get("values") or [] if v[1] is not None]
                    # the latest budget: the line a new run is judged against
                    setattr(plot, budget_attr, float(budgets[-1]) if budgets else None)
            self._changes(board)
        self._histograms()
        return sorted(self.plots.values(), key=lambda p: (p.board, p.suite, p.load, p.variant))

    def _plot(self, board: str, tags: dict) -> SeriesPlot:
        key = (board, str(tags.get("variant", "")), str(tags.get("suite", "")), str(tags.get("load", "")))
        if key not in self.plots:
            self.plots[key] = SeriesPlot(*key)
        return self.plots[key]

    def _points(self, s: dict, titles: dict[float, str]) -> list[Point]:
        got = [(float(t), float(v)) for t, v in s.get("values") or [] if v is not None]
        if self.per == "day":
            return [Point(t, rfc3339(t)[:10], v) for t, v in got]
        # per commit: the largest of the commit's runs, at its first run
        by_commit: dict[str, Point] = {}
        for t, v in got:
            label = titles.get(t) or rfc3339(t)
            p = by_commit.get(label)
            if p is None:
                by_commit[label] = Point(t, label, v)
            else:
                p.value, p.time = max(p.value, v), min(p.time, t)
        return sorted(by_commit.values(), key=lambda p: p.time)

    def _changes(self, board: str) -> None:
        (q,) = self.regressions.panel_queries("Change points")
        for s in series(self._query(self.regressions.fill(q, self.window, {"board": board}))):
            tags = s.get("tags") or {}
            parts = str(tags.get("series", "")).split("/")
            if len(parts) != 4:
                continue
            variant, suite, load, metric = parts
            plot = self.plots.get((board, variant, suite, load))
            if plot is None:
                continue
            cols = s["columns"]
            for v in s.get("values") or []:
                r = dict(zip(cols, v))
                eff = r.get("effect_pct")
                plot.changes.append(ChangeMark(float(r["time"]), metric, str(r.get("status") or ""),
                                               float(eff) if isinstance(eff, (int, float)) else None,
                                               str(r.get("last_good") or ""), str(r.get("commit") or "")))

    def _histograms(self) -> None:
        """Each plot's runs' histograms (all threads), the latest HISTOGRAM_RUNS."""
        runs_q = self.histogram.fill(self.histogram.variable_query("run"), self.window)
        runs = sorted({str(r["started"]) for r in rows(self.store.query(runs_q)) if r.get("started")})
        (hist_q,) = self.histogram.panel_queries("Histogram, thread")
        for plot in self.plots.values():
            vals = {"board": plot.board, "variant": plot.variant, "suite": plot.suite, "load": plot.load}
            got: list[tuple[str, Histogram]] = []
            for run in reversed(runs):
                counts: dict[float, int] = {}
                for s in series(self.store.query(self.histogram.fill(hist_q, self.window, {**vals, "run": run}))):
                    bucket = float((s.get("tags") or {}).get("bucket", "nan"))
                    for v in s.get("values") or []:
                        if v[1] is not None and math.isfinite(bucket):
                            counts[bucket] = counts.get(bucket, 0) + int(v[1])
                if counts:
                    got.append((run, _histogram(counts)))
                if len(got) == HISTOGRAM_RUNS:
                    break
            plot.histograms = list(reversed(got))


def _histogram(counts: dict[float, int]) -> Histogram:
    """Bucket lower bounds (µs) and counts as a Histogram: the bucket width
    is the smallest step between bounds (1 µs when there is one bucket)."""
    bounds = sorted(counts)
    steps = [b - a for a, b in zip(bounds, bounds[1:]) if b > a]
    width = min(steps) if steps else 1.0
    return Histogram(counts={int(round(b / width)): c for b, c in counts.items()}, bucket_us=width)
