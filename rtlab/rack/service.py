"""The rack service (`rtlab rack up` starts it detached; `python -m rtlab.rack.service`).

One process that owns the rack's parts and tears them down together:

1. the virtual boards (each: UART relay + pty, TFTP dir; QEMU only while powered)
2. the HTTP PDU and its controller thread (which owns the QEMU processes)
3. ``labgrid-coordinator --listen 127.0.0.1:PORT`` (cwd ``<dir>/coordinator``:
   its places.yaml/resources.yaml live there)
4. ``labgrid-exporter --coordinator 127.0.0.1:PORT --name <name> --hostname
   127.0.0.1 labgrid/exporter.yaml`` with labgrid/bin first on PATH (the
   ser2net shim that binds ser2net to loopback)

The coordinator's and the exporter's command lines are the lab's own units'
(env/systemd/labgrid-coordinator.service, labgrid-exporter@.service: their
ExecStart= with the rack's values for /etc/rtlab/lab.env, rtlab.lab.systemd),
so the units a real lab installs are the ones every rack test starts.
5. the places of labgrid/places.yaml, declared on the coordinator
6. a reaper: every second, places and reservations of dead rtlab jobs are
   released (:func:`rtlab.lab.places.reap_stale`)

State: ``<dir>/rack.json`` (:mod:`rtlab.rack.state`); logs: ``service.log``,
``coordinator.log``, ``exporter.log``, ``pdu.jsonl``, ``reaper.jsonl``,
``boards/<board>/{console.log,boots.jsonl,qemu.log}``.
SIGTERM/SIGINT: power every board off, stop exporter (and its ser2net
children) and coordinator, write state "stopped".
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from .. import ROOT
from ..lab.coordinator import Coordinator, CoordinatorError
from ..lab.places import reap_stale
from ..lab.systemd import LAB_ENV, load_unit
from ..core.procutil import die_with_parent, labgrid_client
from .board import VirtualBoard
from .config import RackConfig, load_rack_config
from .pdu import PDUServer, PowerController
from .state import read_state, write_state
from ..core.procutil import reserve_port

REAP_PERIOD_S = 1.0
#: a service that keeps dying is a broken rack, not a fault to ride out
MAX_RESTARTS = 20


class RackError(Exception):
    pass


def coordinator_command(listen: str) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of env/systemd/labgrid-coordinator.service listening on *listen*."""
    unit = load_unit("labgrid-coordinator.service")
    files = {LAB_ENV: {"LG_COORDINATOR_LISTEN": listen}}
    return unit.exec_start(files=files), unit.environment(files=files)


def exporter_command(name: str, coordinator: str, hostname: str, config: Path) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of env/systemd/labgrid-exporter@<name>.service."""
    unit = load_unit("labgrid-exporter@.service")
    files = {LAB_ENV: {"LG_COORDINATOR": coordinator, "LG_EXPORTER_HOSTNAME": hostname,
                       "LG_EXPORTER_CONFIG": str(config)}}
    return unit.exec_start(name, files), unit.environment(name, files)


def port_taken(host: str, port: int) -> str:
    """Why *port* cannot be listened on ("" if it can), probed as the servers
    bind: with SO_REUSEADDR, so connections of a rack stopped a moment ago
    (TIME-WAIT) do not make `rack down; rack up` fail, while a listener does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError as e:
            return e.strerror or str(e)
    return ""


def host_share(cfg: RackConfig, boards: list, exporter_name: str) -> RackConfig:
    """The part of the rack one exporter host of a multi-host lab serves: its
    *boards*, exported under its own exporter name (labgrid's coordinator
    takes one exporter per name), and the places of those boards, their
    matches renamed to that exporter."""
    unknown = [b for b in boards if b not in cfg.boards]
    if unknown:
        raise RackError(f"{cfg.path}: no boards {', '.join(unknown)} (boards: {', '.join(cfg.boards)})")
    places = {}
    for p in cfg.places.values():
        groups = {m.split("/")[1] for m in p.matches if m.split("/")[0] == cfg.name}
        if groups and groups <= set(boards):
            matches = tuple(f"{exporter_name}/{m.split('/', 1)[1]}" for m in p.matches)
            places[p.name] = dataclasses.replace(p, matches=matches)
    return dataclasses.replace(cfg, name=exporter_name, places=places,
                               boards={b: cfg.boards[b] for b in cfg.boards if b in boards})


class Rack:
    def __init__(self, cfg: RackConfig, directory: Path, coordinator_port: Optional[int] = None,
                 pdu_port: Optional[int] = None, *, bind: str = "127.0.0.1",
                 coordinator: Optional[str] = None):
        self.cfg = cfg
        #: the address this rack's network services listen on (the PDU, the
        #: exporter's ser2net, the interrupt-probe twins): loopback for one
        #: host; the exporter host's own address in a multi-host lab
        self.bind = bind
        #: another host's coordinator (a multi-host lab): not started here
        self.external_coordinator = coordinator
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        cport = int(cfg.coordinator.rpartition(":")[2]) if coordinator_port is None else coordinator_port
        pport = int(cfg.pdu.rpartition(":")[2]) if pdu_port is None else pdu_port
        #: ports picked here (0 asked), held until their server binds them
        self.reserved: dict[str, socket.socket] = {}

        def pick(what: str, host: str) -> int:
            self.reserved[what] = reserve_port(host)
            return self.reserved[what].getsockname()[1]
        self.coordinator_port = cport or (0 if coordinator else pick("coordinator", "127.0.0.1"))
        self.pdu_port = pport or pick("PDU", bind)
        self.coordinator_address = coordinator or f"127.0.0.1:{self.coordinator_port}"
        self.boards: dict[str, VirtualBoard] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.pdu: Optional[PDUServer] = None
        self.controller: Optional[PowerController] = None
        self.stopping = threading.Event()
        self.idle_since: dict[str, float] = {}
        #: board -> the place whose matches own its exporter group
        self.board_place = {b: p.name for b in cfg.boards for p in cfg.places.values()
                            if any(m.split("/")[:2] == [cfg.name, b] for m in p.matches)}
        self.started = time.time()
        self.restarts: dict[str, int] = {}
        #: board -> its twin interrupt probe's port (started once, kept across exporter restarts)
        self.irq_probes: dict[str, str] = {}

    # -- logging / state ----------------------------------------------------------
    def say(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    def state(self, status: str, error: str = "") -> dict:
        st = {
            "state": status, "pid": os.getpid(), "dir": str(self.dir), "name": self.cfg.name,
            "config": str(self.cfg.path), "coordinator": self.coordinator_address,
            "pdu": f"http://{self.bind}:{self.pdu_port}", "started": self.started,
            # each runs in its own session (start_new_session): pid == process group
            "pids": {k: p.pid for k, p in self.procs.items()},
            "boards": {n: {"outlet": b.spec.outlet, "arch": b.spec.type.arch, "tty": b.tty,
                           "uart_relay_port": b.relay.port, "tftp_dir": str(b.tftp_dir),
                           "place": self.board_place.get(n)}
                       for n, b in self.boards.items()},
            "places": {p.name: {"tags": p.tags, "matches": list(p.matches)} for p in self.cfg.places.values()},
        }
        if error:
            st["error"] = error
        write_state(self.dir, st)
        return st

    # -- start ------------------------------------------------------------------------
    def start(self) -> None:
        self.state("starting")
        ports = [("PDU", self.bind, self.pdu_port)]
        if not self.external_coordinator:
            ports.insert(0, ("coordinator", "127.0.0.1", self.coordinator_port))
        for what, host, port in ports:
            err = port_taken(host, port)
            if err:
                raise RackError(f"{what} port {host}:{port} is taken ({err}): another "
                                f"rack? `rtlab rack up --coordinator-port 0 --pdu-port 0` picks free ones")
        for spec in self.cfg.boards.values():
            self.boards[spec.name] = VirtualBoard(spec, self.dir, say=self.say)
        self.controller = PowerController({b.spec.outlet: b for b in self.boards.values()},
                                          self.dir / "pdu.jsonl")
        self.controller.start()
        self.pdu = PDUServer((self.bind, self.pdu_port), self.controller)
        self.release_port("PDU")
        self.pdu.start()
        self.say(f"PDU on {self.pdu.url} ({len(self.boards)} outlets)")

        if self.external_coordinator:
            with Coordinator(self.coordinator_address) as coord:
                coord.wait_ready(60)
        else:
            self._start_coordinator()
        self.say(f"coordinator on {self.coordinator_address}")

        self._start_exporter()
        self._wait_resources(timeout=60)
        self.say(f"exporter {self.cfg.name}: resources of {', '.join(self.boards)} registered")

        with Coordinator(self.coordinator_address) as coord:
            for p in self.cfg.places.values():
                coord.ensure_place(p.name, list(p.matches), p.tags, p.comment)
        self.say(f"places: {', '.join(self.cfg.places)}")
        self.state("ready")

    def release_port(self, what: str) -> None:
        s = self.reserved.pop(what, None)
        if s is not None:
            s.close()

    def _start_coordinator(self) -> None:
        cdir = self.dir / "coordinator"
        cdir.mkdir(exist_ok=True)
        # labgrid-coordinator binds without waiting for this process: let go
        # of the port just before it starts
        self.release_port("coordinator")
        argv, unit_env = coordinator_command(self.coordinator_address)
        self._spawn("coordinator", argv, cwd=cdir, env={**os.environ, **unit_env})
        with Coordinator(self.coordinator_address) as coord:
            coord.wait_ready(30)

    def _start_exporter(self) -> None:
        env = {**os.environ,
               "PATH": f"{ROOT / 'labgrid' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               "RTLAB_RACK_BOARDS": " ".join(self.boards), "RTLAB_RACK_DIR": str(self.dir),
               "RTLAB_RACK_PDU": self.pdu.url if self.pdu else '', "PYTHONUNBUFFERED": "1",
               # the ser2net shim and exporter.yaml: where clients reach this host's services
               "RTLAB_RACK_BIND": self.bind}
        for name, b in self.boards.items():
            env[f"RTLAB_RACK_TTY_{name}"] = b.tty
            env[f"RTLAB_RACK_OUTLET_{name}"] = str(b.spec.outlet)
            if b.irq_probe_sock is not None:  # the twin of the board's interrupt-response probe
                # started once; an exporter restarted by supervision gets the same probe
                if name not in self.irq_probes:
                    self.irq_probes[name] = str(self._start_irq_probe(name, b.irq_probe_sock))
                env[f"RTLAB_RACK_IRQPROBE_{name}"] = self.irq_probes[name]
        argv, unit_env = exporter_command(self.cfg.name, self.coordinator_address, self.bind,
                                          self.cfg.exporter_config)
        self._spawn("exporter", argv, env={**env, **unit_env}, cwd=self.dir)

    def _spawn(self, name: str, cmd: list[str], cwd: Path, env: Optional[dict] = None) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        log.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
        log.flush()
        # own process group (the exporter's ser2net children go down with it);
        # SIGKILLed if this service dies without cleaning up
        self.procs[name] = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=die_with_parent)
        log.close()

    def _start_irq_probe(self, board: str, sock: Path) -> int:
        """The board's twin probe (rtlab.lab.irqtwin) on a free port of this
        host's address (loopback on one host): QEMU's probe UART connects to
        *sock*, jobs to the port (the exporter exports it as NetworkIrqProbe,
        at RTLAB_RACK_BIND)."""
        port_file = self.dir / "boards" / board / "irqprobe.port"
        port_file.unlink(missing_ok=True)
        self._spawn(f"irqprobe-{board}", [sys.executable, "-m", "rtlab.lab.irqtwin", "--listen", f"{self.bind}:0",
                                          "--chardev", str(sock), "--port-file", str(port_file)], cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if port_file.is_file():
                return int(port_file.read_text())
            if self.procs[f"irqprobe-{board}"].poll() is not None:
                break
            time.sleep(0.1)
        raise RackError(f"the irq probe twin of {board} did not start (see {self.dir / f'irqprobe-{board}.log'})")

    def _wait_resources(self, timeout: float) -> None:
        """Until the coordinator lists every board's group of our exporter."""
        want = {f"{self.cfg.name}/{b}" for b in self.boards}
        deadline = time.monotonic() + timeout
        env = {**os.environ, "LG_COORDINATOR": self.coordinator_address}
        last = ""
        while time.monotonic() < deadline:
            if self.procs["exporter"].poll() is not None:
                raise RackError(f"labgrid-exporter exited with {self.procs['exporter'].returncode} "
                                f"(see {self.dir / 'exporter.log'})")
            res = subprocess.run([labgrid_client(), "resources"], env=env, capture_output=True,
                                 text=True, timeout=30)
            last = (res.stdout + res.stderr).strip()
            have = {"/".join(line.split("/")[:2]) for line in res.stdout.split()}
            if want <= have:
                return
            time.sleep(1.0)
        raise RackError(f"exporter resources did not appear within {timeout:g} s: {last[-300:]}")

    # -- run ----------------------------------------------------------------------------
    def serve(self) -> None:
        next_reap = 0.0
        while not self.stopping.is_set():
            self.stopping.wait(0.5)
            for b in self.boards.values():
                b.poll()
            for name, p in list(self.procs.items()):
                if p.poll() is not None and not self.stopping.is_set():
                    self.restart(name, p.returncode)
            if time.monotonic() >= next_reap:
                next_reap = time.monotonic() + REAP_PERIOD_S
                self.reap()

    def restart(self, name: str, returncode: Optional[int]) -> None:
        """A lab's services are restarted by their supervisor (systemd in a real
        lab): the coordinator comes back with its places (places.yaml, lease
        tags included) but no locks; jobs that hold places re-lock them."""
        if self.restarts.get(name, 0) >= MAX_RESTARTS:
            raise RackError(f"{name} exited with {returncode} (see {self.dir / (name + '.log')}), "
                            f"restarted {MAX_RESTARTS} times already")
        self.restarts[name] = self.restarts.get(name, 0) + 1
        self.say(f"{name} exited with {returncode}: restarting it")
        self._log_event({"action": f"restart {name}", "returncode": returncode})
        try:
            if name == "coordinator":
                self._start_coordinator()
                with Coordinator(self.coordinator_address) as coord:
                    for pl in self.cfg.places.values():
                        coord.ensure_place(pl.name, list(pl.matches), pl.tags, pl.comment)
                # the exporter reconnects by itself or exits; either way it is back soon
            else:
                self._kill_group(self.procs[name])
                self._start_exporter()
        except (CoordinatorError, OSError) as e:
            self.say(f"{name}: restart failed: {e}")
        self.state("ready")

    def _log_event(self, ev: dict) -> None:
        with open(self.dir / "reaper.jsonl", "a") as f:
            f.write(json.dumps({"t": round(time.time(), 3), **ev}) + "\n")

    @staticmethod
    def _kill_group(p: subprocess.Popen) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()

    def reap(self) -> list[str]:
        try:
            with Coordinator(self.coordinator_address, timeout=3) as coord:
                done = reap_stale(coord, say=lambda m: self.say(f"reaper: {m}"))
                self._idle_power_off(coord.places())
        except CoordinatorError as e:
            self.say(f"reaper: {e}")
            return []
        if done:
            with open(self.dir / "reaper.jsonl", "a") as f:
                for d in done:
                    f.write(json.dumps({"t": round(time.time(), 3), "action": d}) + "\n")
        return done

    def _idle_power_off(self, places: dict) -> None:
        """Switch off boards whose place has been unlocked for idle_power_off_s."""
        if not self.cfg.idle_power_off_s or self.controller is None:
            return
        now = time.monotonic()
        for name, board in self.boards.items():
            place = places.get(self.board_place.get(name, ""))
            if place is None or place.acquired or not board.powered:
                self.idle_since.pop(name, None)
                continue
            since = self.idle_since.setdefault(name, now)
            if now - since >= self.cfg.idle_power_off_s:
                self.say(f"{name}: idle for {now - since:.0f} s, powering off")
                self.controller.switch(board.spec.outlet, False, via="idle")
                self.idle_since.pop(name, None)

    # -- stop -----------------------------------------------------------------------------
    def stop(self) -> None:
        self.stopping.set()
        if self.controller is not None:
            for b in self.boards.values():
                try:
                    self.controller.submit(b.power_off, timeout=10)
                except Exception as e:  # noqa: BLE001
                    self.say(f"{b.name}: power off failed: {e}")
        for name in ("exporter", "coordinator", *(n for n in self.procs if n.startswith("irqprobe-"))):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            except ProcessLookupError:
                pass
            # ser2net children of the exporter share its process group
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.pdu is not None:
            self.pdu.shutdown()
            self.pdu.server_close()
        if self.controller is not None:
            self.controller.stop()
        for b in self.boards.values():
            b.relay.stop()
        self.say("rack stopped")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtlab.rack.service")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--coordinator-port", type=int)
    ap.add_argument("--pdu-port", type=int)
    # one exporter host of a multi-host lab (rtlab.rack.multihost)
    ap.add_argument("--coordinator", help="HOST:PORT of another host's coordinator (none started here)")
    ap.add_argument("--bind", default="127.0.0.1", help="address this host's services listen on")
    ap.add_argument("--boards", help="comma-separated boards of this host (default: all)")
    ap.add_argument("--exporter-name", help="this host's exporter name (default: rack.yaml's name)")
    args = ap.parse_args(argv)
    cfg = load_rack_config(args.config)
    if args.boards or args.exporter_name:
        cfg = host_share(cfg, args.boards.split(",") if args.boards else list(cfg.boards),
                         args.exporter_name or cfg.name)
    rack = Rack(cfg, args.dir, args.coordinator_port, args.pdu_port, bind=args.bind,
                coordinator=args.coordinator)
    return serve_until_signalled(rack, "rack")


def serve_until_signalled(service, what: str) -> int:
    """Run a rack service (the single-host Rack or the multi-host lab: start,
    serve, stop, state) until SIGTERM/SIGINT; its state file ends "stopped"
    or keeps "failed" with the error, with no pid either way (the process is
    gone, and its pid may be another's by the time someone reads it)."""
    def on_signal(signum, frame):
        service.stopping.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 0
    try:
        service.start()
        service.serve()
        service.state("stopping")
    except Exception as e:  # noqa: BLE001 - reported in the state file
        service.say(f"{what} failed: {type(e).__name__}: {e}")
        service.state("failed", error=f"{type(e).__name__}: {e}")
        rc = 1
    finally:
        service.stop()
        st = service.state("stopped") if rc == 0 else (read_state(service.dir) or {"state": "failed"})
        st["pid"] = None
        write_state(service.dir, st)
    return rc


if __name__ == "__main__":
    sys.exit(main())
