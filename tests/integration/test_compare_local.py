"""The regression verdict on the local board, end to end: real cyclictest
runs, `rtlab run --repeat`, `rtlab compare`. An A/A comparison (same kernel,
interleaved repeats) says no regression; an injected regression (a
SCHED_FIFO thread stealing 150 us every 3 ms on each CPU, bench/stealer.py)
is named with its key and effect."""
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, rtlab, rtlab_retry_infra

#: latency measured on this machine: make test runs it last, alone (tests/conftest.py)
pytestmark = pytest.mark.serial

sys.path.insert(0, str(ROOT / "bench"))
from stealer import stealing  # noqa: E402

BUDGETS = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 10000000}}}}
    regression:
      statistics: [p99, p99.9]
      # 1 %: this test must not flap (5 % is the shipped policy's campaign rate)
      alpha: 0.01
      min_runs: 3
      # the sequential verdict looks after 3 candidate runs and after 6
      looks: [3, 6]
      min_effect: {"*": {relative: 0.2, abs_us: 2}}
"""
# a 20 ms histogram: a ~7 ms host stall must not make p99.9 unknowable
SUITES = """
    - name: cyclictest
      params: {interval_us: 1000, duration_s: 2, histogram_us: 20000}
"""


#: the injected regression: 1500 us of SCHED_FIFO spin every 4 ms per CPU
#: (p99 of a wake-up that meets it is the spin: several-fold). 150 us was
#: buried in the run-to-run spread of a loaded host (p99 121-224 us, the
#: ratio's interval -43 %..+152 % at 6 vs 7 runs: UNDECIDED, honestly), and
#: 500 us every 3 ms once in a fresh-clone CI run whose "idle" baseline had
#: p99 149-234 us and maxima of 0.7-3 ms (a stolen-from VM): p99 +116 %
#: [+4 %, +346 %], p=0.02 at 6 vs 7 runs, UNDECIDED
SPIN_US = 1500
SPIN_PERIOD_MS = 4


def run_dir_of(res):
    # a repeat the lab broke is INFRA (exit 2): the comparison leaves it out
    assert "results: " in res.stdout, res.stdout + res.stderr
    return Path(res.stdout.split("results: ")[-1].split()[0])


def valid_repeats(run_dir: Path) -> list[int]:
    run = json.loads((run_dir / "run.json").read_text())
    return [j["repeat"] for j in run["jobs"] if j["verdict"] != "infra"]


def split(run_dir: Path, out: Path, keep) -> Path:
    """A run made of some of a run's repeats (its own run id)."""
    run = json.loads((run_dir / "run.json").read_text())
    run["jobs"] = [j for j in run["jobs"] if j["repeat"] in keep]
    run["run_id"] += "-" + out.name
    out.mkdir()
    (out / "run.json").write_text(json.dumps(run))
    (out / "budgets.yaml").write_text((run_dir / "budgets.yaml").read_text())
    return out


# make test-long: the verdict's proof in make test is test_until_decided_local.py::
# test_separate_sessions_a_seen_regression_is_red_and_nothing_is_green_unseen (separate sessions, until decided)
@pytest.mark.long
def test_a_a_is_no_regression_and_injected_regression_is_named(tmp_path, campaign):
    c = campaign(["local"], budgets=textwrap.dedent(BUDGETS), suites=SUITES)
    # 7 repeats: one may be lost to the loaded host (INFRA) and 6 remain
    base = run_dir_of(rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish",
                            "--repeat", "7", timeout=600))
    assert sorted(p.name for p in (base / "local/host").iterdir() if p.is_dir()) == [f"r{i}" for i in range(1, 8)]
    valid = valid_repeats(base)
    assert len(valid) >= 6, valid
    # A/A: alternate valid repeats of the same kernel against each other
    # (interleaved in time, so the host's drift hits both sides alike)
    odd = split(base, tmp_path / "odd", set(valid[0::2]))
    even = split(base, tmp_path / "even", set(valid[1::2]))
    aa = rtlab("compare", "--baseline", odd, "--candidate", even)
    # unchanged: never a regression; shown unchanged (0) when 3 runs bound it
    # below what it can see, else "measure more" (2), or not gated (3) where
    # what it can see is above the class's +100 %: never a pass it could not show
    assert aa.returncode in (0, 2, 3), aa.stdout + aa.stderr
    assert "local/host/cyclictest/idle: p99" in aa.stdout and " runs vs " in aa.stdout
    assert aa.returncode != 2 or "measure more (next look at 6" in aa.stdout, aa.stdout
    assert aa.returncode != 3 or "not gated: local/host/cyclictest/idle: " in aa.stdout, aa.stdout
    assert f"policy: baseline run {odd}" in aa.stdout

    with stealing(spin_us=SPIN_US, period_ms=SPIN_PERIOD_MS):
        cand = run_dir_of(rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish",
                                "--repeat", "3", timeout=600))
    html = tmp_path / "compare.html"
    cands = [cand]
    reg = rtlab("compare", "--baseline", base, "--candidate", *cands, "--html", html)
    if reg.returncode == 2 and "measure more (next look at 6" in reg.stdout:
        # the sequential verdict's second look: 3 more candidate runs, a
        # second session (a loaded host can leave 3 runs undecided)
        with stealing(spin_us=SPIN_US, period_ms=SPIN_PERIOD_MS):
            cands.append(run_dir_of(rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish",
                                          "--repeat", "3", timeout=600)))
        reg = rtlab("compare", "--baseline", base, "--candidate", *cands, "--html", html)
    line = next(l for l in reg.stdout.splitlines() if l.startswith("local/host/cyclictest/idle:"))
    if reg.returncode == 3:  # a baseline of one session that cannot see +100 % on this day: never green
        assert line.endswith(": NOT GATED") and " not gated: sees only +" in line, line
        return
    assert reg.returncode == 1, reg.stdout + reg.stderr
    assert line.endswith(": REGRESSION") and f"runs vs {len(valid)}" in line
    assert f"look {len(cands)} at {3 * len(cands)} runs" in line, line
    # the effect, with its interval: p99 went up by well over the minimum effect
    effect = float(line.split(" +")[1].split(" %")[0])
    assert effect > 50, line
    assert "local/host/cyclictest/idle" in html.read_text()


def test_the_shipped_local_budget_fails_a_several_fold_p99(tmp_path, campaign):
    """budgets/default.yaml's local class has teeth beyond hangs: an idle
    cyclictest whose p99 went up several-fold (a SCHED_FIFO thread stealing
    400 us every 3 ms: p99 ~450 us against ~40-90 us unchanged) breaks the
    derived idle p99 limit of 300 us, by the percentile, not by the max."""
    # judged by the shipped file from the start, so the runner measures an
    # attempt the host's stalls explain again (up to twice) as CI would; a
    # run still explained so after that is INFRA, which CI retries: here once
    # more. A share of the window stolen no longer explains the spin's p99
    # (rtlab.core.hostattr: only the late samples inside a stall of their own
    # CPU come off), but a host that stalls through every attempt still can
    c = campaign(["local"], budgets=(ROOT / "budgets" / "default.yaml").read_text(), suites=SUITES)
    with stealing(spin_us=400, period_ms=3):
        res = rtlab_retry_infra("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish", timeout=600)
    run = run_dir_of(res)
    assert res.returncode == 1, res.stdout + res.stderr  # FAIL: never INFRA turned into a verdict
    gate = rtlab("gate", run, "--budgets", ROOT / "budgets" / "default.yaml")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    # the p99 reason must be there; a host stall may add a max reason before it (27 ms seen once)
    assert re.search(r"local/host/cyclictest/idle: (.*; )?p99 \d+ us >= budget 300 us", gate.stdout), gate.stdout
