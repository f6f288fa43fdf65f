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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import stats
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


@dataclass
class Simulated:
    """Per campaign and key: outcome (1 regression, 2 no-regression,
    0 undecided), candidate runs used, detectable effect (ratio - 1, the
    largest of the key's statistics at its deciding look)."""

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
    lvl = math.log(s.level_us)
    B, C = B + lvl, C + lvl
    m = s.keys * S
    pa = stats.pocock_level(pol.alpha / m, looks, nb)
    pb = stats.pocock_level(pol.beta, looks, nb)
    rho = np.stack([stats.session_ratio_arrays(B[:, :, j], bs) for j in range(S)], -1)[:, None, :]
    eff = pol.effect_for("")
    base = np.exp(B.mean(-1))
    min_log = np.log1p(np.maximum(eff.relative, eff.abs_us / base))
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
        open_ = out == 0
        for mask, code in ((open_ & reg, 1), (open_ & ~reg & none, 2)):
            out[mask], used[mask] = code, n
            det[mask] = np.expm1(d.detectable.max(-1))[mask]
    sim = Simulated(scenario=s, outcome=out, runs=used, detectable=det)
    return (sim, (B, C, bs, cs)) if data else sim
