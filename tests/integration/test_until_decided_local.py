"""`rtlab run --repeat-until-decided` on the local board (issue #23 item 2):
real cyclictest runs, a baseline from another `rtlab run`. Keys already
decided use no more board time: the second batch measures only the key the
first look left undecided.

Which key decides is made certain, not left to a loaded host's spread: the
policy's minimum effect is x51, so a key whose p99 and p99.9 lie inside the
histogram is shown unchanged at the first look (its upper bound is far
below x51 at any spread this host has); the other key's histogram is 2 us
wide, so its p99 is censored in every run, and a censored statistic can
never show that nothing regressed: more runs, up to the last look, then
UNDECIDED (exit 2)."""
import json
import textwrap

import pytest
from conftest import rtlab

#: latency measured on this machine: make test runs it last, alone (tests/conftest.py)
pytestmark = pytest.mark.serial

BUDGETS = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 10000000}}}}
    regression:
      statistics: [p99, p99.9]
      min_runs: 3
      looks: [3, 6]
      min_effect: {"*": {relative: 50, abs_us: 2}}
"""
SUITES = """
    - name: wide
      suite: cyclictest
      params: {interval_us: 1000, duration_s: 2, histogram_us: 20000}
    - name: narrow
      suite: cyclictest
      params: {interval_us: 1000, duration_s: 2, histogram_us: 2}
"""
WIDE, NARROW = "local/host/wide/idle", "local/host/narrow/idle"


def results_of(res) -> list:
    return [line.split("results: ", 1)[1].strip() for line in res.stdout.splitlines()
            if line.startswith("results: ")]


def valid(run_dir, suite) -> int:
    run = json.loads((run_dir / "run.json").read_text())
    return sum(1 for j in run["jobs"] for m in j["measurements"]
               if m["key"]["suite"] == suite and m["verdict"] != "infra")


def measured_suites(run_dir) -> set:
    run = json.loads((run_dir / "run.json").read_text())
    return {m["key"]["suite"] for j in run["jobs"] for m in j["measurements"]}


# make test-long: make test proves measuring until decided with
# test_separate_sessions_unchanged_is_green_and_an_injected_regression_red (below)
# and the job script's choices in tests/unit/test_ci_until_decided.py
@pytest.mark.long
def test_only_undecided_keys_are_measured_again(tmp_path, campaign):
    from pathlib import Path
    c = campaign(["local"], budgets=textwrap.dedent(BUDGETS), suites=SUITES)
    base = rtlab("run", "--campaign", c, "--results", tmp_path / "base", "--no-publish", "--repeat", "4",
                 timeout=900)
    (base_dir,) = results_of(base)
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "cand", "--no-publish",
                "--repeat-until-decided", "--baseline", base_dir, timeout=1800)
    out = res.stdout + res.stderr
    dirs = [Path(d) for d in results_of(res)]
    # the narrow key is undecided at the last look: exit 2, named
    assert res.returncode == 2, out
    assert f"{NARROW}: " in out and "not decided at the maximum of 6 candidate runs" in out, out
    assert len(dirs) >= 2, out
    first, later = dirs[0], dirs[1:]
    assert measured_suites(first) == {"wide", "narrow"}
    if valid(first, "wide") >= 3:
        # decided at the first look: never measured again
        for d in later:
            assert measured_suites(d) == {"narrow"}, d
    verdict = json.loads((dirs[-1] / "compare.json").read_text())
    keys = {k["label"]: k for k in verdict["keys"]}
    assert keys[WIDE]["outcome"] == "no-regression"
    assert keys[NARROW]["outcome"] == "undecided" and keys[NARROW]["n_candidate"] >= 6
    # every batch and every look recorded, in each batch's run dir
    assert [b["run_dir"] for b in verdict["batches"]] == [str(d) for d in dirs]
    assert verdict["batches"][0]["keys"] == sorted([NARROW, WIDE])
    assert verdict["batches"][1]["keys"] == [NARROW] or valid(first, "wide") < 3
    looks = [lk["runs"] for s in keys[NARROW]["statistics"] if s["gates"] for lk in s["looks"]]
    assert 3 in looks and 6 in looks
    assert json.loads((first / "compare.json").read_text()) == verdict
    assert f"batch 2: {dirs[1].name}: " in out


# make test-long: make test proves measuring until decided with
# test_separate_sessions_unchanged_is_green_and_an_injected_regression_red (below)
# and the job script's choices in tests/unit/test_ci_until_decided.py
@pytest.mark.long
def test_a_store_that_is_down_still_gets_the_first_look_measured(tmp_path, campaign):
    import socket
    from pathlib import Path
    with socket.socket() as s:  # a free port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = campaign(["local"], suites="""
        - name: cyclictest
          params: {interval_us: 1000, duration_s: 1, histogram_us: 20000}
    """)
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "cand", "--no-publish",
                "--repeat-until-decided", "--baseline-store", timeout=900,
                env={"RTLAB_INFLUX_URL": f"http://127.0.0.1:{port}"})
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "regression verdict: cannot decide: " in out and "regression verdict UNDECIDED" in out, out
    (d,) = [Path(x) for x in results_of(res)]
    run = json.loads((d / "run.json").read_text())
    # the built-in policy's first look: 5 repeats, kept on disk for the gate and the store
    assert sorted(j["repeat"] for j in run["jobs"]) == [1, 2, 3, 4, 5]


#: the closed design on the local board, as CI meets it: separate sessions
#: on both sides, each candidate measured until decided. alpha 1 % so the
#: unchanged case does not flap; looks at 3 and 6 (the cap: every key decided)
CLOSED = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 10000000}}}}
    regression:
      statistics: [p99, p99.9]
      alpha: 0.01
      min_runs: 3
      looks: [3, 6]
"""
ONE = """
    - name: cyclictest
      params: {interval_us: 1000, duration_s: 2, histogram_us: 20000}
"""


def test_separate_sessions_unchanged_is_green_and_an_injected_regression_red(tmp_path, campaign):
    import sys
    from pathlib import Path

    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "bench"))
    from stealer import stealing

    c = campaign(["local"], budgets=textwrap.dedent(CLOSED), suites=ONE)
    base = []
    for i in range(3):  # three baseline sessions: three separate invocations
        res = rtlab("run", "--campaign", c, "--results", tmp_path / f"b{i}", "--no-publish", "--repeat", "3",
                    timeout=900)
        base += results_of(res)
    assert len(base) == 3
    same = rtlab("run", "--campaign", c, "--results", tmp_path / "same", "--no-publish",
                 "--repeat-until-decided", "--baseline", *base, timeout=1800)
    out = same.stdout + same.stderr
    assert same.returncode == 0, out
    verdict = json.loads((Path(results_of(same)[-1]) / "compare.json").read_text())
    (key,) = verdict["keys"]
    assert key["outcome"] == "no-regression" and " sees +" in key["line"] and key["decided_by"], key
    # the injected regression (1500 us of SCHED_FIFO spin every 4 ms per CPU)
    with stealing(spin_us=1500, period_ms=4):
        worse = rtlab("run", "--campaign", c, "--results", tmp_path / "worse", "--no-publish",
                      "--repeat-until-decided", "--baseline", *base, timeout=1800)
    out = worse.stdout + worse.stderr
    assert worse.returncode == 1, out
    verdict = json.loads((Path(results_of(worse)[-1]) / "compare.json").read_text())
    (key,) = verdict["keys"]
    assert key["outcome"] == "regression" and key["line"].endswith(": REGRESSION"), key
