"""A breach is the host's only where its late samples fall inside the host's
stalls on their own CPU (rtlab.core.hostattr, issue 47): `rtlab run` on the
local board, the real cyclictest, stall witness and /proc/stat.

- a SCHED_FIFO 99 spin on every CPU (bench/stealer.py; heavier than the
  issue's 120 us every 3 ms, so that p99 breaks on any day): FAIL, never
  INFRA, however the VM's steal rises with it;
- the job frozen 120 ms every 180 ms (bench/hoststall.py: its cgroup, as a
  paused VM stops every vCPU; a hypervisor cannot be made to steal): INFRA,
  measured again twice, never FAIL;
- a SCHED_FIFO 99 spin of 30 ms every 500 ms on cpu0: FAIL.

Latency of this machine decides the verdicts: `serial` (make test runs them
alone, last)."""
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import ROOT, RTLAB

sys.path.insert(0, str(ROOT / "bench"))
import hoststall  # noqa: E402
import stealer  # noqa: E402

pytestmark = pytest.mark.serial


def campaign(tmp_path: Path, budgets: str) -> Path:
    b = tmp_path / "budgets.yaml"
    b.write_text(textwrap.dedent(budgets))
    c = tmp_path / "campaign.yaml"
    c.write_text(textwrap.dedent(f"""
        name: host-attribution
        budgets: {b}
        boards: [local]
        suites:
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: 5, priority: 90}}
    """))
    return c


#: budgets/default.yaml's local cyclictest idle limits
SHIPPED = """
    budgets:
      local: {"*": {cyclictest: {idle: {max_us: 20000, percentiles_us: {"99": 300}}}}}
"""


def start(tmp_path: Path, budgets: str) -> subprocess.Popen:
    env = {**os.environ, "RTLAB_LOCK_DIR": str(tmp_path / "locks")}
    return subprocess.Popen([*RTLAB, "run", "--campaign", str(campaign(tmp_path, budgets)), "--results",
                             str(tmp_path / "r"), "--no-publish"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finished(p: subprocess.Popen) -> tuple[str, dict]:
    out = p.communicate(timeout=600)[0]
    assert "results: " in out, out
    run_dir = Path(out.split("results: ")[-1].split()[0])
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    return out, job


def test_a_fifo_spin_on_every_cpu_is_fail_never_infra(tmp_path):
    with stealer.stealing(sorted(os.sched_getaffinity(0)), spin_us=400, period_ms=4, max_s=300, priority=99):
        p = start(tmp_path, SHIPPED)
        out, job = finished(p)
    assert p.returncode == 1, out
    (m,) = job["measurements"]
    # (a host stall of 20 ms or more in the same run breaks the max too, and
    # its line comes first: the p99's is the spin's, wherever it stands)
    assert m["verdict"] == "fail" and any(r.startswith("p99 ") for r in m["reasons"]), m["reasons"]
    assert job["retries"] == [], f"an attempt was judged the host's: {job['retries']}"
    hd = m["host_delays"]  # every late sample recorded and placed; few of them in a stall of the host
    assert hd["recorded"] == hd["total"] > 100 and len(hd["delayed"]) < hd["recorded"] / 4, hd["delayed"][:5]


#: limits this loaded machine's own noise never reaches (it stops one CPU
#: for up to ~50 ms under other users' load: the kernel's, not the host's),
#: and the stalls below break both
OVER_THE_NOISE = """
    budgets:
      local: {"*": {cyclictest: {idle: {max_us: 100000, percentiles_us: {"99": 2000}}}}}
"""


def test_a_stall_of_the_whole_machine_is_infra_measured_again(tmp_path):
    # 120 ms of every 180: one wake-up in ~60 late by 120 ms on each CPU, so
    # the max and p99 break, every late sample inside a stall of every CPU
    p = start(tmp_path, OVER_THE_NOISE)
    time.sleep(1.0)
    with hoststall.Stalling(p.pid, stall_ms=120, period_ms=180) as s:
        out, job = finished(p)
    assert s.stalls > 20
    assert p.returncode == 2, out
    (m,) = job["measurements"]
    assert m["verdict"] == "infra" and m["infra_cause"] in ("host-stall", "host-steal"), m["reasons"]
    assert m["reasons"][0].startswith(("host stalled", "host stole")) and "max: " in m["reasons"][0] \
        and "p99: " in m["reasons"][0], m["reasons"]
    assert [r["causes"] for r in job["retries"]] and len(job["retries"]) == 2, job["retries"]
    assert "measuring cyclictest@idle again (2/2)" in out


def test_a_30_ms_spin_on_one_cpu_is_fail(tmp_path):
    with stealer.stealing([0], spin_us=30000, period_ms=500, max_s=300, priority=99):
        p = start(tmp_path, SHIPPED)
        out, job = finished(p)
    assert p.returncode == 1, out
    (m,) = job["measurements"]
    assert m["verdict"] == "fail" and m["reasons"][0].startswith("max "), m["reasons"]
    # the spun CPU broke the max (the line names the worst thread: a longer
    # host stall on the other CPU in the same run would be named instead)
    (cpu0,) = [t for t in m["output"]["threads"] if t["cpu"] == 0]
    assert cpu0["max_us"] >= 20000, (cpu0["max_us"], m["reasons"])
    assert job["retries"] == [], job["retries"]
