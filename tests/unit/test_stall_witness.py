"""The whole-machine stall witness (rtlab.core.stallwitness): per-CPU
sampler processes whose common gap is a stall of the machine, and the
gate's use of it for a breached max with no steal to show for it."""
import json
import os
import signal
import time

import pytest

from rtlab.core import hostnoise
from rtlab.core.model import InfraCause, Verdict
from rtlab.core.stallwitness import Witnesses, intersect
from rtlab.judge.gate import judge
from rtlab.plan.budgets import Budget

from test_gate import meas, thread


def test_the_stall_is_the_time_every_cpu_was_stopped_at_once():
    assert intersect({"cpu0": [(1.0, 1.030)], "cpu1": [(1.010, 1.050)]}) == 20.0
    # one CPU stopped (a kernel latency there), the other ran: no stall
    assert intersect({"cpu0": [(1.0, 1.030)], "cpu1": []}) == 0.0
    assert intersect({"cpu0": [(1.0, 1.030)], "cpu1": [(2.0, 2.1)]}) == 0.0
    assert intersect({"cpu0": [(1.0, 1.030)]}) == 30.0
    assert intersect({}) == 0.0


def _paused(w: Witnesses, which, ms: float) -> None:
    """Stop some samplers for *ms* at once, as a paused VM stops every vCPU."""
    time.sleep(0.3)  # the samplers are up and sampling
    for cpu, p, _ in w.procs:
        if cpu in which:
            os.kill(p.pid, signal.SIGSTOP)
    time.sleep(ms / 1000)
    for cpu, p, _ in w.procs:
        if cpu in which:
            os.kill(p.pid, signal.SIGCONT)
    time.sleep(0.1)


def test_real_samplers_see_all_cpus_stopped_at_once_and_not_one(tmp_path):
    # the project's machines have 2 CPUs (one stopped must be told from all)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    assert len(cpus) == 2, "the witness is checked on a machine of 2 CPUs or more"
    w = Witnesses(cpus).start()
    _paused(w, set(cpus), 150)
    got = w.stop()
    assert got["stall_ms"] >= 100 and got["trusted"] is (os.geteuid() == 0), got
    assert "SCHED_FIFO 1 sampler pinned to each of 2 CPUs" in got["witness"]
    assert not w.dir.exists()  # its scratch files cleaned up
    w = Witnesses(cpus).start()
    _paused(w, {cpus[0]}, 150)
    got = w.stop()
    assert got["max_gap_ms"][f"cpu{cpus[0]}"] >= 100 and got["stall_ms"] < 50, got


def stalled(max_us, stall_ms, trusted=True, **extra):
    m = meas(thread({10: 999, max_us: 1}, size=100000))
    m.host_noise = {"burst_ms": 0.0, "burst_cpu": None, "tick_ms": 10.0, "steal_ms": {"cpu0": 0.0, "cpu1": 0.0},
                    "window_s": 10.0, "stall": {"stall_ms": stall_ms, "trusted": trusted,
                                                "witness": "a SCHED_FIFO 1 sampler pinned to each of 2 CPUs"},
                    **extra}
    return m


def test_a_max_the_machine_stall_explains_is_infra_measured_again():
    # the measured case: an idle run broke 20 ms at 26.9 ms with no steal
    m = judge(stalled(26900, 30.0), Budget(max_us=20000))
    assert m.verdict == Verdict.INFRA and m.infra_cause == InfraCause.HOST_STALL, m.reasons
    assert m.reasons[0].startswith("host stalled 30 ms on every CPU at once")
    assert "max 26900 us >= budget 20000 us" in m.reasons[1]


@pytest.mark.parametrize("max_us,stall,trusted,budget,why", [
    (26900, 5.0, True, Budget(max_us=20000), "5 ms of stall cannot explain 26.9 ms against 20"),
    (400000, 30.0, True, Budget(max_us=200000), "a 400 ms kernel stall is the kernel's"),
    (26900, 30.0, False, Budget(max_us=20000), "a real-time load could have stopped the samplers"),
    (26900, 30.0, True, Budget(max_us=20000, percentiles_us={"99": 5}), "a percentile broke too"),
    (26900, 0.0, True, Budget(max_us=20000), "no stall"),
])
def test_a_breach_the_stall_cannot_explain_stays_fail(max_us, stall, trusted, budget, why):
    m = judge(stalled(max_us, stall, trusted), budget)
    assert m.verdict == Verdict.FAIL, why
    assert not any(r.startswith("host stalled") for r in m.reasons)


def test_a_sampler_whose_parent_died_ends(tmp_path):
    # the runner and its keeper SIGKILLed: the samplers go with them
    import subprocess
    import sys
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-m', 'rtlab.core.stallwitness', '0', sys.argv[1]]); "
            "print(p.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "w.json")], stdout=subprocess.PIPE,
                              text=True)
    child = int(parent.stdout.readline())
    time.sleep(0.3)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") and \
            open(f"/proc/{child}/stat").read().split()[2] != "Z":
        time.sleep(0.05)
    alive = os.path.exists(f"/proc/{child}") and open(f"/proc/{child}/stat").read().split()[2] != "Z"
    assert not alive, "a sampler outlived the process that started it"


def test_the_watch_records_the_witness_and_a_realtime_load_untrusts_it(tmp_path, monkeypatch):
    inj = tmp_path / "stall.json"
    inj.write_text(json.dumps({"stall_ms": 42.0, "trusted": True, "witness": "injected"}))
    monkeypatch.setenv("RTLAB_HOST_STALL", str(inj))
    with hostnoise.watching(tmp_path / "a", witness=True):
        time.sleep(0.1)
    assert hostnoise.load(tmp_path / "a")["stall"] == {"stall_ms": 42.0, "trusted": True, "witness": "injected"}
    with hostnoise.watching(tmp_path / "b", witness=True, rt_load=True):
        time.sleep(0.1)
    st = hostnoise.load(tmp_path / "b")["stall"]
    assert st["trusted"] is False and "real-time threads" in st["why_not"]
    # a board that does not run on this host: no witness at all
    with hostnoise.watching(tmp_path / "c"):
        time.sleep(0.1)
    assert "stall" not in hostnoise.load(tmp_path / "c")
