"""`rtlab baseline plan`: what each key of a baseline can see before a merge
request pays for it (rtlab.verdict.planning), from runs on disk."""
import json

import numpy as np

from rtlab.cli import main
from rtlab.verdict.compare import compare_runs, load_runs
from rtlab.verdict.planning import plan_baseline
from rtlab.verdict.against import BaselineChoice, baseline_side

from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult, ToolOutput

from test_gate import thread

POLICY = """budgets:
  qemu-tcg: {"*": {"*": {"*": {max_us: 50000}}}}
regression:
  statistics: [p99]
  min_runs: 3
  detectable_limit: 0.6
"""


def write_run(d, p99: int, budgets: str):
    """A run of one key whose p99 is *p99* us (a 5 ms histogram: every run alike)."""
    d.mkdir(parents=True)
    counts = {10: 985, p99: 10, int(p99 * 1.5): 4, p99 * 3: 1}
    j = JobResult("qemu-x86_64", "rt", "x86_64", "qemu-tcg", duration_s=10)
    j.measurements.append(Measurement(MeasurementKey("qemu-x86_64", "rt", "cyclictest", "idle"),
                                      ToolOutput(path="x", tool="cyclictest", threads=[thread(counts, size=5000)]),
                                      raw=["cyclictest/cyclictest.json"]))
    (d / "run.json").write_text(json.dumps(RunResult(d.name, "2026-11-27T00:00:00Z", "ci", jobs=[j]).to_json()))
    (d / "budgets.yaml").write_text(budgets)
    return d


def baseline(tmp_path, sd, n=12, seed=1):
    rng = np.random.default_rng(seed)
    p99 = np.maximum(12, np.round(400 * np.exp(rng.normal(0, sd, n)))).astype(int)
    return [write_run(tmp_path / f"b{i}", int(v), POLICY) for i, v in enumerate(p99)]


def test_a_quiet_baseline_sees_little_and_a_noisy_one_is_flagged(tmp_path, capsys):
    quiet = baseline(tmp_path / "q", 0.05)
    assert main(["baseline", "plan", "--baseline", *map(str, quiet), "--json", str(tmp_path / "q.json")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "cyclictest" in ln)
    assert "p99 sees +" in line and "(policy +20 %)" in line and "at most 30" in line, line
    assert "FLAGGED" not in line and "plan: 1 keys, 0 flagged" in out
    doc = json.loads((tmp_path / "q.json").read_text())
    (k,) = doc["keys"]
    assert 0.2 <= k["detectable"] < 0.6 and not k["flagged"]
    (st,) = k["statistics"]
    # unchanged: decided early; at the detectable effect: found >= 1 - beta
    assert st["runs_unchanged"] < 15 and st["found_at_detectable"] >= 0.9, st
    noisy = baseline(tmp_path / "n", 0.6, n=4)
    assert main(["baseline", "plan", "--baseline", *map(str, noisy)]) == 0
    out = capsys.readouterr().out
    assert "FLAGGED: above the class's limit +60 %" in out and "plan: 1 keys, 1 flagged" in out, out


def test_the_plan_is_what_the_verdict_then_uses(tmp_path):
    # a candidate compared against the same baseline states the same detectable effect
    base = baseline(tmp_path / "b", 0.15)
    side, policy, _ = baseline_side(BaselineChoice(runs=tuple(base)), [])
    (kp,) = plan_baseline(side, policy).keys
    rng = np.random.default_rng(3)
    cand = [write_run(tmp_path / "c" / f"c{i}", int(400 * np.exp(rng.normal(0, 0.15))), POLICY) for i in range(5)]
    cmp = compare_runs(load_runs(base), load_runs(cand), policy)
    (k,) = cmp.keys
    (s,) = [s for s in k.stats if s.gates]
    assert abs(s.looks[0].detectable - kp.detectable) < 1e-9, (s.looks[0].detectable, kp.detectable)


def test_too_few_runs_cannot_be_planned(tmp_path, capsys):
    few = baseline(tmp_path / "f", 0.1, n=2)
    assert main(["baseline", "plan", "--baseline", *map(str, few)]) == 2
    assert "cannot be judged: 2 valid baseline runs, need 3" in capsys.readouterr().out


def test_a_flagged_key_gets_its_cure_printed(tmp_path, capsys):
    # 4 noisy runs: the key sees far more than its class's +60 %; the plan
    # names the baseline that would let it see that
    noisy = baseline(tmp_path / "n", 0.6, n=4)
    assert main(["baseline", "plan", "--baseline", *map(str, noisy), "--json", str(tmp_path / "n.json")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "cyclictest" in ln)
    assert "FLAGGED: above the class's limit +60 %: not gated. Cure: p99: a baseline of " in line, line
    assert "runs (now 4)" in line and line.endswith("to see +60 %"), line
    (k,) = json.loads((tmp_path / "n.json").read_text())["keys"]
    cure = k["statistics"][0]["cure"]
    assert cure["reached"] and cure["runs"] == 1 and cure["sessions"] > 4 and cure["detectable"] <= 0.6


def test_the_cure_is_a_baseline_that_sees_the_limit():
    # a key whose sessions hold half its variance, a baseline of 3 x 3: the
    # cure's baseline (and cap), simulated with the same variance, sees the
    # class's limit at its median; the baseline it has does not
    import math
    from rtlab.plan.policy import Policy
    from rtlab.verdict.cure import cure, schedule_to
    from rtlab.verdict.simulate import Scenario, simulate
    pol = Policy(statistics=("p99",))
    sd, rho = 0.4, 1.0   # within-session sd of the log; sessions as much again
    c = cure(sd ** 2, rho, True, 4, 3, 3, pol.schedule(), pol.alpha / 4, pol.beta, math.log1p(0.2), 1.0)
    assert c.reached and c.sessions > 3 and c.detectable <= 1.0, c
    total = (sd * math.sqrt(1 + rho),)
    now = simulate(Scenario(keys=4, pool=(3, 3), sd=total, tau_share=rho / (1 + rho), policy=pol), 200, 1)
    cured = simulate(Scenario(keys=4, pool=(c.sessions, c.runs), sd=total, tau_share=rho / (1 + rho),
                              policy=Policy(statistics=("p99",), looks=schedule_to(pol.schedule(), c.cap))),
                     200, 2)
    assert np.nanmedian(now.detectable) > 1.0
    assert np.nanmedian(cured.detectable) <= 1.0, (c, np.nanmedian(cured.detectable))
