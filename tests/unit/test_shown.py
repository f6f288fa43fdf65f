"""SHOWN: measured and judged against nothing (an ``unbudgeted`` suite, a
whole-run number that is not a latency) is never a pass. It reaches the
job, the run, the exit code, the summary, JUnit and the store as itself."""
import pytest

from rtlab.core.model import (EXIT_CODE, JobResult, Measurement, MeasurementKey, RunResult,
                              ThreadResult, ToolFailure, ToolOutput, Verdict, combine_verdicts)
from rtlab.judge.gate import judge
from rtlab.plan.budgets import Budget


def latency(suite="rt-migrate-test", metrics=None):
    out = ToolOutput(path="x", tool=suite, metrics=dict(metrics or {}),
                     threads=[ThreadResult(thread=0, cpu=0, min_us=1, avg_us=2, max_us=20000, cycles=100)])
    return Measurement(MeasurementKey("b", "rt", suite, "idle"), out, [])


def whole_run(tool, metrics, failure=None):
    out = ToolOutput(path="x", tool=tool, metrics=dict(metrics), failure=failure)
    return Measurement(MeasurementKey("b", "rt", tool, "idle"), out, [])


@pytest.mark.parametrize("parts, whole", [
    ([Verdict.PASS, Verdict.SHOWN], Verdict.PASS),      # something judged, and it passed
    ([Verdict.SHOWN, Verdict.SHOWN], Verdict.SHOWN),    # nothing judged: not a pass
    ([Verdict.SHOWN, Verdict.INFRA], Verdict.INFRA),
    ([Verdict.SHOWN, Verdict.FAIL, Verdict.INFRA], Verdict.FAIL),
])
def test_combined(parts, whole):
    assert combine_verdicts(parts) == whole


def test_nothing_judged_does_not_exit_0():
    assert EXIT_CODE[Verdict.SHOWN] != 0 and EXIT_CODE[Verdict.PASS] == 0


def test_unbudgeted_latencies_are_shown_unless_the_tool_checked_itself():
    m = judge(latency(), None, unbudgeted=True, where="default.yaml")
    assert m.verdict == Verdict.SHOWN and "shown, not judged" in m.reasons[0]
    # rt-migrate-test -c: its priority-order check passed, that is a judgement
    m = judge(latency(metrics={"failed": 0}), None, unbudgeted=True, where="default.yaml")
    assert m.verdict == Verdict.PASS and "own check passed" in m.reasons[0]
    # and failed: FAIL whatever the budget file says
    m = latency(metrics={"failed": 1})
    m.output.failure = ToolFailure("Failed!")
    assert judge(m, None, unbudgeted=True).verdict == Verdict.FAIL
    # a budget wins over the list
    assert judge(latency(), Budget(max_us=100_000), unbudgeted=True).verdict == Verdict.PASS


def test_whole_run_numbers_are_shown_unless_the_tool_checked_itself():
    import rtlab.suites  # noqa: F401 - registers hackbench and pi_stress
    m = judge(whole_run("hackbench", {"time_s": 1.5}), None)
    assert m.verdict == Verdict.SHOWN and "not latency" in m.reasons[0]
    m = judge(whole_run("pi_stress", {"inversions": 10, "failed": 0}), None)
    assert m.verdict == Verdict.PASS and "own check passed" in m.reasons[0]
    m = judge(whole_run("pi_stress", {"inversions": 3, "failed": 1}, ToolFailure("deadlock")), None)
    assert m.verdict == Verdict.FAIL


def _run(*verdicts):
    ms = []
    for i, v in enumerate(verdicts):
        m = latency(suite=f"s{i}")
        m.verdict, m.reasons = v, [f"why {i}"]
        ms.append(m)
    return RunResult("r1", "2026-11-26T00:00:00Z", "c",
                     jobs=[JobResult(board="b", variant="rt", budget_class="k", measurements=ms)])


def test_summary_junit_and_store_count_shown_apart_from_pass():
    from rtlab.report.junit import junit_xml
    from rtlab.report.table import comparison_table
    from rtlab.store.schema import VERDICT, points_for_run

    run = _run(Verdict.PASS, Verdict.SHOWN)
    assert run.verdict == Verdict.PASS
    text = comparison_table(run)
    assert "1 pass, 0 fail, 0 infra, 1 shown, not judged" in text
    root = junit_xml([run]).getroot()
    skipped = [tc for tc in root.iter("testcase") if tc.find("skipped") is not None]
    assert [tc.get("name") for tc in skipped] == ["s1@idle"]
    assert "why 1" in skipped[0].find("skipped").get("message")
    pts = [p for p in points_for_run(run) if p.measurement == VERDICT and p.tags.get("scope") == "measurement"]
    by_suite = {p.tags["suite"]: p.fields for p in pts}
    assert by_suite["s1"]["verdict"] == "shown" and by_suite["s1"]["shown"] == 1
    assert by_suite["s1"]["passed"] == 0 and by_suite["s0"]["passed"] == 1


def test_a_run_that_judged_nothing_is_shown_and_says_so():
    from rtlab.report.table import comparison_table
    run = _run(Verdict.SHOWN, Verdict.SHOWN)
    assert run.verdict == Verdict.SHOWN and run.jobs[0].verdict == Verdict.SHOWN
    assert "Verdict: SHOWN" in comparison_table(run)
    # and run.json says so and reads back
    assert RunResult.from_json(run.to_json()).verdict == Verdict.SHOWN
