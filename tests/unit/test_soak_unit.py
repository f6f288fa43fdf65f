"""rtlab.soak.checkpoint without a board: atomic checkpoints, merged state, the
judging of kept samples (breach FAIL, incomplete never PASS), --full."""
import json
from pathlib import Path

import pytest

from rtlab.soak import checkpoint as soak
from rtlab.plan.budgets import Budget
from rtlab.plan.campaign import load_campaign
from rtlab.errors import InputError
from rtlab.judge.gate import judge
from rtlab.core.model import Histogram, Measurement, MeasurementKey, ThreadResult, ToolOutput, Verdict

ROOT = Path(__file__).resolve().parents[2]


def seg(max_us, cycles=1000):
    h = Histogram(counts={5: cycles - 1, int(max_us): 1}, size=2000)
    return ToolOutput(path="x", tool="cyclictest", threads=[
        ThreadResult(thread=0, cpu=0, cycles=cycles, min_us=5, avg_us=6, max_us=max_us, histogram=h)])


def state_with(n_done, planned_s=30, step=5, maxes=None):
    st = soak.new_state(planned_s, step, 1000, "cyclictest ...")
    for i in range(n_done):
        soak.add_segment(st, i, seg((maxes or {}).get(i, 50)), duration_s=step, elapsed_s=step, gap_before_s=0.2)
    return st


def test_checkpoint_is_written_atomically_and_merged(tmp_path):
    st = state_with(2, maxes={1: 80})
    soak.save(tmp_path, st)
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed over
    back = soak.load_checked_state(tmp_path / soak.CHECKPOINT_FILE)
    (t,) = back["threads"]
    assert t["cycles"] == 2000 and t["max_us"] == 80
    assert t["histogram"]["counts"] == {"5": 1998, "50": 1, "80": 1}
    assert [s["max_us"] for s in back["segments"]] == [50, 80]
    assert json.loads((tmp_path / "exit.json").read_text())["exit_code"] == 0


def _m(st):
    return Measurement(MeasurementKey("b", "v", "cyclictest-soak"), soak.output_of(st, "cp"))


def test_incomplete_soak_is_infra_stopped_at_never_pass():
    m = judge(_m(state_with(2)), Budget(max_us=1000))
    assert m.verdict == Verdict.INFRA
    assert m.reasons[0].startswith("stopped at 00:00:10 of 00:00:30: 2 of 6 checkpointed segments")


def test_breach_in_kept_samples_fails_even_after_lab_infra():
    m = _m(state_with(2, maxes={1: 900}))
    m.verdict, m.reasons = Verdict.INFRA, ["console lost"]  # as the runner sets it
    judge(m, Budget(max_us=500))
    assert m.verdict == Verdict.FAIL
    assert any("max 900 us >= budget 500 us" in r for r in m.reasons)
    assert any(r.startswith("run incomplete (stopped at 00:00:10") for r in m.reasons)


def test_complete_soak_passes_and_lab_infra_stays_infra():
    assert judge(_m(state_with(6)), Budget(max_us=1000)).verdict == Verdict.PASS
    m = _m(state_with(6))
    m.verdict, m.reasons = Verdict.INFRA, ["load died"]
    assert judge(m, Budget(max_us=1000)).verdict == Verdict.INFRA and m.reasons == ["load died"]


def test_full_runs_the_reports_length_and_refuses_without_one():
    c = load_campaign(ROOT / "campaigns/vendor-rk3568-oee.yaml")
    full = soak.full_length(c)
    cyc = next(e for e in full.suites if e.name == "cyclictest")
    assert cyc.suite == "cyclictest-soak" and cyc.params["duration_s"] == 43200
    assert next(e for e in c.suites if e.name == "cyclictest").params["duration_s"] == 120
    with pytest.raises(InputError, match="no suite has full_duration_s"):
        soak.full_length(load_campaign(ROOT / "campaigns/nightly-soak.yaml"))


def test_progress_event_has_elapsed_eta_samples_and_max():
    class R:
        id = "cyclictest-soak@idle"
    ev = soak.checkpoint_event(R, state_with(3, maxes={2: 77}))
    assert ev["line"].startswith("checkpoint 3/6: 00:00:15 of 00:00:30, ETA 00:00:1")
    assert ev["samples"] == 3000 and ev["max_us"] == 77
