"""Every load lives as long as the longest measurement under it, at the
shipped campaign's real durations on the local board.

The programme's integration test runs short durations, so it never saw the
irq load's stress-ng timer workers end on their own (``--timeout 0``: the
timer stressor checks every 65536 expiries whether the run is older than the
timeout, and 0 s always is; rtlab/loads/catalog.py STRESS_NG_TIMEOUT_S):
"load irq: 2 of its 6 processes exited during the measurement" in every
suite that outlasted 65536 expiries. Here the irq load runs, for real on this
machine, as long as the programme's longest measurement under it (each
suite's own duration bound: Suite.duration_s, what the console waits for)."""
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from rtlab.plan.campaign import load_campaign
from rtlab.loads import LOADS, LoadEnv
from rtlab.loads.catalog import STRESS_NG_TIMEOUT_S, StressNg
from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import BoardShell

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light


class LocalCommand:
    """labgrid CommandProtocol.run() over `sh -c` (the local board's console)."""

    def run(self, cmd, timeout=30):
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.stderr.splitlines(), p.returncode


def longest_under(campaign: str, board: str) -> dict[str, tuple[float, str]]:
    """load -> (longest duration bound of a measurement under it, suite)."""
    out: dict[str, tuple[float, str]] = {}
    for job in load_campaign(campaign, boards=[board]).jobs():
        for run in job.suites:
            d = SUITES[run.suite].duration_s(run)
            if d > out.get(run.load, (0.0, ""))[0]:
                out[run.load] = (d, run.name)
    return out


def test_stress_ng_loads_outlast_every_shipped_measurement():
    """No stress-ng load ends itself before rtlab stops it: its --timeout
    (its own deadline, load_deadline_s) is longer than the measurement it
    runs under, for every measurement of any campaign on any board."""
    from rtlab.plan.campaign import CAMPAIGN_DIR
    stress_ng = [l for l in LOADS.values() if isinstance(l, StressNg)]
    assert {l.name for l in stress_ng} >= {"cpu", "stress", "disk", "irq"}
    runs = [r for p in CAMPAIGN_DIR.glob("*.yaml") for j in load_campaign(p).jobs() for r in j.suites]
    for load in stress_ng:
        for r in runs:
            env = LoadEnv(sh=None, host_dir=Path("/nonexistent"), run=r, board={"name": "local", "kind": "local"},
                          cpus=[0, 1], mem_avail_kb=1 << 20, tmp_avail_kb=1 << 20)
            (_, cmd), = load.commands(env)
            timeout = re.search(r" --timeout (\d+) ", cmd)
            assert timeout and 2 * SUITES[r.suite].duration_s(r) <= int(timeout.group(1)) <= STRESS_NG_TIMEOUT_S, \
                (load.name, r.id, cmd)


@pytest.mark.long
def test_irq_load_lives_through_the_programmes_longest_measurement(tmp_path):
    seconds, suite = longest_under("programme", "local")["irq"]
    assert seconds >= 20, (seconds, suite)  # far past 65536 expiries at 20 kHz (3.3 s)
    run = SuiteRun(id=f"t{uuid.uuid4().hex[:8]}@irq", name=suite, suite="cyclictest", load="irq",
                   params=SUITES["cyclictest"].params({}), cpus=(0,))
    t0 = time.monotonic()
    with LOADS["irq"].running(BoardShell(LocalCommand()), tmp_path, run, board={
            "name": "local", "kind": "local", "arch": "x86_64"}):
        time.sleep(seconds)
    s = json.loads((tmp_path / "load-irq.json").read_text())
    assert time.monotonic() - t0 >= seconds
    assert s["problems"] == [] and s["window"]["problems"] == [], s["problems"] + s["window"]["problems"]
    assert s["window"]["window_s"] >= seconds
    m = s["throughput"]["stressors"]
    # both timer stressors ran the whole window: far more expiries than the
    # 65536 per worker the old --timeout 0 cut them off at
    workers = len(s["cpus"])
    assert m["timer"]["bogo_ops"] > 65536 * workers * 2, m
    assert m["timerfd"]["bogo_ops"] > 0
