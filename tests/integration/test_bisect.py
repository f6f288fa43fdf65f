"""`rtlab bisect` on a real kernel history, booted on qemu-aarch64.

The history (tests/integration/kernel_project.py, make_bisect_history): 8
commits on Debian's linux-source-6.12, one-file changes, the 4th adds a
kthread that holds its CPU without preemption for 400 ms every 900 ms.
`git bisect run` builds each step's kernel (ccache: the pinned source's
qemu-aarch64 × preempt build is the one the GitLab pipeline test and the
kernel build test make too), boots it, measures cyclictest twice
and compares with 5 runs of the good commit (4 s of cyclictest at a 10 ms period). The culprit must be named in
at most ceil(log2 8) + 2 = 5 measured steps, confirmed (culprit regression,
parent not), and the tree left on its branch with no bisect state.

Bad input is refused before anything is touched: unknown SHA, good and bad
reversed, local changes, no history in the store for the key.

The store needs a history for the key: a real cyclictest run of this machine
published under qemu-aarch64/preempt/cyclictest/idle (what the store would
hold after the nightly runs; only its existence is checked).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kernel_project import git, make_bisect_history
from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult
from rtlab.store import InfluxV1, LocalInfluxd, StoreConfig, publish_run

# each step's verdict is 2 boots' latency against 5: a second guest beside them
# is emulation noise they would have to outvote (tests/conftest.py)
pytestmark = pytest.mark.guest_verdict

ROOT = Path(__file__).resolve().parents[2]
KEY = ["--board", "qemu-aarch64", "--variant", "preempt", "--suite", "cyclictest", "--load", "idle"]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    from rtlab.kernel import ensure_source
    src = ensure_source(progress=None)
    dest = tmp_path_factory.mktemp("kernel") / "linux"
    return {**make_bisect_history(src.path, dest), "tree": dest}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two databases of one real influxd: one empty, one with a history for the key."""
    from regression_history import real_outputs
    from rtlab.plan.budgets import Budget
    from rtlab.judge.gate import judge

    tmp = tmp_path_factory.mktemp("bisect-store")
    srv = LocalInfluxd(tmp / "state")
    srv.start()
    for db in ("empty", "lab"):
        InfluxV1(srv.url, db).create_database()
    (out,) = real_outputs(tmp, n=1)
    job = JobResult(board="qemu-aarch64", variant="preempt", arch="aarch64", budget_class="qemu-tcg")
    m = Measurement(MeasurementKey("qemu-aarch64", "preempt", "cyclictest", "idle"), out)
    judge(m, Budget(max_us=200000.0))
    job.measurements.append(m)
    run = RunResult(run_id="nightly-1", started=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    campaign="nightly", commit={"sha": "0" * 40}, jobs=[job])
    d = tmp / "results" / run.run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(run.to_json()))
    assert publish_run(d, progress=lambda s: None,
                       config=StoreConfig(url=srv.url, database="lab", spool_dir=str(tmp / "spool")).normalized()).ok
    yield {"url": srv.url, "state": tmp / "state"}
    srv.stop()


def bisect(stores, db, *args, timeout=3600):
    env = {**os.environ, "RTLAB_INFLUX_URL": stores["url"], "RTLAB_INFLUX_DB": db}
    return subprocess.run([sys.executable, "-m", "rtlab.cli", "bisect", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def tree_fingerprint(tree: Path) -> tuple:
    gitdir = tree / ".git"
    return (git(tree, "rev-parse", "HEAD"), git(tree, "symbolic-ref", "-q", "HEAD"),
            git(tree, "status", "--porcelain"), (gitdir / "BISECT_START").exists(),
            (gitdir / "BISECT_LOG").exists())


def test_bad_input_is_refused_and_the_tree_untouched(history, stores, tmp_path):
    tree, base, head = history["tree"], history["base"], history["commits"][-1]
    before = tree_fingerprint(tree)
    cases = [
        ("lab", ["--good", "deadbeef" * 5, "--bad", head], "unknown commit"),
        ("lab", ["--good", head, "--bad", base], "reversed"),
        ("empty", ["--good", base, "--bad", head], "no history for qemu-aarch64/preempt/cyclictest/idle"),
    ]
    for db, args, what in cases:
        r = bisect(stores, db, "--kernel-tree", tree, *args, *KEY, "--report", tmp_path / "r")
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.count("\n") == 1 and what in r.stderr, r.stderr
        assert tree_fingerprint(tree) == before
    # local changes: refused, and the change is still there afterwards
    f = tree / "Makefile"
    text = f.read_text()
    f.write_text(text + "# local change\n")
    try:
        r = bisect(stores, "lab", "--kernel-tree", tree, "--good", base, "--bad", head, *KEY)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "local changes" in r.stderr, r.stderr
        assert f.read_text().endswith("# local change\n")
    finally:
        f.write_text(text)
    assert tree_fingerprint(tree) == before
    assert not (tmp_path / "r").exists()


# the project's budgets, with a regression policy for this bisect: on a
# shared host a TCG vCPU stalls for tens of ms now and then (seen: a good
# commit's max 6 -> 47 ms, p=0.03 at 2 runs vs 5), so below +200 % and 100 ms
# nothing gates; the bug's 400 ms section is far beyond
BUDGETS = """
budgets:
  qemu-tcg: {"*": {"*": {"*": {max_us: 2000000}}}}
regression:
  # (and the max, which qemu-tcg gates: the 400 ms stall shows there.) No
  # p99.9: of a run's 400 samples it is the largest, so one TCG stall past the
  # 20 ms histogram leaves it censored, and a censored statistic cannot
  # confirm that the culprit's parent did not regress
  statistics: [p99]
  alpha: 0.05
  min_runs: 3
  min_effect:
    "*": {relative: 2.0, abs_us: 100000}
"""

CAMPAIGN = """
name: bisect-test
budgets: budgets.yaml
boards: [qemu-aarch64]
variants: [preempt]
suites:
  - name: cyclictest
    loads: [idle]
    # 10 ms: a period TCG keeps (at 1 ms it takes about half the samples);
    # 4 s: the threads' start-up under TCG stays under the gate's 10 % margin
    params: {interval_us: 10000, duration_s: 4, priority: 90, histogram_us: 20000}
"""


@pytest.mark.over_a_minute
def test_bisect_names_the_latency_bug_on_qemu_aarch64(history, stores, tmp_path):
    tree = history["tree"]
    before = tree_fingerprint(tree)
    n = len(history["commits"])
    report_dir = tmp_path / "report"
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(CAMPAIGN)
    (tmp_path / "budgets.yaml").write_text(BUDGETS)
    r = bisect(stores, "lab", "--kernel-tree", tree, "--good", history["base"], "--bad", history["commits"][-1],
               *KEY, "--repeat", 2, "--baseline-repeat", 5, "--campaign", campaign, "--report", report_dir)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    rep = json.loads((report_dir / "report.json").read_text())
    assert rep["first_bad"] == history["bug"] and rep["result"] == "confirmed"
    assert f"first bad commit: {history['bug']}" in r.stdout
    assert rep["commits"] == n and rep["max_steps"] == math.ceil(math.log2(n)) + 2
    assert 1 <= rep["measured_steps"] <= rep["max_steps"], rep["steps"]
    # every step: commit, verdict, numbers, time; bad steps are the bug or after it
    after_bug = set(history["commits"][history["commits"].index(history["bug"]):])
    for st in rep["steps"]:
        assert st["verdict"] in ("good", "bad", "skip") and st["seconds"] > 0 and st["lines"]
        if st["verdict"] == "bad":
            assert st["commit"] in after_bug
        elif st["verdict"] == "good":
            assert st["commit"] not in after_bug
    culprit, parent = rep["confirm"]["culprit"], rep["confirm"]["parent"]
    # the parent shows no regression of what it can see: decided, or not gated
    # where TCG's max spreads past the class's limit (blind: never "regression")
    assert culprit["outcome"] == "regression" and parent["outcome"] in ("no-regression", "blind")
    mx = culprit["attempts"][-1]["numbers"]["max"]
    # the 400 ms section in every run of the culprit (a good run under TCG
    # can stall that long too, once in a while: the verdict is the test's)
    assert min(mx["candidate"]) >= 300_000, mx
    text = (report_dir / "report.txt").read_text()
    assert history["bug"] in text and "effect: " in text and ": max +" in text and "boot" in text
    t = rep["timing"]
    assert t["build"] >= 0 and t["boot"] > 0 and t["measure"] > 0
    # the tree exactly as found
    assert tree_fingerprint(tree) == before and rep["restored"]
