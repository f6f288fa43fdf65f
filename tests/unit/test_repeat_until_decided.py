"""`rtlab run --repeat-until-decided` (issue #23 item 2): keys already
decided use no more board time. The scheduling (rtlab.verdict.sequential)
against the shipped verdict (compare_runs), on a simulated board: each
batch's runs are drawn per key from that key's own distribution, so which
keys a batch measured is read back from what it returned."""
import math
import textwrap

import numpy as np
import pytest

from rtlab.core.model import (JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput,
                              Verdict)
from rtlab.plan.campaign import load_campaign
from rtlab.plan.policy import Policy
from rtlab.verdict.compare import BLIND, NO_REGRESSION, REGRESSION, UNDECIDED, Comparison, KeyComparison, compare_runs
from rtlab.verdict.sequential import KeyedCampaign, measure_until_decided, narrow, repeats_needed

from test_compare import hist


def key(suite, load="idle"):
    return MeasurementKey("local", "host", suite, load)


STEADY, NOISY, WORSE = key("steady"), key("noisy"), key("worse", "hackbench")


@pytest.fixture
def campaign(tmp_path):
    (tmp_path / "budgets.yaml").write_text("budgets:\n  local: {'*': {'*': {'*': {max_us: 1000000}}}}\n")
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: seq
        budgets: budgets.yaml
        boards: [local]
        suites:
          - {name: steady, suite: cyclictest, loads: [idle], params: {duration_s: 2}}
          - {name: noisy, suite: cyclictest, loads: [idle], params: {duration_s: 2}}
          - {name: worse, suite: cyclictest, loads: [idle, hackbench], params: {duration_s: 2}}
    """))
    return load_campaign(path)


def test_narrowed_campaign_runs_only_the_keys_suite_runs(campaign):
    every = campaign.jobs()
    assert {(r.name, r.load) for r in every[0].suites} == {
        ("steady", "idle"), ("noisy", "idle"), ("worse", "idle"), ("worse", "hackbench")}
    c = narrow(campaign, [NOISY, WORSE], 5)
    assert isinstance(c, KeyedCampaign) and c.name == campaign.name and c.budgets == campaign.budgets
    jobs = c.jobs()
    assert [j.repeat for j in jobs] == [1, 2, 3, 4, 5]
    for j in jobs:
        assert [(r.name, r.load) for r in j.suites] == [("noisy", "idle"), ("worse", "hackbench")]
        # the same parameters as the first batch's: the runs compare
        assert j.suites[0].params == every[0].suites[1].params
    assert narrow(campaign, [], 5).jobs() == []
    assert narrow(campaign, [key("steady", "hackbench")], 3).jobs() == []  # no such measurement


def undecided(k, n, more=True):
    return KeyComparison(key=k, outcome=UNDECIDED, n_candidate=n, more=more)


def test_the_next_batch_reaches_every_undecided_keys_next_look():
    sched = Policy().schedule()
    cmp = Comparison(keys=[undecided(STEADY, 5), KeyComparison(key=NOISY, outcome=NO_REGRESSION, n_candidate=5)])
    assert repeats_needed(cmp, sched) == 5
    # a key that lost a repeat to INFRA reaches its look with the others' batch
    cmp.keys.append(undecided(WORSE, 9))
    assert repeats_needed(cmp, sched) == 5
    # ... or alone: one repeat, not five
    assert repeats_needed(Comparison(keys=[undecided(STEADY, 4), undecided(WORSE, 9)]), sched) == 1
    # every repeat lost: the first look's worth
    assert repeats_needed(Comparison(keys=[undecided(STEADY, 0)]), sched) == 5
    # undecided for want of nothing runs can give (a parameter differs): no batch
    assert repeats_needed(Comparison(keys=[undecided(STEADY, 5, more=False)]), sched) == 0
    # at the last look: none
    assert repeats_needed(Comparison(keys=[undecided(STEADY, 30)]), sched) == 0


class SimulatedBoard:
    """Runs per key as the campaign's jobs say: p99 around 30 us with the
    key's own run-to-run spread; 'worse@hackbench' x3 in the candidate."""

    SD = {"steady": 0.02, "noisy": 0.5, "worse": 0.02}

    def __init__(self, ratio=None, infra_after=None, seed=0):
        self.rng = np.random.default_rng(seed)
        self.ratio = ratio or {}
        self.runs: dict[str, RunResult] = {}
        self.batches: list[list[tuple[str, str, int]]] = []
        self.infra_after = infra_after

    def make(self, run_id, jobs, *, ratio, infra=False):
        out = RunResult(run_id=run_id, started="2026-11-26T00:00:00Z", campaign="seq")
        for job in jobs:
            jr = JobResult(board=job.board.name, variant=job.variant.name, budget_class="local",
                           repeat=job.repeat)
            for r in job.suites:
                k = MeasurementKey(job.board.name, job.variant.name, r.name, r.load)
                p99 = 30 * math.exp(self.rng.normal(0, self.SD[r.name])) * ratio.get(k, 1.0)
                h = hist(10, round(p99), round(p99 * 1.3), round(p99 * 2))
                t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=1, avg_us=11, max_us=round(p99 * 2),
                                 histogram=h)
                jr.measurements.append(Measurement(k, ToolOutput(path="x", tool="cyclictest", threads=[t]),
                                                   verdict=Verdict.INFRA if infra else Verdict.PASS,
                                                   reasons=["load died"] if infra else []))
            out.jobs.append(jr)
        self.runs[run_id] = out
        return out

    def run_batch(self, campaign):
        n = len(self.batches) + 1
        jobs = campaign.jobs()
        self.batches.append([(r.name, r.load, j.repeat) for j in jobs for r in j.suites])
        infra = self.infra_after is not None and n > self.infra_after
        self.make(f"cand{n}", jobs, ratio=self.ratio, infra=infra)
        return f"results/cand{n}"


def measure(campaign, board, policy=None, cand_sd=None):
    policy = policy or Policy()
    base = [board.make(f"base{i}", [j], ratio={}) for i, j in enumerate(
        [j for j in campaign.jobs()] * 15)]
    if cand_sd:  # the candidate's runs spread otherwise than the baseline's
        board.SD = cand_sd

    def judge(dirs):
        return compare_runs(base, [board.runs[d.name] for d in dirs], policy)
    return measure_until_decided(campaign, policy.schedule(), board.run_batch, judge, progress=lambda s: None)


def test_decided_keys_are_not_measured_again(campaign):
    board = SimulatedBoard(ratio={WORSE: 3.0}, seed=4)
    cmp, dirs = measure(campaign, board)
    out = {k.key: k for k in cmp.keys}
    # the first look decides the steady key (shown unchanged) and the x3 one (regressed) ...
    assert out[STEADY].outcome == NO_REGRESSION and out[STEADY].decided_at == 5
    assert out[WORSE].outcome == REGRESSION and out[WORSE].decided_at == 5
    assert out[key("worse")].outcome == NO_REGRESSION
    # ... so the first batch measured every key 5 times, the later ones only the noisy key
    assert sorted({(s, ld) for s, ld, _ in board.batches[0]}) == [
        ("noisy", "idle"), ("steady", "idle"), ("worse", "hackbench"), ("worse", "idle")]
    assert len(board.batches) > 1
    for later in board.batches[1:]:
        assert {(s, ld) for s, ld, _ in later} == {("noisy", "idle")}
        assert len(later) == 5
    assert out[STEADY].n_candidate == 5 and out[WORSE].n_candidate == 5
    # the noisy key: looked at after each batch, up to a decision or the last look
    n = out[NOISY].n_candidate
    assert n == 5 * len(board.batches)
    looks = [lk.runs for s in out[NOISY].stats if s.gates for lk in s.looks]
    assert max(looks) == n and 5 in looks
    assert out[NOISY].outcome != UNDECIDED or n == 30
    # every batch recorded, in compare.json too
    assert [b["repeats"] for b in cmp.batches] == [5] * len(board.batches)
    assert cmp.batches[1]["keys"] == ["local/host/noisy/idle"]
    assert cmp.to_json()["batches"] == cmp.batches
    assert any(line.startswith("batch 2: cand2: 5 repeats of 1 key") for line in cmp.lines())
    assert [d.name for d in dirs] == [f"cand{i}" for i in range(1, len(board.batches) + 1)]


def test_an_undecided_key_gets_more_runs_until_the_last_look(campaign):
    # looks at 3 and 6: a candidate far noisier than its baseline cannot be
    # shown unchanged at the first look; at the last the bounds meet
    board = SimulatedBoard(seed=5)
    cmp, dirs = measure(campaign, board, Policy(looks=(3, 6)),
                        cand_sd={"steady": 0.02, "noisy": 2.0, "worse": 0.02})
    out = {k.key: k for k in cmp.keys}
    assert out[NOISY].outcome != UNDECIDED and out[NOISY].n_candidate == 6, out[NOISY].line()
    # ... decided there: shown unchanged where the bounds meet below its
    # class's limit; here its own spread (x7 per run) puts what it can see
    # far above it: not gated (exit 3), never green
    assert out[NOISY].decided_at == 6
    assert out[NOISY].outcome == BLIND and "look 2 (6 runs): not gated: p99: upper bound" in out[NOISY].decided_by
    assert [b["repeats"] for b in cmp.batches] == [3, 3] and len(dirs) == 2
    assert cmp.exit_code == 3


def test_repeats_lost_to_infra_are_measured_again_and_a_dead_lab_stops_the_loop(campaign):
    board = SimulatedBoard(seed=6, infra_after=1)
    cmp, dirs = measure(campaign, board, Policy(looks=(3, 6)),
                        cand_sd={"steady": 0.02, "noisy": 2.0, "worse": 0.02})
    # batch 2 lost every repeat (INFRA): no progress, no third batch, the key undecided
    assert len(board.batches) == 2
    out = {k.key: k for k in cmp.keys}
    assert out[NOISY].outcome == UNDECIDED and cmp.exit_code == 2


def test_a_key_short_of_its_first_look_is_measured_again():
    from test_compare import run as one_run
    pol = Policy(looks=(5, 10))
    # 15 baseline runs of one key; 3 valid candidate runs (2 lost to INFRA)
    b = [one_run(f"b{i}", 30 + i % 3, budget_class="local", keys=(STEADY,)) for i in range(15)]
    c = [one_run(f"c{i}", 30 + i % 3, budget_class="local", keys=(STEADY,), infra=i >= 3) for i in range(5)]
    cmp = compare_runs(b, c, pol)
    (k,) = cmp.keys
    assert k.outcome == UNDECIDED and k.more and cmp.more_runs == [STEADY]
    assert "first look is at 5" in k.line()
    assert repeats_needed(cmp, pol.schedule()) == 2
    # two lost of the baseline's too few: no candidate run can help
    cmp = compare_runs(b[:2], c, pol)
    assert not cmp.keys[0].more and repeats_needed(cmp, pol.schedule()) == 0


def test_the_first_batch_is_the_first_look_and_no_baseline_stops_there(campaign):
    """The lab's policy looks first at 5 runs: the first batch of every
    until-decided job (a CI kernel push or merge request) is 5 repeats; on a
    branch with no runs in the store yet nothing more can decide, so that
    batch is the only one (judged on budgets: the gate says no baseline)."""
    from rtlab.verdict.against import lab_policy

    assert lab_policy().schedule()[0] == 5
    board = SimulatedBoard(seed=7)

    def judge(dirs):
        return compare_runs([], [board.runs[d.name] for d in dirs], lab_policy())
    cmp, dirs = measure_until_decided(campaign, lab_policy().schedule(), board.run_batch, judge,
                                      progress=lambda s: None)
    assert len(board.batches) == 1 and {r for _, _, r in board.batches[0]} == {1, 2, 3, 4, 5}
    assert [b["repeats"] for b in cmp.batches] == [5] and cmp.outcome == UNDECIDED


def test_a_key_that_cannot_see_its_classs_limit_gets_no_more_runs(campaign):
    # the noisy key spreads x20 per run in its baseline and its candidate
    # alike: it sees far more than the class's +100 %; its first look's
    # runs exclude all it can see, so it is not gated there (BLIND), says
    # why, and is never measured again. The steady keys decide at the first
    # look too: one batch, exit 3
    board = SimulatedBoard(seed=9)
    board.SD = {"steady": 0.02, "noisy": 3.0, "worse": 0.02}
    cmp, dirs = measure(campaign, board)
    out = {k.key: k for k in cmp.keys}
    assert out[NOISY].outcome == BLIND and out[NOISY].decided_at == 5 and len(board.batches) == 1
    assert "look 1 (5 runs): not gated: p99: upper bound" in out[NOISY].decided_by
    assert "more runs would not make it see the limit" in out[NOISY].decided_by
    assert out[STEADY].outcome == NO_REGRESSION and cmp.exit_code == 3
