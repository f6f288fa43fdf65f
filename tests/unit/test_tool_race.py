"""A tool that loses a start-up race of its own (Suite.start_race_exits) is
INFRA saying so, and the runner measures it again like a host-stolen
breach; any other crash stays a plain INFRA, measured once.

sigwaittest's race (rt-tests semathread(): the receiver blocks SIGUSR2 only
when it first runs, the sender signals 10 ms after start) killed it with
exit 140 on the local board under the irq load (programme, 2026-11-26);
in the next programme run it exited 0 with both receivers "not yet ready"
and no sample (InfraCause.NO_SAMPLES, measured again too). The runner goes
by the typed cause (Measurement.infra_cause), never by a reason's words."""
import json
from pathlib import Path

from rtlab.core.model import InfraCause, Measurement, MeasurementKey, ToolOutput, Verdict
from rtlab.run.results import TOOL_RACE, collect, tool_exit_problem
from rtlab.run.runner import cured_by_measuring_again
from rtlab.suites import SUITES, SuiteRun

from test_suites_unit import raw_dir  # the raw files of one suite run, on disk

RT = Path(__file__).resolve().parents[1] / "fixtures" / "rt-tests-2.4"


def collected(tmp_path, suite, rc, files, before=(), after=()):
    """The measurements rtlab.run.results.collect makes of raw files on disk."""
    run = SuiteRun(id=f"{suite}@irq", name=suite, suite=suite, load="irq", params=SUITES[suite].params({}),
                   cpus=(0, 1))
    raw_dir(tmp_path, run, files, rc)
    key = MeasurementKey(board="local", variant="host", suite=suite, load="irq")
    return collect(tmp_path, key, SUITES[suite], run, before=before, after=after)


def test_sigwaittest_killed_by_sigusr2_is_its_start_up_race(tmp_path):
    (m,) = collected(tmp_path, "sigwaittest", 140, {"stderr.txt": "User defined signal 2\n"})
    assert m.verdict == Verdict.INFRA and m.infra_cause == InfraCause.TOOL_RACE
    assert m.reasons[0].startswith(f"{TOOL_RACE}: sigwaittest exited with 140, killed by SIGUSR2"), m.reasons
    assert cured_by_measuring_again(m)
    # run.json keeps the cause, and reads it back typed
    assert Measurement.from_json(json.loads(json.dumps(m.to_json()))).infra_cause == InfraCause.TOOL_RACE


def test_a_tool_that_recorded_no_sample_is_measured_again(tmp_path):
    """The real capture: sigwaittest exited 0 under the irq load with both
    receivers "not yet ready" and 0 samples."""
    (m,) = collected(tmp_path, "sigwaittest", 0, {"sigwaittest.json": RT / "sigwaittest-irq-no-samples.json",
                                                   "stdout.txt": RT / "sigwaittest-irq-no-samples.txt"})
    assert m.verdict == Verdict.INFRA and m.infra_cause == InfraCause.NO_SAMPLES, m.reasons
    assert m.reasons[0] == "sigwaittest thread 0 (cpu 0) recorded 0 cycles"
    assert cured_by_measuring_again(m)
    # a load that died beside it: that is the measurement's problem, measured once
    (m,) = collected(tmp_path / "died", "sigwaittest", 0,
                     {"sigwaittest.json": RT / "sigwaittest-irq-no-samples.json"},
                     after=["load irq: 2 of its 6 processes exited during the measurement"])
    assert m.verdict == Verdict.INFRA and m.infra_cause is None and not cured_by_measuring_again(m)
    # samples in every thread: judged, no cause
    (m,) = collected(tmp_path / "ok", "sigwaittest", 0, {"sigwaittest.json": RT / "sigwaittest-t2.json"})
    assert m.verdict is None and m.infra_cause is None


def test_other_crashes_are_plain_infra_measured_once(tmp_path):
    (tmp_path / "stderr.txt").write_text("Segmentation fault\n")
    for suite, rc in [("sigwaittest", 139), ("svsematest", 140), ("cyclictest", 140)]:
        why = tool_exit_problem(SUITES[suite], rc, tmp_path)
        assert why == f"{SUITES[suite].tool} exited with {rc}: Segmentation fault", why
        (m,) = collected(tmp_path / f"{suite}-{rc}", suite, rc, {"stderr.txt": "Segmentation fault\n"})
        assert m.verdict == Verdict.INFRA and m.infra_cause is None and not cured_by_measuring_again(m)
    # the race beside a load that died: not the race alone, measured once
    (m,) = collected(tmp_path / "load", "sigwaittest", 140, {"stderr.txt": "User defined signal 2\n"},
                     before=["load irq: 2 of its 6 processes exited"])
    assert m.reasons[0].startswith("load irq") and m.infra_cause is None and not cured_by_measuring_again(m)
    # (the runner measures again on the typed cause only: one set by the gate or collect)
    m = Measurement(MeasurementKey("b", "v", "s", "idle"), ToolOutput(path="", tool="s"), [],
                    verdict=Verdict.INFRA, reasons=[f"{TOOL_RACE}: x"])
    assert not cured_by_measuring_again(m), "a reason's words are not a cause"
    m.infra_cause, m.verdict = InfraCause.TOOL_RACE, Verdict.FAIL
    assert not cured_by_measuring_again(m)


def test_a_hostile_retries_list_is_refused_and_never_linked_out(tmp_path):
    """run.json comes from a merge request's job: the report lists and links
    each attempt measured again, so each must be an object with a string dir,
    and only a path inside the run becomes a link."""

    import pytest

    from rtlab.core.model import JobResult, RunResult
    from rtlab.errors import InputError
    from rtlab.report.runpage import host_noise_html
    from rtlab.run.results import load_run

    job = {"board": "local", "variant": "host", "measurements": []}
    for bad, words in [([5], "retries"), ([{"dir": 1}], "dir"), ([{"reasons": ["x"]}], "dir"),
                       ([{"dir": "d", "measured_again": "abc"}], "measured_again"),
                       ([{"dir": "d", "causes": ["rm -rf /"]}], "causes")]:
        (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "s",
                                                       "jobs": [{**job, "retries": bad}]}))
        with pytest.raises(InputError, match=words):
            load_run(tmp_path)
    # a measurement's cause is one rtlab knows, or the file is refused
    m = {"key": {"board": "b", "variant": "v", "suite": "s"}, "verdict": "infra", "infra_cause": "reboot-lab",
         "output": {"path": "", "tool": "s", "threads": []}}
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "s",
                                                   "jobs": [{**job, "measurements": [m]}]}))
    with pytest.raises(InputError, match="infra_cause"):
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
