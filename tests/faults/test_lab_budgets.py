"""The lab's budgets win (#40): a campaign from outside the lab's repository
(a trigger's RTLAB_CAMPAIGN pointing into the kernel tree under test) may
choose what is measured, never how it is judged."""
import json
from pathlib import Path

import yaml

from rtlab.core.model import Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput
from rtlab.core.model import Verdict

from .conftest import ROOT, rtlab

LOOSE = "budgets:\n  local: {'*': {'*': {'*': {max_us: 1000000000}}}}\n"


def fifo_hog_run() -> RunResult:
    """What the local board measured under the fifo-hog load: max 100,653 us
    (budgets/default.yaml allows 20 ms)."""
    t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=2, avg_us=103, max_us=100_653, overflows=1,
                     histogram=Histogram({2: 500, 3: 499}, 1.0, 400, 1))
    m = Measurement(MeasurementKey("local", "host", "cyclictest", "idle"),
                    ToolOutput("c.json", "cyclictest", [t]), verdict=Verdict.PASS)
    return RunResult("20261128T000000Z", "2026-11-28T00:00:00Z", "kernel-tree", {},
                     [JobResult("local", "host", "x86_64", "local", {}, [m], duration_s=3)])


def run_dir(path: Path, budgets: str) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(fifo_hog_run().to_json()))
    (path / "budgets.yaml").write_text(budgets)
    return path


def test_a_runs_own_loose_budgets_from_outside_the_lab_do_not_judge_it(tmp_path):
    d = run_dir(tmp_path / "run", LOOSE)
    res = rtlab("gate", d, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"judged by budgets {ROOT / 'budgets' / 'default.yaml'}" in res.stdout, res.stdout
    assert "none of the lab's budget files" in res.stdout
    assert "gate: FAIL over 1 run" in res.stdout


def test_a_run_kept_with_the_labs_own_budgets_is_judged_by_them(tmp_path):
    d = run_dir(tmp_path / "run", (ROOT / "budgets" / "default.yaml").read_text())
    res = rtlab("gate", d, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "the run's budgets.yaml is the lab's default.yaml" in res.stdout, res.stdout


def test_the_operators_budgets_still_judge_when_given(tmp_path):
    loose = tmp_path / "operator.yaml"
    loose.write_text(LOOSE)
    d = run_dir(tmp_path / "run", LOOSE)
    res = rtlab("gate", d, "--budgets", loose, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"judged by budgets {loose} (given with --budgets)" in res.stdout, res.stdout


def test_ci_measures_and_ingests_under_the_labs_budgets_never_the_campaigns():
    """The test jobs' `rtlab run`, `rtlab paired` and `lava submit --wait`
    name the lab's budget file (RTLAB_GATE_BUDGETS or budgets/default.yaml),
    so a campaign file that a trigger pointed into the kernel tree cannot
    loosen the test job's exit either; the gate re-judges by the rule above."""
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    policy = 'RTLAB_POLICY="${RTLAB_GATE_BUDGETS:-$RTLAB_HOME/budgets/default.yaml}"'
    test = "\n".join(ci["test"]["script"])
    assert policy in test
    runs = [c for c in test.split('"$RTLAB" ')[1:] if c.startswith(("run ", "paired "))]
    assert len(runs) == 2 and all('--budgets "$RTLAB_POLICY"' in c.split("||")[0] for c in runs), runs
    lava = "\n".join(ci["test-lava"]["script"])
    submit = next(c for c in lava.split('"$RTLAB" ')[1:] if c.startswith("lava submit"))
    assert '--budgets "${RTLAB_GATE_BUDGETS:-$RTLAB_HOME/budgets/default.yaml}"' in submit.split("||")[0]
