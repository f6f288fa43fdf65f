"""Leases on a real labgrid coordinator (no boards: places with tags only):
a job of another host that dies is released within T by a reaper that cannot
see its pids; a job that renews keeps its place past T; a coordinator that is
killed and restarted forgets its locks, and the holder locks its place again
before a waiting job may use it; aging lets a low-priority job through.

Each job is a separate process (``LG_HOSTNAME`` makes it another lab host),
so SIGKILL is what a dead runner host looks like to the coordinator.
"""
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.lab import places as P
from rtlab.lab.coordinator import Coordinator, CoordinatorError
from rtlab.core.procutil import free_port

from conftest import wait_line

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light

#: each test has a short form in make test (CI) and its full form, minutes of
#: real coordinator restarts and lease expiry, in `make test-long`
SHORT_AND_FULL = pytest.mark.parametrize("form", ["short", pytest.param("full", marks=pytest.mark.long)])

BIN = Path(sys.executable).parent
T = 6.0

HOLDER = textwrap.dedent("""
    import sys, time
    from rtlab.lab.places import PlaceLease
    lost = []
    lease = PlaceLease(sys.argv[1], {"board": "x"}, lease_s=float(sys.argv[2]),
                       prio=float(sys.argv[3]), aging_s=float(sys.argv[4]),
                       on_lost=lambda why: print("LOST", why, flush=True), say=lambda m: print(m, flush=True))
    lease.acquire()
    print("PLACE", lease.place, lease.owner, lease.waited_s, flush=True)
    time.sleep(float(sys.argv[5]))
    lease.release()
    print("RELEASED", flush=True)
""")


class Lab:
    def __init__(self, d: Path):
        self.dir = d
        self.addr = f"127.0.0.1:{free_port()}"
        self.coord = None
        self.jobs = []

    def start_coordinator(self):
        log = open(self.dir / "coordinator.log", "ab")
        self.coord = subprocess.Popen([str(BIN / "labgrid-coordinator"), "-l", self.addr], cwd=self.dir,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        with Coordinator(self.addr) as c:
            c.wait_ready(30)

    def kill_coordinator(self):
        os.killpg(self.coord.pid, signal.SIGKILL)
        self.coord.wait()

    def job(self, host, hold_s=600.0, prio=10.0, aging_s=1000.0, lease_s=T):
        env = {**os.environ, "LG_HOSTNAME": host, "PYTHONUNBUFFERED": "1"}
        p = subprocess.Popen([sys.executable, "-c", HOLDER, self.addr, str(lease_s), str(prio), str(aging_s),
                              str(hold_s)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        self.jobs.append(p)
        return p

    def places(self):
        # a coordinator that just restarted answers slowly on a loaded machine
        for _ in range(5):
            try:
                with Coordinator(self.addr, timeout=15) as c:
                    return c.places()
            except CoordinatorError:
                time.sleep(1)
        with Coordinator(self.addr, timeout=15) as c:
            return c.places()

    def reap(self):
        with Coordinator(self.addr) as c:
            return P.reap_stale(c, lease_s=T)


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path)
    lab.start_coordinator()
    with Coordinator(lab.addr) as c:
        for name in ("x1", "x2"):
            c.ensure_place(name, [], {"board": "x"})  # no resources: locks only
    try:
        yield lab
    finally:
        for k, p in enumerate(lab.jobs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            # what each job said (lease losses, yields, coordinator trouble):
            # printed with the failure report, so a failure's cause is captured
            print(f"--- job {k} (rc {p.returncode}):\n{p.stdout.read()}")
            p.stdout.close()
        print("--- coordinator.log:\n" + (lab.dir / "coordinator.log").read_text(errors="replace")[-3000:])
        if lab.coord and lab.coord.poll() is None:
            lab.kill_coordinator()


def test_a_dead_job_of_another_host_is_released_within_T_and_the_next_job_gets_it(lab):
    # short already (T = 6 s): in make test as it is
    a = lab.job("runner-a")
    b = lab.job("runner-b")
    pa, pb = wait_line(a, "PLACE").split()[1], wait_line(b, "PLACE").split()[1]
    assert {pa, pb} == {"x1", "x2"}
    c = lab.job("runner-c")  # waits: both places held
    time.sleep(T + 2)
    assert lab.reap() == [], "leases that are renewed are never reaped"
    assert c.poll() is None
    owner_b = lab.places()[pb].acquired
    os.killpg(b.pid, signal.SIGKILL)  # runner-b dies: pids this reaper cannot see
    b.wait()
    t_dead = time.monotonic()
    # the waiting job's own lease reaps (every T/3); no rack service runs here
    while lab.places()[pb].acquired == owner_b and time.monotonic() - t_dead < 4 * T:
        time.sleep(0.2)
    released_after = time.monotonic() - t_dead
    # within T of its last renewal (at most T/3 before the kill), plus one reaper
    # period, plus a loaded machine's round trips
    assert released_after <= T + T / 3 + 3, released_after
    # and the place goes to the job in the queue (a labgrid-client start
    # takes seconds on a loaded machine)
    line = wait_line(c, "PLACE", timeout=60)
    assert line.split()[1] == pb
    places = lab.places()
    assert places[pa].acquired.startswith("runner-a/")
    assert places[pb].acquired.startswith("runner-c/")


@SHORT_AND_FULL
def test_a_coordinator_restart_keeps_holders_on_their_places(lab, form):
    # T as in a lab (30 s): a restart plus the coordinator's 15 s save period
    # plus labgrid-client starts on a loaded machine must fit in it
    a = lab.job("runner-a", lease_s=30)
    b = lab.job("runner-b", lease_s=30)
    owners = {}
    for p in (a, b):
        _, place, owner, _ = wait_line(p, "PLACE").split()
        owners[place] = owner
    waiter = lab.job("runner-c", hold_s=1, lease_s=30)
    # labgrid's coordinator writes places.yaml (and so the lease tags) every
    # 15 s: a restart before that would find no places at all
    time.sleep(P.COORDINATOR_SAVE_S + 2)
    lab.kill_coordinator()
    time.sleep(1.0)
    lab.start_coordinator()  # places.yaml back, locks and reservations gone
    deadline = time.monotonic() + 60  # labgrid-client starts take seconds when loaded
    while time.monotonic() < deadline:
        held = {n: p.acquired for n, p in lab.places().items()}
        if held == owners:
            break
        time.sleep(0.5)
    assert held == owners, f"holders did not lock their places again: {held}"
    # nobody lost anything: the holders' leases live on, the waiter still waits
    # (the short form looks for one renewal period, the full form for one more)
    time.sleep(10 if form == "short" else 20)
    assert {n: p.acquired for n, p in lab.places().items()} == owners
    for p in (a, b):
        assert p.poll() is None
    assert waiter.poll() is None
    if form == "short":
        return  # a dead holder's place going to the waiter: the test above (T = 6 s)
    # the waiter's reserve client lost the old coordinator: it reserves again
    # and gets a place once one is free
    os.killpg(a.pid, signal.SIGKILL)
    a.wait()
    line = wait_line(waiter, "PLACE", timeout=120)
    assert line.split()[1] in owners
    waiter.wait(60)
    assert waiter.returncode == 0


@pytest.mark.over_a_minute
@SHORT_AND_FULL
def test_aging_lets_a_low_priority_job_past_a_stream_of_high_priority_ones(lab, form):
    with Coordinator(lab.addr) as c:
        c.set_tags("x2", {"board": "y"})  # one place of type x
    # the first holder is a job of this host: once killed, a reaper frees its place at once
    first = lab.job(socket.gethostname())
    wait_line(first, "PLACE")
    aging_s = 3.0
    # the short form starts the low job 3 below the stream instead of 5:
    # the same overtaking by aging, in fewer steps (each costs a labgrid-client start)
    low = lab.job("runner-b", prio=2 if form == "short" else 0, aging_s=aging_s, hold_s=1)
    # the short form: a stream of two (each labgrid-client start costs seconds when loaded)
    highs = [lab.job(f"runner-h{k}", prio=5, hold_s=2) for k in range(2 if form == "short" else 3)]
    n = 1 + len(highs)

    def waiting():
        with Coordinator(lab.addr) as c:
            return [r for r in c.reservations().values() if r.state == "waiting"]
    deadline = time.monotonic() + 120
    while len(waiting()) < n and time.monotonic() < deadline:  # everyone in the queue
        time.sleep(0.5)
    assert len(waiting()) >= n, waiting()
    # until the low job has aged past the high ones (prio 0 or 2, + 1 per 3 s, > 5)
    while time.monotonic() < deadline:
        prios = {r.owner.split("/")[0]: r.prio for r in waiting()}
        if prios.get("runner-b", 0) > 5:
            break
        time.sleep(0.5)
    assert prios.get("runner-b", 0) > 5, prios
    # one reservation per job: an aging step reserves anew *before* it cancels
    # the old one (so the job never leaves the queue), so two exist only for
    # that moment, never more, never lasting
    mine = []
    for _ in range(10):
        mine.append(len([r for r in waiting() if r.owner.startswith("runner-b/")]))
        time.sleep(0.5)
    assert max(mine) <= 2 and mine.count(1) >= len(mine) // 2, mine
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert lab.reap()  # the dead holder's place is free now
    order = []
    procs = {"low": low, **{f"h{k}": h for k, h in enumerate(highs)}}
    deadline = time.monotonic() + 180
    while len(order) < n and time.monotonic() < deadline:
        for name, p in procs.items():
            if name not in order and p.poll() is not None:
                order.append(name)
        time.sleep(0.2)
    assert len(order) == n, order
    # without aging the prio-5 jobs would all go first
    assert order[0] == "low", f"the low-priority job did not overtake: {order}"
