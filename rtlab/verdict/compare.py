"""The regression verdict: candidate runs against a baseline, per key.

    compare_runs(baseline_runs, candidate_runs, policy) -> Comparison

Each measurement of a run (one repeat of one board × variant × suite × load)
is one replicate; its run-level statistics (``rtlab.verdict.stats``) are compared
between the two sides key by key, every test of the campaign corrected at
once (Benjamini-Hochberg), and a key regresses only when the correction
says so AND the effect is at least the budget class's minimum effect
(relative and absolute: a +50 % of 2 us is no regression worth a merge).

Outcomes per key and for the whole comparison:

- ``regression``: exit 1, with the key, the statistic and the effect named;
- ``no-regression``: exit 0: no regression of the key's detectable effect
  or more;
- ``undecided``: exit 2 — too few valid runs, a key on one side only, a
  statistic beyond a histogram of unknown range, runs of different
  campaigns or histogram buckets;
- ``blind``: exit 3 — a gating statistic whose detectable effect exceeds
  its class's ``detectable_limit`` is not gated: the key found no
  regression, but could not have seen one the class asks it to see. Never
  NO-REGRESSION; the lab's cure (baseline sessions x runs, cap) is named.

A percentile beyond a histogram of known range is censored: at least the
range. Where any run of a key censors a gating percentile, that statistic
is judged by the share of samples past the range (overflows / cycles, a
log share against the baseline's, the same closed design): the percentile
lies past the range exactly where the share exceeds its tail (p99.9: 0.1 %),
so NO-REGRESSION says "at most X % of samples past R".
The gating statistics and the minimum effects may differ per budget class
and statistic (``regression:`` in the budget file; budgets/README.md).
  Nothing that cannot be judged passes.

A regression wins over undecided keys elsewhere (it is definitive), as a
broken budget wins over infra errors in the gate; both win over a key not
gated.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from . import stats
from .cure import cure, pct
from ..errors import InputError
from ..core.model import Histogram, MeasurementKey, RunResult, Verdict
from ..plan.policy import MinEffect, Policy
from ..run.results import load_run

REGRESSION = "regression"
NO_REGRESSION = "no-regression"
UNDECIDED = "undecided"
#: a key that found no regression but cannot see what its class asks
#: (detectable effect above ``detectable_limit``): not gated, never green
BLIND = "blind"
OUTCOME_EXIT = {NO_REGRESSION: 0, REGRESSION: 1, UNDECIDED: 2, BLIND: 3}


def exit_precedence(codes) -> int:
    """One exit code of several: 1 (a budget broke, a regression) wins, then
    2 (infra, undecided), then 3 (passed with keys not gated), then 0."""
    codes = set(codes)
    for c in (1, 2, 3):
        if c in codes:
            return c
    return 0


class CampaignOutcome:
    """A comparison's outcome and exit code from its keys' and problems: a
    regression anywhere wins (it is definitive); else any undecided key, a
    problem or no key at all is undecided; else a key not gated is blind;
    else no regression."""

    keys: list
    problems: list[str]

    @property
    def outcome(self) -> str:
        outcomes = [k.outcome for k in self.keys]
        if REGRESSION in outcomes:
            return REGRESSION
        if self.problems or UNDECIDED in outcomes or not outcomes:
            return UNDECIDED
        if BLIND in outcomes:
            return BLIND
        return NO_REGRESSION

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]


# -- replicates -------------------------------------------------------------
@dataclass
class Replicate:
    """One run of one key: what the statistics see of it."""

    run_id: str
    repeat: int
    campaign: str
    budget_class: str
    values: dict[str, Optional[float]]
    bucket_us: Optional[float] = None
    histogram: Optional[Histogram] = None
    commit: str = ""
    #: statistics beyond the histogram's range: name -> the range (the
    #: statistic is at least that: right-censored, not unknowable)
    censored: dict[str, float] = field(default_factory=dict)
    #: how the run was made (rtlab.verdict.compare.run_parameters): runs compared
    #: against each other must agree on every one both record
    params: dict[str, Any] = field(default_factory=dict)
    cycles: int = 0
    #: samples past the histogram's range (None: not known, e.g. an old
    #: store row): the share past the range judges a censored percentile
    overflows: Optional[int] = None

    @property
    def session(self) -> str:
        """Runs of one ``rtlab run`` share a session (host state, neighbours)."""
        return self.run_id

    @property
    def label(self) -> str:
        return f"{self.run_id}#{self.repeat}" if self.repeat else self.run_id

    def value(self, name: str) -> Optional[float]:
        """The statistic, or the range it lies beyond where it is censored
        (:attr:`censored`); None where it is unknowable."""
        v = self.values.get(name)
        return v if v is not None else self.censored.get(name)


@dataclass
class Side:
    """The runs of one side, key by key, and what could not be used."""

    runs: list[str] = field(default_factory=list)
    #: run id -> campaign name
    campaign_of: dict[str, str] = field(default_factory=dict)
    keys: dict[MeasurementKey, list[Replicate]] = field(default_factory=dict)
    #: per key, replicates left out and why (infra, no samples)
    dropped: dict[MeasurementKey, list[str]] = field(default_factory=dict)
    #: where it came from: run dirs, "store: branch main, last 5", a pin
    source: str = ""


def side_from_runs(runs: Iterable[RunResult], source: str = "") -> Side:
    side = Side(source=source)
    for run in runs:
        side.runs.append(run.run_id)
        side.campaign_of[run.run_id] = run.campaign
        sha = str((run.commit or {}).get("sha") or "")
        for job in run.jobs:
            repeat = int(getattr(job, "repeat", 0) or 0)
            for m in job.measurements:
                k = m.key
                if m.verdict == Verdict.INFRA:
                    side.dropped.setdefault(k, []).append(f"{run.run_id}: infra ({'; '.join(m.reasons)})")
                    continue
                c = m.output.combined()
                if c is None or c.cycles == 0:
                    side.dropped.setdefault(k, []).append(f"{run.run_id}: no samples")
                    continue
                rep = Replicate(run_id=run.run_id, repeat=int(getattr(m, "repeat", repeat) or 0),
                                campaign=run.campaign, budget_class=job.budget_class,
                                values=stats.run_statistics(c),
                                bucket_us=c.histogram.bucket_us if c.histogram else None,
                                histogram=c.histogram, commit=sha,
                                censored=stats.censored_statistics(c),
                                params=run_parameters(m), cycles=int(c.cycles),
                                overflows=_overflows(c))
                side.keys.setdefault(k, []).append(rep)
        if not run.jobs:
            side.dropped.setdefault(MeasurementKey("*", "*", "*", "*"), []).append(
                f"{run.run_id}: no jobs")
    return side


def _overflows(t) -> Optional[int]:
    """Samples of a combined thread past its histogram's range, where known."""
    if t.histogram is not None:
        return int(t.histogram.overflows)
    return None if t.overflows is None else int(t.overflows)


def run_parameters(m) -> dict[str, Any]:
    """What a run was made with, as run.json records it: the suite's
    parameters (``Measurement.params``: duration, interval, histogram
    buckets, priority, load options, CPUs), and what the output itself says
    (threads, the CPUs measured, the histogram's range)."""
    out: dict[str, Any] = {k: v for k, v in (m.params or {}).items()}
    threads = m.output.threads
    out["threads"] = len(threads)
    cpus = sorted(t.cpu for t in threads if t.cpu is not None)
    if cpus:
        out["measured cpus"] = cpus
    h = threads[0].histogram if threads else None
    if h is not None and h.size:
        out["histogram range us"] = h.size * h.bucket_us
    return out


def parameter_differences(reps: list[Replicate]) -> list[str]:
    """Parameters the runs disagree on (each named, with its values and
    runs); a parameter some runs do not record is compared where recorded.
    Where some runs record duration and interval and others do not (a store
    baseline), the samples per run stand in for them: 1.5x apart is
    differently made (a kernel stalling 400 ms in every 900 ms under TCG
    lost 28 % of its samples: that is a regression, not another duration)."""
    out = []
    names = sorted({k for r in reps for k in r.params})
    for name in names:
        by: dict[str, list[str]] = {}
        for r in reps:
            if name in r.params:
                by.setdefault(json.dumps(r.params[name], sort_keys=True), []).append(r.label)
        if len(by) > 1:
            out.append(f"run parameter {name} differs: " + "; ".join(
                f"{v} in {', '.join(sorted(ls))}" for v, ls in sorted(by.items())))
    timed = ["duration_s" in r.params and "interval_us" in r.params for r in reps]
    if any(timed) and not all(timed):
        cyc = [r.cycles for r in reps if r.cycles]
        if cyc and max(cyc) > 1.5 * min(cyc):
            lo = min(reps, key=lambda r: r.cycles or math.inf)
            hi = max(reps, key=lambda r: r.cycles)
            out.append(f"run parameter samples per run differs (duration or interval): {lo.cycles} in "
                       f"{lo.label}, {hi.cycles} in {hi.label}")
    return out


# -- results ----------------------------------------------------------------
@dataclass
class StatComparison:
    name: str
    baseline: list[float]
    candidate: list[float]
    test: Optional[stats.ShiftTest] = None
    p_adjusted: Optional[float] = None
    gates: bool = True
    big_enough: bool = False
    #: per run: the value is the histogram's range and the statistic at
    #: least that (right-censored); the medians are then lower bounds
    baseline_censored: list[bool] = field(default_factory=list)
    candidate_censored: list[bool] = field(default_factory=list)
    #: every look at this statistic, in order (runs, estimate, bound)
    looks: list["Look"] = field(default_factory=list)
    #: the nominal one-sided level of each look (Pocock, Bonferroni-shared)
    level: Optional[float] = None
    #: the policy's minimum effect as one ratio - 1 (relative, or abs_us
    #: over the baseline's level, the larger)
    min_effect: Optional[float] = None
    #: where some run censors the statistic: the histogram's range (us) it
    #: is judged past, by each run's share of samples beyond it
    share_past_us: Optional[float] = None
    baseline_share: list[float] = field(default_factory=list)
    candidate_share: list[float] = field(default_factory=list)
    #: the baseline's share as the test sees it: the geometric mean of the
    #: runs' shares, each with half a sample added (stats.share_logs)
    share_level: Optional[float] = None
    #: the class's detectable_limit (ratio - 1): above it, not gated
    limit: float = math.inf
    #: what would let a statistic not gated see its class's limit
    #: (rtlab.verdict.planning.Cure), where its baseline is what it lacks
    cure: Optional[Any] = None
    #: the detectable effect planned from the baseline (ratio - 1): at the
    #: cap the candidate's own spread can widen it
    planned: Optional[float] = None

    @property
    def blind(self) -> bool:
        """Not gated: its last look could not see what its class asks."""
        return bool(self.looks) and self.looks[-1].blind

    @property
    def judged_by(self) -> str:
        return (f"the share of samples past {_us(self.share_past_us)} us" if self.share_past_us is not None
                else self.name)

    def share_text(self) -> str:
        """The two sides' shares past the range (means over their runs)."""
        return (f"{_share(float(np.mean(self.baseline_share)))} -> {_share(float(np.mean(self.candidate_share)))} "
                f"of samples past {_us(self.share_past_us or 0)} us")

    @property
    def detectable(self) -> Optional[float]:
        """What the key can see: the regression (ratio - 1) it finds with
        probability 1 - beta by its last look, at the look shown."""
        if not self.looks or not math.isfinite(self.looks[-1].detectable):
            return None
        return self.looks[-1].detectable

    def sync(self) -> None:
        """After the key stopped at a look: the shown test is that look's."""
        if self.looks:
            lk = self.looks[-1]
            self.test, self.big_enough, self.p_adjusted = lk.test, lk.big, lk.p_adjusted

    @property
    def base_median(self) -> float:
        return stats.median(self.baseline)

    @property
    def cand_median(self) -> float:
        return stats.median(self.candidate)

    @property
    def any_censored(self) -> bool:
        return any(self.baseline_censored) or any(self.candidate_censored)

    @staticmethod
    def _median_censored(values: list[float], censored: list[bool]) -> bool:
        order = sorted(zip([math.inf if c else v for v, c in zip(values, censored)], censored))
        n = len(order)
        return bool(n) and (order[n // 2][1] or (n % 2 == 0 and order[n // 2 - 1][1]))

    def medians_text(self) -> str:
        if self.share_past_us is not None:
            return self.share_text()

        def one(m: float, cens: bool) -> str:
            return (">=" if cens else "") + _us(m)
        return (f"{one(self.base_median, self._median_censored(self.baseline, self.baseline_censored))} -> "
                f"{one(self.cand_median, self._median_censored(self.candidate, self.candidate_censored))} us")

    def to_json(self) -> dict[str, Any]:
        t = self.test

        def fin(x: Optional[float]) -> Optional[float]:
            return x if x is not None and math.isfinite(x) else None
        return {"statistic": self.name, "baseline": self.baseline, "candidate": self.candidate,
                "baseline_censored": self.baseline_censored, "candidate_censored": self.candidate_censored,
                "baseline_median": self.base_median, "candidate_median": self.cand_median,
                "gates": self.gates, "big_enough": self.big_enough,
                "p": t.p if t else None, "p_adjusted": self.p_adjusted,
                "ratio": t.ratio if t else None,
                "ratio_interval": [fin(t.ratio_low), fin(t.ratio_high)] if t else None,
                "method": t.method if t else None, "level": self.level,
                "min_effect": self.min_effect, "detectable": self.detectable,
                "judged_by": self.judged_by, "share_past_us": self.share_past_us,
                "baseline_share": self.baseline_share, "candidate_share": self.candidate_share,
                "share_level": self.share_level,
                "limit": self.limit if math.isfinite(self.limit) else None, "not_gated": self.blind,
                "planned_detectable": self.planned,
                "cure": self.cure.to_json() if self.cure is not None else None,
                "looks": [lk.to_json() for lk in self.looks]}


@dataclass
class Look:
    """One look at one statistic: after `runs` candidate runs."""

    runs: int
    test: "stats.ShiftTest"
    big: bool
    p_adjusted: float
    #: the upper bound of the ratio NO-REGRESSION needs below 1 + minimum effect
    upper: float
    regress: bool
    no_regression: bool
    #: the detectable effect (ratio - 1) at this look: NO-REGRESSION needs
    #: ``upper`` below 1 + this (nan: the look's test cannot show none)
    detectable: float = math.nan
    #: the key's last look (the cap): the bounds meet, it decides
    final: bool = False
    #: no regression found, and the detectable effect is above the class's
    #: limit: not gated (more runs are not spent on it)
    blind: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "ratio": self.test.ratio, "p": self.test.p, "p_adjusted": self.p_adjusted,
                "upper": self.upper if math.isfinite(self.upper) else None,
                "detectable": self.detectable if math.isfinite(self.detectable) else None,
                "final": self.final,
                "decision": (REGRESSION if self.regress else NO_REGRESSION if self.no_regression
                             else BLIND if self.blind else "continue")}


_pct = pct


def _us(v: float) -> str:
    return f"{v:.3g}" if v < 10 else f"{v:,.0f}"


def _share(x: float) -> str:
    return f"{x * 100:.2g} %" if x else "0 %"


@dataclass
class KeyComparison:
    key: MeasurementKey
    outcome: str = UNDECIDED
    budget_class: str = ""
    n_baseline: int = 0
    n_candidate: int = 0
    stats: list[StatComparison] = field(default_factory=list)
    #: why undecided (naming runs), or notes
    reasons: list[str] = field(default_factory=list)
    baseline: list[Replicate] = field(default_factory=list)
    candidate: list[Replicate] = field(default_factory=list)
    #: candidate runs at the look that decided (None: undecided)
    decided_at: Optional[int] = None
    #: undecided for want of runs: more candidate runs can decide it
    #: (``rtlab run --repeat-until-decided`` schedules them)
    more: bool = False

    @property
    def deciding(self) -> Optional[StatComparison]:
        """The statistic the line shows: a regressing one, else the gating
        one closest to significance."""
        gating = [s for s in self.stats if s.gates and s.test is not None]
        if not gating:
            return None
        reg = [s for s in gating if self._regresses(s)]
        pool = reg or gating
        return min(pool, key=lambda s: (s.p_adjusted if s.p_adjusted is not None else 1.0, -s.test.ratio))

    alpha: float = 0.05

    def _regresses(self, s: StatComparison) -> bool:
        return bool(s.looks) and s.looks[-1].regress

    @property
    def not_gated(self) -> list[str]:
        """One sentence per gating statistic that is not gated (its
        detectable effect above the class's limit), with the lab's cure:
        what a blind key's line, the report and the gate lead with."""
        if self.outcome == REGRESSION:
            return []
        out = []
        for s in self.stats:
            if s.gates and s.blind and s.detectable is not None:
                text = (f"{s.name} not gated: sees only {_pct(1 + s.detectable)} "
                        + (f"of the share past {_us(s.share_past_us)} us " if s.share_past_us is not None else "")
                        + f"(its class's limit {_pct(1 + s.limit)})")
                if s.cure is not None:
                    text += f"; {s.cure.text()}"
                elif s.planned is not None and s.planned <= s.limit:
                    text += (f"; its baseline sees {_pct(1 + s.planned)}: the candidate's own runs spread wider "
                             f"(a wild run?): measure the candidate again")
                out.append(text)
        return out

    def line(self) -> str:
        head = f"{self.key.label()}: "
        s = self.deciding
        tail = {REGRESSION: "REGRESSION", NO_REGRESSION: "ok", UNDECIDED: "UNDECIDED",
                BLIND: "NOT GATED"}[self.outcome]
        if s is None:
            return head + "~ (" + "; ".join(self.reasons or ["nothing to compare"]) + f"): {tail}"
        if self.outcome == BLIND:  # it leads: this key passed without being gated
            head += "; ".join(self.not_gated) + "; "
        t = s.test
        p = t.p
        n_c = s.looks[-1].runs if s.looks else self.n_candidate
        what = s.name if s.share_past_us is None else f"{s.name} past its range: share"
        text = (f"{what} {_pct(t.ratio)} [{_pct(t.ratio_low)}, {_pct(t.ratio_high)}] "
                f"({s.medians_text()}), "
                f"{n_c} runs vs {self.n_baseline}, p={p:.2g}" + (f" (< {s.level:.2g} decides)" if s.level else ""))
        if s.looks:
            lk = s.looks[-1]
            text += (f", look {len(s.looks)} at {lk.runs} runs"
                     + (f", upper bound {_pct(lk.upper)}" if math.isfinite(lk.upper) else ""))
        seen = self.sees()
        if seen:
            text += f"; {seen}"
        if self.reasons:
            text += " (" + "; ".join(self.reasons) + ")"
        elif self.outcome == NO_REGRESSION and s.looks and s.looks[-1].test.p < (s.level or 0) and not s.big_enough:
            text += " (below the minimum effect)"
        return head + text + f": {tail}"

    def sees(self) -> str:
        """What this key can see, and the policy's minimum: "sees +31 % or
        more by 30 runs; policy +20 %" (the largest detectable effect of its
        gating statistics)."""
        det = [(s.detectable, s) for s in self.stats if s.gates and s.detectable is not None]
        if not det:
            return ""
        d, s = max(det, key=lambda x: x[0])
        cap = s.looks[-1].runs if s.looks and s.looks[-1].final else None
        text = f"{s.name} sees {_pct(1 + d)} or more"
        text += f" in {cap} runs" if cap else ""
        if s.min_effect is not None:
            text += f"; policy {_pct(1 + s.min_effect)}"
        return text

    limit: float = math.inf

    @property
    def flagged(self) -> str:
        """Why the lab should look at this key's baseline: a gating
        statistic cannot see a regression below its class's limit (not
        gated, unless the key regressed all the same)."""
        det = [s.detectable for s in self.stats if s.gates and s.detectable is not None]
        if not det or max(det) <= self.limit:
            return ""
        cures = [s.cure.text() for s in self.stats if s.gates and s.cure is not None]
        return (f"{self.key.label()} sees only {_pct(1 + max(det))} or more (limit {_pct(1 + self.limit)}): "
                + (cures[0] if cures else "its baseline is too noisy or too small; pin a larger baseline, "
                                          "or run longer"))

    @property
    def decided_by(self) -> str:
        """How the key was decided, in words (compare.json ``decided_by``)."""
        gating = [s for s in self.stats if s.gates and s.looks]
        if self.outcome == REGRESSION:
            s = next((s for s in gating if s.looks[-1].regress), None)
            return (f"{s.name}: lower bound above 1 at look {len(s.looks)} ({s.looks[-1].runs} runs) and the "
                    f"estimate at least the minimum effect" if s else "regression")
        if self.outcome in (NO_REGRESSION, BLIND):
            lk = [s.looks[-1] for s in gating]
            where = f"look {len(gating[0].looks)} ({lk[0].runs} runs)" if lk else "?"
            shown = [s for s in gating if not s.blind]
            none = "; ".join(
                f"{s.name}: no regression of {_pct(1 + (s.detectable or 0))} or more"
                + (f" in the share past {_us(s.share_past_us)} us (at most "
                   f"{_share((s.share_level or 0) * (1 + (s.detectable or 0)))} of the samples, as the "
                   f"runs' geometric mean)" if s.share_past_us is not None else "")
                for s in shown)
            if self.outcome == BLIND:
                why = "; ".join(
                    f"{s.name}: upper bound {_pct(s.looks[-1].upper)} below the {_pct(1 + (s.detectable or 0))} "
                    f"it can see, above its class's limit {_pct(1 + s.limit)}: more runs would not make it see "
                    f"the limit" for s in gating if s.blind)
                return f"{where}: not gated: {why}" + (f"; {none}" if none else "")
            how = ("the last look: the bounds meet" if any(x.final for x in lk)
                   else "every gating statistic's upper bound below its detectable effect")
            return f"{where}: {how}: {none}"
        return "not decided: " + "; ".join(self.reasons or ["nothing to compare"])

    def to_json(self) -> dict[str, Any]:
        det = [s.detectable for s in self.stats if s.gates and s.detectable is not None]
        return {"key": self.key.__dict__, "label": self.key.label(), "outcome": self.outcome,
                "detectable": max(det) if det else None, "sees": self.sees(), "decided_by": self.decided_by,
                "flagged": self.flagged, "not_gated": self.not_gated,
                "limit": self.limit if math.isfinite(self.limit) else None,
                "budget_class": self.budget_class, "n_baseline": self.n_baseline,
                "n_candidate": self.n_candidate, "reasons": self.reasons, "line": self.line(),
                "statistics": [s.to_json() for s in self.stats],
                "decided_at": self.decided_at, "more_runs_can_decide": self.more,
                "baseline_runs": [r.label for r in self.baseline],
                "candidate_runs": [r.label for r in self.candidate]}


@dataclass
class Comparison(CampaignOutcome):
    keys: list[KeyComparison] = field(default_factory=list)
    #: problems of the whole comparison (no runs, mixed campaigns): undecided
    problems: list[str] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    baseline_source: str = ""
    candidate_source: str = ""
    baseline_runs: list[str] = field(default_factory=list)
    candidate_runs: list[str] = field(default_factory=list)
    #: what changed in the boards' systems, baseline -> candidate (their
    #: snapshot.json, rtlab.report.snapshot.run_differences): context, never a verdict
    system_changes: list[str] = field(default_factory=list)
    #: per statistic: the sessions' share of the baseline's variance
    #: (stats.session_ratio) and whether the pool clusters by session
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``rtlab run --repeat-until-decided``: the candidate's batches of
    #: repeats, each with the keys it measured (rtlab.verdict.sequential)
    batches: list[dict[str, Any]] = field(default_factory=list)
    #: a store baseline with no runs at all: why (the gate then judges on
    #: budgets only and says so; ``rtlab compare`` stays undecided)
    no_baseline: str = ""

    def lines(self) -> list[str]:
        out = [f"baseline: {self.baseline_source or ', '.join(self.baseline_runs)} "
               f"({_runs_text(self.baseline_runs, [r for k in self.keys for r in k.baseline])})",
               f"candidate: {self.candidate_source or ', '.join(self.candidate_runs)} "
               f"({_runs_text(self.candidate_runs, [r for k in self.keys for r in k.candidate])})"]
        out += [f"error: {p}" for p in self.problems]
        out += self.not_gated_lines()
        out += [k.line() for k in self.keys]
        out += [f"flagged for the lab: {k.flagged}" for k in self.keys
                if k.flagged and k.outcome not in (BLIND, REGRESSION)]
        out += [f"system changed: {c}" for c in self.system_changes]
        for name, sess in sorted(self.sessions.items()):
            out.append(f"sessions ({name}): between-session variance {sess['tau2_over_sigma2']:.2g} x the "
                       f"within (upper bound {sess['upper_bound']:.2g} in the baseline; each look pools the "
                       f"candidate's sessions too), p={sess['p']:.2g}: "
                       + ("the baseline clusters by session: its spread is widened by it, and a "
                          "board that boots built kernels can take paired boots instead "
                          "(regression: baseline: {<class>: paired}), which no session effect can fake"
                          if sess["clusters"] else "no clustering found: a store baseline serves"))
        for i, b in enumerate(self.batches, 1):
            keys = b.get("keys") or []
            out.append(f"batch {i}: {b.get('run_id')}: {b.get('repeats')} repeats of {len(keys)} "
                       f"key{'s' * (len(keys) != 1)} ({', '.join(keys)})")
        n = {o: sum(1 for k in self.keys if k.outcome == o) for o in OUTCOME_EXIT}
        tests = sum(1 for k in self.keys for s in k.stats if s.looks)
        out.append(f"policy: {self.policy.source}")
        out.append(f"compare: {self.outcome.upper()} ({n[REGRESSION]} regressed, {n[NO_REGRESSION]} ok, "
                   + (f"{n[BLIND]} not gated, " if n[BLIND] else "")
                   + f"{n[UNDECIDED]} undecided of {len(self.keys)} keys; "
                   f"false alarms held at {self.policy.alpha:g} per comparison: Bonferroni over {tests} "
                   f"tests, Pocock over looks at {', '.join(map(str, self.policy.schedule()))} candidate runs)")
        return out

    def not_gated_lines(self) -> list[str]:
        """What leads the verdict where keys passed without being gated:
        "not gated: KEY: p99 not gated: sees only +1451 % ...; the lab's
        baseline needs ..."."""
        return [f"not gated: {k.key.label()}: {text}" for k in self.keys if k.outcome == BLIND
                for text in k.not_gated]

    @property
    def more_runs(self) -> list[MeasurementKey]:
        """Keys more candidate runs can decide (the rest is decided or
        cannot be decided by measuring more)."""
        return [k.key for k in self.keys if k.outcome == UNDECIDED and k.more]

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "exit_code": self.exit_code, "problems": self.problems,
                "policy": self.policy.to_json(),
                "baseline": {"source": self.baseline_source, "runs": self.baseline_runs},
                "candidate": {"source": self.candidate_source, "runs": self.candidate_runs},
                "keys": [k.to_json() for k in self.keys], "system_changes": self.system_changes,
                "sessions": self.sessions, "policy_source": self.policy.source,
                "batches": self.batches, "no_baseline": self.no_baseline}


def _runs_text(runs: list[str], replicates: list["Replicate"]) -> str:
    """How many runs a side has, counted as the statistics count them: each
    repeat of a repeating campaign is one (a run dir with repeat: 5 is 5)."""
    n = len({r.label for r in replicates}) or len(runs)
    text = f"{n} run{'s' * (n != 1)}"
    if n != len(runs):
        text += f" from {len(runs)} run dir{'s' * (len(runs) != 1)}"
    return text


# -- the comparison ---------------------------------------------------------
def compare_runs(baseline: list[RunResult], candidate: list[RunResult],
                 policy: Optional[Policy] = None, *, baseline_source: str = "",
                 candidate_source: str = "") -> Comparison:
    return compare_sides(side_from_runs(baseline, baseline_source),
                         side_from_runs(candidate, candidate_source), policy)


def compare_sides(base: Side, cand: Side, policy: Optional[Policy] = None) -> Comparison:
    policy = policy or Policy()
    cmp = Comparison(policy=policy, baseline_source=base.source, candidate_source=cand.source,
                     baseline_runs=list(base.runs), candidate_runs=list(cand.runs))
    both = sorted(set(base.runs) & set(cand.runs))
    if both:
        # a run against itself shows nothing but agreement: refused
        cmp.problems.append(f"run {', '.join(both)} is on both sides: a candidate is never its own baseline")
        return cmp
    if not base.runs:
        cmp.problems.append("empty baseline: no runs to compare against")
    if not cand.runs:
        cmp.problems.append("empty candidate: no runs to judge")
    by_campaign: dict[str, list[str]] = {}
    for side in (base, cand):
        for run_id, name in side.campaign_of.items():
            by_campaign.setdefault(name, []).append(run_id)
    if len(by_campaign) > 1:
        cmp.problems.append("runs of different campaigns: " + "; ".join(
            f"campaign {name or '?'}: runs {', '.join(ids)}" for name, ids in sorted(by_campaign.items())))
    for where, side in (("baseline", base), ("candidate", cand)):
        for why in side.dropped.get(MeasurementKey("*", "*", "*", "*"), []):
            cmp.problems.append(f"{where} run {why}")

    all_keys = sorted(set(base.keys) | set(cand.keys) | set(base.dropped) | set(cand.dropped),
                      key=lambda k: k.label())
    all_keys = [k for k in all_keys if k.board != "*"]
    #: what gates: (key, statistic, histogram floor, minimum effect)
    gated: list[tuple[KeyComparison, StatComparison, float, MinEffect]] = []
    for key in all_keys:
        kc = KeyComparison(key=key, alpha=policy.alpha)
        cmp.keys.append(kc)
        b, c = base.keys.get(key, []), cand.keys.get(key, [])
        kc.baseline, kc.candidate = b, c
        kc.n_baseline, kc.n_candidate = len(b), len(c)
        kc.budget_class = (c or b)[0].budget_class if (c or b) else ""
        kc.limit = policy.limit_for(kc.budget_class)
        if not b and not base.dropped.get(key):
            kc.reasons.append(f"no baseline: only in candidate runs {', '.join(sorted({r.run_id for r in c}))}")
            continue
        if not c and not cand.dropped.get(key):
            kc.reasons.append(f"not measured by the candidate: only in baseline runs "
                              f"{', '.join(sorted({r.run_id for r in b}))}")
            continue
        for where, reps, side in (("baseline", b, base), ("candidate", c, cand)):
            if len(reps) < policy.min_runs:
                why = f"{len(reps)} valid {where} run{'s' * (len(reps) != 1)}, need {policy.min_runs}"
                if side.dropped.get(key):
                    why += " (left out: " + "; ".join(side.dropped[key]) + ")"
                kc.reasons.append(why)
        buckets = {(r.bucket_us, r.label) for r in b + c if r.bucket_us is not None}
        if len({bu for bu, _ in buckets}) > 1:
            by: dict[Any, list] = {}
            for bu, label in buckets:
                by.setdefault(bu, []).append(label)
            kc.reasons.append("histogram bucket sizes differ: " + "; ".join(
                f"{bu:g} us in {', '.join(sorted(ls))}" for bu, ls in sorted(by.items())))
        # runs made differently (a 2 s candidate against 5 s runs, another
        # histogram range) measure something else: never compared
        kc.reasons += parameter_differences(b + c)
        # too few candidate runs (repeats lost to INFRA) and nothing else
        # wrong: more candidate runs can decide it (--repeat-until-decided)
        kc.more = len(kc.reasons) == 1 and len(b) >= policy.min_runs and len(c) < policy.min_runs
        if kc.reasons:
            continue
        floor = 0.5 * min((r.bucket_us for r in b + c if r.bucket_us), default=1.0)
        gating = policy.statistics_for(kc.budget_class)
        for name in stats.RUN_STATISTICS:
            # a value beyond the histogram's range is censored at the range
            # (known to be at least that), read from the overflow count
            bv, cv = [r.value(name) for r in b], [r.value(name) for r in c]
            gates = name in gating
            if any(v is None for v in bv + cv):
                if gates:
                    who = [r.label for r, v in zip(b + c, bv + cv) if v is None]
                    kc.reasons.append(f"{name} unknowable (beyond a histogram of unknown range) in {', '.join(who)}")
                continue
            sc = StatComparison(name=name, baseline=[float(v) for v in bv],
                                candidate=[float(v) for v in cv], gates=gates,
                                baseline_censored=[name in r.censored for r in b],
                                candidate_censored=[name in r.censored for r in c], limit=kc.limit)
            kc.stats.append(sc)
            if gates and sc.any_censored:
                # past the range in some run: judged by each run's share of
                # samples past the range, which every run knows exactly
                unknown = [r.label for r in b + c if r.overflows is None or not r.cycles]
                if unknown:
                    kc.reasons.append(f"{name} beyond the histogram range in some run, and the samples past "
                                      f"the range unknown in {', '.join(unknown)}")
                    continue
                sc.share_past_us = max(r.censored[name] for r in b + c if name in r.censored)
                sc.baseline_share = [int(r.overflows or 0) / r.cycles for r in b]
                sc.candidate_share = [int(r.overflows or 0) / r.cycles for r in c]
            if gates:  # only what gates is tested: the rest is shown
                gated.append((kc, sc, floor, policy.effect_for(kc.budget_class, name)))
    _sequential(cmp, gated, policy)
    return cmp


@dataclass
class _Gated:
    """One gating statistic of one key, as the looks see it: the two
    sides' logs (of the statistic, or of the share past the range), its
    session pool and its minimum effect as one log ratio."""

    kc: KeyComparison
    sc: StatComparison
    blog: Any
    clog: Any
    #: the session pool its share of variance is estimated in: the
    #: statistic's name, or "<name> share" for shares past the range
    pool: str
    min_effect: float
    #: the raw values the no-spread test compares (shares, or us)
    base_raw: list[float]
    cand_raw: list[float]


def _gated_logs(kc: KeyComparison, sc: StatComparison, floor: float, eff: MinEffect) -> _Gated:
    if sc.share_past_us is not None:
        b = [r for r in kc.baseline]
        c = [r for r in kc.candidate]
        blog = stats.share_logs([r.overflows for r in b], [r.cycles for r in b])
        clog = stats.share_logs([r.overflows for r in c], [r.cycles for r in c])
        sc.share_level = math.exp(float(blog.mean()))
        # the relative minimum effect only: every sample past a range that
        # covers the budget breaks it, so one more per run is no noise to
        # look through (and an absolute floor of a sample over a baseline
        # of none, x2 or more, would put every such key above its limit)
        return _Gated(kc, sc, blog, clog, f"{sc.name} share", eff.relative,
                      [float(x) for x in np.exp(blog)], [float(x) for x in np.exp(clog)])
    blog, clog = stats._logs(sc.baseline, floor), stats._logs(sc.candidate, floor)
    level = math.exp(float(blog.mean()))
    # the minimum effect as one ratio: the relative one, or the absolute
    # one over the baseline's level, whichever is larger (both must be met)
    return _Gated(kc, sc, blog, clog, sc.name,
                  max(eff.relative, eff.abs_us / level if level > 0 else math.inf),
                  list(sc.baseline), list(sc.candidate))


def _sequential(cmp: Comparison, gated: list, policy: Policy) -> None:
    """The looks (policy.looks: candidate run counts) of every gating
    statistic, then per key the first look that decides.

    False alarms: every gating statistic of the campaign gets alpha / m
    (Bonferroni over m tests), spent over the looks with a Pocock bound
    (stats.pocock_level): P(any false REGRESSION in the campaign) <= alpha
    whatever look the keys stop at. NO-REGRESSION is shown, never assumed:
    the upper bound of the ratio (level 1 - beta, Pocock over the looks) is
    below the key's detectable effect (stats.closed_look: the larger of the
    minimum effect and what the key's variance lets its last look find with
    probability 1 - beta). At the last look the two bounds meet: every key
    whose statistics can be compared is REGRESSION or NO-REGRESSION, or,
    where its detectable effect exceeds its class's limit, not gated
    (BLIND). A statistic whose planned detectable effect exceeds the limit
    is blind from its first look: no board time is spent on it.

    A statistic that some run censors is judged by the runs' shares past
    the histogram's range (log shares, their own session pool): p99.9 lies
    past the range exactly where more than 0.1 % of the samples do."""
    m = max(1, len(gated))
    entries = [_gated_logs(kc, sc, floor, eff) for kc, sc, floor, eff in gated]
    # the sessions' share of the variance, per statistic, from every key's
    # baseline pool at once (the host's sessions are the same for all keys):
    # what the key can see before any candidate run (its planned detectable
    # effect); each look adds the candidate's sessions so far to the pools
    rho: dict[str, float] = {}
    rho_est: dict[str, float] = {}
    for pool in {g.pool for g in entries}:
        upper, est, p = stats.session_ratio(_session_pools(entries, pool))
        rho[pool] = upper
        rho_est[pool] = est or 0.0
        if est is not None:
            cmp.sessions[pool] = {"tau2_over_sigma2": est, "upper_bound": upper, "p": p,
                                  "clusters": p < 0.05}
    rho_at: dict[tuple[str, int], float] = {}

    def rho_look(pool: str, n: int) -> float:
        if (pool, n) not in rho_at:
            rho_at[pool, n] = stats.session_ratio(_session_pools(entries, pool, n))[0]
        return rho_at[pool, n]
    schedule = policy.schedule()
    for g in entries:
        kc, sc = g.kc, g.sc
        nb, nc = len(g.blog), len(g.clog)
        looks = [n for n in schedule if n <= nc]
        if not looks:
            kc.reasons.append(f"{nc} candidate runs: the first look is at {schedule[0]}")
            # only fewer runs than the first look (repeats lost to INFRA): measure more
            kc.more = kc.more or len(kc.reasons) == 1
            continue
        pa = stats.pocock_level(policy.alpha / m, schedule, nb)
        pb = stats.pocock_level(policy.beta, schedule, nb)
        sc.level = pa
        sc.min_effect = g.min_effect
        min_log = math.log1p(sc.min_effect)
        b_sessions = [r.session for r in kc.baseline]
        # what the key can see: from the baseline, before any candidate run
        first = [r.session for r in kc.candidate[:schedule[0]]]
        planned = float(stats.planned_detectable(
            g.blog, b_sessions, rho.get(g.pool, 0.0),
            stats.cap_sessions(list(Counter(first).values()), schedule[0], schedule), pa, pb, min_log))
        sc.planned = math.expm1(planned)
        for n in looks:
            final = n == schedule[-1]
            c_sessions = [r.session for r in kc.candidate[:n]]
            L = stats.look_statistics(g.blog, g.clog[:n], b_sessions, c_sessions, rho=rho_look(g.pool, n))
            e, p = float(L.estimate), float(L.p())
            if not (math.isfinite(p) and float(L.se) > 0):
                # no spread at all (quantised values): the exact rank test;
                # none is shown where no candidate run exceeds any baseline
                # run by the minimum effect (a bound without a variance)
                t = stats.shift_test_exact(g.base_raw, g.cand_raw[:n], 0.0 if g.pool != sc.name else 0.5)
                ucb = max(g.cand_raw[:n]) / max(min(g.base_raw), 1e-12)
                det = sc.min_effect
                big = t.ratio >= 1 + sc.min_effect
                regress = t.p < pa and big
                shown_none = not regress and ucb <= 1 + sc.min_effect
            else:
                d = stats.closed_look(L, pa, pb, min_log, planned, final)
                lo, hi = float(L.bound(0.975, upper=False)), float(L.bound(0.975))
                t = stats.ShiftTest(p=p, ratio=math.exp(e), ratio_low=math.exp(lo),
                                    ratio_high=math.exp(hi),
                                    method=L.method + (", share past the range" if g.pool != sc.name else ""))
                ucb, det = math.exp(float(d.upper)), math.expm1(float(d.detectable))
                big = e >= min_log
                regress, shown_none = bool(d.regress), bool(d.no_regression)
            # not gated: no regression of +d or more shown, where d (its
            # planned effect, or at the cap its own) is above what its class
            # asks to see. It stops where NO-REGRESSION would have: its runs
            # exclude all it can see, and more runs would not make it see
            # the class's limit. Where they do not exclude d it measures on:
            # a regression of d or more is still there to be found
            blind = shown_none and not regress and det > sc.limit
            sc.looks.append(Look(runs=n, test=t, big=big, p_adjusted=min(1.0, t.p * policy.alpha / pa),
                                 upper=ucb, regress=regress, no_regression=shown_none and not regress and not blind,
                                 detectable=det, final=final, blind=blind))
            sc.sync()
    for kc in cmp.keys:
        _decide(kc, policy)
    # the cure of every statistic not gated: what baseline and cap would
    # let it see its class's limit (rtlab.verdict.planning.cure)
    pools = Counter(g.pool for g in entries)
    for g in entries:
        if g.kc.outcome != BLIND or not g.sc.blind or not math.isfinite(g.sc.limit):
            continue
        if g.sc.planned is not None and g.sc.planned <= g.sc.limit:
            continue  # its baseline serves: the candidate's own spread is what it lacks
        b_sessions = [r.session for r in g.kc.baseline]
        s2, by_session = stats.within_variance(g.blog, b_sessions)
        n_sessions = len(set(b_sessions))
        g.sc.cure = cure(float(s2), rho_est.get(g.pool), bool(by_session), pools[g.pool], n_sessions,
                         round(len(g.blog) / max(1, n_sessions)), schedule, policy.alpha / m, policy.beta,
                         math.log1p(g.sc.min_effect or 0.0), g.sc.limit)


def _session_pools(entries: list, pool: str, looked: int = 0) -> list[tuple[Any, list[Any]]]:
    """(logs, sessions) of session pool *pool*: every key's baseline, and
    with *looked* its first *looked* candidate runs as a pool of their own."""
    pools = []
    for g in entries:
        if g.pool != pool:
            continue
        pools.append((g.blog, [r.session for r in g.kc.baseline]))
        if looked:
            pools.append((g.clog[:looked], [r.session for r in g.kc.candidate[:looked]]))
    return pools


def _decide(kc: KeyComparison, policy: Policy) -> None:
    gating = [s for s in kc.stats if s.gates and s.looks]
    if not kc.reasons and not gating:
        kc.reasons.append("no statistic to judge")
    runs = sorted({lk.runs for s in gating for lk in s.looks})
    for n in runs:
        at = [next((lk for lk in s.looks if lk.runs == n), None) for s in gating]
        if any(lk is not None and lk.regress for lk in at):
            # definitive even where another statistic could not be read
            kc.outcome, kc.decided_at = REGRESSION, n
            for s in gating:
                s.looks = [lk for lk in s.looks if lk.runs <= n]
                s.sync()
            return
        if not kc.reasons and all(lk is not None and (lk.no_regression or lk.blind) for lk in at):
            kc.outcome = BLIND if any(lk.blind for lk in at if lk is not None) else NO_REGRESSION
            kc.decided_at = n
            for s in gating:
                s.looks = [lk for lk in s.looks if lk.runs <= n]
                s.sync()
            return
    kc.outcome = UNDECIDED
    if kc.reasons or not gating:
        return
    last = max(runs)
    if kc.n_candidate < policy.schedule()[-1]:
        kc.more = True
        nxt = next(n for n in policy.schedule() if n > last)
        kc.reasons.append(f"not decided at {last} candidate runs: measure more (next look at {nxt}, "
                          f"at most {policy.schedule()[-1]})")
    else:
        kc.reasons.append(f"not decided at the maximum of {last} candidate runs")


def load_runs(run_dirs: Iterable[Path]) -> list[RunResult]:
    runs, seen = [], set()
    for d in run_dirs:
        run = load_run(d)
        if run.run_id in seen:
            raise InputError(d, f"run {run.run_id} given twice")
        seen.add(run.run_id)
        runs.append(run)
    return runs
