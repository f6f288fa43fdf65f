"""The sequential verdict's error rates on simulated campaigns
(rtlab.verdict.simulate): 40 keys, two gating statistics each (p99 and
p99.9, run-to-run sd of the log 0.18 and 0.21 as measured on the local
board), a baseline pool of 60 runs from 20 sessions (3 runs each), the
candidate measured until decided (a session per batch), looked at after 5,
10, ..., 30 runs (budgets/default.yaml's policy).
test_simulated_rule_is_the_shipped_rule checks the simulated rule against
compare_runs."""

import numpy as np

from rtlab.verdict.compare import BLIND, NO_REGRESSION, REGRESSION, UNDECIDED, compare_runs
from rtlab.core.model import MeasurementKey
from rtlab.plan.policy import Policy
from rtlab.verdict.simulate import Scenario, simulate as run_simulation

from test_compare import hist, run

KEYS = 40
LOOKS = Policy().looks


def simulate(camps, *, ratio=1.0, pool=(20, 3), tau_share=0.0, wild=False, looks=LOOKS,
             cand_sessions="batches", seed=0, keys=None, policy=None):
    """Outcomes (camps, keys): 1 regression, 2 no-regression, 0 undecided;
    key 0 carries the effect. Runs used per key, and the logs."""
    pol = policy or Policy(looks=looks)
    sc = Scenario(keys=keys or KEYS, ratio=ratio, pool=pool, tau_share=tau_share, wild=wild,
                  cand_sessions=cand_sessions, policy=pol)
    sim, data = run_simulation(sc, camps, seed, data=True)
    return sim.outcome, sim.runs, data


def scenario(camps, seed, **kw):
    return run_simulation(Scenario(**kw), camps, seed)


def false_alarms(out):
    return (out[:, 1:] == 1).any(-1).mean()


# The targets of the closed design (budgets/default.yaml's policy), on 40-key
# campaigns: every comparable key decided by its cap, >= 95 % of unchanged
# campaigns green, <= 5 % false alarms, a regression of a key's stated
# detectable effect found >= 90 %. The design before it (NO-REGRESSION only
# below the policy's minimum effect) decided every key of an unchanged
# campaign in 16 % of campaigns: each test below fails on it.

def test_no_change_every_key_decided_and_green():
    sim = scenario(300, 1)
    assert sim.decided_share() == 1.0
    assert sim.green_rate() >= 0.95 and sim.false_alarm_rate() <= 0.05
    # and cheaply: runs per key against a fixed 5 + 15
    assert sim.mean_runs() < 15


def test_power_at_p99_x1_3_and_at_the_stated_detectable_effect():
    sim = scenario(300, 2, ratio=1.3)
    assert sim.decided_share() == 1.0 and sim.power() >= 0.95
    # a regression as large as the keys' stated detectable effect is found
    det = float(np.median(scenario(100, 3).detectable))
    assert 0.2 < det < 0.6
    found = scenario(300, 4, ratio=1 + det)
    assert found.power() >= 0.90, (det, found.power())


def test_session_effects_a_quarter_and_half_of_the_variance():
    for seed, share in ((5, 0.25), (6, 0.5)):
        sim = scenario(300, seed, tau_share=share)
        assert sim.decided_share() == 1.0
        assert sim.false_alarm_rate() <= 0.05 and sim.green_rate() >= 0.95, (share, sim.false_alarm_rate())
        # what the key can see widens with the session effect, and says so
        assert np.median(sim.detectable) > np.median(scenario(100, seed).detectable)
        reg = scenario(300, seed + 10, tau_share=share, ratio=2.0)
        assert reg.power() >= 0.9


def test_a_wild_run_is_no_false_alarm_and_still_decides():
    sim = scenario(300, 7, wild=True)
    assert sim.false_alarm_rate() <= 0.05 and sim.decided_share() == 1.0
    # the wild run does not buy an early weak "no regression": the key measures on
    assert sim.mean_runs() > 20
    assert scenario(300, 8, wild=True, ratio=1.5).power() >= 0.9


def test_unequal_run_counts_15_vs_one_session_hold_alpha_and_decide():
    # the store's last 5 runs of 3 repeats against a fixed --repeat job
    for seed, share in ((9, 0.0), (10, 0.25)):
        sim = scenario(500, seed, pool=(5, 3), cand_sessions="one", tau_share=share)
        assert sim.false_alarm_rate() <= 0.05 and sim.decided_share() == 1.0, share


def test_few_baseline_sessions_hold_alpha_and_still_see_a_large_regression():
    # the sessions' share from few sessions and keys: its estimate alone was
    # liberal here (12 %), its 90 % bound blind with two sessions
    for seed in (14, 21):
        sim = scenario(1000, seed, keys=4, pool=(3, 3), tau_share=0.25, cand_sessions="one")
        assert sim.false_alarm_rate() <= 0.05 and sim.decided_share() == 1.0, sim.false_alarm_rate()
    two = scenario(1000, 15, keys=1, pool=(2, 4), cand_sessions="one", ratio=4.0)
    assert two.power() >= 0.9, two.power()


def test_two_baseline_sessions_against_a_session_per_batch_hold_alpha_and_find_x3():
    # the store's baseline of two sessions against rtlab run
    # --repeat-until-decided: each look pools the candidate's sessions into
    # the session share; with the baseline's two alone x3 was found in 85 %
    # of campaigns where sessions hold half the variance (2000, seed 1)
    for seed in (31, 32):
        sim = scenario(1000, seed, keys=1, pool=(2, 4), tau_share=0.5)
        assert sim.false_alarm_rate() <= 0.05 and sim.decided_share() == 1.0, sim.false_alarm_rate()
    big = scenario(1000, 33, keys=1, pool=(2, 4), tau_share=0.5, ratio=3.0)
    assert big.power() >= 0.95, big.power()


def test_the_old_design_left_unchanged_campaigns_undecided():
    # the same campaigns judged as before the closed design: NO-REGRESSION
    # only below the minimum effect, and no meeting of the bounds at the cap
    from rtlab.verdict import stats as st
    real = st.closed_look
    try:
        st.closed_look = lambda L, pa, pb, min_log, planned, final=False: real(L, pa, pb, min_log, min_log)
        old = scenario(100, 1)
    finally:
        st.closed_look = real
    assert old.green_rate() < 0.5 and old.decided_share() < 1.0


def test_simulated_rule_is_the_shipped_rule():
    # three simulated campaigns of 6 keys through compare_runs: same outcomes
    global KEYS
    keys, KEYS = KEYS, 6
    try:
        out, used, (B, C, bs, cs) = simulate(3, ratio=1.6, seed=8, looks=(5, 10))
    finally:
        KEYS = keys
    mk = [MeasurementKey("b", "v", f"s{i}", "idle") for i in range(6)]
    for ci in range(3):
        def side(prefix, X, sess):
            rs = []
            for j in range(X.shape[-1]):
                r = run(f"{prefix}{sess[j]}", 24, keys=mk)
                r.run_id = f"{prefix}{sess[j]}"
                for k, m in enumerate(r.measurements()):
                    p99, p999 = np.exp(X[ci, k, 0, j]), np.exp(X[ci, k, 1, j])
                    t = m.output.threads[0]
                    t.histogram = hist(10, p99, p999 * 2, p999 * 4, bucket=0.001)
                    t.max_us = p999 * 4
                rs.append(r)
            return rs
        # runs of one session share a run id: one RunResult per repeat here
        base, cand = side("b", B, bs), side("c", C, cs)
        for i, r in enumerate(base):
            r.jobs[0].repeat = i
        cmp = compare_runs(base, cand, Policy(looks=(5, 10)))
        got = [{REGRESSION: 1, NO_REGRESSION: 2, UNDECIDED: 0, BLIND: 3}[k.outcome] for k in
               sorted(cmp.keys, key=lambda k: int(k.key.suite[1:]))]
        assert got == list(out[ci]), (got, list(out[ci]), cmp.lines())


def test_simulated_share_rule_is_the_shipped_rule():
    # a censored p99.9 judged by its share past the range: simulated counts
    # (Poisson around a log-normal rate, 1000 samples a run) through
    # compare_runs as histograms with that many overflows: same outcomes
    from rtlab.core.model import Histogram
    pol = Policy(looks=(5, 10), statistics=("p99.9",))
    sc = Scenario(keys=6, sd=(0.6,), share=0.005, cycles=1000, ratio=3.0, policy=pol)
    sim, (B, C, bs, cs) = run_simulation(sc, 3, 9, data=True)
    mk = [MeasurementKey("b", "v", f"s{i}", "idle") for i in range(6)]
    for ci in range(3):
        def side(prefix, X, sess):
            rs = []
            for j in range(X.shape[-1]):
                r = run(f"{prefix}{sess[j]}", 24, keys=mk)
                for k, m in enumerate(r.measurements()):
                    over = int(round(np.exp(X[ci, k, 0, j]) * 1000 - 0.5))  # stats.share_logs, inverted
                    t = m.output.threads[0]
                    t.histogram = Histogram(counts={10: 1000 - over}, bucket_us=1.0, size=200, overflows=over)
                    t.max_us = 400.0 if over else 10.0
                rs.append(r)
            return rs
        base, cand = side("b", B, bs), side("c", C, cs)
        for i, r in enumerate(base):
            r.jobs[0].repeat = i
        cmp = compare_runs(base, cand, pol)
        got = [{REGRESSION: 1, NO_REGRESSION: 2, UNDECIDED: 0, BLIND: 3}[k.outcome] for k in
               sorted(cmp.keys, key=lambda k: int(k.key.suite[1:]))]
        assert all(s.share_past_us == 200 for k in cmp.keys for s in k.stats if s.gates), cmp.lines()
        assert got == list(sim.outcome[ci]), (got, list(sim.outcome[ci]), cmp.lines())
    assert (sim.outcome[:, 0] == 1).any() and not (sim.outcome[:, 0] == 2).any()  # x3 on key 0: never green


def test_censored_share_false_alarms_and_power():
    # the share past the range as the local board gives it (a 3 s run at
    # 1 ms: 3000 samples; the log rate's run-to-run sd 0.6): within alpha
    # when nothing changed, every comparable key decided; x3 found
    for share in (0.001, 0.01):
        sim = run_simulation(Scenario(share=share, sd=(0.6,), policy=Policy(statistics=("p99.9",))), 200, 11)
        assert sim.false_alarm_rate() <= 0.05 and sim.decided_share() == 1.0, (share, sim.false_alarm_rate())
        found = run_simulation(Scenario(share=share, sd=(0.6,), ratio=3.0, policy=Policy(statistics=("p99.9",))),
                               200, 12)
        assert found.power() >= 0.9, (share, found.power())


def test_a_key_above_its_limit_is_not_gated_and_never_green():
    # 1 key against 2 sessions of 4 runs, half the variance in sessions: it
    # can show only large effects; where that is above the class's limit
    # (+100 %) it is BLIND (3), never NO-REGRESSION (2), and no false alarm
    sim = run_simulation(Scenario(keys=1, pool=(2, 4), tau_share=0.5), 300, 13)
    assert sim.decided_share() == 1.0 and sim.false_alarm_rate() <= 0.05
    assert not (np.isin(sim.outcome, (2,)) & (sim.detectable > 1.0)).any()
    assert sim.blind_share() > 0.3
