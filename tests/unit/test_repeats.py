"""Repeats: a campaign's jobs N times, each its own job dir, points, JUnit
suite, and the table's median (min-max) across them."""
import pytest

from rtlab.plan.campaign import load_campaign
from rtlab.errors import InputError
from rtlab.report.junit import junit_xml
from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                         ToolOutput, Verdict)
from rtlab.report.table import comparison_table
from rtlab.run.results import ResultsDir
from rtlab.store.schema import points_for_run


def campaign(tmp_path, extra=""):
    p = tmp_path / "c.yaml"
    p.write_text("name: r\nboards: [local, qemu-aarch64]\nvariants: [rt]\n"
                 "suites:\n  - name: cyclictest\n" + extra)
    return p


def test_repeat_key_and_option_interleave_jobs(tmp_path):
    c = load_campaign(campaign(tmp_path, "repeat: 3\n"))
    ids = [j.id for j in c.jobs()]
    assert ids == ["local/host#1", "qemu-aarch64/rt#1", "local/host#2", "qemu-aarch64/rt#2",
                   "local/host#3", "qemu-aarch64/rt#3"]
    assert [j.repeat for j in load_campaign(campaign(tmp_path), repeat=2).jobs()] == [1, 1, 2, 2]
    assert [j.repeat for j in load_campaign(campaign(tmp_path)).jobs()] == [0, 0]
    for bad, what in (("repeat: 0\n", "repeat: must be >= 1"), ("repeat: 'x; rm -rf /'\n", "repeat: must be an integer"),
                      ("repeat: 1000\n", "repeat: must be <= 100")):
        with pytest.raises(InputError, match=what):
            load_campaign(campaign(tmp_path, bad))
    with pytest.raises(InputError, match="--repeat: must be 1..100"):
        load_campaign(campaign(tmp_path), repeat=0)


def _job(repeat, max_us, verdict=Verdict.PASS):
    h = Histogram(counts={10: 990, int(max_us): 10}, size=100000)
    t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=10, avg_us=11, max_us=max_us, histogram=h)
    m = Measurement(MeasurementKey("local", "host", "cyclictest", "idle"),
                    ToolOutput(path="x", tool="cyclictest", threads=[t]), verdict=verdict)
    return JobResult(board="local", variant="host", budget_class="local", measurements=[m], repeat=repeat)


def test_every_repeat_kept_in_table_points_junit_and_dirs(tmp_path):
    run = RunResult(run_id="r", started="2026-11-23T00:00:00Z", campaign="c",
                    jobs=[_job(1, 40), _job(2, 100), _job(3, 60, Verdict.FAIL)])
    table = comparison_table(run)
    assert "60 (40-100)" in table.splitlines()[[l.split()[0] if l.split() else "" for l in table.splitlines()].index("max")]
    assert "FAIL x3" in table
    # each repeat its own series: rep=1..3 on latency, verdict and job points
    reps = {(p.measurement, p.tags.get("rep")) for p in points_for_run(run)}
    for meas in ("latency", "verdict", "job", "latency_hist"):
        assert {r for m, r in reps if m == meas} == {"1", "2", "3"}, meas
    names = [s.get("name") for s in junit_xml([run]).getroot()]
    assert names == ["r/local/host/r1", "r/local/host/r2", "r/local/host/r3"]
    rd = ResultsDir(tmp_path, "r")
    assert rd.new_job_dir("local", "host", 2) == tmp_path / "r/local/host/r2"
    assert rd.job_dir("local", "host") == tmp_path / "r/local/host"
    assert RunResult.from_json(run.to_json()).jobs[2].repeat == 3
