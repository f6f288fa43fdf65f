"""The regression verdict on synthetic run sets with known answers."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from rtlab.verdict import stats
from rtlab.cli import main
from rtlab.verdict.compare import BLIND, NO_REGRESSION, REGRESSION, UNDECIDED, compare_runs
from rtlab.plan.policy import MinEffect, Policy, load_policy
from rtlab.errors import InputError
from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                         ToolOutput, Verdict)

KEY = MeasurementKey("qemu-aarch64", "rt", "cyclictest", "idle")
ROOT_BUDGETS = Path(__file__).resolve().parents[2] / "budgets" / "default.yaml"


def hist(p50, p99, p999, mx, bucket=1.0):
    """1000 samples: p50, p99 and p99.9 (nearest rank) and max as given (us)."""
    b = lambda us: int(round(us / bucket))  # noqa: E731
    counts = {}
    for idx, n in ((b(p50), 985), (b(p99), 10), (b(p999), 4), (b(mx), 1)):
        counts[idx] = counts.get(idx, 0) + n
    return Histogram(counts=counts, bucket_us=bucket, size=100000)


def run(run_id, p99, *, campaign="c", keys=(KEY,), bucket=1.0, infra=False, p999=None, mx=None,
        budget_class="qemu-tcg"):
    jobs = {}
    for k in keys:
        h = hist(10, p99, p999 or p99 * 1.5, mx or p99 * 3, bucket)
        t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=1, avg_us=11, max_us=mx or p99 * 3,
                         histogram=h)
        m = Measurement(k, ToolOutput(path="x", tool="cyclictest", threads=[t]),
                        verdict=Verdict.INFRA if infra else Verdict.PASS,
                        reasons=["load died"] if infra else [])
        jobs.setdefault((k.board, k.variant), JobResult(board=k.board, variant=k.variant,
                                                        budget_class=budget_class)).measurements.append(m)
    return RunResult(run_id=run_id, started="2026-11-23T00:00:00Z", campaign=campaign,
                     jobs=list(jobs.values()))


def runs(prefix, p99s, **kw):
    return [run(f"{prefix}{i}", v, **kw) for i, v in enumerate(p99s)]


def noisy(rng, n, level, sd=0.15):
    return list(np.round(level * np.exp(rng.normal(0, sd, n))))


def test_no_change_is_no_regression():
    rng = np.random.default_rng(1)
    cmp = compare_runs(runs("b", noisy(rng, 5, 24)), runs("c", noisy(rng, 5, 24)))
    assert cmp.outcome == NO_REGRESSION and cmp.exit_code == 0
    (k,) = cmp.keys
    assert k.outcome == NO_REGRESSION and k.line().endswith(": ok")
    assert "5 runs vs 5" in k.line()


def test_doubled_p99_is_a_regression_named_with_its_effect():
    rng = np.random.default_rng(2)
    cmp = compare_runs(runs("b", noisy(rng, 5, 24)), runs("c", noisy(rng, 5, 48)))
    assert cmp.outcome == REGRESSION and cmp.exit_code == 1
    line = cmp.keys[0].line()
    assert line.startswith("qemu-aarch64/rt/cyclictest/idle: p99") and line.endswith("REGRESSION")
    assert "5 runs vs 5" in line and " -> " in line
    s = cmp.keys[0].deciding
    assert 1.6 < s.test.ratio < 2.5 and s.test.ratio_low > 1
    assert s.p_adjusted < 0.05


def test_improvement_is_not_a_regression():
    rng = np.random.default_rng(3)
    cmp = compare_runs(runs("b", noisy(rng, 5, 48)), runs("c", noisy(rng, 5, 24)))
    assert cmp.outcome == NO_REGRESSION


def test_one_wild_outlier_run_is_no_false_alarm():
    # one candidate boot hit a host stall: its p99 is 20x, the other four unchanged
    rng = np.random.default_rng(4)
    cand = noisy(rng, 5, 24)
    cand[2] = 24 * 20
    base = runs("b", noisy(rng, 5, 24))
    # the pooled t-test does not call it a shift: the stall inflates the variance
    cmp = compare_runs(base, runs("c", cand))
    assert cmp.outcome != REGRESSION, cmp.lines()
    # ... nor shows it unchanged: the wild run keeps the bound wide, more runs decide
    assert cmp.keys[0].more and cmp.exit_code == 2


def test_different_run_counts_5_vs_20():
    rng = np.random.default_rng(5)
    base = runs("b", noisy(rng, 20, 24))
    cmp = compare_runs(base, runs("c", noisy(rng, 5, 44)))
    assert cmp.outcome == REGRESSION
    assert "5 runs vs 20" in cmp.keys[0].line()
    cmp = compare_runs(base, runs("c", noisy(rng, 5, 24)))
    assert cmp.outcome == NO_REGRESSION


def test_below_minimum_effect_never_gates():
    # +10 % that is perfectly consistent: significant, but under +20 %
    cmp = compare_runs(runs("b", [100, 101, 99, 100, 100]), runs("c", [110, 111, 109, 110, 110]),
                       Policy(statistics=("p99",)))
    assert cmp.outcome == NO_REGRESSION
    assert "below the minimum effect" in cmp.keys[0].line()
    # +100 % of 1 us is under the absolute minimum of +2 us
    cmp = compare_runs(runs("b", [1, 1, 1, 1, 1], p999=1, mx=1), runs("c", [2, 2, 2, 2, 2], p999=2, mx=2),
                       Policy(statistics=("p99",), min_effect={"*": MinEffect(0.2, 2.0)}))
    assert cmp.outcome != REGRESSION


def test_constant_values_fall_back_to_the_exact_rank_test():
    cmp = compare_runs(runs("b", [24] * 5), runs("c", [48] * 5), Policy(statistics=("p99",), alpha=0.1))
    s = cmp.keys[0].deciding
    assert "Mann-Whitney" in s.test.method
    assert s.test.p == pytest.approx(1 / 252)
    assert cmp.outcome == REGRESSION, cmp.lines()


def test_campaign_wide_false_alarm_rate_on_synthetic_a_a():
    # 100 A/A campaigns of 10 keys, 5 vs 5 runs: BH over 20 tests holds 5 %
    # (bench/bench_verdict.py measures it on real runs)
    rng = np.random.default_rng(6)
    keys = [MeasurementKey("b", "v", f"s{i}", "idle") for i in range(10)]
    alarms = 0
    for _ in range(100):
        def side(prefix):
            out = []
            for i in range(5):
                r = run(f"{prefix}{i}", 24, keys=keys)
                for j in r.jobs:
                    for m in j.measurements:
                        v = float(np.round(24 * np.exp(rng.normal(0, 0.2))))
                        t = m.output.threads[0]
                        t.histogram = hist(10, v, v * np.exp(rng.normal(0.4, 0.3)), v * 3)
                        t.max_us = v * 3
                out.append(r)
            return out
        alarms += compare_runs(side("b"), side("c")).outcome == REGRESSION
    assert alarms / 100 <= 0.05


def test_infra_runs_are_left_out_and_too_few_is_undecided():
    base = runs("b", [24, 25, 23])
    cand = runs("c", [50, 52]) + [run("c9", 50, infra=True)]
    cmp = compare_runs(base, cand)
    assert cmp.outcome == UNDECIDED and cmp.exit_code == 2
    line = cmp.keys[0].line()
    assert "~" in line and "2 valid candidate runs, need 3" in line and "c9: infra" in line


def test_empty_baseline_is_undecided():
    cmp = compare_runs([], runs("c", [24, 25, 26]))
    assert cmp.exit_code == 2 and "empty baseline" in cmp.lines()[2]


def test_key_on_one_side_only_names_run_and_key():
    other = MeasurementKey("qemu-aarch64", "rt", "cyclictest", "hackbench")
    base = runs("b", [24, 25, 23])
    cand = runs("c", [24, 25, 23], keys=(KEY, other))
    cmp = compare_runs(base, cand)
    assert cmp.exit_code == 2
    (k,) = [k for k in cmp.keys if k.key == other]
    assert k.outcome == UNDECIDED
    assert "qemu-aarch64/rt/cyclictest/hackbench" in k.line() and "c0, c1, c2" in k.line()


def test_different_campaigns_and_bucket_sizes_are_undecided():
    cmp = compare_runs(runs("b", [24, 25, 23], campaign="x"), runs("c", [24, 25, 23], campaign="y"))
    assert cmp.exit_code == 2
    assert "campaign x: runs b0, b1, b2" in cmp.problems[0] and "campaign y" in cmp.problems[0]
    cmp = compare_runs(runs("b", [24, 25, 23], bucket=10), runs("c", [20, 30, 20], bucket=1))
    assert cmp.exit_code == 2
    assert "bucket sizes differ: 1 us in c0, c1, c2; 10 us in b0, b1, b2" in cmp.keys[0].line()


def test_regression_wins_over_undecided_keys():
    other = MeasurementKey("qemu-aarch64", "rt", "cyclictest", "hackbench")
    rng = np.random.default_rng(7)
    base = runs("b", noisy(rng, 5, 24))
    cand = [run(f"c{i}", v, keys=(KEY, other)) for i, v in enumerate(noisy(rng, 5, 60))]
    assert compare_runs(base, cand).exit_code == 1


def test_policy_from_budget_file(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text("budgets: {}\nregression:\n  statistics: [p99]\n  alpha: 0.01\n"
                 "  min_effect: {local: {relative: 0.5, abs_us: 5}}\n")
    p = load_policy(f)
    assert p.statistics == ("p99",) and p.alpha == 0.01 and p.effect_for("local") == MinEffect(0.5, 5)
    assert p.effect_for("other") == MinEffect()
    for bad, what in (("statistics: [p98]", "regression.statistics: unknown statistic"),
                      ("alpha: .nan", "regression.alpha"), ("trim: 0.5", "regression.trim"),
                      ("min_runs: 1", "regression.min_runs"), ("bogus: 1", "regression.bogus")):
        f.write_text(f"budgets: {{}}\nregression:\n  {bad}\n")
        with pytest.raises(InputError, match=what):
            load_policy(f)


def _write(tmp_path, rs):
    dirs = []
    for r in rs:
        d = tmp_path / r.run_id
        d.mkdir()
        (d / "run.json").write_text(json.dumps(r.to_json()))
        dirs.append(str(d))
    return dirs


def test_cli_exit_codes_and_lines(tmp_path, capsys):
    rng = np.random.default_rng(8)
    base = _write(tmp_path, runs("b", [23, 25, 24, 26, 22]))
    same = _write(tmp_path, runs("s", [24, 22, 26, 25, 23]))
    worse = _write(tmp_path, runs("w", noisy(rng, 5, 50)))
    assert main(["compare", "--baseline", *base, "--candidate", *same]) == 0
    out = capsys.readouterr().out
    assert "compare: NO-REGRESSION" in out
    js = tmp_path / "cmp.json"
    assert main(["compare", "--baseline", *base, "--candidate", *worse, "--json", str(js)]) == 1
    out = capsys.readouterr().out
    assert "qemu-aarch64/rt/cyclictest/idle: p99 +" in out and ": REGRESSION" in out
    assert json.loads(js.read_text())["keys"][0]["outcome"] == "regression"
    assert main(["compare", "--baseline", str(tmp_path / "nope"), "--candidate", *same]) == 2
    assert "nope/run.json" in capsys.readouterr().err


def test_shift_test_needs_two_runs():
    with pytest.raises(ValueError):
        stats.shift_test([1.0], [1.0, 2.0])


def test_unknowable_statistic_is_undecided_unless_another_regressed():
    # p99.9 of one candidate run lies beyond a histogram of unknown range
    # (no size recorded): nothing bounds it
    def overflowing(r):
        t = r.jobs[0].measurements[0].output.threads[0]
        t.histogram = Histogram(counts={10: 985, int(t.histogram.percentile(99)): 10}, size=None, overflows=5)
        return r
    base = runs("b", [24, 25, 23, 24, 25])
    same = runs("c", [24, 26, 23, 24, 25])
    cmp = compare_runs(base, same[:4] + [overflowing(same[4])])
    assert cmp.exit_code == 2, cmp.lines()
    assert "p99.9 unknowable (beyond a histogram of unknown range) in c4" in cmp.keys[0].line()
    worse = runs("w", [60, 66, 58, 62, 64])
    cmp = compare_runs(base, worse[:4] + [overflowing(worse[4])])
    assert cmp.exit_code == 1 and cmp.keys[0].line().endswith("REGRESSION")


def censor(r, overflows=5, size=200):
    """The run's histogram cut at `size` us with `overflows` samples beyond
    it (cyclictest -h size): its p99.9 (rank 1001 of 1005) is among them."""
    t = r.jobs[0].measurements[0].output.threads[0]
    counts = {i: c for i, c in t.histogram.counts.items() if i < size}
    t.histogram = Histogram(counts=counts, bucket_us=1.0, size=size, overflows=overflows)
    t.max_us = 400_000.0 if overflows else t.max_us
    return r


def test_a_percentile_beyond_the_range_is_judged_by_the_share_past_it():
    # one candidate run's p99.9 beyond the 200 us range (5 of its 1005
    # samples past it): the statistic is judged by each run's share of
    # samples past the range, which every run knows exactly
    base = [censor(r, overflows=0) for r in runs("b", [24, 25, 23, 24, 26])]
    same = [censor(r, overflows=0) for r in runs("c", [24, 26, 23, 25, 24])]
    cmp = compare_runs(base, same[:4] + [censor(same[4])])
    (p999,) = [s for s in cmp.keys[0].stats if s.name == "p99.9"]
    assert p999.candidate_censored == [False] * 4 + [True] and p999.share_past_us == 200.0
    assert p999.candidate_share == [0, 0, 0, 0, 5 / 1000]  # cycles 1000: 995 recorded, 5 past
    assert "share past the range" in p999.test.method
    assert "p99.9 past its range: share " in cmp.keys[0].line() and "of samples past 200 us" in cmp.keys[0].line()
    # one wild candidate run among five: the key measures on (more runs can
    # decide it), never "cannot show that nothing regressed"
    assert cmp.exit_code == 2 and cmp.keys[0].more, cmp.lines()
    assert "censored statistic cannot show" not in "\n".join(cmp.lines())
    # at its last look it decides: the closed design's promise holds for
    # a censored statistic too
    cmp = compare_runs(base, same[:4] + [censor(same[4])], Policy(looks=(5,)))
    assert cmp.keys[0].outcome in (NO_REGRESSION, BLIND) and cmp.exit_code in (0, 3), cmp.lines()


def test_a_censored_percentile_with_samples_past_the_range_in_every_run_decides_by_their_share():
    # a busy tail: 20-40 of 1005 samples past the 200 us range in every run
    # (p99.9 censored in all of them): unchanged decides NO-REGRESSION,
    # saying how much of the samples may lie past the range; x3 the share
    # is a REGRESSION
    import random
    rng = random.Random(3)
    base = [censor(r, overflows=rng.randint(20, 40)) for r in runs("b", [24] * 10)]
    same = [censor(r, overflows=rng.randint(20, 40)) for r in runs("c", [24] * 5)]
    cmp = compare_runs(base, same)
    k = cmp.keys[0]
    assert cmp.exit_code == 0 and k.outcome == NO_REGRESSION, cmp.lines()
    assert "p99.9: no regression of +" in k.decided_by and "in the share past 200 us (at most " in k.decided_by
    worse = [censor(r, overflows=rng.randint(60, 120)) for r in runs("w", [24] * 5)]
    cmp = compare_runs(base, worse)
    assert cmp.exit_code == 1 and cmp.keys[0].line().endswith("REGRESSION"), cmp.lines()
    assert cmp.keys[0].deciding.share_past_us == 200.0


def test_a_censored_percentile_without_the_samples_past_the_range_is_undecided():
    # a store row without the overflow count: the share cannot be read
    base = [censor(r, overflows=0) for r in runs("b", [24, 25, 23, 24, 26])]
    same = [censor(r, overflows=0) for r in runs("c", [24, 26, 23, 25, 24])]
    from rtlab.verdict.compare import side_from_runs, compare_sides
    b, c = side_from_runs(base), side_from_runs(same[:4] + [censor(same[4])])
    for reps in c.keys.values():
        reps[4].overflows = None
    cmp = compare_sides(b, c)
    assert cmp.exit_code == 2 and "the samples past the range unknown in c4" in cmp.keys[0].line(), cmp.lines()


def test_a_kernel_stall_beyond_the_histogram_is_a_regression():
    # the latency-bug kernel under TCG: p99 unchanged, p99.9 of every
    # candidate run beyond the histogram (overflows), never "cannot decide"
    base = [censor(r, overflows=0, size=2000) for r in runs("b", [240, 250, 230, 260, 245], p999=1000, mx=4600)]
    bad = [censor(r, overflows=5, size=2000) for r in runs("w", [245, 240, 255, 235, 250], p999=1000)]
    cmp = compare_runs(base, bad, Policy(min_effect={"qemu-tcg": MinEffect(0.5, 200)}))
    k = cmp.keys[0]
    assert cmp.exit_code == 1, cmp.lines()
    assert k.deciding.name == "p99.9" and k.deciding.candidate_censored == [True] * 5
    # none of the baseline's samples past the range, 5 of every candidate
    # run's: no spread on either side, the exact rank test (1/252 at 5 vs 5)
    assert k.deciding.test.p == pytest.approx(1 / 252)
    assert "(0 % -> 0.5 % of samples past 2,000 us)" in k.line(), k.line()
    assert k.line().endswith("REGRESSION")


def test_statistics_per_budget_class_gate_the_max_on_tcg_only(tmp_path):
    budgets = tmp_path / "b.yaml"
    budgets.write_text("regression:\n  statistics:\n    '*': [p99, p99.9]\n    qemu-tcg: [p99, p99.9, max]\n")
    pol = load_policy(budgets)
    assert pol.statistics_for("qemu-tcg") == ("p99", "p99.9", "max")
    assert pol.statistics_for("rk3568") == ("p99", "p99.9")
    # the shipped file: the max's own minimum effect on TCG, the class's elsewhere
    shipped = load_policy(ROOT_BUDGETS)
    assert shipped.effect_for("qemu-tcg", "max") == MinEffect(1.0, 20000)
    assert shipped.effect_for("qemu-tcg", "p99") == MinEffect(0.5, 200)
    assert shipped.effect_for("rk3568", "max") == MinEffect(0.2, 2)
    # the max alone moved (a rare long section): the TCG class gates on it
    base = runs("b", [24, 25, 23, 24, 26], mx=4600)
    worse = runs("w", [24, 26, 23, 25, 24], mx=400_000)
    cmp = compare_runs(base, worse, pol)
    assert cmp.exit_code == 1 and cmp.keys[0].deciding.name == "max", cmp.lines()
    assert "max +" in cmp.keys[0].line()
    # ... a class gating on percentiles only does not
    base = runs("b", [24, 25, 23, 24, 26], mx=4600, budget_class="rk3568")
    worse = runs("w", [24, 26, 23, 25, 24], mx=400_000, budget_class="rk3568")
    assert compare_runs(base, worse, pol).exit_code == 0
    for bad, what in (("statistics: {qemu-tcg: [p98]}", "regression.statistics.qemu-tcg: unknown statistic 'p98'"),
                      ("statistics: {qemu-tcg: []}", "regression.statistics.qemu-tcg: needs at least one"),
                      ("min_effect: {qemu-tcg: {max: {relative: -1}}}",
                       "regression.min_effect.qemu-tcg.max: minimum effects must not be negative"),
                      ("min_effect: {qemu-tcg: {max: {ratio: 2}}}",
                       "regression.min_effect.qemu-tcg.max.ratio: unknown key"),
                      ("min_effect: {qemu-tcg: {p97: {relative: 1}}}",
                       "regression.min_effect.qemu-tcg.p97: unknown key")):
        budgets.write_text(f"regression:\n  {bad}\n")
        with pytest.raises(InputError, match=what):
            load_policy(budgets)


def test_gate_with_baseline_combines_budgets_and_regression(tmp_path, capsys):
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 1000}}}}\n'
                       'regression: {min_effect: {"*": {relative: 0.2, abs_us: 2}}}\n')
    base = _write(tmp_path, runs("b", [23, 25, 24, 26, 22]))
    worse = _write(tmp_path, runs("w", [50, 46, 52, 48, 55]))
    same = _write(tmp_path, runs("s", [24, 22, 26, 25, 23]))
    over = _write(tmp_path, runs("o", [24, 22, 26, 25, 400]))  # max 1200 us: over the budget
    gate = ["gate", "--budgets", str(budgets)]
    assert main([*gate, *same, "--baseline", *base]) == 0
    assert main([*gate, *worse, "--baseline", *base]) == 1
    out = capsys.readouterr().out
    assert "gate: exit 1 (budgets PASS, regression verdict REGRESSION)" in out
    assert main([*gate, *over, "--baseline", *base]) == 1
    assert main([*gate, *same, "--baseline", *base[:2]]) == 2  # too few baseline runs
    assert "need 3" in capsys.readouterr().out
    assert main([*gate, *same]) == 0  # without a baseline: the budgets alone, as before


def test_pipeline_compares_merge_requests_against_the_target_branch_baseline():
    import yaml
    from pathlib import Path

    ci = yaml.safe_load((Path(__file__).parents[2] / ".gitlab-ci.yml").read_text())
    rules = {r.get("if", ""): r for r in ci["workflow"]["rules"]}
    mr = rules['$CI_PIPELINE_SOURCE == "merge_request_event"']
    push = rules['$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH']
    # both sides of the comparison repeat enough for a verdict (min_runs 3)
    assert int(mr["variables"]["RTLAB_REPEAT"]) >= 3 and int(push["variables"]["RTLAB_REPEAT"]) >= 3
    assert '--repeat "$RTLAB_REPEAT"' in " ".join(ci["test"]["script"])
    # every stored run is filed under its branch; the default branch's are published
    # (ci/verdict.sh sets RTLAB_KERNEL_BRANCH and the baseline branch: tests/integration/test_gitlab_ci.py)
    assert any("ci/verdict.sh" in line for line in ci[".rtlab"]["before_script"])
    assert {"if": '$RTLAB_PUBLISH == "1"'} in ci["publish"]["rules"]
    gate = "\n".join(ci["gate"]["script"])
    assert '--baseline-store --branch "$RTLAB_BASELINE_BRANCH"' in gate
    assert '--pin "$RTLAB_BASELINE_PIN"' in gate
    # the JUnit of the gate carries the regression verdict: written after it
    assert gate.index("--baseline-store") < gate.index('junit $runs')


def test_budget_derived_from_repeated_runs(tmp_path, capsys):
    rng = np.random.default_rng(9)
    v = noisy(rng, 8, 25, sd=0.2)
    bound = stats.upper_prediction_bound(v, 0.99)
    assert max(v) < bound < 25 * np.exp(0.2 * 5)
    # one more run of the same kernel stays below it 99 % of the time
    more = 25 * np.exp(rng.normal(0, 0.2, 20000))
    assert 0.97 < np.mean(more < stats.upper_prediction_bound(list(25 * np.exp(rng.normal(0, 0.2, 50))))) < 1
    dirs = _write(tmp_path, runs("b", v))
    assert main(["baseline", "derive", *dirs]) == 0
    out = capsys.readouterr().out
    assert out.startswith("qemu-aarch64/rt/cyclictest/idle (qemu-tcg, 8 runs): {max_us: ")
    assert '"99": ' in out and '"99.9": ' in out


def test_a_budget_is_not_derived_from_a_censored_percentile(tmp_path, capsys):
    # p99.9 past a 200 us histogram in 3 of 8 runs is only "at least 200 us"
    # there: a bound from it would be a budget the board does not hold
    rng = np.random.default_rng(9)
    rs = runs("b", noisy(rng, 8, 25, sd=0.2))
    rs = [censor(r) if i < 3 else censor(r, overflows=0) for i, r in enumerate(rs)]
    for r in rs[:3]:
        r.jobs[0].measurements[0].output.threads[0].cycles += 5  # the samples past the range
    dirs = _write(tmp_path, rs)
    assert main(["baseline", "derive", *dirs, "--class", "new"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("  new:")
    assert '"99": ' in out and '"99.9": ' not in out
    assert ("  # qemu-aarch64/rt/cyclictest/idle: p99.9 past the 200 us histogram in 3 of 8 runs: not derived; "
            "measure again with the suite's histogram_us above it") in out


def test_a_derived_percentile_never_exceeds_the_derived_max(tmp_path, capsys):
    # p99.9 spread over a decade, the max steady just above it: each bound is
    # its own statistic's, and p99.9's alone would lie far above the max's
    rng = np.random.default_rng(4)
    p999 = [float(x) for x in np.round(np.exp(rng.uniform(np.log(100), np.log(1000), 8)))]
    rs = [run(f"b{i}", 50, p999=v, mx=1100 + i) for i, v in enumerate(p999)]
    dirs = _write(tmp_path, rs)
    assert stats.upper_prediction_bound(p999, 0.99) > stats.upper_prediction_bound([1100 + i for i in range(8)], 0.99)
    assert main(["baseline", "derive", *dirs, "--class", "new"]) == 0
    cls = yaml.safe_load("budgets:\n" + capsys.readouterr().out)["budgets"]["new"]
    limits = cls["rt"]["cyclictest"]["idle"]
    assert limits["percentiles_us"]["99.9"] == limits["max_us"], limits
