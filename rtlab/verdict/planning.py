"""What each key of a baseline can see, before a merge request pays for it.

    plan_baseline(side, policy) -> BaselinePlan

Per key and gating statistic: the detectable effect the verdict will use
(rtlab.verdict.stats.planned_detectable: the larger of the policy's minimum
effect and what the baseline's variance, its sessions and the run cap let
the last look find with probability 1 - beta), and how many candidate runs
a key takes: expected when nothing changed, expected when it regressed by
exactly that effect, and at most (the last look). The run counts come from
candidates drawn from the baseline's own variance model (the sessions'
share included, a session per batch as ``--repeat-until-decided`` measures)
and judged by the shipped closed rule (stats.look_statistics, closed_look),
with a fixed seed: the same baseline plans the same every time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from . import stats
from .compare import Side, _pct
from .cure import Cure, cure
from ..core.model import MeasurementKey
from ..plan.policy import Policy

#: simulated candidates per key for the expected run counts
DRAWS = 400
SEED = 20261128
@dataclass
class StatPlan:
    name: str
    detectable: float            # ratio - 1
    min_effect: float            # ratio - 1
    runs_unchanged: float
    runs_at_detectable: float
    found_at_detectable: float   # share of simulated candidates found REGRESSION
    #: where the baseline censors the statistic: the range whose share of
    #: samples past it is what is planned (compare judges it so)
    share_past_us: Optional[float] = None
    #: above the class's limit: the baseline and cap that would see it
    cure: Optional[Cure] = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "cure"}
        out["cure"] = self.cure.to_json() if self.cure is not None else None
        return out


@dataclass
class KeyPlan:
    key: MeasurementKey
    budget_class: str
    n_baseline: int
    sessions: int
    max_runs: int
    limit: float
    stats: list[StatPlan] = field(default_factory=list)
    why_not: str = ""

    @property
    def detectable(self) -> Optional[float]:
        return max((s.detectable for s in self.stats), default=None)

    @property
    def flagged(self) -> bool:
        d = self.detectable
        return d is not None and d > self.limit

    def line(self) -> str:
        head = f"{self.key.label()}: "
        if self.why_not:
            return head + f"cannot be judged: {self.why_not}"
        parts = [f"{s.name} sees {_pct(1 + s.detectable)} or more"
                 + (f" of the share past {s.share_past_us:,.0f} us" if s.share_past_us is not None else "")
                 + f" (policy {_pct(1 + s.min_effect)})" for s in self.stats]
        worst = max(self.stats, key=lambda s: s.runs_unchanged)
        text = head + "; ".join(parts) + (
            f"; runs: {worst.runs_unchanged:.1f} expected unchanged, {worst.runs_at_detectable:.1f} at the "
            f"detectable effect, at most {self.max_runs}; baseline {self.n_baseline} runs in {self.sessions} "
            f"session{'s' * (self.sessions != 1)}")
        if self.flagged:
            text += (f"; FLAGGED: above the class's limit {_pct(1 + self.limit)}: not gated. Cure: "
                     + "; ".join(f"{s.name}: {s.cure.text()}" for s in self.stats if s.cure is not None))
        return text

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.label(), "budget_class": self.budget_class, "n_baseline": self.n_baseline,
                "sessions": self.sessions, "max_runs": self.max_runs, "detectable": self.detectable,
                "limit": self.limit, "flagged": self.flagged, "why_not": self.why_not,
                "statistics": [s.to_json() for s in self.stats]}


@dataclass
class BaselinePlan:
    keys: list[KeyPlan]
    policy: Policy
    source: str

    def lines(self) -> list[str]:
        out = [f"baseline: {self.source}", *(k.line() for k in self.keys),
               f"policy: {self.policy.source}"]
        flagged = [k for k in self.keys if k.flagged]
        out.append(f"plan: {len(self.keys)} keys, {len(flagged)} flagged for the lab"
                   + (" (not gated: their verdict is BLIND, exit 3, until the baseline named above serves)"
                      if flagged else ""))
        return out

    @property
    def exit_code(self) -> int:
        """0 a plan for every key; 2 a key that cannot be judged at all."""
        return 2 if not self.keys or any(k.why_not for k in self.keys) else 0


def plan_baseline(side: Side, policy: Policy) -> BaselinePlan:
    schedule = policy.schedule()
    #: (plan, statistic, session pool, logs, sessions, the share's range or None)
    gated: list[tuple[KeyPlan, str, str, np.ndarray, list[Any], Optional[float]]] = []
    plans = []
    for key in sorted(side.keys, key=lambda k: k.label()):
        reps = side.keys[key]
        cls = reps[0].budget_class if reps else ""
        kp = KeyPlan(key=key, budget_class=cls, n_baseline=len(reps), sessions=len({r.session for r in reps}),
                     max_runs=schedule[-1], limit=policy.limit_for(cls))
        plans.append(kp)
        if len(reps) < policy.min_runs:
            kp.why_not = f"{len(reps)} valid baseline runs, need {policy.min_runs}"
            continue
        floor = 0.5 * min((r.bucket_us for r in reps if r.bucket_us), default=1.0)
        sessions = [r.session for r in reps]
        for name in policy.statistics_for(cls):
            vals = [r.value(name) for r in reps]
            if any(v is None for v in vals):
                kp.why_not = f"{name} unknowable (beyond a histogram of unknown range) in some baseline run"
                continue
            if any(name in r.censored for r in reps):
                # as compare judges it: by the runs' shares past the range
                if any(r.overflows is None or not r.cycles for r in reps):
                    kp.why_not = f"{name} beyond the histogram range in some baseline run, and the samples " \
                                 f"past the range unknown"
                    continue
                gated.append((kp, name, f"{name} share",
                              stats.share_logs([r.overflows for r in reps], [r.cycles for r in reps]), sessions,
                              max(r.censored[name] for r in reps if name in r.censored)))
                continue
            gated.append((kp, name, name, stats._logs([float(v) for v in vals if v is not None], floor),
                          sessions, None))
    m = max(1, len(gated))
    rho: dict[str, float] = {}
    rho_est: dict[str, float] = {}
    for pool in {g[2] for g in gated}:
        upper, est, _ = stats.session_ratio([(b, s) for _, _, pl, b, s, _ in gated if pl == pool])
        rho[pool], rho_est[pool] = upper, est or 0.0
    keys_in = {pool: sum(1 for g in gated if g[2] == pool) for pool in rho}
    rng = np.random.default_rng(SEED)
    for kp, name, pool, blog, sessions, share_past in gated:
        nb = len(blog)
        pa = stats.pocock_level(policy.alpha / m, schedule, nb)
        pb = stats.pocock_level(policy.beta, schedule, nb)
        eff = policy.effect_for(kp.budget_class, name)
        level = math.exp(float(blog.mean()))
        # a share's minimum effect is relative only (compare._gated_logs)
        min_effect = eff.relative if share_past is not None else \
            max(eff.relative, eff.abs_us / level if level > 0 else math.inf)
        min_log = math.log1p(min_effect)
        cap = stats.cap_sessions([schedule[0]], schedule[0], schedule)
        planned = float(stats.planned_detectable(blog, sessions, rho[pool], cap, pa, pb, min_log))
        unchanged = _runs(blog, sessions, rho[pool], 0.0, schedule, pa, pb, min_log, planned, rng)
        at_d = _runs(blog, sessions, rho[pool], planned, schedule, pa, pb, min_log, planned, rng)
        sp = StatPlan(name=name, detectable=math.expm1(planned), min_effect=min_effect,
                      runs_unchanged=unchanged[0], runs_at_detectable=at_d[0], found_at_detectable=at_d[1],
                      share_past_us=share_past)
        if sp.detectable > kp.limit:
            s2, by_session = stats.within_variance(blog, sessions)
            n_sessions = len(set(sessions))
            sp.cure = cure(float(s2), rho_est[pool], bool(by_session), keys_in[pool], n_sessions,
                           round(nb / max(1, n_sessions)), schedule, policy.alpha / m, policy.beta, min_log,
                           kp.limit)
        kp.stats.append(sp)
    return BaselinePlan(keys=plans, policy=policy, source=side.source)


def _runs(blog: np.ndarray, sessions: list[Any], rho: float, shift: float, schedule: tuple[int, ...],
          pa: float, pb: float, min_log: float, planned: float,
          rng: np.random.Generator) -> tuple[float, float]:
    """Candidates drawn from the baseline's model (its within-session
    variance, the sessions' share *rho*, a session per batch), shifted by
    *shift* (log), judged look by look: (mean runs to a decision, share
    found REGRESSION). The looks keep the baseline's bound *rho* where
    compare pools the candidate's sessions in: these candidates are drawn
    with that share, so their sessions would estimate it again."""
    nb = len(blog)
    s2 = float(stats.within_variance(blog, sessions)[0])
    nmax = schedule[-1]
    batch = np.zeros(nmax, dtype=int)
    prev = 0
    for i, n in enumerate(schedule):
        batch[prev:n] = i
        prev = n
    sig, tau = math.sqrt(s2), math.sqrt(max(rho, 0.0) * s2)
    C = (float(blog.mean()) + shift + rng.normal(0, sig, (DRAWS, nmax))
         + rng.normal(0, tau, (DRAWS, len(schedule)))[:, batch])
    B = np.broadcast_to(blog, (DRAWS, nb))
    done = np.zeros(DRAWS, dtype=bool)
    used = np.full(DRAWS, float(nmax))
    found = np.zeros(DRAWS, dtype=bool)
    for n in schedule:
        L = stats.look_statistics(B, C[:, :n], sessions, list(batch[:n]), rho=rho)
        d = stats.closed_look(L, pa, pb, min_log, planned, final=(n == nmax))
        new = ~done & (d.regress | d.no_regression)
        used[new] = n
        found |= new & d.regress
        done |= new
    return float(used.mean()), float(found.mean())
