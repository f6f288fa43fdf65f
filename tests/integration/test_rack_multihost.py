"""`rtlab rack up --hosts 2`: the virtual rack over five network-namespace
hosts (a coordinator host, two exporter hosts each with its own boards, PDU
and labgrid-exporter, two runner hosts), real labgrid processes throughout.

Jobs on both runner hosts lease the two rack-aarch64 places (one on each
exporter host) through the coordinator host and power their boards on
through labgrid: the exporter hosts' own PDU logs and the boards' console
logs (QEMU's U-Boot, on the exporter host) show it happened there. A whole
runner host killed loses its place to the job queued on the other runner
host within T (the exporter hosts' reapers, and the waiting job's). `rtlab
rack down` leaves no namespace, veth, /etc/netns entry or process of the lab
behind.

A whole `rtlab run` from a runner host boots boards of both exporter hosts
their real way: the kernel and initramfs go to the exporter host by SSH
(labgrid's ManagedFile: rsync to the host's labgrid cache, a symlink in the
board's TFTP directory), U-Boot fetches them over TFTP there, and the RK356x
twin's interrupt-response probe is reached at its exporter host's address.
An exporter host killed whole (every process in its namespace) is brought
back by the lab's supervisor, and the next run on its board passes.

The lab's services are the units a real lab installs (env/systemd/): the
coordinator host runs labgrid-coordinator.service's command line, each
exporter host labgrid-exporter@.service's; on the coordinator host the
reaper unit releases the place of a job that died there, and the store unit
serves the lab's store that a runner host publishes the run to.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.lab.systemd import LAB_ENV, load_unit
from rtlab.rack.config import load_rack_config
from rtlab.rack.control import rack_down, rack_up
from rtlab.rack.service import coordinator_command, exporter_command
from rtlab.core.procutil import pid_alive
from rtlab.rack.hostssh import leftover_etc
from rtlab.rack.hosts import kill_netns, leftovers, netns_pids

from conftest import wait_line

T = 6.0

JOB = textwrap.dedent("""
    import sys, time
    from rtlab.lab.places import PlaceLease
    lease = PlaceLease(sys.argv[1], {"board": "rack-aarch64"}, lease_s=float(sys.argv[2]),
                       on_lost=lambda why: print("LOST", why, flush=True), say=lambda m: print(m, flush=True))
    lease.acquire()
    print("PLACE", lease.place, lease.owner, flush=True)
    # the board's power goes through labgrid: the exporter's NetworkPowerPort,
    # the HTTP PDU on the exporter host's own address
    res = lease._client("-p", lease.place, "power", "on", timeout=120)
    print("POWER", res.returncode, (res.stdout + res.stderr).strip()[-300:], flush=True)
    time.sleep(float(sys.argv[3]))
    lease._client("-p", lease.place, "power", "off", timeout=120)
    lease.release()
    print("RELEASED", flush=True)
""")


WATCH = textwrap.dedent("""
    import json, sys, time
    from rtlab.lab.coordinator import Coordinator, CoordinatorError
    with Coordinator(sys.argv[1], timeout=15) as c:
        while True:  # the coordinator as an outside observer on a runner host sees it
            try:
                print(json.dumps({"t": time.time(), "held": {n: p.acquired for n, p in c.places().items()}}),
                      flush=True)
            except CoordinatorError:
                pass
            time.sleep(0.5)
""")


def pdu_switches(d: Path) -> list[dict]:
    path = d / "pdu.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def lab_up(d: Path) -> dict:
    """`rack up --hosts 2` in *d*; a lab that fails to start is torn down and fails the test."""
    try:
        return rack_up(d, hosts=2)
    except Exception as e:  # noqa: BLE001
        rack_down(d)
        pytest.fail(f"rack up --hosts 2: {e} (network namespaces need CAP_NET_ADMIN)")


# make test-long: a second lab of five namespace hosts; the multi-host proof (boards of both exporter hosts,
#   nothing left after down) is
#   test_rtlab_run_on_a_runner_host_stages_over_ssh_and_boots_boards_of_both_exporter_hosts
@pytest.mark.long
def test_rack_up_hosts_splits_the_rack_over_namespace_hosts_and_down_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_LEASE_S", str(T))  # the exporter hosts' reapers
    d = tmp_path / "lab"
    st = lab_up(d)
    jobs = []
    prefix = st["netns_prefix"]
    every_pid = [st["pid"], *st["pids"].values()]
    try:
        roles = {n: h["role"] for n, h in st["hosts"].items()}
        assert sorted(roles.values()) == ["coordinator", "exporter", "exporter", "runner", "runner"]
        hosts = st["hosts"]
        # each service runs on its own host: the coordinator in the
        # coordinator's namespace, each exporter in its exporter host's
        assert st["pids"]["coord"] in netns_pids(hosts["coord"]["netns"])
        exp_state = {h: json.loads((d / h / "rack.json").read_text()) for h in ("exp1", "exp2")}
        for h, est in exp_state.items():
            assert est["state"] == "ready" and est["coordinator"] == st["coordinator"]
            assert est["pids"]["exporter"] in netns_pids(hosts[h]["netns"])
            assert est["pdu"] == f"http://{hosts[h]['address']}:20480"  # its own PDU, on its own address
            every_pid += list(est["pids"].values())
        board_host = {b: h for h in ("exp1", "exp2") for b in hosts[h]["boards"]}
        assert board_host["vb0"] != board_host["vb1"]

        def job(host, hold_s=600.0):
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            p = subprocess.Popen([str(Path(sys.executable).parent / "rtlab"), "rack", "exec", "--dir", str(d), host, "--",
                                  sys.executable, "-c", JOB, st["coordinator"], str(T), str(hold_s)],
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
            jobs.append(p)
            return p

        a, b = job("runner1"), job("runner2")
        pa, pb = (wait_line(p, "PLACE", 120).split() for p in (a, b))
        assert {pa[1], pb[1]} == {"rack-vb0", "rack-vb1"}
        assert pa[2].startswith("runner1/") and pb[2].startswith("runner2/")  # LG_HOSTNAME: the host's name
        for p in (a, b):
            assert wait_line(p, "POWER", 120).split()[1] == "0"
        # `rtlab rack status` from the machine's own namespace: asked from the coordinator host
        status = json.loads(subprocess.run([str(Path(sys.executable).parent / "rtlab"), "rack", "status", "--json",
                                            "--dir", str(d)], capture_output=True, text=True, timeout=180).stdout)
        assert "coordinator_error" not in status, status
        assert {n: (p["holder"] or "").split("/")[0] for n, p in status["places"].items()
                if n in ("rack-vb0", "rack-vb1")} == {pa[1]: "runner1", pb[1]: "runner2"}
        assert set(status["hosts"]) == {"coord", "exp1", "exp2", "runner1", "runner2"}
        # the switches happened on the exporter hosts, each on its own PDU
        for place in (pa[1], pb[1]):
            board = place.removeprefix("rack-")
            sw = pdu_switches(d / board_host[board])
            assert [s["set"] for s in sw if s["board"] == board][-1:] == ["on"], sw
            console = d / board_host[board] / "boards" / board / "console.log"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and (not console.is_file() or console.stat().st_size == 0):
                time.sleep(1)
            assert console.is_file() and console.stat().st_size > 0, f"{board} printed nothing on {board_host[board]}"

        waiter = job("runner1", hold_s=1)
        watch = subprocess.Popen([str(Path(sys.executable).parent / "rtlab"), "rack", "exec", "--dir", str(d),
                                  "runner1", "--", sys.executable, "-c", WATCH, st["coordinator"]], cwd=ROOT,
                                 stdout=open(tmp_path / "watch.jsonl", "w"), start_new_session=True)
        jobs.append(watch)
        time.sleep(T)
        assert waiter.poll() is None  # both places held: it waits
        # runner2 loses power: every process on it
        ns2 = hosts["runner2"]["netns"]
        killed = kill_netns(ns2)
        t_dead = time.time()
        assert killed >= 1
        line = wait_line(waiter, "PLACE", timeout=180)
        assert line.split()[1] == pb[1] and line.split()[2].startswith("runner1/")
        os.killpg(watch.pid, signal.SIGKILL)
        watch.wait()
        snaps = [json.loads(x) for x in (tmp_path / "watch.jsonl").read_text().splitlines()]
        freed = next(s["t"] for s in snaps
                     if s["t"] > t_dead and not (s["held"].get(pb[1]) or "").startswith("runner2/"))
        # as the coordinator saw it: released within T of the last renewal (at
        # most T/3 before the kill) + a reaper period and the observer's poll,
        # + a loaded machine's round trips (as test_rack_hosts)
        assert freed - t_dead <= T + T / 3 + 10, freed - t_dead
        print(f"runner2's place released {freed - t_dead:.1f} s after the host died (T = {T:g} s)")
        waiter.wait(180)
        assert waiter.returncode == 0
    finally:
        for p in jobs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            if p.stdout:
                p.stdout.close()
        rack_down(d)
    # nothing of the lab is left: no namespace, no veth, no /etc/netns, no process
    assert leftovers(prefix) == [], leftovers(prefix)
    assert leftover_etc(prefix) == []
    alive = [pid for pid in every_pid if pid and pid_alive(pid)]
    assert alive == [], f"lab processes survive rack down: {alive}"
    assert json.loads((d / "rack.json").read_text())["state"] == "stopped"


def ran(pid: int, argv: list[str]) -> bool:
    """Whether process *pid* runs *argv* (a script: its interpreter first)."""
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    return cmd == argv or (cmd[1:] == argv and Path(cmd[0]).name.startswith("python"))


def on_host(d: Path, host: str, argv: list, **kw) -> subprocess.Popen:
    """A command on a host of the lab, as a service there would run it."""
    return subprocess.Popen([str(Path(sys.executable).parent / "rtlab"), "rack", "exec", "--dir", str(d), host, "--",
                             *map(str, argv)], cwd=ROOT, start_new_session=True, **kw)


def lab_units(d: Path, st: dict, run_dir: Path) -> None:
    """The units of env/systemd/ are what the lab runs: their command lines."""
    hosts = st["hosts"]
    assert ran(st["pids"]["coord"], coordinator_command(st["coordinator"])[0])
    cfg = load_rack_config()
    for host in ("exp1", "exp2"):
        exporter = json.loads((d / host / "rack.json").read_text())["pids"]["exporter"]
        assert ran(exporter, exporter_command(f"{cfg.name}-{host}", st["coordinator"], hosts[host]["address"],
                                              cfg.exporter_config)[0])
    # the reaper unit, on the coordinator host: a job of that host holds a place and dies
    job = on_host(d, "coord", [sys.executable, "-c", JOB, st["coordinator"], "30", "600"], stdout=subprocess.PIPE,
                  text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        place = wait_line(job, "PLACE", 120).split()[1]
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        job.stdout.close()
    reaper = load_unit("rtlab-reaper.service")
    lab_env = {LAB_ENV: {"LG_COORDINATOR": st["coordinator"]}}
    r = on_host(d, "coord", reaper.exec_start(files=lab_env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env={**os.environ, **reaper.environment(files=lab_env)})
    out = r.communicate(timeout=120)[0]
    assert r.returncode == 0 and f"released place {place} from coord/rtlab-" in out, out
    # the store unit on the coordinator host; a runner host publishes the run to it
    store = load_unit("rtlab-influxd.service")
    address = hosts["coord"]["address"]
    lab_env = {LAB_ENV: {"RTLAB_STATE_DIR": str(d / "store"), "RTLAB_INFLUXD_BIND": address,
                         "RTLAB_INFLUXD_PORT": "8086"}}
    log = open(d / "store.log", "wb")
    srv = on_host(d, "coord", store.exec_start(files=lab_env), stdout=log, stderr=subprocess.STDOUT,
                  env={**os.environ, **store.environment(files=lab_env)})
    try:
        url = f"http://{address}:8086"
        deadline = time.monotonic() + 60
        while on_host(d, "runner2", ["curl", "-sf", f"{url}/ping"]).wait() != 0:
            assert srv.poll() is None and time.monotonic() < deadline, (d / "store.log").read_text()
            time.sleep(0.5)
        pub = on_host(d, "runner1", [Path(sys.executable).parent / "rtlab", "publish", run_dir],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                      env={**os.environ, "RTLAB_INFLUX_URL": url, "RTLAB_STATE_DIR": str(d / "runner1-state")})
        out = pub.communicate(timeout=120)[0]
        assert pub.returncode == 0, out
        q = on_host(d, "runner2", ["curl", "-sG", f"{url}/query", "--data-urlencode", "db=rtlab",
                                   "--data-urlencode", 'q=SELECT "run_id" FROM "verdict"'], stdout=subprocess.PIPE,
                    text=True)
        assert run_dir.resolve().name in q.communicate(timeout=60)[0]
    finally:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(30)
        log.close()


CAMPAIGN = """
name: multihost
budgets: {budgets}
boards: [rack-aarch64, twin-rk356x]
variants: [rt]
suites:
  - name: cyclictest
    params: {{interval_us: 10000, duration_s: 3, histogram_us: 20000}}
  - name: irq-response
    params: {{period_us: 50000, pulse_us: 100, samples: 60, histogram_us: 50000}}
"""


@pytest.mark.over_a_minute
def test_rtlab_run_on_a_runner_host_stages_over_ssh_and_boots_boards_of_both_exporter_hosts(tmp_path):
    (tmp_path / "budgets.yaml").write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    camp = tmp_path / "campaign.yaml"
    camp.write_text(CAMPAIGN.format(budgets=tmp_path / "budgets.yaml"))
    d = tmp_path / "lab"
    st = lab_up(d)
    prefix, hosts = st["netns_prefix"], st["hosts"]
    try:
        board_host = {b: h for h in ("exp1", "exp2") for b in hosts[h]["boards"]}
        assert board_host["vb0"] != board_host["vb1"]
        # runner1 has an /etc/ssh of its own (and the machine's is untouched)
        assert leftover_etc(prefix) == sorted(f"/etc/netns/{hosts[r]['netns']}" for r in ("runner1", "runner2"))
        res = subprocess.run([str(Path(sys.executable).parent / "rtlab"), "rack", "exec", "--dir", str(d), "runner1",
                              "--", str(Path(sys.executable).parent / "rtlab"), "run", "--campaign", str(camp),
                              "--no-publish", "--results", str(tmp_path / "results"), "--places", "2"],
                             cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
        run_dir = next((tmp_path / "results").iterdir())
        run = json.loads((run_dir / "run.json").read_text())
        verdicts = {(j["board"], m["key"]["suite"]): m["verdict"]
                    for j in run["jobs"] for m in j["measurements"]}
        assert verdicts == {("rack-aarch64", "cyclictest"): "pass", ("twin-rk356x", "cyclictest"): "pass",
                            ("twin-rk356x", "irq-response"): "pass"}, verdicts
        irq = next(m for j in run["jobs"] for m in j["measurements"] if m["key"]["suite"] == "irq-response")
        assert irq["output"]["threads"][0]["cycles"] == 60
        runner1 = hosts["runner1"]["address"]
        for env_board in ("rack-aarch64", "twin-rk356x"):
            spec = json.loads((run_dir / env_board / "rt" / "job-spec.json").read_text())
            name = spec["place"].removeprefix("rack-")
            host = board_host[name]
            # staged over SSH from runner1: the exporter host's sshd let its key in,
            # and the board's TFTP files are labgrid's synced copies, not the runner's
            assert f"Accepted publickey for root from {runner1}" in (d / f"sshd-{host}.log").read_text()
            tftp = d / host / "boards" / name / "tftp" / "rtlab"
            for f in ("kernel", "initrd", "uEnv.txt"):
                assert (tftp / f).is_symlink() and os.readlink(tftp / f).startswith("/var/cache/labgrid/"), f
            # U-Boot on that exporter host fetched them over TFTP and Linux came up
            console = (d / host / "boards" / name / "console.log").read_text(errors="replace")
            assert "TFTP from server" in console and "Bytes transferred" in console
            assert "Linux version" in console
        lab_units(d, st, run_dir)

        # the probe twin listens on its exporter host's address, not loopback
        port = int((d / board_host["rk356x0"] / "boards" / "rk356x0" / "irqprobe.port").read_text())
        listening = subprocess.run(["ip", "netns", "exec", hosts[board_host["rk356x0"]]["netns"], "ss", "-ltnH"],
                                   capture_output=True, text=True, timeout=30).stdout
        assert f"{hosts[board_host['rk356x0']]['address']}:{port}" in listening, listening

        # an exporter host loses power (every process on it, its boards' QEMUs
        # too) and comes back: its boards are exported and staged to again
        exp = board_host["rk356x0"]
        kill_netns(hosts[exp]["netns"])
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            lab = json.loads((d / "rack.json").read_text())
            if lab.get("restarts", {}).get(exp) == 1 and lab["state"] == "ready":
                break
            time.sleep(1)
        assert lab.get("restarts") == {exp: 1}, lab.get("restarts")
        camp.write_text(CAMPAIGN.format(budgets=tmp_path / "budgets.yaml")
                        .replace("boards: [rack-aarch64, twin-rk356x]", "boards: [twin-rk356x]")
                        .replace("  - name: cyclictest\n    params: {interval_us: 10000, duration_s: 3, "
                                 "histogram_us: 20000}\n", ""))
        res = subprocess.run([str(Path(sys.executable).parent / "rtlab"), "rack", "exec", "--dir", str(d), "runner2",
                              "--", str(Path(sys.executable).parent / "rtlab"), "run", "--campaign", str(camp),
                              "--no-publish", "--results", str(tmp_path / "results2")],
                             cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    finally:
        rack_down(d)
    assert leftovers(prefix) == [] and leftover_etc(prefix) == []
