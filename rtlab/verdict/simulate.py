"""Simulated campaigns judged by the shipped sequential rule.

    simulate(Scenario(...), campaigns, seed) -> Simulated

The error rates of the regression verdict (false alarms per campaign, power
per key, how often and how soon it decides) cannot be read off one real
campaign; they are properties of the rule under a model of the runs. The
model is the verdict's own: a run's log statistic = the key's level + the
session's offset (variance tau2) + run noise (variance sigma2), with the
variance components measured on the boards (``Scenario``'s defaults: the
local board's p99 and p99.9 run-to-run log sd, 0.18 and 0.21). The rule is
the one rtlab.verdict.compare applies, vectorised over campaigns, keys and
statistics with the same pieces (stats.look_statistics, pocock_level,
session_ratio_arrays, planned_detectable, closed_look);
tests/unit/test_compare_sequential.py checks it against compare_runs, and
asserts the targets; bench/bench_verdict.py --simulate prints them.

The candidate is measured as ``rtlab run --repeat-until-decided`` measures
it: a first batch up to the first look, then one batch per look, each batch
a session of its own (``cand_sessions="batches"``), or all its runs in one
session (``"one"``: a fixed ``--repeat N`` job).

A key whose gating statistic can only show no regression larger than its
class's ``detectable_limit`` is not gated (outcome 3, BLIND), as in
compare. With ``share`` the statistic is a censored percentile judged by
the share of samples past the histogram's range: each run's count past it
is Poisson around the run's rate (``cycles`` samples a run), whose log is
the level + session offset + run noise as above (``sd``: the log rate's),
and the verdict sees the counts' log shares (stats.share_logs, half a
sample where none), as compare does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import stats
from ..core.model import Histogram, RunResult, ThreadResult
from ..plan.policy import Policy


@dataclass(frozen=True)
class Scenario:
    keys: int = 40
    #: run-to-run log sd per gating statistic (the local board's p99, p99.9)
    sd: tuple[float, ...] = (0.18, 0.21)
    #: the sessions' share of the total variance
    tau_share: float = 0.0
    #: the baseline pool: sessions x runs per session
    pool: tuple[int, int] = (20, 3)
    #: the effect (ratio) on the keys in ``affected``, every statistic
    ratio: float = 1.0
    affected: int = 1
    #: one run of every key's first candidate batch x20 (a host stall)
    wild: bool = False
    cand_sessions: str = "batches"
    #: the keys' level, us (the local board's idle p99)
    level_us: float = 24.0
    policy: Policy = Policy()
    #: a censored percentile judged by its share past the range: the mean
    #: share of samples past it (None: the statistics themselves)
    share: "float | None" = None
    #: samples per run (with ``share``): a 3 s cyclictest at 1 ms
    cycles: int = 3000


@dataclass
class Simulated:
    """Per campaign and key: outcome (1 regression, 2 no-regression,
    3 not gated (blind), 0 undecided), candidate runs used, detectable
    effect (ratio - 1, the largest of the key's statistics at its deciding
    look)."""

    scenario: Scenario
    outcome: np.ndarray
    runs: np.ndarray
    detectable: np.ndarray

    @property
    def unaffected(self) -> slice:
        return slice(self.scenario.affected if self.scenario.ratio != 1.0 else 0, None)

    def false_alarm_rate(self) -> float:
        """Campaigns with a REGRESSION on a key that did not change."""
        return float((self.outcome[:, self.unaffected] == 1).any(-1).mean())

    def green_rate(self) -> float:
        """Campaigns whose every key is NO-REGRESSION (exit 0)."""
        return float((self.outcome == 2).all(-1).mean())

    def decided_share(self) -> float:
        return float((self.outcome != 0).mean())

    def blind_share(self) -> float:
        """Keys not gated (what they could see above the class's limit)."""
        return float((self.outcome == 3).mean())

    def unchanged_green_or_blind(self) -> float:
        """Campaigns with no REGRESSION and nothing undecided (exit 0 or 3)."""
        return float(np.isin(self.outcome, (2, 3)).all(-1).mean())

    def power(self) -> float:
        """Affected keys found (REGRESSION)."""
        a = self.scenario.affected
        return float((self.outcome[:, :a] == 1).mean()) if self.scenario.ratio != 1.0 else math.nan

    def mean_runs(self) -> float:
        return float(self.runs.mean())


def _candidate_sessions(s: Scenario, looks: tuple[int, ...]) -> np.ndarray:
    nmax = looks[-1]
    if s.cand_sessions == "one":
        return np.zeros(nmax, dtype=int)
    out = np.zeros(nmax, dtype=int)
    prev = 0
    for i, n in enumerate(looks):
        out[prev:n] = i
        prev = n
    return out


def simulate(s: Scenario, campaigns: int, seed: int = 0, *, data: bool = False):
    """*campaigns* simulated campaigns of *s*; with ``data`` also the logs
    (B, C, baseline sessions, candidate sessions) for a cross-check."""
    pol = s.policy
    looks = pol.schedule()
    rng = np.random.default_rng(seed)
    nbs, per = s.pool
    nb, nmax = nbs * per, looks[-1]
    S = len(s.sd)
    sd = np.asarray(s.sd)[None, None, :, None]
    tau, sig = math.sqrt(s.tau_share) * sd, math.sqrt(1 - s.tau_share) * sd
    bs: Any = np.repeat(np.arange(nbs), per)
    cs: Any = _candidate_sessions(s, looks)
    ncs = int(cs.max()) + 1
    B = rng.normal(0, 1, (campaigns, s.keys, S, nb)) * sig \
        + (rng.normal(0, 1, (campaigns, s.keys, S, nbs)) * tau)[..., bs]
    C = rng.normal(0, 1, (campaigns, s.keys, S, nmax)) * sig \
        + (rng.normal(0, 1, (campaigns, s.keys, S, ncs)) * tau)[..., cs]
    if s.ratio != 1.0:
        C[:, :s.affected] += math.log(s.ratio)
    if s.wild:
        C[..., 0] += math.log(20)
    eff = pol.effect_for("")
    if s.share is not None:
        # counts past the range around each run's rate; the verdict sees
        # their log shares, and a share's minimum effect is relative only
        lvl = math.log(s.share)
        B = stats.share_logs(rng.poisson(s.cycles * np.exp(B + lvl)), s.cycles)
        C = stats.share_logs(rng.poisson(s.cycles * np.exp(C + lvl)), s.cycles)
        min_log = np.full(B.shape[:-1], math.log1p(eff.relative))
    else:
        lvl = math.log(s.level_us)
        B, C = B + lvl, C + lvl
        base = np.exp(B.mean(-1))
        min_log = np.log1p(np.maximum(eff.relative, eff.abs_us / base))
    m = s.keys * S
    pa = stats.pocock_level(pol.alpha / m, looks, nb)
    pb = stats.pocock_level(pol.beta, looks, nb)
    rho = np.stack([stats.session_ratio_arrays(B[:, :, j], bs) for j in range(S)], -1)[:, None, :]
    limit = math.log1p(pol.limit_for(""))
    first = list(np.bincount(cs[:looks[0]]))
    first = [int(x) for x in first if x]
    planned = stats.planned_detectable(B, bs, rho, stats.cap_sessions(first, looks[0], looks), pa, pb, min_log)
    out = np.zeros((campaigns, s.keys), int)
    used = np.full((campaigns, s.keys), nmax)
    det = np.full((campaigns, s.keys), np.nan)
    for n in looks:
        rho_n = np.stack([stats.session_ratio_arrays(B[:, :, j], bs, more=[(C[:, :, j, :n], cs[:n])])
                          for j in range(S)], -1)[:, None, :]
        L = stats.look_statistics(B, C[..., :n], bs, cs[:n], rho=rho_n)
        d = stats.closed_look(L, pa, pb, min_log, planned, final=(n == looks[-1]))
        reg = d.regress.any(-1)
        none = d.no_regression.all(-1)
        # shown none, but of an effect above the class's limit: not gated
        blind = (d.no_regression & (d.detectable > limit)).any(-1)
        open_ = out == 0
        for mask, code in ((open_ & reg, 1), (open_ & ~reg & none & ~blind, 2), (open_ & ~reg & none & blind, 3)):
            out[mask], used[mask] = code, n
            det[mask] = np.expm1(d.detectable.max(-1))[mask]
    sim = Simulated(scenario=s, outcome=out, runs=used, detectable=det)
    return (sim, (B, C, bs, cs)) if data else sim


def scaled_run(run: RunResult, factor: float) -> RunResult:
    """A real run with every latency multiplied by *factor* (histogram
    buckets moved, min/avg/max scaled, samples moved past the range counted
    as overflows as the tool would): exactly an N-fold regression with the
    host's real run-to-run spread, for the power at a known effect
    (bench/bench_verdict.py, tests over recorded runs). Its run id gets
    ``x<factor>``: never the same run on both sides."""

    r = RunResult.from_json(run.to_json())
    r.run_id += f"x{factor:g}"
    for m in r.measurements():
        ts = []
        for t in m.output.threads:
            h = t.histogram
            if h is not None:
                counts: dict[int, int] = {}
                over = h.overflows
                for i, c in h.counts.items():
                    j = int(round(i * factor))
                    if h.size and j >= h.size:
                        over += c  # beyond the tool's range: an overflow, as the tool would count it
                        continue
                    counts[j] = counts.get(j, 0) + c
                # the range is a run parameter (compare.run_parameters): kept
                h = Histogram(counts=counts, bucket_us=h.bucket_us, size=h.size, overflows=over)
            ts.append(ThreadResult(thread=t.thread, cpu=t.cpu, cycles=t.cycles, min_us=t.min_us * factor,
                                   avg_us=t.avg_us * factor, max_us=t.max_us * factor,
                                   overflows=h.overflows if h is not None else t.overflows, histogram=h))
        m.output.threads = ts
    return r
