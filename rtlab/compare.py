"""The regression verdict: candidate runs against a baseline, per key.

    compare_runs(baseline_runs, candidate_runs, policy) -> Comparison

Each measurement of a run (one repeat of one board × variant × suite × load)
is one replicate; its run-level statistics (``rtlab.stats``) are compared
between the two sides key by key, every test of the campaign corrected at
once (Benjamini-Hochberg), and a key regresses only when the correction
says so AND the effect is at least the budget class's minimum effect
(relative and absolute: a +50 % of 2 us is no regression worth a merge).

Outcomes per key and for the whole comparison:

- ``regression``: exit 1, with the key, the statistic and the effect named;
- ``no-regression``: exit 0;
- ``undecided``: exit 2 — too few valid runs, a key on one side only, a
  statistic beyond a histogram of unknown range, runs of different
  campaigns or histogram buckets.

A percentile beyond a histogram of known range is censored: at least the
range (the overflow count makes its rank exact), and tested by a rank test
with the censored runs tied at the top (``stats.censored_shift_test``).
The gating statistics and the minimum effects may differ per budget class
and statistic (``regression:`` in the budget file; budgets/README.md).
  Nothing that cannot be judged passes.

A regression wins over undecided keys elsewhere (it is definitive), as a
broken budget wins over infra errors in the gate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from . import stats
from .errors import InputError
from .model import Histogram, MeasurementKey, RunResult, Verdict
from .policy import MinEffect, Policy
from .results import load_run

REGRESSION = "regression"
NO_REGRESSION = "no-regression"
UNDECIDED = "undecided"
OUTCOME_EXIT = {NO_REGRESSION: 0, REGRESSION: 1, UNDECIDED: 2}


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
                                censored=stats.censored_statistics(c))
                side.keys.setdefault(k, []).append(rep)
        if not run.jobs:
            side.dropped.setdefault(MeasurementKey("*", "*", "*", "*"), []).append(
                f"{run.run_id}: no jobs")
    return side


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
                "method": t.method if t else None}


def _pct(x: float) -> str:
    if math.isinf(x):
        return "+inf %"
    v = (x - 1) * 100
    return f"{v:+.0f} %" if abs(v) >= 1 or v == 0 else f"{v:+.1f} %"


def _us(v: float) -> str:
    return f"{v:.3g}" if v < 10 else f"{v:,.0f}"


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
        return (s.p_adjusted is not None and s.p_adjusted < self.alpha and s.big_enough)

    def line(self) -> str:
        head = f"{self.key.label()}: "
        s = self.deciding
        tail = {REGRESSION: "REGRESSION", NO_REGRESSION: "ok", UNDECIDED: "UNDECIDED"}[self.outcome]
        if s is None:
            return head + "~ (" + "; ".join(self.reasons or ["nothing to compare"]) + f"): {tail}"
        t = s.test
        p = s.p_adjusted if s.p_adjusted is not None else t.p
        text = (f"{s.name} {_pct(t.ratio)} [{_pct(t.ratio_low)}, {_pct(t.ratio_high)}] "
                f"({s.medians_text()}), "
                f"{self.n_candidate} runs vs {self.n_baseline}, p={p:.2g}")
        if self.reasons:
            text += " (" + "; ".join(self.reasons) + ")"
        elif self.outcome == NO_REGRESSION and p < self.alpha and not s.big_enough:
            text += " (below the minimum effect)"
        return head + text + f": {tail}"

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.__dict__, "label": self.key.label(), "outcome": self.outcome,
                "budget_class": self.budget_class, "n_baseline": self.n_baseline,
                "n_candidate": self.n_candidate, "reasons": self.reasons, "line": self.line(),
                "statistics": [s.to_json() for s in self.stats],
                "baseline_runs": [r.label for r in self.baseline],
                "candidate_runs": [r.label for r in self.candidate]}


@dataclass
class Comparison:
    keys: list[KeyComparison] = field(default_factory=list)
    #: problems of the whole comparison (no runs, mixed campaigns): undecided
    problems: list[str] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    baseline_source: str = ""
    candidate_source: str = ""
    baseline_runs: list[str] = field(default_factory=list)
    candidate_runs: list[str] = field(default_factory=list)
    #: what changed in the boards' systems, baseline -> candidate (their
    #: snapshot.json, rtlab.snapshot.run_differences): context, never a verdict
    system_changes: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        outs = {k.outcome for k in self.keys}
        if REGRESSION in outs:
            return REGRESSION
        if self.problems or UNDECIDED in outs or not self.keys:
            return UNDECIDED
        return NO_REGRESSION

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    def lines(self) -> list[str]:
        out = [f"baseline: {self.baseline_source or ', '.join(self.baseline_runs)} "
               f"({len(self.baseline_runs)} runs)",
               f"candidate: {self.candidate_source or ', '.join(self.candidate_runs)} "
               f"({len(self.candidate_runs)} runs)"]
        out += [f"error: {p}" for p in self.problems]
        out += [k.line() for k in self.keys]
        out += [f"system changed: {c}" for c in self.system_changes]
        n = {o: sum(1 for k in self.keys if k.outcome == o) for o in OUTCOME_EXIT}
        out.append(f"compare: {self.outcome.upper()} ({n[REGRESSION]} regressed, {n[NO_REGRESSION]} ok, "
                   f"{n[UNDECIDED]} undecided of {len(self.keys)} keys; "
                   f"false alarms held at {self.policy.alpha:g} per comparison, "
                   f"Benjamini-Hochberg over {sum(1 for k in self.keys for s in k.stats if s.p_adjusted is not None)} tests)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "exit_code": self.exit_code, "problems": self.problems,
                "policy": self.policy.to_json(),
                "baseline": {"source": self.baseline_source, "runs": self.baseline_runs},
                "candidate": {"source": self.candidate_source, "runs": self.candidate_runs},
                "keys": [k.to_json() for k in self.keys], "system_changes": self.system_changes}


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
    family: list[tuple[KeyComparison, StatComparison]] = []
    #: what gates, with its histogram floor and minimum effect
    gated: list[tuple[StatComparison, float, MinEffect]] = []
    for key in all_keys:
        kc = KeyComparison(key=key, alpha=policy.alpha)
        cmp.keys.append(kc)
        b, c = base.keys.get(key, []), cand.keys.get(key, [])
        kc.baseline, kc.candidate = b, c
        kc.n_baseline, kc.n_candidate = len(b), len(c)
        kc.budget_class = (c or b)[0].budget_class if (c or b) else ""
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
                                candidate_censored=[name in r.censored for r in c])
            kc.stats.append(sc)
            if gates:  # only what gates is tested: the rest is shown
                family.append((kc, sc))
                gated.append((sc, floor, policy.effect_for(kc.budget_class, name)))
    plain = [(sc, floor) for sc, floor, _ in gated if not sc.any_censored]
    for (sc, _), t in zip(plain, stats.shift_tests([(sc.baseline, sc.candidate) for sc, _ in plain],
                                                   trim=policy.trim, floor=[f for _, f in plain])):
        sc.test = t
    for sc, _, _ in gated:
        if sc.any_censored:
            sc.test = stats.censored_shift_test(sc.baseline, sc.baseline_censored,
                                                sc.candidate, sc.candidate_censored)
    for sc, _, eff in gated:
        # the minimum effect, on the run-level medians of the statistic, in
        # its own unit (us): the ratio and the difference must both reach
        # it; with censored runs the medians are lower bounds, so a censored
        # candidate median only ever understates the effect
        sc.big_enough = (sc.test.ratio >= 1 + eff.relative and sc.cand_median - sc.base_median >= eff.abs_us)
    adjusted = stats.adjust([sc.test.p for _, sc in family])
    for (_, sc), p in zip(family, adjusted):
        sc.p_adjusted = p
    for kc in cmp.keys:
        # a statistic that regressed is definitive even when another one
        # could not be read (a stall beyond the histogram range in one run)
        if any(s.gates and kc._regresses(s) for s in kc.stats):
            kc.outcome = REGRESSION
        elif kc.reasons:
            kc.outcome = UNDECIDED
        elif any(s.gates and s.test for s in kc.stats):
            kc.outcome = NO_REGRESSION
        else:
            kc.reasons.append("no statistic to judge")
            kc.outcome = UNDECIDED
    return cmp


def load_runs(run_dirs: Iterable[Path]) -> list[RunResult]:
    runs, seen = [], set()
    for d in run_dirs:
        run = load_run(d)
        if run.run_id in seen:
            raise InputError(d, f"run {run.run_id} given twice")
        seen.add(run.run_id)
        runs.append(run)
    return runs
