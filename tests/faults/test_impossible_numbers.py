"""Numbers that cannot be true are refused at load (#40): a negative latency,
min above max, a bucket past the declared histogram, counts that do not fit
the cycles, overflows with a maximum inside the range; LAVA test cases below
zero; an IRQ probe record that contradicts itself. Each turned a FAIL into
a PASS, or let one noisy number decide, before."""
import json
from pathlib import Path

import pytest

from rtlab.errors import InputError

from .conftest import rtlab
from .test_lab_budgets import fifo_hog_run
from .test_lava_records import hostile_record, job_file  # noqa: F401 (a fixture)

THREAD = "jobs[0].measurements[0].output.threads[0]"


def _run_dir(path: Path, doc: dict) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(doc))
    (path / "budgets.yaml").write_text("budgets:\n  local: {'*': {'*': {'*': {max_us: 20000}}}}\n")
    return path


CASES = {
    "negative max": ({"max_us": -1}, "max_us", "negative"),
    "negative min": ({"min_us": -3}, "min_us", "negative"),
    "min above max": ({"min_us": 200_000}, "min_us", "above max"),
    "avg outside min..max": ({"avg_us": 500_000}, "avg_us", "outside"),
    "bucket past the declared size": ({"histogram.counts": {"2": 500, "99999999999": 499}}, "histogram.counts",
                                      "beyond the histogram's size"),
    "all-zero counts with cycles": ({"histogram.counts": {}, "histogram.overflows": 0, "overflows": 0},
                                    "histogram.counts", "no sample at all"),
    "more samples than cycles": ({"cycles": 10}, "histogram.counts", "in 10 cycles"),
    "overflows with max inside the range": ({"max_us": 300}, "max_us", "overflows past the range"),
    "overflows with max -1": ({"max_us": -1, "min_us": 0}, "max_us", "negative"),
}


@pytest.mark.parametrize("change,key,why", CASES.values(), ids=CASES.keys())
def test_a_run_json_whose_numbers_cannot_be_true_is_refused(tmp_path, change, key, why):
    from rtlab.core.modelcheck import Doc, run
    doc = fifo_hog_run().to_json()
    run(Doc(Path("run.json"), doc))  # each case changes one number of a run that loads
    t = doc["jobs"][0]["measurements"][0]["output"]["threads"][0]
    for k, v in change.items():
        if k.startswith("histogram."):
            t["histogram"][k.split(".", 1)[1]] = v
        else:
            t[k] = v
    d = _run_dir(tmp_path / "run", doc)
    res = rtlab("gate", d, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2, res.stdout + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{d / 'run.json'}: not a valid run result: {THREAD}.{key}" in err and why in err, err
    assert "PASS" not in res.stdout


def test_a_thread_that_recorded_nothing_keeps_its_placeholders():
    """sigwaittest with no samples prints min -1: no latency, judged as
    "recorded 0 cycles" (INFRA), not refused."""
    from rtlab.core.modelcheck import thread_contradiction
    assert thread_contradiction(0, -1.0, 0.0, 0.0, {}) is None


@pytest.mark.parametrize("case,value", [("t0-max-latency", "-5.0"), ("t0-min-latency", "-1")])
def test_a_lava_result_below_zero_is_refused_naming_the_case(job_file, tmp_path, case, value):  # noqa: F811
    import yaml
    rec = hostile_record(job_file, tmp_path)
    spec = json.loads(yaml.safe_load((rec / "job.yaml").read_text())["metadata"]["rtlab.spec"])
    suite_def = spec["definitions"]["suite"]
    results = yaml.safe_load((rec / "results.yaml").read_text())
    results += [{"suite": suite_def, "name": n, "result": "pass", "measurement": v, "job": "4242"}
                for n, v in (("t0-cycles", "1000"), ("t0-min-latency", "2"), ("t0-avg-latency", "3"),
                             ("t0-max-latency", "40")) if n != case] + \
               [{"suite": suite_def, "name": case, "result": "pass", "measurement": value, "job": "4242"}]
    (rec / "results.yaml").write_text(yaml.safe_dump(results))
    res = rtlab("lava", "ingest", rec, "--results", tmp_path / "results", timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{rec / 'results.yaml'}: test case {case}: a latency cannot be negative" in res.stderr, res.stderr
    assert not (tmp_path / "results").exists()


def test_a_lava_thread_with_min_above_max_is_refused(job_file, tmp_path):  # noqa: F811
    import yaml
    rec = hostile_record(job_file, tmp_path)
    spec = json.loads(yaml.safe_load((rec / "job.yaml").read_text())["metadata"]["rtlab.spec"])
    results = yaml.safe_load((rec / "results.yaml").read_text())
    results += [{"suite": spec["definitions"]["suite"], "name": n, "result": "pass", "measurement": v}
                for n, v in (("t0-cycles", "1000"), ("t0-min-latency", "90"), ("t0-avg-latency", "50"),
                             ("t0-max-latency", "40"))]
    (rec / "results.yaml").write_text(yaml.safe_dump(results))
    res = rtlab("lava", "ingest", rec, "--results", tmp_path / "results", timeout=120)
    assert res.returncode == 2 and "test case t0-min-latency: min 90.0 is above max 40.0" in res.stderr, res.stderr


def _probe_doc(**result) -> dict:
    r = {"sent": 5, "answered": 5, "missed": 0, "min_ns": 0, "avg_ns": 0, "max_ns": 0, "bucket_ns": 1000,
         "overflows": 5, "ready": True, "timed_out": False, "counts": {}}
    r.update(result)
    return {"probe": {"name": "p", "resolution_ns": 10}, "result": r,
            "arm": {"period_us": 1000, "pulse_us": 10, "samples": 5, "timeout_s": 10, "bucket_ns": 1000,
                    "buckets": 1000}}


@pytest.mark.parametrize("result,why", [
    ({}, "5 overflows past 1000000 ns, but max_ns 0 lies within it"),
    ({"answered": 6, "missed": 0, "overflows": 6, "max_ns": 2_000_000}, "sent (5) != answered (6)"),
    ({"max_ns": -1}, "integer >= 0"),
    ({"overflows": 0, "counts": {"99999": 5}, "min_ns": 99_999_000, "avg_ns": 99_999_000,
      "max_ns": 99_999_000}, "beyond the 1000 buckets"),
])
def test_an_irq_probe_record_that_contradicts_itself_is_refused(result, why):
    from rtlab.suites.irqresponse import probe_output
    # the same record with its answers past the range loads (each case breaks one number of it)
    (t,) = probe_output(_probe_doc(max_ns=1_500_000, min_ns=1_200_000, avg_ns=1_300_000), {}, "p.json").threads
    assert t.max_us == 1500 and t.overflows == 5
    with pytest.raises(InputError, match="probe") as e:
        probe_output(_probe_doc(**result), {}, "probe.json")
    assert why in str(e.value) and str(e.value).startswith("probe.json:")


def test_the_same_probe_reply_on_the_wire_is_refused():
    from rtlab.lab.irqprotocol import ArmRequest, ProbeError, parse_result
    arm = ArmRequest(period_us=1000, pulse_us=10, samples=5, timeout_s=10)
    line = ("RESULT sent=5 answered=5 missed=0 min_ns=0 avg_ns=0 max_ns=0 bucket_ns=1000 overflows=5 "
            "ready=1 timed_out=0")
    with pytest.raises(ProbeError, match="overflows past 1000000 ns, but max_ns 0"):
        parse_result(line, [], arm)
