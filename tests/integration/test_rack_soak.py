"""The lab soak (`make test-rack-soak`, not in make test): many clients on two
runner hosts contend for four places through a real labgrid coordinator for
RTLAB_SOAK_S seconds (default 600) while faults hit at random times: a job
SIGKILLed, a whole runner host killed (every process in its namespace), the
coordinator killed and restarted.

Hosts are network namespaces (rtlab.rack.hosts). The boards are simulated,
and only their console: a job that holds a place writes time-stamped lines
to that place's board log (what a board's UART log is in the rack), and its
raw output to its own file. The invariants are checked from those logs and
from the coordinator as an outside observer sees it, not from the jobs'
bookkeeping:

* never two jobs on one place (board log intervals never overlap);
* no place held by a dead owner for longer than T (+ one reaper period and
  the observer's poll);
* every job ends PASS or INFRA (killed, lost its place), and every INFRA job
  is run again;
* no raw output lost: a job that passed has every sample it wrote.
"""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from rtlab import ROOT
from rtlab.rack.hosts import HostLab, leftovers

BIN = Path(sys.executable).parent
T = 10.0
PLACES = [f"x{k}" for k in range(1, 5)]

JOB = r"""
import os, sys, time
from rtlab.lab.places import PlaceError, PlaceLease
addr, T, prio, hold_s, boards, job, out_path = sys.argv[1:8]
def lost(why):
    with open(out_path, "a") as f:
        f.write(f"LOST {why}\n")
    os._exit(2)  # INFRA: never touch the board again
lease = PlaceLease(addr, {"board": "x"}, lease_s=float(T), prio=float(prio), on_lost=lost)
try:
    lease.acquire()
except PlaceError as e:
    print("INFRA", e, flush=True)
    sys.exit(2)
print("PLACE", lease.place, lease.owner, lease.waited_s, flush=True)
board = open(os.path.join(boards, lease.place + ".log"), "a", buffering=1)
out = open(out_path, "a", buffering=1)
board.write(f"{time.time():.3f} start {job} {lease.owner}\n")
n = 0
t_end = time.time() + float(hold_s)
while time.time() < t_end:
    n += 1
    board.write(f"{time.time():.3f} tick {job}\n")
    out.write(f"sample {n}\n")
    time.sleep(0.5)
out.write(f"SAMPLES {n}\n")
board.write(f"{time.time():.3f} end {job}\n")
lease.release()
print("DONE", flush=True)
"""

OBSERVER = r"""
import json, sys, time
from rtlab.lab.coordinator import Coordinator, CoordinatorError
from rtlab.lab.places import reap_stale
addr, T, action = sys.argv[1], float(sys.argv[2]), sys.argv[3]
if action == "declare":
    with Coordinator(addr, timeout=15) as c:
        c.wait_ready(60)
        for n in sys.argv[4:]:
            c.ensure_place(n, [], {"board": "x"})
    sys.exit(0)
while True:  # the coordinator host's reaper, and the outside observer
    try:
        with Coordinator(addr, timeout=3) as c:
            reap_stale(c, lease_s=T, say=lambda m: print(json.dumps({"t": time.time(), "reaped": m}), flush=True))
            print(json.dumps({"t": time.time(), "held": {n: p.acquired for n, p in c.places().items()}}),
                  flush=True)
    except CoordinatorError:
        print(json.dumps({"t": time.time(), "down": True}), flush=True)
    time.sleep(1.0)
"""


class Soak:
    def __init__(self, lab: HostLab, d: Path, seconds: float):
        self.lab, self.dir, self.seconds = lab, d, seconds
        self.addr = f"{lab.coordinator.address}:20408"
        (d / "boards").mkdir()
        (d / "jobs").mkdir()
        self.lock = threading.Lock()
        self.next_id = 0
        self.retry: list = []
        self.results: list = []          # dicts: job, attempt, host, rc, verdict, place, waited_s
        self.running: dict = {}          # job id -> Popen
        self.kills: list = []            # (t, owner-host or job, kind)
        self.faults: dict = {}
        #: hosts that are down (power lost): their clients start nothing until they are back
        self.down: set = set()
        self.inject_error: Optional[BaseException] = None
        self.coord = None
        self.t0 = time.time()
        self.end = self.t0 + seconds

    def start_coordinator(self):
        self.coord = self.lab.popen("coord", [BIN / "labgrid-coordinator", "-l", self.addr], cwd=self.dir,
                                    stdout=open(self.dir / "coordinator.log", "ab"), stderr=subprocess.STDOUT)

    def declare(self):
        out = subprocess.run(self.lab.command("coord", [sys.executable, "-c", OBSERVER, self.addr, T, "declare",
                                                        *PLACES]), cwd=ROOT, capture_output=True, text=True,
                             timeout=180)
        assert out.returncode == 0, out.stderr

    def take(self):
        with self.lock:
            if self.retry:
                return self.retry.pop(0)
            if time.time() > self.end - 40:
                return None
            self.next_id += 1
            return (f"j{self.next_id:03d}", 1)

    def client(self, host: str, rng: random.Random):
        while True:
            item = self.take()
            if item is None:
                return
            job, attempt = item
            while host in self.down:  # a host without power runs no jobs
                time.sleep(0.2)
            hold = rng.uniform(15, 35)
            prio = rng.choice([0, 10, 20])
            out = self.dir / "jobs" / f"{job}-{attempt}.out"
            p = self.lab.popen(host, [sys.executable, "-c", JOB, self.addr, T, prio, f"{hold:.1f}",
                                      self.dir / "boards", job, out], cwd=ROOT, stdout=subprocess.PIPE,
                               text=True)
            with self.lock:
                self.running[job] = (p, host)
            lines = p.stdout.read().splitlines()
            p.wait()
            p.stdout.close()
            with self.lock:
                self.running.pop(job, None)
            place = next((x.split()[1] for x in lines if x.startswith("PLACE")), None)
            waited = next((float(x.split()[3]) for x in lines if x.startswith("PLACE")), None)
            verdict = "PASS" if p.returncode == 0 and "DONE" in lines else "INFRA"
            self.results.append({"job": job, "attempt": attempt, "host": host, "rc": p.returncode,
                                 "verdict": verdict, "place": place, "waited_s": waited, "hold_s": hold,
                                 "last": lines[-1][:200] if lines else ""})
            if verdict == "INFRA" and attempt == 1:
                with self.lock:
                    self.retry.append((job, 2))  # INFRA on a lost board: again, on any place of the type

    def inject(self, rng: random.Random):
        try:
            self._inject(rng)
        except BaseException as e:  # noqa: BLE001 - the test fails on it (a soak without its faults is no soak)
            self.inject_error = e
            raise

    def _inject(self, rng: random.Random):
        while time.time() < self.end - 60:
            time.sleep(rng.uniform(30, 60))
            kind = rng.choice(["kill-job", "kill-runner-host", "restart-coordinator"])
            if kind == "kill-job":
                with self.lock:
                    if not self.running:
                        continue
                    job, (p, host) = rng.choice(sorted(self.running.items()))
                try:
                    os.kill(p.pid, signal.SIGKILL)  # ip netns exec execs the job: this is the job
                except ProcessLookupError:
                    continue
                self.kills.append((time.time(), job))
            elif kind == "kill-runner-host":
                with self.lock:
                    self.down.add("runner-b")  # power lost: its clients start nothing more
                    dying = [j for j, (p, h) in self.running.items() if h == "runner-b"]
                self.lab.kill_host("runner-b")
                self.kills.extend((time.time(), j) for j in dying)
                time.sleep(2)
                self.down.discard("runner-b")  # rebooted: its runners take jobs again
            else:
                self.coord.kill()
                self.coord.wait()
                time.sleep(2)
                self.start_coordinator()
            self.faults[kind] = self.faults.get(kind, 0) + 1
            print(f"soak {time.time() - self.t0:5.0f} s: fault {kind}", flush=True)


def board_intervals(d: Path) -> dict:
    """place -> [(start, last line, job)] read from the board logs."""
    out = {}
    for log in sorted((d / "boards").glob("*.log")):
        spans: dict = {}
        for line in log.read_text().splitlines():
            t, what, job = line.split()[:3]
            s = spans.setdefault(job, [float(t), float(t)])
            s[1] = float(t)
        out[log.stem] = sorted((a, b, j) for j, (a, b) in spans.items())
    return out


@pytest.mark.rack
def test_rack_soak(tmp_path):
    seconds = float(os.environ.get("RTLAB_SOAK_S", "600"))

    def on_term(signum, frame):  # `timeout`, CI cancel: still tear the hosts down
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    lab = HostLab(["runner-a", "runner-b"]).up()
    soak = Soak(lab, tmp_path, seconds)
    observer = None
    try:
        soak.start_coordinator()
        soak.declare()
        time.sleep(17)  # labgrid saves places.yaml every 15 s: a restart before would find none
        soak.t0 = time.time()
        soak.end = soak.t0 + seconds
        observer = lab.popen("coord", [sys.executable, "-c", OBSERVER, soak.addr, T, "watch"], cwd=ROOT,
                             stdout=open(tmp_path / "observer.jsonl", "w"), stderr=subprocess.DEVNULL)
        rng = random.Random(int(os.environ.get("RTLAB_SOAK_SEED", "24")))
        clients = [threading.Thread(target=soak.client, args=(h, random.Random(rng.random())), daemon=True)
                   for h in ("runner-a", "runner-a", "runner-a", "runner-b", "runner-b", "runner-b")]
        faults = threading.Thread(target=soak.inject, args=(random.Random(rng.random()),), daemon=True)
        for c in clients:
            c.start()
        faults.start()
        for c in clients:
            c.join(seconds + 600)
        wall = time.time() - soak.t0
    finally:
        if observer is not None:
            observer.kill()
            observer.wait()
        prefix = lab.prefix
        lab.down()
        assert leftovers(prefix) == []

    # -- invariants, from the board logs and the observer ------------------------
    spans = board_intervals(tmp_path)
    for place, iv in spans.items():
        last_end, last_job = 0.0, None
        for start, end, job in iv:
            assert start >= last_end, f"two jobs on {place}: {last_job} until {last_end:.3f}, {job} from {start:.3f}"
            if end > last_end:
                last_end, last_job = end, job
    snaps = [json.loads(x) for x in (tmp_path / "observer.jsonl").read_text().splitlines()]
    held = [s for s in snaps if "held" in s]
    dead_held = []
    for t_kill, job in soak.kills:
        owner = next((r for r in soak.results if r["job"] == job and r["rc"] != 0), None)
        place = owner and owner["place"]
        if not place:
            continue
        # the owner identity on that place at the kill, until it is no longer there
        at_kill = [s for s in held if s["t"] >= t_kill]
        if not at_kill:
            continue
        who = at_kill[0]["held"].get(place)
        if not who:
            continue
        gone = next((s["t"] for s in at_kill if s["held"].get(place) != who), None)
        dead_held.append((gone or time.time()) - t_kill)
    jobs_done = [r for r in soak.results if r["verdict"] == "PASS"]
    assert all(r["verdict"] in ("PASS", "INFRA") for r in soak.results)
    infra_first = {r["job"] for r in soak.results if r["verdict"] == "INFRA" and r["attempt"] == 1}
    retried = {r["job"] for r in soak.results if r["attempt"] == 2}
    assert infra_first <= retried, f"INFRA jobs not run again: {infra_first - retried}"
    for r in jobs_done:
        out = (tmp_path / "jobs" / f"{r['job']}-{r['attempt']}.out").read_text().splitlines()
        n = int(out[-1].split()[1])
        assert [x for x in out if x.startswith("sample")] == [f"sample {k}" for k in range(1, n + 1)]
    waits = np.array([r["waited_s"] for r in soak.results if r["waited_s"] is not None])
    busy = sum(b - a for iv in spans.values() for a, b, _ in iv)
    demanded = sum(r["hold_s"] for r in soak.results)
    util, ideal = busy / (len(PLACES) * wall), min(1.0, demanded / (len(PLACES) * wall))
    print(f"\nrack soak: {wall:.0f} s, {len(PLACES)} places, 6 clients on 2 runner hosts, T={T:g} s")
    print(f"  jobs done (PASS) {len(jobs_done)}, INFRA {len(soak.results) - len(jobs_done)} "
          f"(all run again: {len(infra_first)}), faults survived {sum(soak.faults.values())}: {soak.faults}")
    if waits.size:
        print(f"  wait for a place: max {waits.max():.1f} s, p95 {np.percentile(waits, 95):.1f} s, "
              f"median {np.median(waits):.1f} s over {waits.size} leases")
    if dead_held:
        print(f"  place held by a dead owner: max {max(dead_held):.1f} s (T={T:g} s)")
    print(f"  utilisation {util:.0%} of {len(PLACES)} places (ideal for the work asked: {ideal:.0%})")
    infra = {}
    for r in soak.results:
        if r["verdict"] == "INFRA":
            infra[r["last"][:60]] = infra.get(r["last"][:60], 0) + 1
    print("  INFRA by last line: " + "; ".join(f"{n}x {k!r}" for k, n in sorted(infra.items(), key=lambda x: -x[1])[:5]))
    assert len(soak.results) >= 12 and len(jobs_done) >= 12
    # a soak whose fault thread died early is no soak (it once passed with 0 faults)
    assert soak.inject_error is None, f"fault injection failed: {soak.inject_error!r}"
    assert sum(soak.faults.values()) >= max(1, int(seconds // 120)), soak.faults
    assert not dead_held or max(dead_held) <= T + T / 3 + 10, dead_held
