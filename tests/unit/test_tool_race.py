"""A tool that loses a start-up race of its own (Suite.start_race_exits) is
INFRA saying so, and the runner measures it again like a host-stolen
breach; any other crash stays a plain INFRA, measured once.

sigwaittest's race (rt-tests semathread(): the receiver blocks SIGUSR2 only
when it first runs, the sender signals 10 ms after start) killed it with
exit 140 on the local board under the irq load (programme, 2026-11-26)."""
from rtlab.core.model import Measurement, MeasurementKey, ToolOutput, Verdict
from rtlab.run.results import TOOL_RACE, tool_exit_problem
from rtlab.run.runner import cured_by_measuring_again
from rtlab.suites import SUITES


def measurement(reasons):
    key = MeasurementKey(board="local", variant="host", suite="sigwaittest", load="irq")
    return Measurement(key, ToolOutput(path="", tool="sigwaittest"), [], verdict=Verdict.INFRA, reasons=reasons)


def test_sigwaittest_killed_by_sigusr2_is_its_start_up_race(tmp_path):
    (tmp_path / "stderr.txt").write_text("User defined signal 2\n")
    why = tool_exit_problem(SUITES["sigwaittest"], 140, tmp_path)
    assert why.startswith(f"{TOOL_RACE}: sigwaittest exited with 140, killed by SIGUSR2"), why
    assert cured_by_measuring_again(measurement([why]))


def test_other_crashes_are_plain_infra_measured_once(tmp_path):
    (tmp_path / "stderr.txt").write_text("Segmentation fault\n")
    for suite, rc in [("sigwaittest", 139), ("svsematest", 140), ("cyclictest", 140)]:
        why = tool_exit_problem(SUITES[suite], rc, tmp_path)
        assert why == f"{SUITES[suite].tool} exited with {rc}: Segmentation fault", why
        assert not cured_by_measuring_again(measurement([why]))
    # the race named second (a load died first) is not the measurement's cause
    assert not cured_by_measuring_again(measurement(["load irq: 2 of its 6 processes exited", f"{TOOL_RACE}: x"]))
    assert not cured_by_measuring_again(measurement([]))
    m = measurement([f"{TOOL_RACE}: x"])
    m.verdict = Verdict.FAIL
    assert not cured_by_measuring_again(m)


def test_a_hostile_retries_list_is_refused_and_never_linked_out(tmp_path):
    """run.json comes from a merge request's job: the report lists and links
    each attempt measured again, so each must be an object with a string dir,
    and only a path inside the run becomes a link."""
    import json

    import pytest

    from rtlab.core.model import JobResult, RunResult
    from rtlab.errors import InputError
    from rtlab.report.plot import host_noise_html
    from rtlab.run.results import load_run

    job = {"board": "local", "variant": "host", "measurements": []}
    for bad, words in [([5], "retries"), ([{"dir": 1}], "dir"), ([{"reasons": ["x"]}], "dir"),
                       ([{"dir": "d", "measured_again": "abc"}], "measured_again")]:
        (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "s",
                                                       "jobs": [{**job, "retries": bad}]}))
        with pytest.raises(InputError, match=words):
            load_run(tmp_path)
    html = "\n".join(host_noise_html(RunResult("r", "", "", jobs=[JobResult(
        board="b", variant="v", arch="x", budget_class="c",
        retries=[{"dir": "javascript:alert(1)", "reasons": []}, {"dir": "../../etc", "reasons": []},
                 {"dir": "measured-again/b-v/1", "reasons": ["tool start-up race: x"]}])])))
    assert "href='javascript" not in html and "href='../" not in html
    assert "<a href='measured-again/b-v/1'>" in html


def test_a_retry_keeps_every_measurement_of_the_suites_not_measured_again(tmp_path):
    """_merge_retry: the retry's measurements of the suites measured again,
    the earlier attempt's of the others (raw files moved back), in campaign
    order; a suite with two outputs (timerlat -irq/-thread) keeps both."""
    from rtlab.core.model import JobResult
    from rtlab.plan.campaign import Job
    from rtlab.run.runner import _merge_retry
    from rtlab.suites import SuiteRun
    from rtlab.targets.boards import load_boards
    from rtlab.targets.variants import load_variants

    runs = (SuiteRun(id="timerlat@idle", name="timerlat", suite="timerlat", load="idle"),
            SuiteRun(id="sigwaittest@irq", name="sigwaittest", suite="sigwaittest", load="irq"))
    job = Job(board=load_boards()["local"], variant=load_variants()["host"], suites=runs)

    def m(suite, load, verdict):
        return Measurement(MeasurementKey(board="local", variant="host", suite=suite, load=load),
                           ToolOutput(path="", tool=suite.split("-")[0]), [], verdict=verdict)
    before = JobResult(board="local", variant="host", arch="x86_64", budget_class="local", duration_s=10,
                       measurements=[m("timerlat-irq", "idle", Verdict.PASS), m("timerlat-thread", "idle", Verdict.PASS),
                                     m("sigwaittest", "irq", Verdict.INFRA)])
    retry = JobResult(board="local", variant="host", arch="x86_64", budget_class="local", duration_s=3,
                      measurements=[m("sigwaittest", "irq", Verdict.PASS)])
    kept, job_dir = tmp_path / "kept", tmp_path / "job"
    (kept / "timerlat@idle").mkdir(parents=True)
    (kept / "sigwaittest@irq").mkdir()
    (job_dir / "sigwaittest@irq").mkdir(parents=True)
    merged = _merge_retry(job, before, retry, runs[1:], kept, job_dir)
    assert [(x.key.suite, x.verdict) for x in merged.measurements] == [
        ("timerlat-irq", Verdict.PASS), ("timerlat-thread", Verdict.PASS), ("sigwaittest", Verdict.PASS)]
    assert (job_dir / "timerlat@idle").is_dir() and not (kept / "timerlat@idle").exists()
    assert (kept / "sigwaittest@irq").is_dir()  # the earlier attempt's raw files stay with it
    assert merged.duration_s == 13
