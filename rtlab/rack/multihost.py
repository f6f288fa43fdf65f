"""The virtual rack split over lab hosts (`rtlab rack up --hosts N`;
``python -m rtlab.rack.multihost``).

A real lab runs its coordinator on one host, exporters on the hosts the
boards are wired to (each with its own PDU) and CI jobs on runner hosts.
This service makes that lab on one machine, every host a network namespace
(:class:`rtlab.rack.hosts.HostLab`, veth links to the coordinator host)::

    coord       labgrid-coordinator -l 10.<net>.1.1:20418
    exp1..expN  a rack service each (rtlab.rack.service --coordinator ...
                --bind <host address>): its share of rack.yaml's boards
                (QEMU, UART relay, TFTP), its own HTTP PDU, labgrid-exporter
                named <rack name>-expK and its ser2net, all listening on the
                host's own address; it declares its boards' places; and
                sshd on the host's address (rtlab.rack.hostssh): how jobs
                stage kernels into its boards' TFTP directories (labgrid's
                RemoteTFTPProvider: rsync over SSH)
    runner1..runnerN  hosts for jobs: `rtlab rack exec runnerK -- CMD` runs a
                job there (LG_COORDINATOR, LG_HOSTNAME set); each has its own
                /etc/ssh with the lab's client key and known_hosts

State: ``<dir>/rack.json`` (``hosts``: role, namespace, address; every
exporter host's own state in ``<dir>/<host>/rack.json``). SIGTERM: each
exporter host stops its boards and services, then every process left in a
namespace is SIGKILLed and the namespaces are deleted (their veths and
addresses with them): nothing of the lab remains. Needs CAP_NET_ADMIN.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from .. import ROOT
from .config import RackConfig, load_rack_config
from .hostssh import LabSSH
from .hosts import HostLab
from .service import coordinator_command, serve_until_signalled
from .state import read_state, write_state

#: inside namespaces this service creates: no other process can hold them
COORDINATOR_PORT = 20418
PDU_PORT = 20480
READY_TIMEOUT_S = 180.0
MIN_HOSTS, MAX_HOSTS = 2, 8
#: a dead exporter host is started again after this long (its reboot), up to
#: BRING_BACK_TRIES times before the lab fails
HOST_REBOOT_S = 2.0
BRING_BACK_TRIES = 3


class MultiHostError(Exception):
    pass


def split_boards(cfg: RackConfig, n: int) -> dict[str, list[str]]:
    """Exporter host -> its boards, dealt round-robin by outlet so every host
    gets boards of the common types first (vb0 on exp1, vb1 on exp2, ...)."""
    hosts: dict[str, list[str]] = {f"exp{k}": [] for k in range(1, n + 1)}
    for i, board in enumerate(cfg.boards):
        hosts[f"exp{i % n + 1}"].append(board)
    return {h: b for h, b in hosts.items() if b}


class MultiHostRack:
    def __init__(self, cfg: RackConfig, directory: Path, n_hosts: int, config_path: Optional[Path] = None):
        if not MIN_HOSTS <= n_hosts <= MAX_HOSTS:
            raise MultiHostError(f"--hosts must be in [{MIN_HOSTS}, {MAX_HOSTS}], got {n_hosts}")
        if len(cfg.boards) < n_hosts:
            raise MultiHostError(f"{cfg.path}: {len(cfg.boards)} boards cannot give {n_hosts} exporter hosts one each")
        self.cfg = cfg
        self.config_path = config_path
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shares = split_boards(cfg, n_hosts)
        self.runners = [f"runner{k}" for k in range(1, n_hosts + 1)]
        self.lab = HostLab([*self.shares, *self.runners], prefix=f"rtlr{os.getpid() % 100000}")
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = threading.Event()
        self.started = time.time()
        self.coordinator_address = ""
        #: the runner hosts' SSH to the exporter hosts (labgrid's ManagedFile)
        self.ssh = LabSSH(self.dir / "ssh", self.lab.net)
        #: exporter host -> times it was brought back (serve)
        self.restarts: dict[str, int] = {}

    def say(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    def state(self, status: str, error: str = "") -> dict:
        hosts = {}
        for name, h in self.lab.hosts.items():
            role = "coordinator" if name == "coord" else "exporter" if name in self.shares else "runner"
            hosts[name] = {"role": role, "netns": h.netns, "address": h.address,
                           "boards": self.shares.get(name, []),
                           "pid": self.procs[name].pid if name in self.procs else None}
        places = {}
        for host in self.shares:
            places.update((read_state(self.dir / host) or {}).get("places", {}))
        st = {"state": status, "pid": os.getpid(), "dir": str(self.dir), "name": self.cfg.name,
              "config": str(self.cfg.path), "coordinator": self.coordinator_address,
              "multihost": True, "netns_prefix": self.lab.prefix, "hosts": hosts,
              "started": self.started, "places": places, "restarts": dict(self.restarts),
              "pids": {k: p.pid for k, p in self.procs.items()}}
        if error:
            st["error"] = error
        write_state(self.dir, st)
        return st

    def start(self) -> None:
        self.state("starting")
        self.lab.up()
        self.say(f"hosts: {', '.join(f'{n} ({h.netns} {h.address})' for n, h in self.lab.hosts.items())}")
        self.coordinator_address = f"{self.lab.coordinator.address}:{COORDINATOR_PORT}"
        self.ssh.prepare({h: self.lab.hosts[h].address for h in self.shares})
        for runner in self.runners:
            self.ssh.configure_runner(self.lab.hosts[runner].netns)
        self._start_coordinator()
        for host, boards in self.shares.items():
            self._start_sshd(host)
            self._start_exporter_host(host, boards)
        self._wait_ready()
        self.state("ready")
        self.say(f"lab ready: coordinator {self.coordinator_address}, exporter hosts "
                 f"{', '.join(f'{h} ({len(b)} boards)' for h, b in self.shares.items())}, "
                 f"runner hosts {', '.join(self.runners)}")

    def _spawn(self, name: str, host: str, argv: list, cwd: Path, env: Optional[dict] = None) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        log.write(f"--- {time.strftime('%H:%M:%S')} on {host}: {' '.join(map(str, argv))}\n".encode())
        log.flush()
        self.procs[name] = self.lab.popen(host, argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _start_coordinator(self) -> None:
        cdir = self.dir / "coordinator"
        cdir.mkdir(exist_ok=True)
        # the lab's unit (env/systemd/labgrid-coordinator.service), as the coordinator host runs it
        argv, unit_env = coordinator_command(self.coordinator_address)
        self._spawn("coord", "coord", argv, cwd=cdir, env={**os.environ, **unit_env})

    def _start_sshd(self, host: str) -> None:
        self._spawn(f"sshd-{host}", host, self.ssh.sshd_argv(host, self.lab.hosts[host].address), cwd=self.dir)

    def _start_exporter_host(self, host: str, boards: list) -> None:
        d = self.dir / host
        d.mkdir(exist_ok=True)
        (d / "rack.json").unlink(missing_ok=True)
        argv = [sys.executable, "-m", "rtlab.rack.service", "--dir", d, "--coordinator", self.coordinator_address,
                "--bind", self.lab.hosts[host].address, "--boards", ",".join(boards),
                "--exporter-name", f"{self.cfg.name}-{host}", "--pdu-port", PDU_PORT]
        if self.config_path:
            argv += ["--config", self.config_path]
        env = {k: v for k, v in os.environ.items() if k not in ("LG_COORDINATOR", "RTLAB_RACK_DIR")}
        self._spawn(host, host, argv, cwd=ROOT, env=env)

    def _wait_ready(self, hosts: Optional[list] = None) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = set(hosts or self.shares)
        while pending:
            for host in sorted(pending):
                st = read_state(self.dir / host) or {}
                if st.get("state") == "ready":
                    pending.discard(host)
                elif st.get("state") == "failed" or self.procs[host].poll() is not None:
                    raise MultiHostError(f"exporter host {host} failed: {st.get('error', 'its rack service exited')} "
                                         f"(see {self.dir / (host + '.log')})")
            if self.procs["coord"].poll() is not None:
                raise MultiHostError(f"labgrid-coordinator exited (see {self.dir / 'coord.log'})")
            if time.monotonic() > deadline:
                raise MultiHostError(f"exporter hosts {', '.join(sorted(pending))} not ready within "
                                     f"{READY_TIMEOUT_S:g} s")
            if self.stopping.wait(0.5):
                raise MultiHostError("stopped while starting")

    def serve(self) -> None:
        """Supervise, as systemd on each host would: the coordinator host's
        labgrid-coordinator comes back if it dies; an exporter host whose rack
        service died (the host lost power, or the service crashed) is brought
        back whole: whatever is left on it is killed (its boards' QEMUs go
        with it, as with a power loss), then sshd and the service start again
        and re-export its boards. An exporter host's service supervises its
        own parts."""
        while not self.stopping.wait(0.5):
            if self.procs["coord"].poll() is not None:
                self.say(f"labgrid-coordinator exited with {self.procs['coord'].returncode}: restarting it")
                self._start_coordinator()
                self.state("ready")
            for host in self.shares:
                if self.stopping.is_set():
                    break
                if self.procs[host].poll() is not None:
                    self._bring_back(host)
                    continue
                sshd = self.procs[f"sshd-{host}"]
                if sshd.poll() is not None:
                    self.say(f"sshd of {host} exited with {sshd.returncode}: restarting it")
                    self._start_sshd(host)

    def _bring_back(self, host: str) -> None:
        self.say(f"exporter host {host}'s rack service exited with {self.procs[host].returncode}: "
                 f"the host comes back")
        self.restarts[host] = self.restarts.get(host, 0) + 1
        for attempt in range(1, BRING_BACK_TRIES + 1):
            self.lab.kill_host(host)
            for name in (host, f"sshd-{host}"):
                try:
                    self.procs[name].wait(10)
                except subprocess.TimeoutExpired:
                    pass
            # a host takes a moment to reboot; and whatever killed it (a test's
            # kill loop) may still be at work: what starts then dies at once
            if self.stopping.wait(HOST_REBOOT_S):
                return
            self._start_sshd(host)
            self._start_exporter_host(host, self.shares[host])
            try:
                self._wait_ready([host])
                break
            except MultiHostError as e:
                if attempt == BRING_BACK_TRIES or self.stopping.is_set():
                    raise
                self.say(f"exporter host {host} did not come back ({e}): again")
        self.state("ready")
        self.say(f"exporter host {host} is back ({self.restarts[host]} restart(s))")

    def stop(self) -> None:
        self.stopping.set()
        # each exporter host powers its boards off and stops its services
        for host in self.shares:
            p = self.procs.get(host)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for host in self.shares:
            p = self.procs.get(host)
            if p is None:
                continue
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                self.say(f"exporter host {host} did not stop within 30 s: killing its host")
        # then every process left on any host goes, and the hosts themselves
        self.lab.down()
        self.ssh.remove()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.say("lab stopped: namespaces deleted")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtlab.rack.multihost")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--hosts", type=int, required=True)
    args = ap.parse_args(argv)
    cfg = load_rack_config(args.config)
    rack = MultiHostRack(cfg, args.dir, args.hosts, args.config)
    return serve_until_signalled(rack, "lab")


if __name__ == "__main__":
    sys.exit(main())
