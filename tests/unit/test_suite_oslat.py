"""The oslat suite (docs/extending.md's "A suite" recipe, followed): it is
found without being listed anywhere, builds its command from the campaign,
and its raw output goes through the one results path to a judged
measurement. campaigns/programme.yaml runs it on real boards
(tests/integration/test_suites_programme.py)."""
import json
import shutil
from pathlib import Path

from rtlab.plan.budgets import Budget
from rtlab.judge.gate import judge
from rtlab.core.model import MeasurementKey, Verdict
from rtlab.run.results import collect
from rtlab.suites import SUITES, SuiteRun

RT = Path(__file__).resolve().parents[1] / "fixtures" / "rt-tests-2.4"


def run_of(cpus=(1,), **params):
    s = SUITES["oslat"]
    return SuiteRun(id="oslat@idle", name="oslat", suite="oslat", load="idle", params=s.params(params), cpus=cpus)


def test_oslat_registers_itself_and_names_its_cpus():
    assert SUITES["oslat"].tool == "oslat" and SUITES["oslat"].result_kind == "latency"
    cmd = SUITES["oslat"].command(run_of((0, 1), duration_s=3))
    assert cmd == ["oslat", "-q", "-D", "3", "-c", "0-1", "-b", "32", "-z", "--json=oslat.json"]  # SCHED_OTHER
    assert SUITES["oslat"].command(run_of(priority=5))[6:8] == ["-f", "5"]


def test_oslat_raw_output_becomes_a_judged_measurement(tmp_path):
    run = run_of()
    raw = tmp_path / run.id
    raw.mkdir()
    shutil.copy(RT / "oslat-c1.json", raw / "oslat.json")
    (raw / "exit.json").write_text(json.dumps({"exit_code": 0}))
    key = MeasurementKey(board="local", variant="host", suite="oslat", load="idle")
    (m,) = collect(tmp_path, key, SUITES["oslat"], run)
    assert m.verdict is None and m.output.tool == "oslat" and m.output.path == "oslat@idle/oslat.json"
    (t,) = m.output.threads
    assert t.cpu == 1 and t.cycles > 70_000_000 and t.max_us == 3093
    assert judge(m, Budget(max_us=5000)).verdict == Verdict.PASS
    assert judge(m, Budget(max_us=1000)).verdict == Verdict.FAIL and "max 3093 us" in m.reasons[0]
