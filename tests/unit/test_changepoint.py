"""Change points on synthetic histories with known answers: found at the
exact commit range, none on A/A series, effect and confidence, active vs
resolved, and the lab drift flag on a synthetic reference series."""
from __future__ import annotations

import numpy as np
import pytest

from rtlab.verdict.changepoint import (Observation, SeriesKey, find_changes, find_drift, segment,
                               mark_lab_drift)

KEY = SeriesKey("rk3568", "rt", "cyclictest", "hackbench", "p99_us")
DAY = 86400.0


def history(levels, runs=3, spread=0.15, seed=1, t0=1.8e9, step=3600.0, prefix="c"):
    """One commit per level, `runs` runs each, log-normal run-to-run spread."""
    rng = np.random.default_rng(seed)
    obs = []
    for i, lvl in enumerate(levels):
        for r in range(runs):
            obs.append(Observation(t0 + i * step + r, f"{prefix}{i:03d}", f"run-{prefix}{i}-{r}",
                                   float(lvl * rng.lognormal(0, spread))))
    return obs


def test_step_found_at_the_exact_commit_range():
    obs = history([25.0] * 12 + [45.0] * 10)
    (c,) = find_changes(KEY, obs)
    assert (c.last_good, c.first_bad) == ("c011", "c012")
    assert c.direction == "regression" and c.status == "active" and not c.lab_drift
    assert 0.5 < c.effect < 1.1 and c.confidence > 0.999
    assert (c.n_before, c.n_after) == (36, 30)
    assert "c011" in c.line() and "c012" in c.line() and "active" in c.line()


@pytest.mark.parametrize("seed", range(5))
def test_regression_then_fix_found_exactly(seed):
    # two runs per commit, two changes: up at 15, back down at 30 (resolved)
    obs = history([20.0] * 15 + [40.0] * 15 + [20.0] * 12, runs=2, seed=seed)
    changes = find_changes(KEY, obs)
    assert [(c.last_good, c.first_bad, c.direction) for c in changes] == [
        ("c014", "c015", "regression"), ("c029", "c030", "improvement")]
    reg = changes[0]
    assert reg.status == "resolved" and reg.resolved_by == "c030"


def test_aa_series_find_nothing():
    # 40 unchanged histories at 30 % spread: E-divisive at p=0.001 stays quiet
    found = [find_changes(KEY, history([25.0] * 30, runs=2, spread=0.3, seed=s)) for s in range(40)]
    assert sum(bool(f) for f in found) == 0


def test_small_effects_and_short_series_are_not_reported():
    assert find_changes(KEY, history([25.0] * 10 + [26.5] * 10, spread=0.01)) == []  # +6 %
    assert find_changes(KEY, history([25.0] * 2 + [80.0] * 2)) == []  # 4 commits: too few to say


def test_repeats_of_one_commit_never_split():
    # 4 runs per commit: the change lands between commits, never inside one
    obs = history([30.0] * 8 + [90.0] * 8, runs=4, spread=0.05)
    (c,) = find_changes(KEY, obs)
    assert (c.last_good, c.first_bad) == ("c007", "c008")


def test_deterministic():
    x = np.r_[np.full(10, 5.0), np.full(10, 9.0)] + np.random.default_rng(0).normal(0, 0.3, 20)
    assert segment(x) == segment(x) == [10]


def test_lab_drift_on_a_synthetic_reference_series():
    # the pinned reference kernel, nightly: the lab got worse on day 10
    ref_key = SeriesKey("rk3568", "rt", "cyclictest", "hackbench", "p99_us")
    ref = history([25.0] * 10 + [40.0] * 8, runs=1, spread=0.08, step=DAY, prefix="night")
    ref = [Observation(o.time, "pinned", o.run_id, o.value) for o in ref]
    (drift,) = find_drift({ref_key: ref})
    assert drift.board == "rk3568" and drift.change.first_bad == "run-night10-0"
    assert "DRIFTING" in drift.line()
    # commits tested every 8 h over the same days: a jump near day 10 ...
    commits = history([25.0] * 30 + [40.0] * 24, runs=2, spread=0.08, step=DAY / 3, t0=1.8e9 + 0.5 * DAY)
    changes = find_changes(KEY, commits)
    (c,) = changes
    mark_lab_drift(changes, [drift])
    assert c.lab_drift and "LAB DRIFT SUSPECTED" in c.line()
    # ... but the same jump on another board, or long before the drift, is the commit's
    other = find_changes(SeriesKey("imx6", "rt", "cyclictest", "hackbench", "p99_us"), commits)
    early = find_changes(KEY, history([25.0] * 6 + [40.0] * 6, runs=2, spread=0.08, step=DAY / 3,
                                      t0=1.8e9 - 30 * DAY))
    mark_lab_drift(other + early, [drift])
    assert other and early and not any(c.lab_drift for c in other + early)


def test_reference_without_change_flags_nothing():
    ref = [Observation(o.time, "pinned", o.run_id, o.value)
           for o in history([25.0] * 20, runs=1, spread=0.1, step=DAY)]
    assert find_drift({KEY: ref}) == []
