"""Lab hosts as network namespaces (rtlab.rack.hosts): a coordinator host and
two runner hosts, real labgrid-coordinator and real jobs, each in its own
namespace, reaching the coordinator over veths. A whole runner host dies
(every process in its namespace SIGKILLed): its place is released within T
by a reaper on another host and goes to the job queued there. Nothing of the
lab is left afterwards (namespaces, veths, processes)."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.rack.hosts import HostLab, leftovers
from conftest import wait_line
from test_rack_leases import HOLDER, T

BIN = Path(sys.executable).parent

PLACES = """
import json, sys, time
from rtlab.lab.coordinator import Coordinator, CoordinatorError
with Coordinator(sys.argv[1], timeout=15) as c:
    if sys.argv[2] == "declare":
        for n in ("x1", "x2"):
            c.ensure_place(n, [], {"board": "x"})
    print(json.dumps({n: p.acquired for n, p in c.places().items()}), flush=True)
    while sys.argv[2] == "watch":  # the coordinator as an outside observer sees it
        time.sleep(0.5)
        try:
            print(json.dumps({"t": time.time(), "held": {n: p.acquired for n, p in c.places().items()}}),
                  flush=True)
        except CoordinatorError:
            pass
"""


@pytest.fixture
def hosts(tmp_path):
    lab = HostLab(["runner-a", "runner-b"])
    try:
        lab.up()
    except Exception as e:  # noqa: BLE001
        lab.down()
        pytest.fail(f"network namespaces: {e} (needs CAP_NET_ADMIN)")
    try:
        yield lab
    finally:
        prefix = lab.prefix
        lab.down()
        assert leftovers(prefix) == [], "namespaces or veths left behind"


def coordinator_places(lab, addr, action="show") -> dict:
    out = subprocess.run(lab.command("coord", [sys.executable, "-c", PLACES, addr, action]), cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# make test-long: a dead host's place released within T: test_rack_leases.py's short form and
#   test_rack_service.py's lease test prove the reaper
@pytest.mark.long
def test_a_runner_host_that_dies_loses_its_place_to_the_next_host_within_T(hosts, tmp_path):
    addr = f"{hosts.coordinator.address}:20408"  # inside the coordinator's namespace: nobody else's port
    coord = hosts.popen("coord", [BIN / "labgrid-coordinator", "-l", addr], cwd=tmp_path,
                        stdout=open(tmp_path / "coordinator.log", "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            coordinator_places(hosts, addr, "declare")
            break
        except AssertionError:
            if time.monotonic() > deadline or coord.poll() is not None:
                raise
            time.sleep(1)

    def job(host, hold_s=600):
        return hosts.popen(host, [sys.executable, "-c", HOLDER, addr, T, 10, 1000, hold_s], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)

    a, b = job("runner-a"), job("runner-b")
    pa, pb = wait_line(a, "PLACE", 120).split()[1], wait_line(b, "PLACE", 120).split()[1]
    assert {pa, pb} == {"x1", "x2"}
    waiter = job("runner-a", hold_s=1)
    time.sleep(T)
    held = coordinator_places(hosts, addr)
    assert held[pb].startswith("runner-b/") and held[pa].startswith("runner-a/")

    watch = subprocess.Popen(hosts.command("coord", [sys.executable, "-c", PLACES, addr, "watch"]), cwd=ROOT,
                             stdout=open(tmp_path / "watch.jsonl", "w"))
    time.sleep(5)
    killed = hosts.kill_host("runner-b")  # power loss: the job, its threads, its children
    t_dead = time.time()
    assert killed >= 1 and hosts.pids("runner-b") == []
    line = wait_line(waiter, "PLACE", timeout=180)
    assert line.split()[1] == pb and line.split()[2].startswith("runner-a/")
    watch.kill()
    watch.wait()
    snaps = [json.loads(x) for x in (tmp_path / "watch.jsonl").read_text().splitlines()[1:]]
    freed = next(s["t"] for s in snaps if s["t"] > t_dead and not (s["held"].get(pb) or "").startswith("runner-b/"))
    # as the coordinator saw it: released within T (+ T/3 reaper period) of the
    # last renewal (at most T/3 before the kill), + a loaded machine's round trips
    assert freed - t_dead <= T + T / 3 + 10, freed - t_dead
    waiter.wait(120)
    assert waiter.returncode == 0
    for p in (a, b, waiter):
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
    coord.kill()
    coord.wait()
