"""A LAVA lab on this machine: PostgreSQL, lava-server and one lava-worker,
all Debian 12's packages (2023.01, the dispatcher's version), on loopback.

    lab = LocalLavaLab(directory)
    state = lab.up(progress)     # idempotent: what runs stays, what is missing starts
    lab.status()                 # each process, each device's health
    lab.down()                   # stops everything it started; nothing is left

What runs (every process in a session of its own, pid and start time in
``<dir>/lab.json`` so ``down`` never signals a recycled pid):

1. ``postgres`` as the ``postgres`` user, a private cluster listening on
   127.0.0.1:<free port> only (the package's own cluster and service are
   left alone). The cluster and its socket are not in ``<dir>`` but in
   ``service_state_dir(<dir>)`` (/var/lib/rtlab/lava-lab/<hash of dir>):
   the ``postgres`` account must open them, and ``<dir>`` may sit in a clone
   it cannot enter (a mode-700 home directory);
2. ``gunicorn3 lava_server.wsgi`` (the API: XML-RPC ``/RPC2``, REST
   ``/api/v0.2``, the worker's internal API) on 127.0.0.1:<free port>;
3. ``lava-server manage lava-scheduler``;
4. ``lava-worker --name rtlab-worker``, which runs ``lava-run`` for every job
   the scheduler gives it (as root: lava-run mounts and loops).

lava-server reads its database, paths and secret from the environment
(``DATABASE_URL``, ``SECRET_KEY``, ``LAVA_SETTINGS_*``: lava_server/settings/
prod.py), so nothing under /etc/lava-server is written: the device
dictionaries, device-type templates, health checks and job logs of this lab
live in its directory.

Provisioning (one ``lava-server manage shell`` call, idempotent): a superuser
``rtlab`` and an API token for lavacli, the worker, and one device
(``<board>-01``) per board: by default every QEMU board of lava/boards.yaml;
``boards=`` (``up --board``) may name any board that runs on this machine,
the rack's twins and the U-Boot boards too. Each device is of its board's
device type (``qemu``; ``qemu-uboot-aarch64`` ...), tagged with the board's
name (boards share device types; the tag routes a job to the right machine),
and its dictionary extends the board's own template ``rtlab-<board>.jinja2``:

* a QEMU board's: LAVA's ``qemu.jinja2`` with the machine, CPU, memory and
  options of its env file (the server renders what lava-run is given);
* any other board's (twins, U-Boot boards): its device dictionary of
  lava/devices/ as it is, the form lava-run runs, so the server hands the
  worker what lava-run gets here. One thing differs: lava-run takes the
  board's ``--dispatcher`` file (the TFTP server's address as the board sees
  it, QEMU's user network: 10.0.2.2), a server has one dispatcher
  configuration per worker (under /etc/lava-server, which the lab leaves
  alone), so that address is written into the board's template instead.

LAVA finds a device's health check by that template's name: the board's
health check is an rtlab boot job (boot, kernel facts, a 1 s cyclictest) of
the rt kernel, rendered at ``up`` from the board's images; a device whose
health check fails is taken offline by LAVA (health Bad), so a broken board
is never a latency result.
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .. import ROOT
from ..errors import RtlabError
from ..core.procutil import free_port, pid_alive, process_start, processes_in_dir

PG_BIN = Path("/usr/lib/postgresql/15/bin")
LAB_USER = "rtlab"
WORKER = "rtlab-worker"
DEVICE_TYPE = "qemu"
STATE_FILE = "lab.json"
UP_TIMEOUT_S = 300
#: the lab's processes, in start order (down stops them in reverse)
SERVICES = ("postgres", "gunicorn", "scheduler", "worker")


#: where state that a service account opens lives, one directory per lab
#: (``$RTLAB_SERVICE_STATE_ROOT`` moves it; every ancestor must let others pass)
SERVICE_STATE_ROOT = Path("/var/lib/rtlab/lava-lab")


def lab_dir() -> Path:
    """$RTLAB_LAVA_LAB_DIR, else this checkout's lab: beside its services'
    state, outside the checkout, because lava-server runs as ``lavaserver``
    and must reach the lab's devices, device types, health checks, media and
    logs whatever the checkout's directory allows (a clone in root's mode-700
    home); named by a hash of the checkout's path, one lab per checkout."""
    env = os.environ.get("RTLAB_LAVA_LAB_DIR")
    if env:
        return Path(env)
    root = Path(os.environ.get("RTLAB_SERVICE_STATE_ROOT") or SERVICE_STATE_ROOT)
    digest = hashlib.sha256(str((ROOT / ".cache" / "lava-lab").resolve()).encode()).hexdigest()[:16]
    return root / f"{digest}-lab"


def service_state_dir(directory: Path) -> Path:
    """The directory of the lab in *directory* for what the ``postgres``
    account opens (its cluster, its socket): outside the lab directory, whose
    ancestors (a clone in root's mode-700 home, pytest's tmp) may bar every
    other user; named by a hash of the lab directory's path, so each clone's
    lab has a cluster of its own and the same one at every ``up``."""
    root = Path(os.environ.get("RTLAB_SERVICE_STATE_ROOT") or SERVICE_STATE_ROOT)
    digest = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:16]
    return root / digest


def unreachable_ancestor(path: Path, uid: int, gid: int) -> Optional[Path]:
    """The first ancestor of *path* (itself excluded) that user *uid*/*gid*
    cannot pass through (no search permission), or None."""
    import stat

    for anc in reversed(Path(path).resolve().parents):
        st = anc.stat()
        if st.st_uid == uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid == gid:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return anc
    return None


def make_service_state_dir(directory: Path, owner: pwd.struct_passwd) -> Path:
    """Create ``service_state_dir(directory)`` (idempotent): its ancestors
    root's and passable by all (0755), the directory itself *owner*'s; an
    ancestor *owner* cannot pass is an error naming it."""
    state = service_state_dir(directory)
    for d in reversed([state.parent, *state.parent.parents]):
        if not d.exists():
            d.mkdir(mode=0o755)
            os.chmod(d, 0o755)  # whatever the umask
    state.mkdir(mode=0o700, exist_ok=True)
    os.chown(state, owner.pw_uid, owner.pw_gid)
    os.chmod(state, 0o700)
    bar = unreachable_ancestor(state, owner.pw_uid, owner.pw_gid)
    if bar is not None:
        raise RtlabError(f"LAVA lab: the {owner.pw_name} user cannot enter {bar}, an ancestor of its state "
                         f"directory {state} ($RTLAB_SERVICE_STATE_ROOT)")
    # which lab it belongs to, for whoever lists /var/lib/rtlab
    (state.parent / f"{state.name}.lab").write_text(f"{Path(directory).resolve()}\n")
    return state


@dataclass
class LabState:
    """What ``up`` made and started (``<dir>/lab.json``)."""

    pg_port: int = 0
    http_port: int = 0
    secret_key: str = ""
    token: str = ""
    worker_token: str = ""
    devices: dict[str, str] = field(default_factory=dict)      # device hostname -> rtlab board
    pids: dict[str, list[int]] = field(default_factory=dict)   # service -> [pid, start ticks]

    @property
    def uri(self) -> str:
        """lavacli's --uri (user and token in it: keep the state file private)."""
        return f"http://{LAB_USER}:{self.token}@127.0.0.1:{self.http_port}/RPC2"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/"

    def running(self, service: str) -> bool:
        entry = self.pids.get(service)
        return bool(entry) and pid_alive(entry[0]) and process_start(entry[0]) == entry[1]


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalLavaLab:
    def __init__(self, directory: Optional[Path] = None, boards: Optional[list[str]] = None):
        self.dir = Path(directory or lab_dir()).resolve()
        #: the boards of lava/boards.yaml that get a device (default: the QEMU boards)
        self.boards = boards
        #: boards whose device-type template this `up` wrote anew
        self.changed_templates: set[str] = set()

    # -- state ----------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.dir / STATE_FILE

    def read_state(self) -> LabState:
        try:
            raw = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return LabState()
        except ValueError as e:
            raise RtlabError(f"{self.state_file}: not the lab's state ({e}); `rtlab lava lab down` and remove it") from None
        known = LabState.__dataclass_fields__
        return LabState(**{k: v for k, v in raw.items() if k in known})

    def _write_state(self, st: LabState) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the token
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(st), f, indent=2)
        os.replace(tmp, self.state_file)

    def env(self, st: LabState) -> dict[str, str]:
        """lava-server's settings, by environment (nothing under /etc changes)."""
        return {
            **os.environ,
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{st.pg_port}/lavaserver",
            "SECRET_KEY": st.secret_key,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "LAVA_SETTINGS_MEDIA_ROOT": str(self.dir / "media") + "/",
            "LAVA_SETTINGS_DEVICES_PATH": str(self.dir / "devices"),
            "LAVA_SETTINGS_HEALTH_CHECKS_PATH": str(self.dir / "health-checks"),
            "LAVA_YAML_SETTINGS_DEVICE_TYPES_PATHS": json.dumps(
                [str(self.dir / "device-types"), "/etc/lava-server/dispatcher-config/device-types",
                 "/usr/share/lava-server/device-types"]),
        }

    # -- up -------------------------------------------------------------------
    def up(self, progress: Callable[[str], None] = lambda s: None) -> LabState:
        for tool in ("lava-server", "gunicorn3", "lava-worker", "lavacli"):
            if not shutil.which(tool):
                raise RtlabError(f"{tool} not found: Debian's lava-server, lava-dispatcher and lavacli "
                                 f"packages make the lab (env/apt-packages.txt; `make setup`)")
        st = self.database_up(progress)
        self._migrate(st, progress)
        self._write_templates(progress)
        self._provision(st, progress)
        self._write_state(st)
        self._start_server(st, progress)
        self._write_state(st)
        self._wait_ready(st, progress)
        return st

    def database_up(self, progress: Callable[[str], None] = lambda s: None) -> LabState:
        """The lab's directories and its PostgreSQL cluster, running (the
        first step of ``up``; ``down`` stops it)."""
        if not (PG_BIN / "initdb").exists():
            raise RtlabError(f"{PG_BIN}/initdb not found: Debian's postgresql-15 package (env/apt-packages.txt)")
        for d in reversed([self.dir, *self.dir.parents]):
            if not d.exists():  # passable by lava-server's user, whatever the umask
                d.mkdir(mode=0o755)
                os.chmod(d, 0o755)
        for sub in ("log", "media", "devices", "device-types", "health-checks", "worker"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        st = self.read_state()
        if not st.secret_key:
            st.secret_key = os.urandom(24).hex()
        self._postgres(st, progress)
        self._write_state(st)
        return st

    def _run(self, cmd: list[str], st: LabState, what: str, timeout: float = 600, cwd: Optional[Path] = None,
             **kw) -> str:
        res = subprocess.run(cmd, env=self.env(st), cwd=cwd or self.dir, capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL, **kw)
        if res.returncode != 0:
            raise RtlabError(f"LAVA lab: {what} failed ({res.returncode}): "
                             f"{(res.stderr or res.stdout).strip()[-800:]}")
        return res.stdout

    def _as_postgres(self, cmd: list[str], st: LabState, what: str, timeout: float = 120) -> str:
        # cwd: a directory postgres may enter (initdb reads its working directory)
        return self._run(["runuser", "-u", "postgres", "--", *cmd], st, what, timeout=timeout,
                         cwd=self.service_dir)

    @property
    def service_dir(self) -> Path:
        """What the ``postgres`` account opens: service_state_dir()."""
        return service_state_dir(self.dir)

    def _postgres(self, st: LabState, progress) -> None:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise RtlabError("no postgres user: Debian's postgresql package makes it (env/apt-packages.txt)") from None
        state = make_service_state_dir(self.dir, pw)
        pg = state / "pg"
        sock = state / "pg-socket"
        if not (pg / "PG_VERSION").exists():
            progress("lava lab: new PostgreSQL cluster (initdb)")
            shutil.rmtree(pg, ignore_errors=True)
            pg.mkdir(mode=0o700)
            os.chown(pg, pw.pw_uid, pw.pw_gid)
            self._as_postgres([str(PG_BIN / "initdb"), "-D", str(pg), "-A", "trust", "-U", "postgres",
                               "--no-instructions"], st, "initdb")
        sock.mkdir(exist_ok=True)
        os.chown(sock, pw.pw_uid, pw.pw_gid)
        log = self.dir / "log" / "postgres.log"
        if st.running("postgres"):
            return
        if not st.pg_port or not _port_free(st.pg_port):
            st.pg_port = free_port()
        # postgres in a session of its own, its log ours (opened here, as root)
        proc = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "postgres"), "-D", str(pg), "-k", str(sock),
             "-p", str(st.pg_port), "-c", "listen_addresses=127.0.0.1"],
            stdin=subprocess.DEVNULL, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
            start_new_session=True, cwd=state)
        st.pids["postgres"] = [proc.pid, process_start(proc.pid) or 0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run([str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(st.pg_port)],
                               capture_output=True)
            if r.returncode == 0:
                break
            if proc.poll() is not None:
                raise RtlabError(f"LAVA lab: postgres exited ({proc.returncode}); see {log}")
            time.sleep(0.5)
        else:
            raise RtlabError(f"LAVA lab: postgres not ready on 127.0.0.1:{st.pg_port} after 60 s; see {log}")
        have = self._as_postgres(["psql", "-h", "127.0.0.1", "-p", str(st.pg_port), "-U", "postgres", "-tAc",
                                  "SELECT 1 FROM pg_database WHERE datname='lavaserver'"], st, "psql")
        if have.strip() != "1":
            self._as_postgres(["createdb", "-h", "127.0.0.1", "-p", str(st.pg_port), "-U", "postgres",
                               "lavaserver"], st, "createdb")

    def _migrate(self, st: LabState, progress) -> None:
        stamp = self.service_dir / "migrated"  # the cluster's schema: beside the cluster
        version = self._lava_version()
        if stamp.exists() and stamp.read_text() == version:
            return
        progress("lava lab: lava-server database schema (manage migrate, about a minute)")
        self._run(["lava-server", "manage", "migrate", "--noinput"], st, "lava-server manage migrate", timeout=900)
        stamp.write_text(version)

    @staticmethod
    def _lava_version() -> str:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "lava-server"], capture_output=True, text=True)
        return res.stdout.strip() or "unknown"

    def lab_boards(self) -> dict:
        """The boards of this ``up``: every QEMU board, or those asked for
        (any board of lava/boards.yaml that runs on this machine)."""
        from .boards import load_lava_boards

        here = {n: lb for n, lb in load_lava_boards().items() if lb.runs_here}
        if not self.boards:
            return {n: lb for n, lb in here.items() if not lb.lab}
        unknown = [b for b in self.boards if b not in here]
        if unknown:
            raise RtlabError(f"LAVA lab: no board {', '.join(unknown)} that runs on this machine in "
                             f"lava/boards.yaml (known: {', '.join(sorted(here))})")
        return {n: here[n] for n in self.boards}

    def _write_templates(self, progress) -> None:
        """Per board: its device-type template and its device dictionary
        (a board whose template changed is health-checked again)."""
        for name, lb in self.lab_boards().items():
            template = self.dir / "device-types" / f"rtlab-{name}.jinja2"
            text = device_type_template(lb)
            if not template.exists() or template.read_text() != text:
                template.write_text(text)
                self.changed_templates.add(name)
            (self.dir / "devices" / f"{name}-01.jinja2").write_text(
                f"{{# rtlab board {name}: written by `rtlab lava lab up` #}}\n"
                f"{{% extends 'rtlab-{name}.jinja2' %}}\n")

    def _provision(self, st: LabState, progress) -> None:
        boards = self.lab_boards()
        devices = {f"{name}-01": [name, lb.device_type] for name, lb in boards.items()}
        out = self._run(["lava-server", "manage", "shell", "-c", provision_script(devices)], st,
                        "provisioning", timeout=600)
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RtlabError(f"LAVA lab: provisioning said {out.strip()[-300:]!r}") from None
        # the devices of earlier `up --board` calls stay the lab's
        st.token, st.worker_token = answer["token"], answer["worker_token"]
        st.devices = {**st.devices, **{d: name for d, (name, _) in devices.items()}}

    def _spawn(self, st: LabState, service: str, cmd: list[str]) -> None:
        if st.running(service):
            return
        log = open(self.dir / "log" / f"{service}.out", "ab")
        proc = subprocess.Popen(cmd, env=self.env(st), cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        st.pids[service] = [proc.pid, process_start(proc.pid) or 0]

    def _start_server(self, st: LabState, progress) -> None:
        if not st.running("gunicorn"):
            if not st.http_port or not _port_free(st.http_port):
                st.http_port = free_port()
        progress(f"lava lab: lava-server on {st.url}, scheduler, lava-worker {WORKER}")
        logs = self.dir / "log"
        # eventlet, as Debian's unit runs it (long log downloads); a generous
        # timeout: on a loaded 2-core machine a worker can miss 30 s heartbeats
        self._spawn(st, "gunicorn", ["gunicorn3", "lava_server.wsgi", "--log-level", "INFO",
                                     "--log-file", str(logs / "gunicorn.log"), "--worker-class", "eventlet",
                                     "--workers", "2", "--timeout", "300", "--bind", f"127.0.0.1:{st.http_port}"])
        self._spawn(st, "scheduler", ["lava-server", "manage", "lava-scheduler", "--level", "INFO",
                                      "--log-file", str(logs / "scheduler.log")])
        self._spawn(st, "worker", ["lava-worker", "--level", "INFO", "--log-file", str(logs / "worker.log"),
                                   "--url", st.url, "--token", st.worker_token, "--name", WORKER,
                                   "--worker-dir", str(self.dir / "worker")])

    def _wait_ready(self, st: LabState, progress) -> None:
        """Until the API answers and the worker is online."""
        deadline = time.monotonic() + UP_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            for service in SERVICES:
                if not st.running(service):
                    raise RtlabError(f"LAVA lab: {service} exited; see {self.dir / 'log'}")
            try:
                workers = self.api(st, f"workers/{WORKER}/")
                if workers.get("state") == "Online":
                    return
                last = f"worker {WORKER} is {workers.get('state')}"
            except (OSError, ValueError, urllib.error.URLError) as e:
                last = f"API not answering: {e}"
            time.sleep(2)
        raise RtlabError(f"LAVA lab: not ready after {UP_TIMEOUT_S} s ({last}); see {self.dir / 'log'}")

    def api(self, st: LabState, path: str) -> dict:
        """GET the REST API (api/v0.2/<path>) as the lab's user."""
        req = urllib.request.Request(f"{st.url}api/v0.2/{path}", headers={"Authorization": f"Token {st.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read(1 << 22))

    # -- health checks --------------------------------------------------------
    def write_health_checks(self, st: LabState, jobs: dict[str, Path]) -> None:
        """Install a rendered rtlab job as each board's health check
        (HEALTH_CHECKS_PATH/rtlab-<board>.yaml, found by the dictionary's
        template) and have LAVA run it: devices go to health Unknown, and
        the scheduler runs the health check before any other job."""
        changed = set(self.changed_templates)
        for board, job in jobs.items():
            check = self.dir / "health-checks" / f"rtlab-{board}.yaml"
            text = Path(job).read_text()
            if not check.exists() or check.read_text() != text:
                check.write_text(text)
                changed.add(board)
        # a device whose check and template did not change keeps its verdict
        # (an `up` of a running lab does not re-check every device)
        script = RECHECK.format(params=json.dumps([d for d, b in st.devices.items() if b in changed]))
        self._run(["lava-server", "manage", "shell", "-c", script], st, "health checks", timeout=600)

    def add_device(self, hostname: str, tag: str, device_type: str = DEVICE_TYPE) -> None:
        """One more device on the lab's worker, health Unknown (its
        dictionary, ``devices/<hostname>.jinja2``, written by the caller)."""
        st = self.read_state()
        self._run(["lava-server", "manage", "shell", "-c", provision_script({hostname: [tag, device_type]})],
                  st, "add device", timeout=600)

    def retire_device(self, hostname: str) -> None:
        st = self.read_state()
        self._run(["lava-server", "manage", "devices", "update", "--health", "RETIRED", hostname], st,
                  "retire device", timeout=300)

    # -- status, down ---------------------------------------------------------
    def status(self) -> dict:
        st = self.read_state()
        out: dict = {"dir": str(self.dir), "service_dir": str(self.service_dir), "services": {s: st.running(s) for s in SERVICES}}
        if st.http_port:
            out["url"] = st.url
        if all(out["services"].values()):
            try:
                out["devices"] = {d["hostname"]: {"health": d["health"], "state": d["state"],
                                                  "board": st.devices.get(d["hostname"], "")}
                                  for d in self.api(st, "devices/?limit=100")["results"]}
            except (OSError, ValueError, urllib.error.URLError) as e:
                out["devices_error"] = str(e)
        return out

    def down(self, timeout: float = 30) -> list[str]:
        """Stop every process of the lab (worker first: its lava-run and QEMU
        go with its session); returns what was stopped."""
        from ..run.joblife import kill_tree

        st = self.read_state()
        stopped = []
        for service in reversed(SERVICES):
            if not st.running(service):
                continue
            pid = st.pids[service][0]
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and st.running(service):
                time.sleep(0.2)
            if st.running(service):
                kill_tree(pid)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            stopped.append(service)
        # lava-worker starts each job's lava-run in a session of its own: one
        # that outlives the worker (a job running at `down`) spins on without
        # its server, at most of a CPU. The lab's processes all work in the
        # lab's directory, which nothing else of the machine does
        strays = processes_in_dir(self.dir)
        if strays:
            for pid in strays:
                kill_tree(pid)
            stopped.append(f"{len(strays)} job process(es)")
        st.pids = {}
        if self.state_file.exists():
            self._write_state(st)
        return stopped


def device_type_template(lb) -> str:
    """The board's device-type template (``rtlab-<board>.jinja2``)."""
    if lb.lab:
        return rendered_dictionary_template(lb)
    return qemu_type_template(lb)


def rendered_dictionary_template(lb) -> str:
    """A twin's or U-Boot board's template: its lava-run device dictionary,
    with the dispatcher address of its ``--dispatcher`` file filled in where
    LAVA would substitute it (``{SERVER_IP}``: the TFTP server U-Boot loads
    from), since the lab's worker has no per-board dispatcher file."""
    import yaml

    text = Path(lb.device).read_text()
    if lb.dispatcher is not None:
        ip = (yaml.safe_load(Path(lb.dispatcher).read_text()) or {}).get("dispatcher_ip")
        if ip:
            text = text.replace("{SERVER_IP}", str(ip))
    head = (f"{{# rtlab board {lb.name}: lava/devices/{Path(lb.device).name} as lava-run runs it"
            f" (written by `rtlab lava lab up`) #}}\n")
    return head + text


def qemu_type_template(lb) -> str:
    """A QEMU board's device-type template: LAVA's ``qemu`` type with the
    board's machine, CPU, memory and options (from its labgrid env file),
    whatever the job context says."""
    q = lb.qemu
    arch = lb.lava_arch
    extra = [o for o in q.extra]
    return textwrap.dedent(f"""\
        {{# rtlab board {lb.name}: LAVA's qemu type, set to the machine env/{lb.name}.yaml boots
           (written by `rtlab lava lab up`; TCG: no KVM on this host) #}}
        {{% extends 'qemu.jinja2' %}}
        {{% set arch = '{arch}' %}}
        {{% set machine = '{q.machine}' %}}
        {{% set cpu = '{q.cpu}' %}}
        {{% set memory = {q.memory_mb} %}}
        {{% set no_kvm = True %}}
        {{% set netdevice = 'user' %}}
        {{% set extra_options = {json.dumps(extra)} %}}
        """)


def provision_script(devices: dict[str, list[str]]) -> str:
    """The provisioning script for *devices* (hostname -> [board, device type])."""
    return PROVISION.format(params=json.dumps({"user": LAB_USER, "worker": WORKER, "devices": devices}))


#: run by `lava-server manage shell -c` (Django's ORM, in one process: each
#: `manage` command costs seconds of start-up); idempotent; prints the tokens
PROVISION = """
import json, secrets
from django.contrib.auth.models import User
from linaro_django_xmlrpc.models import AuthToken
from lava_scheduler_app.models import Device, DeviceType, Tag, Worker
p = json.loads({params!r})
u, _ = User.objects.get_or_create(username=p["user"])
u.is_superuser = u.is_staff = True
u.save()
tok = AuthToken.objects.filter(user=u, description="rtlab").first()
if tok is None:
    tok = AuthToken.objects.create(user=u, description="rtlab")
w, _ = Worker.objects.get_or_create(hostname=p["worker"])
w.health = Worker.HEALTH_ACTIVE
w.save()
for hostname, (board, device_type) in p["devices"].items():
    dt, _ = DeviceType.objects.get_or_create(name=device_type)
    tag, _ = Tag.objects.get_or_create(name=board, defaults={{"description": "rtlab board " + board}})
    d, created = Device.objects.get_or_create(hostname=hostname, defaults={{"device_type": dt, "worker_host": w}})
    d.device_type, d.worker_host = dt, w
    if created or d.health == Device.HEALTH_RETIRED:
        d.health = Device.HEALTH_UNKNOWN
    d.save()
    d.tags.set([tag])
print(json.dumps({{"token": tok.secret, "worker_token": w.token}}))
"""

#: devices whose health check changed: health Unknown, so LAVA checks them first
RECHECK = """
import json
from lava_scheduler_app.models import Device
for hostname in json.loads({params!r}):
    d = Device.objects.get(hostname=hostname)
    if d.health != Device.HEALTH_UNKNOWN:
        d.health = Device.HEALTH_UNKNOWN
        d.save()
"""
