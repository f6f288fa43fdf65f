"""The cure of a key that cannot see what its class asks: the baseline
(sessions x runs) and the cap that would bring its detectable effect down
to its class's ``detectable_limit``.

    cure(s2, rho, ...) -> Cure

From the key's run-to-run variance and the sessions' estimated share of it,
by the same closed form the verdict plans with (stats.design_detectable),
the bound on the sessions' share projected for the larger baseline
(stats.projected_session_ratio). Used by ``rtlab baseline plan`` and by the
verdict's line of a key not gated (rtlab.verdict.compare)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from . import stats


def pct(x: float) -> str:
    """A ratio as an effect in percent: 1.31 -> "+31 %"."""
    if math.isinf(x):
        return "+inf %"
    v = (x - 1) * 100
    return f"{v:+.0f} %" if abs(v) >= 1 or v == 0 else f"{v:+.1f} %"


#: the cure's search: baseline sessions and candidate runs at most (the
#: policy's looks stop at 200 runs)
MAX_SESSIONS = 100
MAX_CAP = 200


@dataclass(frozen=True)
class Cure:
    """What brings a key's detectable effect down to *target* (ratio - 1):
    a baseline of *sessions* sessions of *runs* runs and a cap of *cap*
    candidate runs, or nothing within MAX_SESSIONS and MAX_CAP (*reached*
    False). Computed from the key's run-to-run variance and the sessions'
    estimated share of it: a larger baseline narrows both the baseline's
    mean and the bound on the sessions' share; a larger cap adds candidate
    sessions (one per batch) and runs."""

    target: float
    sessions: int
    runs: int
    cap: int
    detectable: float
    reached: bool
    now_sessions: int
    now_runs: int
    now_cap: int
    #: the policy's minimum effect (ratio - 1): no design sees below it
    min_effect: float = 0.0

    def text(self) -> str:
        if not self.reached and self.min_effect >= self.target:
            return (f"its minimum effect {pct(1 + self.min_effect)} lies above the limit: no baseline sees "
                    f"{pct(1 + self.target)}")
        if not self.reached:
            return (f"no baseline of up to {MAX_SESSIONS} sessions x {self.runs} runs and no cap of up to "
                    f"{MAX_CAP} runs sees {pct(1 + self.target)} (at best {pct(1 + self.detectable)}): the "
                    f"board varies too much between sessions; run longer, or measure a quieter board")
        parts = []
        if self.runs == 1:  # no session held two runs: runs, not sessions
            if self.sessions != self.now_sessions * max(self.now_runs, 1):
                parts.append(f"a baseline of {self.sessions} runs (now {self.now_sessions * max(self.now_runs, 1)})")
        elif (self.sessions, self.runs) != (self.now_sessions, self.now_runs):
            parts.append(f"a baseline of {self.sessions} sessions x {self.runs} runs "
                         f"(now {self.now_sessions} x {self.now_runs})")
        if self.cap != self.now_cap:
            parts.append(f"a cap of {self.cap} candidate runs (looks: up to {self.cap}; now {self.now_cap})")
        return (" and ".join(parts) or "what it has") + f" to see {pct(1 + self.target)}"

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "sessions": self.sessions, "runs": self.runs, "cap": self.cap,
                "detectable": self.detectable, "reached": self.reached, "text": self.text()}


def schedule_to(schedule: tuple[int, ...], cap: int) -> tuple[int, ...]:
    """The policy's looks carried on to *cap* candidate runs at its last step."""
    step = schedule[-1] - schedule[-2] if len(schedule) > 1 else schedule[0]
    out = [n for n in schedule if n <= cap] or [min(schedule[0], cap)]
    while out[-1] + step <= cap:
        out.append(out[-1] + step)
    if out[-1] < cap:
        out.append(cap)
    return tuple(out)


def cure(s2: float, rho: Optional[float], by_session: bool, keys: int, sessions: int, runs: int,
         schedule: tuple[int, ...], alpha_per_test: float, beta: float, min_log: float,
         target: float) -> Cure:
    """The smallest baseline (sessions of *runs* runs, at least two) that
    lets the key see *target* at the policy's cap, else the smallest at a
    cap doubled, and so on to MAX_CAP. *s2*: the key's run-to-run variance
    of the log (around its sessions' means where *by_session*), *rho*: the
    sessions' share of it as estimated from the campaign's pools (the
    verdict bounds it from above, as the projected baseline would:
    stats.projected_session_ratio), *keys*: how many keys share that
    estimate. The looks' Pocock levels are taken against an unbounded
    baseline: slightly stricter than a finite one's, so the cure errs large."""
    r = max(2, runs) if by_session else 1
    best: Optional[Cure] = None
    caps, cap = [], schedule[-1]
    while cap < MAX_CAP:
        caps.append(cap)
        cap *= 2
    caps.append(MAX_CAP)
    target_log = math.log1p(target)
    for cap in caps:
        sched = schedule_to(schedule, cap)
        cs = stats.cap_sessions([sched[0]], sched[0], sched)
        pa = stats.pocock_level(alpha_per_test, sched, 10 ** 9)
        pb = stats.pocock_level(beta, sched, 10 ** 9)

        def d(n_sessions: int) -> float:
            rho_up = stats.projected_session_ratio(rho or 0.0, keys, n_sessions, r) if by_session else 0.0
            return float(stats.design_detectable(s2, rho_up, [r] * n_sessions, cs, pa, pb, min_log, by_session))
        lo = max(2, sessions if by_session else sessions * max(runs, 1))
        if d(MAX_SESSIONS) > target_log:
            if best is None or d(MAX_SESSIONS) < math.log1p(best.detectable):
                best = Cure(target, MAX_SESSIONS, r, cap, math.expm1(d(MAX_SESSIONS)), False, sessions, runs,
                            schedule[-1], math.expm1(min_log))
            continue
        hi = MAX_SESSIONS
        while lo < hi:  # the detectable effect falls as sessions are added
            mid = (lo + hi) // 2
            if d(mid) <= target_log:
                hi = mid
            else:
                lo = mid + 1
        return Cure(target, lo, r, cap, math.expm1(d(lo)), True, sessions, runs, schedule[-1], math.expm1(min_log))
    assert best is not None
    return best
