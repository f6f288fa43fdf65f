"""The paired verdict (issue #23, item 3b): baseline and candidate kernels
booted alternately on one board in one pipeline, A B, B A, A B ..., and the
paired differences tested.

    compare_paired(baseline_runs, candidate_runs, policy) -> PairedComparison

The boots themselves: rtlab.verdict.paired_boots (`rtlab paired`).

Why: runs of one session share conditions (the host, its neighbours, a noisy
hour). A baseline from other pipelines against a candidate from this one
alarms whenever the sessions differ; two kernels measured side by side, pair
by pair, see the same conditions, so a session effect cancels in each pair's
difference and cannot pass for a regression.

Pair *i* is baseline run *i* and candidate run *i* (the order the runs are
given in, which ``rtlab paired`` records); a key missing from either run of
a pair (infra) drops that pair for that key. Per key and gating statistic,
with the run-level statistics of rtlab.verdict.stats:

    d_i = ln(candidate_i) - ln(baseline_i)       (floored at half a bucket)

Their mean is the log of the ratio; its t interval (n - 1 degrees of
freedom; Student's t from scipy) bounds the ratio:

- REGRESSION: the one-sided lower bound at alpha / (gating tests of the
  campaign) (Bonferroni: the campaign's false alarms stay within alpha) is
  above 1, and the estimate exceeds the class's minimum effect (relative
  and absolute, both);
- NO-REGRESSION otherwise: no regression of +d or more, where d, the
  pairs' detectable effect, is what they find with probability 1 - beta
  (rtlab.verdict.stats.detectable_log: the same closed rule as the
  sequential verdict's last look; the bounds meet, so it always decides);
- UNDECIDED for fewer pairs than ``min_runs``, runs made with different
  parameters, pairs without any spread, and a censored statistic (beyond
  the histogram: its difference is unknown, so it never shows "no
  regression").

A key regresses when one of its statistics does, shows none when all do;
the campaign exits 1 on any regression, else 2 on any undecided key, else 0.
False alarms and power are measured in tests/unit/test_paired_verdict.py
on simulated pairs with a session effect that breaks the unpaired test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from scipy import stats as sps

from ..core.model import MeasurementKey, RunResult
from ..plan.policy import MinEffect, Policy
from .compare import (BLIND, NO_REGRESSION, REGRESSION, UNDECIDED, CampaignOutcome, Replicate, parameter_differences,
                      side_from_runs)
from .stats import RUN_STATISTICS, detectable_log


@dataclass
class PairedStat:
    """One statistic of one key over its pairs."""

    name: str
    baseline: list[float]
    candidate: list[float]
    ratio: float = float("nan")
    lower: float = float("nan")   # one-sided, at the campaign's corrected alpha
    upper: float = float("nan")   # one-sided, at beta
    outcome: str = UNDECIDED
    why: str = ""
    #: what these pairs can see (ratio - 1): found with probability 1 - beta
    detectable: float = float("nan")
    min_effect: float = float("nan")

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> Optional[float]:
            return None if math.isnan(x) else round(x, 6)
        return {"name": self.name, "pairs": len(self.baseline), "baseline": self.baseline,
                "candidate": self.candidate, "ratio": num(self.ratio), "lower": num(self.lower),
                "upper": num(self.upper), "outcome": self.outcome, "why": self.why,
                "detectable": num(self.detectable), "min_effect": num(self.min_effect)}


@dataclass
class PairedKey:
    key: MeasurementKey
    budget_class: str = ""
    pairs: list[tuple[str, str]] = field(default_factory=list)   # (baseline run, candidate run)
    stats: list[PairedStat] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)             # why nothing was tested

    @property
    def outcome(self) -> str:
        if any(s.outcome == REGRESSION for s in self.stats):
            return REGRESSION
        if not self.reasons and self.stats and all(s.outcome in (NO_REGRESSION, BLIND) for s in self.stats):
            # a statistic that sees only more than its class's limit is not gated
            return BLIND if any(s.outcome == BLIND for s in self.stats) else NO_REGRESSION
        return UNDECIDED

    def line(self) -> str:
        head = f"{self.outcome.upper():14} {self.key.label()} ({len(self.pairs)} pairs)"
        if self.reasons:
            return f"{head}: {'; '.join(self.reasons)}"
        return head + ": " + "; ".join(
            f"{s.name} x{s.ratio:.2f} [{s.lower:.2f}, {s.upper:.2f}]" + (f" {s.why}" if s.why else "")
            for s in self.stats)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.label(), "outcome": self.outcome, "budget_class": self.budget_class,
                "pairs": [list(p) for p in self.pairs], "stats": [s.to_json() for s in self.stats],
                "reasons": self.reasons}


@dataclass
class PairedComparison(CampaignOutcome):
    policy: Policy
    baseline_runs: list[str]
    candidate_runs: list[str]
    keys: list[PairedKey] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: the one-sided level of each REGRESSION bound (alpha / gating tests)
    alpha_per_test: float = float("nan")

    def lines(self) -> list[str]:
        out = [f"paired verdict: {len(self.baseline_runs)} baseline and {len(self.candidate_runs)} candidate runs, "
               f"booted alternately (pair i = baseline run i, candidate run i); policy: {self.policy.source}"]
        out += [f"PROBLEM {p}" for p in self.problems]
        out += [k.line() for k in self.keys]
        out.append(f"Paired verdict: {self.outcome.upper()}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"method": "paired", "outcome": self.outcome, "exit_code": self.exit_code,
                "baseline_runs": self.baseline_runs, "candidate_runs": self.candidate_runs,
                "alpha_per_test": None if math.isnan(self.alpha_per_test) else self.alpha_per_test,
                "policy": self.policy.to_json(), "problems": self.problems,
                "keys": [k.to_json() for k in self.keys]}


def compare_paired(baseline: list[RunResult], candidate: list[RunResult],
                   policy: Optional[Policy] = None) -> PairedComparison:
    policy = policy or Policy()
    base, cand = side_from_runs(baseline), side_from_runs(candidate)
    cmp = PairedComparison(policy=policy, baseline_runs=list(base.runs), candidate_runs=list(cand.runs))
    if len(base.runs) != len(cand.runs):
        cmp.problems.append(f"{len(base.runs)} baseline runs and {len(cand.runs)} candidate runs: "
                            f"pairs need one of each")
        return cmp
    shared = sorted(set(base.runs) & set(cand.runs))
    if shared:
        cmp.problems.append(f"run {', '.join(shared)} is on both sides")
        return cmp
    campaigns = {*base.campaign_of.values(), *cand.campaign_of.values()}
    if len(campaigns) > 1:
        cmp.problems.append(f"runs of different campaigns: {', '.join(sorted(campaigns))}")
    order = list(zip(base.runs, cand.runs))
    keys = sorted(set(base.keys) | set(cand.keys) | set(base.dropped) | set(cand.dropped), key=lambda k: k.label())
    tests: list[tuple[PairedStat, float, MinEffect, float]] = []
    for key in (k for k in keys if k.board != "*"):
        pk = PairedKey(key=key)
        cmp.keys.append(pk)
        b_of = {r.run_id: r for r in base.keys.get(key, [])}
        c_of = {r.run_id: r for r in cand.keys.get(key, [])}
        pairs: list[tuple[Replicate, Replicate]] = [(b_of[b], c_of[c]) for b, c in order if b in b_of and c in c_of]
        pk.pairs = [(b.run_id, c.run_id) for b, c in pairs]
        pk.budget_class = pairs[0][0].budget_class if pairs else ""
        if len(pairs) < policy.min_runs:
            left = sorted({*base.dropped.get(key, []), *cand.dropped.get(key, [])})
            pk.reasons.append(f"{len(pairs)} complete pairs, need {policy.min_runs}"
                              + (f" (left out: {'; '.join(left)})" if left else ""))
            continue
        pk.reasons += parameter_differences([r for p in pairs for r in p])
        if pk.reasons:
            continue
        floor = 0.5 * min((r.bucket_us for p in pairs for r in p if r.bucket_us), default=1.0)
        for name in RUN_STATISTICS:
            if name not in policy.statistics_for(pk.budget_class):
                continue
            bv, cv = [b.value(name) for b, _ in pairs], [c.value(name) for _, c in pairs]
            ps = PairedStat(name=name, baseline=[float(v) if v is not None else float("nan") for v in bv],
                            candidate=[float(v) if v is not None else float("nan") for v in cv])
            pk.stats.append(ps)
            censored = [f"{r.label}" for p in pairs for r in p if name in r.censored or r.value(name) is None]
            if censored:
                ps.why = f"censored or unknowable (beyond the histogram) in {', '.join(censored)}"
                continue
            tests.append((ps, floor, policy.effect_for(pk.budget_class, name), policy.limit_for(pk.budget_class)))
    cmp.alpha_per_test = policy.alpha / max(1, len(tests))
    for ps, floor, effect, limit in tests:
        _judge(ps, floor, effect, cmp.alpha_per_test, policy.beta, limit)
    return cmp


def _judge(ps: PairedStat, floor: float, effect: MinEffect, alpha: float, beta: float,
           limit: float = math.inf) -> None:
    """The closed rule of rtlab.verdict.stats.closed_look at one look, the
    session's pairs (its cap): REGRESSION where the lower bound is above 1
    and the estimate at least the minimum effect, else NO-REGRESSION: no
    regression of +detectable or more, the effect these pairs find with
    probability 1 - beta. Pairs without any spread (copies of one run)
    cannot bound anything: UNDECIDED."""
    b = np.log(np.maximum(np.asarray(ps.baseline), floor))
    c = np.log(np.maximum(np.asarray(ps.candidate), floor))
    d = c - b
    n = len(d)
    mean = float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    base_gm = float(np.exp(b.mean()))
    ps.ratio = math.exp(mean)
    if not se > 0:
        ps.why = "(the pairs show no spread at all: copies of one run cannot bound an effect)"
        return
    ta, tb = float(sps.t.isf(alpha, n - 1)), float(sps.t.isf(beta, n - 1))
    ps.min_effect = max(effect.relative, effect.abs_us / base_gm if base_gm > 0 else math.inf)
    min_log = math.log1p(ps.min_effect)
    ps.lower = math.exp(mean - ta * se)
    ps.upper = math.exp(mean + tb * se)
    ps.detectable = math.expm1(float(detectable_log(se, ta, tb, min_log)))
    if ps.lower > 1 and mean >= min_log:
        ps.outcome = REGRESSION
        ps.why = f"(+{(ps.ratio - 1) * 100:.0f} %, {base_gm:.0f} -> {base_gm * ps.ratio:.0f} us)"
    elif ps.detectable > limit:
        # it can only show no regression larger than its class asks to see
        ps.outcome = BLIND
        ps.why = (f"(not gated: {n} pairs see only +{ps.detectable * 100:.0f} % or more, its class's limit "
                  f"+{limit * 100:.0f} %: more pairs (RTLAB_PAIRS))")
    else:
        ps.outcome = NO_REGRESSION
        ps.why = (f"(no regression of +{ps.detectable * 100:.0f} % or more: {n} pairs see that; "
                  f"policy +{ps.min_effect * 100:.0f} %)")
