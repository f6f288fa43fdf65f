"""`rtlab junit` (JUnit XML for GitLab) and `rtlab gate` over several runs."""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_gate import thread  # noqa: E402

from rtlab.cli import main
from rtlab.report.junit import junit_xml
from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult, ToolOutput

BUDGETS = 'budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 100}}}}\n'


def job(variant, counts=None, **kw):
    j = JobResult("qemu-x86_64", variant, "x86_64", "qemu-tcg", duration_s=10, **kw)
    if counts:
        j.measurements.append(Measurement(MeasurementKey("qemu-x86_64", variant, "cyclictest", "idle"),
                                          ToolOutput(path="x", tool="cyclictest",
                                                     threads=[thread(counts, size=max(200, max(counts) + 1))]),
                                          raw=["cyclictest/cyclictest.json"]))
    return j


def write_run(d: Path, *jobs) -> Path:
    d.mkdir(parents=True)
    run = RunResult(d.name, "2026-11-21T00:00:00Z", "ci", jobs=list(jobs),
                    not_available=[{"board": "qemu-x86_64", "variant": "x", "reason": "no such kernel"}])
    (d / "run.json").write_text(json.dumps(run.to_json()))
    (d / "budgets.yaml").write_text(BUDGETS)
    return d


def test_one_testcase_per_measurement_failure_error_and_build(tmp_path):
    from rtlab.plan.budgets import load_budgets
    from rtlab.judge.gate import judge_run
    (tmp_path / "b.yaml").write_text(BUDGETS)
    run = RunResult("r1", "2026-11-21T00:00:00Z", "ci", jobs=[
        job("rt", {10: 99, 40: 1}), job("none", {10: 99, 400: 1}),
        job("preempt", infra_error="board qemu-x86_64: boot failed: no prompt"),
        job("voluntary", build_error="kernel build failed: CONFIG_PREEMPT_RT dropped")])
    judge_run(run, load_budgets(tmp_path / "b.yaml"))
    root = junit_xml([run]).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "1")
    cases = {f"{c.get('classname')}:{c.get('name')}": c for c in root.iter("testcase")}
    assert set(cases) == {"qemu-x86_64.rt:cyclictest@idle", "qemu-x86_64.none:cyclictest@idle",
                          "qemu-x86_64.preempt:boot", "qemu-x86_64.voluntary:build"}
    f = cases["qemu-x86_64.none:cyclictest@idle"].find("failure")
    assert "max 400 us >= budget 100 us" in f.get("message") and f.get("type") == "budget"
    assert cases["qemu-x86_64.preempt:boot"].find("error").get("type") == "infra"
    assert "CONFIG_PREEMPT_RT" in cases["qemu-x86_64.voluntary:build"].find("failure").text
    assert cases["qemu-x86_64.rt:cyclictest@idle"].find("failure") is None


def test_cli_junit_and_gate_over_several_runs(tmp_path, capsys):
    ok = write_run(tmp_path / "a" / "r1", job("rt", {10: 100}))
    bad = write_run(tmp_path / "b" / "r2", job("none", {10: 99, 250: 1}))
    infra = write_run(tmp_path / "c" / "r3", job("preempt", infra_error="boot failed"))
    out = tmp_path / "junit.xml"
    assert main(["junit", str(ok), str(bad), "-o", str(out)]) == 0
    assert ET.parse(out).getroot().get("tests") == "4"  # two measurements + a skipped pair per run
    (tmp_path / "b.yaml").write_text(BUDGETS)
    given = ["--budgets", str(tmp_path / "b.yaml")]  # the gate judges by the lab's budgets unless given others
    assert main(["gate", str(ok), *given]) == 0
    assert main(["gate", str(ok), str(infra), *given]) == 2
    capsys.readouterr()
    assert main(["gate", str(ok), str(bad), str(infra), *given]) == 1  # a broken budget wins
    text = capsys.readouterr().out
    assert "gate: FAIL" in text and "qemu-x86_64/none/cyclictest/idle: max 250 us >= budget 100 us" in text
    assert "gate: INFRA" in text and "gate: FAIL over 3 runs" in text
