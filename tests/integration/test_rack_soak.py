"""The lab soak (`make test-rack-soak`, not in make test): `rtlab run` jobs
from two runner hosts contend for four boards on two exporter hosts for
RTLAB_SOAK_S seconds (default 600) while faults hit at random times.

The lab is `rtlab rack up --hosts 2` with four rack-aarch64 boards (vb0 and
vb2 on exp1, vb1 and vb3 on exp2): network namespaces, a real labgrid
coordinator and exporters, QEMU boards cold-booted through their PDU,
U-Boot, DHCP and TFTP, kernels staged over SSH. Four clients (two on each
runner host) each run one `rtlab run` job after another (cyclictest, 3 s);
a job whose verdict is INFRA is run again once, as CI retries it. Faults:
a job SIGKILLed, a job SIGTERMed (cancelled), a whole runner host killed
(every process in its namespace; it starts nothing for a few seconds), the
coordinator killed (the lab's supervisor restarts it), a whole exporter
host killed (its boards' QEMUs with it) and brought back.

The invariants are checked from what the lab's own parts wrote, not from
rtlab's verdicts:

* never two jobs on one board: from each exporter host's PDU log, nobody
  switched a board between the power-on of a job that passed and that job's
  end (a second job on the board would have cold-booted it), and the
  board's console shows the kernel it booted for that job;
* no place held by a dead owner for longer than T (+ a reaper period and
  the observer's poll), as an observer on runner1 sees the coordinator;
* every job ends PASS, FAIL or INFRA: its exit code says so, and a job the
  soak killed is INFRA to `rtlab gate` on whatever directory it left; every
  INFRA job is run again;
* no raw output lost: every measurement of a job that passed has its raw
  files, and its sample count is the tool's (duration / interval).
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import yaml

from rtlab import ROOT
from rtlab.rack.control import rack_down, rack_up
from rtlab.rack.hostssh import leftover_etc
from rtlab.rack.hosts import kill_netns, leftovers

BIN = Path(sys.executable).parent
T = 10.0
BOARDS = [f"vb{k}" for k in range(4)]
CLIENTS = ["runner1", "runner1", "runner2", "runner2"]
DURATION_S, INTERVAL_US = 3, 10000

WATCH = r"""
import json, sys, time
from rtlab.lab.coordinator import Coordinator, CoordinatorError
while True:  # an outside observer (on runner1: the coordinator host is killed too)
    try:
        with Coordinator(sys.argv[1], timeout=3) as c:
            print(json.dumps({"t": time.time(), "held": {n: p.acquired for n, p in c.places().items()}}),
                  flush=True)
    except CoordinatorError:
        print(json.dumps({"t": time.time(), "down": True}), flush=True)
    time.sleep(1.0)
"""


def write_lab(d: Path) -> tuple[Path, Path]:
    """The soak's rack (four aarch64 boards of labgrid/rack.yaml's type) and its campaign."""
    base = yaml.safe_load((ROOT / "labgrid" / "rack.yaml").read_text())
    places = {f"rack-{b}": {"comment": f"soak board {b}", "matches": [f"rtlab-rack/{b}/*"],
                            "tags": {"board": "rack-aarch64", "arch": "aarch64", "rack": "virtual"}}
              for b in BOARDS}
    (d / "places.yaml").write_text(yaml.safe_dump({"places": places}))
    rack = {"name": base["name"], "coordinator": base["coordinator"], "pdu": base["pdu"],
            "exporter": str(ROOT / "labgrid" / base["exporter"]), "places": "places.yaml",
            "idle_power_off_s": 0, "board_types": {"aarch64-virt": base["board_types"]["aarch64-virt"]},
            "boards": {b: {"type": "aarch64-virt", "outlet": k} for k, b in enumerate(BOARDS)}}
    (d / "rack.yaml").write_text(yaml.safe_dump(rack))
    (d / "budgets.yaml").write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    (d / "campaign.yaml").write_text(
        f"name: soak\nbudgets: {d / 'budgets.yaml'}\nboards: [rack-aarch64]\nvariants: [rt]\n"
        "suites:\n  - name: cyclictest\n"
        f"    params: {{interval_us: {INTERVAL_US}, duration_s: {DURATION_S}, histogram_us: 20000}}\n")
    return d / "rack.yaml", d / "campaign.yaml"


class Soak:
    def __init__(self, lab: dict, d: Path, campaign: Path, seconds: float):
        self.lab, self.dir, self.campaign, self.seconds = lab, d, campaign, seconds
        (d / "jobs").mkdir()
        self.lock = threading.Lock()
        self.next_id = 0
        self.retry: list = []
        self.results: list = []          # one dict per attempt
        self.running: dict = {}          # job -> (Popen, host)
        self.killed: dict = {}           # (job, attempt) -> (t, kind)
        self.faults: dict = {}
        self.down: set = set()           # runner hosts without power
        self.inject_error: Optional[BaseException] = None
        self.lab_down: Optional[float] = None
        self.t0 = time.time()
        self.end = self.t0 + seconds

    def take(self):
        with self.lock:
            if self.retry:
                return self.retry.pop(0)
            if time.time() > self.end:
                return None
            self.next_id += 1
            return (f"j{self.next_id:03d}", 1)

    def client(self, host: str):
        while True:
            item = self.take()
            if item is None:
                return
            job, attempt = item
            while host in self.down:  # a host without power runs no jobs
                time.sleep(0.2)
            out = self.dir / "jobs" / f"{job}-{attempt}"
            env = {**os.environ, "LG_HOSTNAME": host, "LG_COORDINATOR": self.lab["coordinator"],
                   "RTLAB_RACK_DIR": self.lab["dir"], "RTLAB_LEASE_S": str(T), "PYTHONUNBUFFERED": "1"}
            env.pop("RTLAB_STORE_URL", None)
            argv = ["ip", "netns", "exec", self.lab["hosts"][host]["netns"], BIN / "rtlab", "run",
                    "--campaign", self.campaign, "--no-publish", "--results", out, "--places", "1"]
            t_start = time.time()
            with open(f"{out}.log", "wb") as log:
                # ip netns exec execs rtlab: the pid is the job's (and its lease owner's)
                p = subprocess.Popen(list(map(str, argv)), env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
                with self.lock:
                    self.running[job] = (p, host, attempt)
                p.wait()
            with self.lock:
                self.running.pop(job, None)
            if p.returncode == 255 and not Path("/run/netns", self.lab["hosts"][host]["netns"]).exists():
                self.lab_down = self.lab_down or time.time()  # the lab itself is gone: nothing more to run
                return
            r = {"job": job, "attempt": attempt, "host": host, "pid": p.pid, "rc": p.returncode,
                 "start": t_start, "end": time.time(), "out": out}
            r["verdict"] = verdict_of(r, (job, attempt) in self.killed)
            self.results.append(r)
            if r["verdict"] == "INFRA" and attempt == 1:
                with self.lock:
                    self.retry.append((job, 2))  # as CI retries an INFRA job: on any place of the type

    def inject(self, rng: random.Random):
        try:
            self._inject(rng)
        except BaseException as e:  # noqa: BLE001 - the test fails on it (a soak without its faults is no soak)
            self.inject_error = e
            raise

    def _inject(self, rng: random.Random):
        kinds = ["kill-job", "term-job", "kill-runner-host", "restart-coordinator", "kill-exporter-host"]
        rng.shuffle(kinds)  # every kind once before any twice
        n = 0
        while time.time() < self.end - 60:
            time.sleep(rng.uniform(30, 60))
            kind = kinds[n % len(kinds)] if n < len(kinds) else rng.choice(kinds)
            n += 1
            hosts = self.lab["hosts"]
            if kind in ("kill-job", "term-job"):
                with self.lock:
                    if not self.running:
                        continue
                    job, (p, host, attempt) = rng.choice(sorted(self.running.items()))
                    self.killed[(job, attempt)] = (time.time(), kind)
                try:
                    os.kill(p.pid, signal.SIGKILL if kind == "kill-job" else signal.SIGTERM)
                except ProcessLookupError:
                    continue
            elif kind == "kill-runner-host":
                with self.lock:
                    self.down.add("runner2")  # power lost: its clients start nothing more
                    for job, (_p, host, attempt) in self.running.items():
                        if host == "runner2":
                            self.killed[(job, attempt)] = (time.time(), kind)
                kill_netns(hosts["runner2"]["netns"])
                time.sleep(3)
                self.down.discard("runner2")  # rebooted: its clients take jobs again
            elif kind == "restart-coordinator":
                kill_netns(hosts["coord"]["netns"])  # the coordinator host reboots; the supervisor restarts it
            else:
                host = rng.choice(["exp1", "exp2"])
                kill_netns(hosts[host]["netns"])  # its boards' QEMUs, ser2net, exporter, sshd: everything
                kind = f"kill-exporter-host ({host})"
            self.faults[kind.split(" ")[0]] = self.faults.get(kind.split(" ")[0], 0) + 1
            print(f"soak {time.time() - self.t0:5.0f} s: fault {kind}", flush=True)


def verdict_of(r: dict, killed_by_soak: bool) -> str:
    """PASS/FAIL/INFRA from the exit code; a job the soak killed is judged by
    `rtlab gate` on the directory it left (none at all: it measured nothing)."""
    rc = r["rc"]
    if rc in (0, 1, 2) and not killed_by_soak:
        return {0: "PASS", 1: "FAIL", 2: "INFRA"}[rc]
    runs = sorted(p for p in r["out"].glob("*/run-started.json") if p.parent.name != "latest") \
        if r["out"].is_dir() else []
    if not runs:
        return "INFRA" if killed_by_soak else f"CRASH rc={rc}"
    g = subprocess.run([str(BIN / "rtlab"), "gate", str(runs[-1].parent)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    r["gate"] = (g.returncode, (g.stdout + g.stderr).strip().splitlines()[-1:])
    if not killed_by_soak:
        return f"CRASH rc={rc}"
    return {0: "PASS", 1: "FAIL", 2: "INFRA"}.get(g.returncode, f"CRASH gate rc={g.returncode}")


def pdu_log(d: Path) -> dict:
    """board -> [switch records] from every exporter host's PDU log."""
    out: dict = {}
    for f in sorted(d.glob("exp*/pdu.jsonl")):
        for line in f.read_text().splitlines():
            s = json.loads(line)
            out.setdefault(s["board"], []).append(s)
    return {b: sorted(v, key=lambda s: s["t"]) for b, v in out.items()}


@pytest.mark.rack
def test_rack_soak(tmp_path, monkeypatch):
    seconds = float(os.environ.get("RTLAB_SOAK_S", "600"))

    def on_term(signum, frame):  # `timeout`, CI cancel: still tear the lab down
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    monkeypatch.setenv("RTLAB_LEASE_S", str(T))  # the exporter hosts' reapers
    rack_yaml, campaign = write_lab(tmp_path)
    d = tmp_path / "lab"
    st = rack_up(d, config=rack_yaml, hosts=2)
    prefix = st["netns_prefix"]
    board_host = {b: h for h in ("exp1", "exp2") for b in st["hosts"][h]["boards"]}
    soak = Soak(st, tmp_path, campaign, seconds)
    observer = None
    try:
        observer = subprocess.Popen(["ip", "netns", "exec", st["hosts"]["runner1"]["netns"], sys.executable, "-c",
                                     WATCH, st["coordinator"]], cwd=ROOT,
                                    stdout=open(tmp_path / "observer.jsonl", "w"), stderr=subprocess.DEVNULL)
        rng = random.Random(int(os.environ.get("RTLAB_SOAK_SEED", "24")))
        soak.t0 = time.time()
        soak.end = soak.t0 + seconds
        clients = [threading.Thread(target=soak.client, args=(h,), daemon=True) for h in CLIENTS]
        faults = threading.Thread(target=soak.inject, args=(random.Random(rng.random()),), daemon=True)
        for c in clients:
            c.start()
        faults.start()
        for c in clients:
            c.join(seconds + 900)
        wall = time.time() - soak.t0
        restarts = json.loads((d / "rack.json").read_text()).get("restarts", {})
    finally:
        if observer is not None:
            observer.kill()
            observer.wait()
        with soak.lock:
            for p, _, _ in soak.running.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
        rack_down(d)
    assert leftovers(prefix) == [] and leftover_etc(prefix) == []

    (tmp_path / "soak.json").write_text(json.dumps({
        "results": [{**r, "out": str(r["out"])} for r in soak.results], "faults": soak.faults,
        "killed": [[j, a, t, k] for (j, a), (t, k) in soak.killed.items()], "wall_s": wall,
        "restarts": restarts, "seconds": seconds, "inject_error": repr(soak.inject_error or ""),
        "lab_down_s": soak.lab_down and soak.lab_down - soak.t0,
        "hosts": {h: v["address"] for h, v in st["hosts"].items()}, "board_host": board_host}, indent=1))
    judge(tmp_path)


def judge(tmp_path: Path) -> None:
    """The invariants and the summary, from what the soak left in *tmp_path*
    (soak.json, the lab's logs, the jobs' directories): replayable on a kept
    soak with ``python -c 'import test_rack_soak as t; t.judge(Path(DIR))'``."""
    soak = json.loads((tmp_path / "soak.json").read_text())
    d, res, wall, hosts = tmp_path / "lab", soak["results"], soak["wall_s"], soak["hosts"]
    for r in res:
        r["out"] = Path(r["out"])
    killed = {(j, a): (t, k) for j, a, t, k in soak["killed"]}

    # the lab stays up through every fault (its supervisor brings hosts back)
    assert not soak.get("lab_down_s"), f"the lab went down {soak['lab_down_s']:.0f} s into the soak " \
                                       f"(lab/service.log)"
    # -- every job ends PASS, FAIL or INFRA; INFRA is run again -------------------
    bad = [(r["job"], r["attempt"], r["verdict"], r.get("gate")) for r in res
           if r["verdict"] not in ("PASS", "FAIL", "INFRA")]
    assert not bad, bad
    infra_first = {r["job"] for r in res if r["verdict"] == "INFRA" and r["attempt"] == 1}
    retried = {r["job"] for r in res if r["attempt"] == 2}
    assert infra_first <= retried, f"INFRA jobs not run again: {infra_first - retried}"
    passed = [r for r in res if r["verdict"] == "PASS"]

    # -- never two jobs on one board: the PDU log and the console -----------------
    switches = pdu_log(d)
    busy = 0.0
    on_board: dict = {b: [] for b in BOARDS}
    for r in passed:
        run_dir = next(p for p in r["out"].glob("*/run.json") if p.parent.name != "latest").parent
        spec = json.loads((run_dir / "rack-aarch64" / "rt" / "job-spec.json").read_text())
        board = spec["place"].removeprefix("rack-")
        mine = [s for s in switches.get(board, []) if r["start"] <= s["t"] <= r["end"]]
        ons = [s for s in mine if s["set"] == "on"]
        assert ons, f"{r['job']}-{r['attempt']} passed on {board} but its board was never powered on"
        after = [s for s in mine if s["t"] > ons[-1]["t"]]
        assert not after, f"{board} switched while {r['job']}-{r['attempt']} measured on it: {after}"
        # the runner host that powered it is the job's
        assert ons[-1].get("from") == hosts[r["host"]], (r["job"], ons[-1])
        busy += r["end"] - ons[-1]["t"]
        on_board[board].append(r)
        # and the raw output is all there: every raw file, and the tool's own
        # JSON has every sample the verdict counted (a TCG board under load
        # overruns some 10 ms periods: fewer than duration / interval)
        run = json.loads((run_dir / "run.json").read_text())
        job_dir = run_dir / "rack-aarch64" / "rt"
        for m in run["jobs"][0]["measurements"]:
            for f in m["raw"]:
                assert (job_dir / f).is_file(), (r["job"], f)
            raw = json.loads((job_dir / m["output"]["path"]).read_text())["thread"]
            for t in m["output"]["threads"]:
                assert raw[str(t["thread"])]["cycles"] == t["cycles"], (r["job"], t)
                assert t["cycles"] >= DURATION_S * 1_000_000 // INTERVAL_US // 2, (r["job"], t)
    for b, jobs in on_board.items():
        # each job that passed on b booted a kernel there (its board's own console)
        console = "\n".join(f.read_text(errors="replace") for f in d.glob(f"exp*/boards/{b}/console.log"))
        boots = len(re.findall(r"Linux version", console))
        assert boots >= len(jobs), f"{b}: {boots} kernel boots on its console, {len(jobs)} jobs passed on it"

    # -- no place held by a dead owner for longer than T ---------------------------
    snaps = [json.loads(x) for x in (tmp_path / "observer.jsonl").read_text().splitlines()]
    held = [s for s in snaps if "held" in s]
    dead_held = []
    for r in res:
        k = killed.get((r["job"], r["attempt"]))
        if not k or k[1] == "term-job":
            continue
        t_kill = k[0]
        tag = f"rtlab-{r['pid']}-"
        after = [s for s in held if s["t"] >= t_kill]
        place = next((n for s in after[:1] for n, who in s["held"].items() if who and tag in who), None)
        if place is None:
            continue  # it held no place when killed (waiting, or already released)
        gone = next((s["t"] for s in after if tag not in (s["held"].get(place) or "")), None)
        dead_held.append((gone or held[-1]["t"]) - t_kill)

    waits = []
    for r in res:
        run_json = next((p for p in r["out"].glob("*/run.json") if p.parent.name != "latest"), None) \
            if r["out"].is_dir() else None
        if run_json:
            waits += [j["place_wait_s"] for j in json.loads(run_json.read_text())["jobs"]
                      if j.get("place_wait_s") is not None]
    waits = np.array(waits)
    demanded = sum(r["end"] - r["start"] for r in res)
    print(f"\nrack soak: {wall:.0f} s, {len(BOARDS)} boards on 2 exporter hosts, {len(CLIENTS)} clients "
          f"on 2 runner hosts, T={T:g} s")
    print(f"  jobs {len(res)}: PASS {len(passed)}, FAIL {sum(r['verdict'] == 'FAIL' for r in res)}, "
          f"INFRA {sum(r['verdict'] == 'INFRA' for r in res)} (first attempts run again: {len(infra_first)})")
    print(f"  faults survived {sum(soak['faults'].values())}: {soak['faults']}; exporter hosts brought back: "
          f"{soak['restarts']}")
    if waits.size:
        print(f"  wait for a place: max {waits.max():.1f} s, p95 {np.percentile(waits, 95):.1f} s, "
              f"median {np.median(waits):.1f} s over {waits.size} jobs")
    if dead_held:
        print(f"  place held by a dead owner: max {max(dead_held):.1f} s over {len(dead_held)} kills (T={T:g} s)")
    print(f"  utilisation: boards measuring for a passed job {busy / (len(BOARDS) * wall):.0%} of board-time; "
          f"clients busy {demanded / (len(CLIENTS) * wall):.0%} of theirs (ideal with {len(CLIENTS)} clients "
          f"on {len(BOARDS)} boards: every client always on a board)")
    print("  boards: " + ", ".join(f"{b}@{soak['board_host'][b]} ({len(on_board[b])} passed)" for b in BOARDS))
    assert len(res) >= 12 and len(passed) >= 12, [(r["job"], r["verdict"]) for r in res]
    assert soak["inject_error"] in ("", "''"), f"fault injection failed: {soak['inject_error']}"
    # a soak whose fault thread died early is no soak (it once passed with 0 faults)
    assert sum(soak["faults"].values()) >= max(1, int(soak["seconds"] // 120)), soak["faults"]
    assert not dead_held or max(dead_held) <= T + T / 3 + 10, dead_held
