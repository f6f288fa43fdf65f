"""Verdicts: budgets judged on histograms; infra never becomes a latency verdict."""
from rtlab.plan.budgets import Budget
from rtlab.judge.gate import judge
from rtlab.core.model import (EXIT_CODE, Histogram, JobResult, Measurement, MeasurementKey,
                         RunResult, ThreadResult, ToolOutput, Verdict, combine_verdicts)
from rtlab.report.table import comparison_table

KEY = MeasurementKey("b", "rt", "cyclictest", "idle")


def thread(counts, size=200, overflows=0, max_us=None, cpu=0, thread=0):
    h = Histogram(counts=counts, size=size, overflows=overflows)
    vals = sorted(counts)
    cycles = h.total
    avg = sum(k * v for k, v in counts.items()) / max(1, h.recorded)
    return ThreadResult(thread=thread, cpu=cpu, cycles=cycles, min_us=vals[0], avg_us=avg,
                        max_us=max_us if max_us is not None else vals[-1],
                        overflows=overflows, histogram=h)


def meas(*threads, rc=0):
    return Measurement(KEY, ToolOutput(path="x", tool="cyclictest", threads=list(threads), return_code=rc))


def test_within_budget_passes_and_share_is_zero():
    m = judge(meas(thread({10: 990, 40: 10})), Budget(max_us=100, percentiles_us={"99.9": 50}))
    assert m.verdict == Verdict.PASS and m.share_over_budget == 0.0 and m.reasons == []


def test_max_at_budget_fails_with_share_and_reason():
    m = judge(meas(thread({10: 999, 100: 1})), Budget(max_us=100))
    assert m.verdict == Verdict.FAIL
    assert m.share_over_budget == 1 / 1000
    assert "max 100 us >= budget 100 us" in m.reasons[0]


def test_percentile_budget_uses_all_threads():
    # thread 0 alone is fine at p99; with thread 1 the combined p99 moves up
    m = judge(meas(thread({5: 100}), thread({60: 100}, thread=1, cpu=1)),
              Budget(percentiles_us={"99": 50}))
    assert m.verdict == Verdict.FAIL and "p99 60 us >= budget 50 us" in m.reasons[0]


def test_percentile_beyond_histogram_range_is_a_failure_not_a_guess():
    m = judge(meas(thread({5: 90}, size=20, overflows=10, max_us=300)), Budget(percentiles_us={"99": 10}))
    assert m.verdict == Verdict.FAIL and "beyond the histogram range" in m.reasons[0]


def test_percentile_without_histogram_cannot_be_judged():
    t = ThreadResult(thread=0, cpu=0, cycles=10, min_us=1, avg_us=2, max_us=3)
    m = judge(meas(t), Budget(percentiles_us={"99": 10}))
    assert m.verdict == Verdict.INFRA


def test_tool_error_is_infra_even_with_numbers_over_budget():
    m = judge(meas(thread({500: 10}), rc=1), Budget(max_us=100))
    assert m.verdict == Verdict.INFRA and "returned 1" in m.reasons[0]


def test_infra_set_by_runner_is_never_rejudged():
    m = Measurement(KEY, ToolOutput(path="", tool="cyclictest"), verdict=Verdict.INFRA, reasons=["load died"])
    assert judge(m, Budget(max_us=1)).verdict == Verdict.INFRA


def test_verdicts_combine_fail_over_infra_over_pass():
    assert combine_verdicts([Verdict.PASS, Verdict.PASS]) == Verdict.PASS
    assert combine_verdicts([Verdict.PASS, Verdict.INFRA]) == Verdict.INFRA
    assert combine_verdicts([Verdict.INFRA, Verdict.FAIL]) == Verdict.FAIL
    assert combine_verdicts([Verdict.PASS, None]) == Verdict.INFRA  # never judged is not a pass
    job = JobResult(board="b", variant="rt", infra_error="boot failed: no prompt")
    assert job.verdict == Verdict.INFRA
    assert EXIT_CODE[RunResult("r", "t", "c", jobs=[job]).verdict] == 2
    assert EXIT_CODE[RunResult("r", "t", "c", jobs=[]).verdict] == 2


def test_table_puts_variants_side_by_side_and_lists_reasons():
    ok = meas(thread({10: 1000}))
    judge(ok, Budget(max_us=100))
    bad = Measurement(MeasurementKey("b", "none", "cyclictest", "idle"),
                      ToolOutput(path="x", tool="cyclictest", threads=[thread({10: 990, 150: 10})]))
    judge(bad, Budget(max_us=100))
    run = RunResult("r", "t", "c", jobs=[
        JobResult(board="b", variant="none", arch="aarch64", budget_class="k", measurements=[bad]),
        JobResult(board="b", variant="rt", arch="aarch64", budget_class="k", measurements=[ok]),
        JobResult(board="b", variant="rt-iso", arch="aarch64", budget_class="k", infra_error="no prompt"),
    ])
    table = comparison_table(run)
    header = next(l for l in table.splitlines() if "rt-iso" in l and "none" in l)
    assert header.split() == ["none", "rt", "rt-iso"]
    maxrow = next(l for l in table.splitlines() if l.startswith("max "))
    assert maxrow.split()[1:] == ["150", "10", "-"]
    share = next(l for l in table.splitlines() if l.startswith(">= budget"))
    assert share.split()[2:] == ["1%", "0", "-"]
    verdict = next(l for l in table.splitlines() if l.startswith("verdict"))
    assert verdict.split()[1:] == ["FAIL", "PASS", "INFRA"]
    assert "INFRA b/rt-iso: no prompt" in table and "FAIL b/none/cyclictest/idle: max 150 us" in table
    assert run.verdict == Verdict.FAIL


def test_run_result_round_trips_through_json():
    m = judge(meas(thread({10: 990, 40: 10})), Budget(max_us=100))
    run = RunResult("r", "2026-01-01T00:00:00Z", "c", commit={"sha": "abc"},
                    jobs=[JobResult(board="b", variant="rt", kernel={"release": "6.1"}, measurements=[m])])
    again = RunResult.from_json(run.to_json())
    assert again.to_json() == run.to_json()
    assert again.jobs[0].measurements[0].output.threads[0].histogram.counts == {10: 990, 40: 10}


# -- holes found by fault injection: no budget, runs cut short, nan/inf -----
def _run_with(m, budget_class="k"):
    return RunResult(run_id="r", started="2026-11-23T00:00:00Z", campaign="c",
                     jobs=[JobResult(board="b", variant="rt", budget_class=budget_class, measurements=[m])])


def test_no_budget_is_an_error_naming_the_key_unless_declared_unbudgeted(tmp_path):
    from rtlab.plan.budgets import load_budgets
    from rtlab.judge.gate import judge_run

    f = tmp_path / "budgets.yaml"
    # a typo in the class name: nothing matches the board's class "k"
    f.write_text('budgets:\n  kk: {"*": {"*": {"*": {max_us: 100}}}}\n')
    run = judge_run(_run_with(meas(thread({10: 100}))), load_budgets(f))
    m = run.jobs[0].measurements[0]
    assert m.verdict == Verdict.INFRA and run.verdict == Verdict.INFRA
    assert "no budget for b/rt/cyclictest/idle in budgets.yaml (budget class k)" in m.reasons[0]
    # an empty budget file: the same, never a green gate
    f.write_text("budgets: {}\n")
    assert judge_run(_run_with(meas(thread({10: 100}))), load_budgets(f)).verdict == Verdict.INFRA
    # said on purpose: shown, judged against nothing, so never passed
    f.write_text("budgets: {}\nunbudgeted:\n  k: [cyclictest]\n")
    run = judge_run(_run_with(meas(thread({10: 100}))), load_budgets(f))
    assert run.verdict == Verdict.SHOWN and "unbudgeted by budgets.yaml" in run.jobs[0].measurements[0].reasons[0]
    assert EXIT_CODE[run.verdict] != 0
    f.write_text('budgets: {}\nunbudgeted:\n  "*": [other]\n')
    assert judge_run(_run_with(meas(thread({10: 100}))), load_budgets(f)).verdict == Verdict.INFRA


def test_zero_cycles_is_infra_never_pass_or_fail():
    t = ThreadResult(thread=0, cpu=1, cycles=0, min_us=0, avg_us=0, max_us=0)
    m = judge(meas(t), Budget(max_us=100))
    assert m.verdict == Verdict.INFRA and "thread 0 (cpu 1) recorded 0 cycles" in m.reasons[0]


def test_run_cut_short_is_infra(tmp_path):
    from rtlab.judge.gate import sample_problems
    from rtlab.suites import SUITES, SuiteRun

    suite = SUITES["cyclictest"]
    run = SuiteRun(id="c@idle", name="cyclictest", suite="cyclictest", load="idle",
                   params=suite.params({"duration_s": 20, "interval_us": 1000}), cpus=(0,))
    assert suite.expected_samples(run) == 20000
    # cyclictest got SIGTERM at 3 s of 20 s and exited 0 with what it had
    short = ToolOutput(path="x", tool="cyclictest", threads=[thread({10: 3326})])
    (why,) = sample_problems(short, suite.expected_samples(run))
    assert "cut short: 3326 of 20000 samples" in why
    assert sample_problems(ToolOutput(path="x", tool="cyclictest", threads=[thread({10: 18500})]), 20000) == []
    # with its run time known: SIGTERM at 3 s of 20 s is cut short ...
    (why,) = sample_problems(short, 20000, elapsed_s=3.1, duration_s=20)
    assert "3326 of 20000 samples in 3.1 s of 20 s" in why
    # ... a tool that ran its 20 s but missed periods (an overloaded TCG
    # board) measured latency: judged, not infra
    assert sample_problems(short, 20000, elapsed_s=20.2, duration_s=20) == []
    # killed early, with the interval known: its latencies explain nothing, still INFRA
    assert sample_problems(short, 20000, 1000)


def test_samples_lost_to_a_latency_bug_are_not_a_run_cut_short():
    """A thread held off its CPU for 400 ms every 900 ms skips the periods
    that pass meanwhile (cyclictest advances its next wake-up past now):
    11,200 of 20,000 samples, and the missing ones are its own latency, a
    FAIL to judge, never INFRA."""
    from rtlab.judge.gate import sample_problems

    hog = ThreadResult(thread=0, cpu=0, cycles=11200, min_us=5, avg_us=40, max_us=400500,
                       overflows=22, histogram=Histogram(counts={10: 11178}, bucket_us=1.0, overflows=22))
    out = ToolOutput(path="x", tool="cyclictest", threads=[hog])
    assert sample_problems(out, 20000, 1000) == []
    m = judge(meas(hog), Budget(max_us=200000))
    assert m.verdict == Verdict.FAIL
    # the same count with small latencies only: cut short
    assert sample_problems(ToolOutput(path="x", tool="cyclictest", threads=[thread({10: 11200})]), 20000, 1000)


def test_nan_and_inf_limits_are_rejected_at_load(tmp_path):
    import pytest

    from rtlab.plan.budgets import load_budgets
    from rtlab.errors import InputError

    f = tmp_path / "budgets.yaml"
    for bad in (".nan", ".inf", "-.inf"):
        f.write_text(f'budgets:\n  k: {{"*": {{"*": {{"*": {{max_us: {bad}}}}}}}}}\n')
        with pytest.raises(InputError, match=r"budgets.yaml: budgets.k.\*.\*.\*.max_us: must be a finite number"):
            load_budgets(f)
        f.write_text(f'budgets:\n  k: {{"*": {{"*": {{"*": {{percentiles_us: {{"99": {bad}}}}}}}}}}}\n')
        with pytest.raises(InputError, match=r'percentiles_us.99: must be a finite number'):
            load_budgets(f)


def test_run_time_from_exit_json_or_the_tools_own_json(tmp_path):
    import json

    from rtlab.run.results import read_elapsed

    (tmp_path / "exit.json").write_text(json.dumps({"exit_code": 0, "elapsed_s": 20.3}))
    assert read_elapsed(tmp_path) == 20.3
    (tmp_path / "exit.json").write_text(json.dumps({"exit_code": 0}))  # LAVA: no elapsed_s
    assert read_elapsed(tmp_path, "cyclictest.json") is None
    (tmp_path / "cyclictest.json").write_text(json.dumps(
        {"start_time": "Sat, 21 Nov 2026 06:13:15 +0000", "end_time": "Sat, 21 Nov 2026 06:13:18 +0000"}))
    assert read_elapsed(tmp_path, "cyclictest.json") == 4.0  # whole seconds: an upper bound


def test_summary_counts_infra_measurements_beside_a_fail():
    """One FAIL decides a job's verdict (and the exit code); the INFRA
    measurements beside it must still be counted in the summary line."""
    bad = judge(meas(thread({10: 999, 100: 1})), Budget(max_us=100))
    lost = []
    for load in ("irq", "cpu"):
        m = Measurement(MeasurementKey("b", "rt", "cyclictest", load),
                        ToolOutput(path="x", tool="cyclictest", threads=[thread({10: 100})]))
        m.verdict, m.reasons = Verdict.INFRA, [f"load {load}: died mid-run"]
        lost.append(m)
    run = RunResult("r", "2026-01-01T00:00:00Z", "c",
                    jobs=[JobResult(board="b", variant="rt", budget_class="k", measurements=[bad, *lost])])
    last = comparison_table(run).splitlines()[-1]
    assert run.verdict == Verdict.FAIL and EXIT_CODE[run.verdict] == 1
    assert last == ("Verdict: FAIL  (0 jobs pass, 1 over budget, 2 infra errors; "
                    "measurements: 0 pass, 1 fail, 2 infra)")
