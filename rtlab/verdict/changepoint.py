"""Change points in a latency history, and the lab drift check.

A series is one board × variant × suite × load × statistic (run-level p99,
p99.9, share of samples over the budget), ordered by time. Its elements are
the commits tested (the median of a commit's runs) or, for the pinned
reference kernel of the drift check, the runs themselves.

Detection is PELT (Killick et al. 2012) from ``ruptures`` (maintained,
on PyPI), with an L1 cost on log levels and a penalty of 3 × noise × ln n,
the noise being the robust spread of successive differences. Measured on
synthetic log-normal series (docs/measurements/change-points.md, tests/unit/
test_changepoint.py): 0-2 % of A/A series with any false change (also with
5 % wild runs), 88 % of steps at the exact commit (97 % within one), 94 % of
regress-then-fix histories both changes exact. E-divisive at Otava's
p = 0.001 (``signal-processing-algorithms``) was measured too: no false
change either, but 0 of 100 regress-then-fix histories found (its first
single split of a bump is not significant), so PELT it is.

PELT says *where*; the effect and its confidence come from the run-level
values on either side (scipy's Mann–Whitney U, the ratio of medians): a
change smaller than ``min_effect`` (relative) or ``min_abs`` (absolute) is
not reported.

A regression is *active* while the latest segment stays nearer the level
after the change than the level before it, *resolved* once it went back.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterable, Optional, Sequence

import numpy as np
from scipy import stats

#: PELT penalty in units of noise × ln(n), calibrated on synthetic A/A and
#: step series (docs/measurements/change-points.md): 0-2 % false series, 88 % of steps exact
PENALTY = 3.0
#: fewest elements on either side of a change
MIN_SIZE = 2
#: relative noise floor (log units) and the smallest level taken to log
NOISE_FLOOR = 0.02
LOG_FLOOR = 1e-6
#: fewest elements (commits or runs) a series needs before anything is said
MIN_POINTS = 6
#: a change smaller than this (relative) is not reported
MIN_EFFECT = 0.20

#: statistics the history is analysed on: field of the store -> (label, min_abs)
METRICS = {
    "p99_us": ("p99", 2.0),
    "p999_us": ("p99.9", 2.0),
    "share_over_budget": ("share over budget", 0.001),
}


@dataclass(frozen=True, order=True)
class SeriesKey:
    board: str
    variant: str
    suite: str
    load: str
    metric: str

    def __str__(self) -> str:
        return f"{self.board}/{self.variant}/{self.suite}/{self.load} {METRICS.get(self.metric, (self.metric,))[0]}"


@dataclass(frozen=True)
class Observation:
    """One run-level value: when, which commit, which run."""
    time: float          # unix seconds (the run's timestamp in the store)
    commit: str
    run_id: str
    value: float


@dataclass
class Element:
    """A point of the analysed series: one commit (or one run) and its values."""
    label: str           # the commit (or run id)
    commit: str
    first_time: float
    last_time: float
    values: list[float] = field(default_factory=list)

    @property
    def level(self) -> float:
        return float(np.median(self.values))


@dataclass
class Change:
    key: SeriesKey
    direction: str               # "regression" (up: worse) or "improvement"
    last_good: str               # last commit (or run) before the change
    first_bad: str               # first commit (or run) after it
    last_good_time: float
    first_bad_time: float
    before: float                # median of the runs of the segment before
    after: float                 # ... and after
    effect: float                # after / before - 1
    p_value: float               # one-sided Mann-Whitney U, runs after vs before
    n_before: int
    n_after: int
    status: str = "active"       # "active" | "resolved" (regressions); "improvement"
    resolved_by: Optional[str] = None
    lab_drift: bool = False      # the board's reference series changed in the same window

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value

    def line(self) -> str:
        unit = "" if self.key.metric == "share_over_budget" else " us"
        what = "lab drift suspected" if self.lab_drift else self.status
        return (f"{self.key}: {self.direction} {self.effect:+.0%} ({_fmt(self.before)} -> "
                f"{_fmt(self.after)}{unit}) between {self.last_good[:12]} (last good) and "
                f"{self.first_bad[:12]} (first bad), {self.n_before} vs {self.n_after} runs, "
                f"confidence {self.confidence:.3f}: {what.upper() if self.lab_drift else what}")

    def to_json(self) -> dict:
        d = asdict(self)
        d["key"] = asdict(self.key)
        d["confidence"] = self.confidence
        return d


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def elements(obs: Iterable[Observation], by: str = "commit") -> list[Element]:
    """Observations grouped by commit (or by run), in order of first time."""
    groups: dict[str, Element] = {}
    for o in sorted(obs, key=lambda o: (o.time, o.run_id)):
        if o.value is None or not math.isfinite(o.value):
            continue
        label = o.commit if by == "commit" else o.run_id
        e = groups.get(label)
        if e is None:
            e = groups[label] = Element(label, o.commit, o.time, o.time)
        e.values.append(float(o.value))
        e.last_time = max(e.last_time, o.time)
    return sorted(groups.values(), key=lambda e: e.first_time)


def noise_scale(x: np.ndarray) -> float:
    """Robust run-to-run spread of log levels: the MAD of successive
    differences (a step moves one difference, not the scale), floored at 2 %."""
    if len(x) < 3:
        return NOISE_FLOOR
    d = np.diff(x)
    return max(float(stats.median_abs_deviation(d, scale="normal")) / math.sqrt(2), NOISE_FLOOR)


def segment(levels: Sequence[float], penalty: float = PENALTY, min_size: int = MIN_SIZE,
            offset: float = 0.0) -> list[int]:
    """Indices i where a new segment starts (levels[i] is the first element
    after a change): ruptures' PELT, L1 cost (medians: one wild run does not
    make a segment) on log levels (latency steps are ratios), penalty
    ``penalty`` × noise × ln n. Deterministic."""
    import ruptures as rpt  # lazy: a slow import only the change-point search needs

    lv = np.asarray(levels, dtype=float)
    if len(lv) < 2 * min_size:
        return []
    # log(level + offset): steps as ratios, but a share going 0 -> 0.0001
    # is not a thousand-fold change (offset: the metric's smallest effect)
    x = np.log(np.maximum(lv + offset, LOG_FLOOR))
    pen = penalty * noise_scale(x) * math.log(len(x))
    bkps = rpt.Pelt(model="l1", min_size=min_size, jump=1).fit(x.reshape(-1, 1)).predict(pen=pen)
    return [int(b) for b in bkps[:-1]]


def find_changes(key: SeriesKey, obs: Iterable[Observation], by: str = "commit",
                 penalty: float = PENALTY,
                 min_effect: float = MIN_EFFECT, min_abs: Optional[float] = None,
                 min_points: int = MIN_POINTS) -> list[Change]:
    """The change points of one series, oldest first."""
    els = elements(obs, by)
    if len(els) < min_points:
        return []
    if min_abs is None:
        min_abs = METRICS.get(key.metric, ("", 0.0))[1]
    levels = [e.level for e in els]
    cps = segment(levels, penalty, offset=min_abs)
    bounds = [0, *cps, len(els)]
    changes: list[Change] = []
    segs = [els[a:b] for a, b in zip(bounds, bounds[1:])]
    for i, cp in enumerate(cps):
        before = [v for e in segs[i] for v in e.values]
        after = [v for e in segs[i + 1] for v in e.values]
        mb, ma = float(np.median(before)), float(np.median(after))
        up = ma > mb
        if mb > 0:
            effect = ma / mb - 1.0
        else:
            effect = math.inf if ma > 0 else 0.0
        if abs(ma - mb) < min_abs or (math.isfinite(effect) and abs(effect) < min_effect):
            continue
        p = float(stats.mannwhitneyu(after, before, alternative="greater" if up else "less").pvalue)
        changes.append(Change(key, "regression" if up else "improvement",
                              els[cp - 1].label, els[cp].label, els[cp - 1].last_time,
                              els[cp].first_time, mb, ma, effect, p, len(before), len(after),
                              status="active" if up else "improvement"))
    _resolve(changes, segs[-1] if segs else [], els)
    return changes


def _resolve(changes: list[Change], last_segment: list[Element], els: list[Element]) -> None:
    """A regression is resolved when the latest level is back nearer the
    level before it than the level after it."""
    if not last_segment:
        return
    latest = float(np.median([v for e in last_segment for v in e.values]))
    for c in changes:
        if c.direction != "regression":
            continue
        if abs(latest - c.before) < abs(latest - c.after):
            c.status = "resolved"
            later = [d for d in changes if d.direction == "improvement" and d.first_bad_time > c.first_bad_time]
            c.resolved_by = later[0].first_bad if later else None


# ------------------------------------------------------------------ lab drift
@dataclass
class Drift:
    """A change in a board's pinned reference series: the lab, not a kernel."""
    change: Change

    @property
    def board(self) -> str:
        return self.change.key.board

    @property
    def window(self) -> tuple[float, float]:
        """From the last reference run before the change to one reference
        period after the first one after it: commits measured until the
        next reference run cannot be told from the lab's change."""
        lo, hi = self.change.last_good_time, self.change.first_bad_time
        return lo, hi + (hi - lo)

    def line(self) -> str:
        c = self.change
        return (f"board {self.board} DRIFTING: reference kernel {c.key.variant}/{c.key.suite}/{c.key.load} "
                f"{METRICS.get(c.key.metric, (c.key.metric,))[0]} {c.effect:+.0%} ({_fmt(c.before)} -> "
                f"{_fmt(c.after)}) between runs {c.last_good} and {c.first_bad}, "
                f"confidence {c.confidence:.3f}")


def find_drift(reference: dict[SeriesKey, list[Observation]], **kw) -> list[Drift]:
    """Changes in the reference series (one element per run: the kernel is
    the same pinned one, only the lab can change), both directions."""
    out: list[Drift] = []
    for key, obs in sorted(reference.items()):
        out.extend(Drift(c) for c in find_changes(key, obs, by="run", **kw))
    return out


def mark_lab_drift(changes: list[Change], drifts: list[Drift]) -> None:
    """A commit's change on a board whose reference drifted in an
    overlapping window is lab drift suspected, not the commit's."""
    for c in changes:
        for d in drifts:
            lo, hi = d.window
            if d.board == c.key.board and c.last_good_time <= hi and lo <= c.first_bad_time:
                c.lab_drift = True
