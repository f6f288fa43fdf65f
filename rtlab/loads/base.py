"""How a load runs on a board: started before the measurement, sampled once
a second while it runs, checked over the measurement window, stopped after.

Board side (any POSIX sh: busybox ash on the QEMU images, dash on the local
board), one directory per load and suite run,
``/tmp/rtlab/loads/<suite>@<load>/<load>/``:

* ``cmd.sh``: the workload, generated per load. It runs under ``setsid``,
  so its PID is the session and process group of everything it starts;
  each essential process ("part") is started in the background, pinned with
  ``taskset -c`` to the load CPUs, and listed in ``parts`` (name, pid).
* ``rtlab-load.sh sample DIR`` (one shared helper): a sampler in a session
  of its own, pinned to the load CPUs, appending a line a second to
  ``samples.txt`` (see :mod:`rtlab.loads.health`) until ``DIR/stop`` exists.
* ``rtlab-load.sh snap DIR``: one sample right now plus the names of dead
  parts and the /proc/stat CPU lines, taken over the console right before
  and right after the tool: the measurement window.
* ``rtlab-load.sh stop DIR SIGNALS``: signals the whole session (graceful
  signal first so stress-ng writes its YAML, iperf3 and ping their
  summaries), SIGKILL last; it goes on to the next signal once the parts
  have exited (the session's shells ignore SIGINT) or the whole session has.

The lab's own bookkeeping must not starve behind the load it watches: the
helper runs at nice -20, and so does the console shell while a load runs
(it starts the tool and fetches its raw files before the load is stopped;
without it, 50 hackbench tasks on one TCG CPU stretch a 2 s measurement's
window to 40 s). The tools that measure set their own RT priority; the one
SCHED_OTHER measurement, hackbench, resets itself to nice 0.

Every raw file the load wrote is copied next to the suite's raw output as
``load-<load>-<file>``, plus ``load-<load>.json``, rtlab's summary of the
window (CPU share, stalls, throughput, problems). A load that died, stalled
or never started raises :class:`LoadDied` naming it: the suite result is
INFRA, never a latency measured on an idle board.
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import os
import shlex
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional, Sequence, Union

from ..targets.boards import Board, job_workdir
from ..core.config import format_cpulist, parse_cpulist
from ..errors import SuiteFailure
from ..registry import Registry
from . import health

LOADS_ROOT = "/tmp/rtlab/loads"
#: what every board load leaves in its directory (besides its own raw_files)
LOAD_DIR_FILES = ("samples.txt", "cmd.sh", "cmd.log", "died")
#: niceness of the console shell while a load runs (see Load.running)
CONSOLE_NICE = -20


#: the longest a load runs when nothing tells it how long its measurement is
STRESS_NG_TIMEOUT_S = 30 * 86400
#: a load's own deadline past its measurement's duration bound: it ends by
#: itself even when nothing of the job is left to stop it (the runner and its
#: keeper both SIGKILLed), so the next run never measures under it
LOAD_DEADLINE_MARGIN_S = 600


def load_deadline_s(env: "LoadEnv") -> int:
    """How long a load of the suite run *env* carries may live: twice its
    duration bound (``env.duration_s``: Suite.duration_s, what the console
    waits for) plus LOAD_DEADLINE_MARGIN_S; STRESS_NG_TIMEOUT_S where no
    duration is known. Its script, its sampler and stress-ng's --timeout
    each keep it (BoardLoad.script)."""
    if env.duration_s is None:
        return STRESS_NG_TIMEOUT_S
    return min(STRESS_NG_TIMEOUT_S, int(2 * env.duration_s) + LOAD_DEADLINE_MARGIN_S)


class LoadDied(Exception):
    """The load did not run for the whole measurement: infra."""


LoadDied.__module__ = "rtlab.loads"  # how reports name it: rtlab.loads.LoadDied


#: the board-side helper (sampler, snapshots, stop), one file for labgrid and LAVA
HELPER = (Path(__file__).parent / "rtlab-load.sh").read_text()
HELPER_DIGEST = hashlib.sha256(HELPER.encode()).hexdigest()[:12]
HELPER_PATH = f"{LOADS_ROOT}/rtlab-load-{HELPER_DIGEST}.sh"


def put_file(sh, path: str, data: bytes, mode: int = 0o644, chunk: int = 512) -> None:
    """Write *data* to *path* on the board over the console: gzip + base64 in
    short lines (a serial console line editor mangles lines of a few kB)."""
    b64 = base64.b64encode(gzip.compress(data, mtime=0)).decode()
    q = shlex.quote(path)
    tmp = shlex.quote(path + ".b64")
    sh.check(f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0] or '/')} && : > {tmp}")
    for i in range(0, len(b64), chunk):
        sh.check(f"printf %s {b64[i:i + chunk]} >> {tmp}")
    out = sh.check(f"base64 -d {tmp} | gunzip > {q} && rm -f {tmp} && chmod {mode:o} {q} && wc -c < {q}")
    if not out or out[-1].strip() != str(len(data)):
        raise SuiteFailure(f"writing {path} on the board: size {out[-1:] if out else '?'}, "
                           f"expected {len(data)}")


def ensure_helper(sh, present: bool = False) -> str:
    if not present:
        _, rc = sh.run(f"test -f {HELPER_PATH}")
        if rc != 0:
            put_file(sh, HELPER_PATH, HELPER.encode())
    return HELPER_PATH


@dataclass
class LoadEnv:
    """What a load knows when it starts: the board, the suite run, its options."""

    sh: Any                          # rtlab.suites.board.BoardShell
    host_dir: Path                   # the suite run's raw directory on the host
    run: Any                         # rtlab.suites.SuiteRun
    board: Board                     # the job's board (a dict is read as one: tests, LAVA specs)
    #: the suite run's duration bound (Suite.duration_s), s: the load's own deadline follows it
    duration_s: Optional[float] = None
    online: list[int] = field(default_factory=list)
    isolated: list[int] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)   # the CPUs the load runs on
    mem_total_kb: int = 0
    mem_avail_kb: int = 0
    tmp_avail_kb: int = 0
    helper: bool = False                             # the helper is on the board already
    console_nice: Optional[int] = None               # niceness of the console shell
    opts: dict = field(default_factory=dict)         # campaign load_opts[<load>]
    # what a load learns while it runs (never the campaign's options)
    ready: bool = False                              # it got going (start() returned)
    port: Optional[int] = None                       # host-side server port (network)
    window: Optional[tuple[float, float]] = None     # board uptime of the two snapshots

    def __post_init__(self) -> None:
        self.board = as_board(self.board, len(self.cpus))

    @property
    def cpulist(self) -> str:
        return format_cpulist(self.cpus)

    @property
    def ncpus(self) -> int:
        return len(self.cpus)

    @property
    def is_qemu(self) -> bool:
        """An emulated (TCG) board: the QEMU boards, and the rack's virtual
        boards, which are remote places but QEMU machines all the same."""
        return self.board.emulated


def as_board(board: Union[Board, dict, None], ncpus: int = 1) -> Board:
    """The job's board; a dict (a LAVA spec's, a test's) may name only some fields."""
    if isinstance(board, Board):
        return board
    d = board or {}
    return Board(name=d.get("name", ""), env_file=Path(d.get("env_file", "")), arch=d.get("arch", ""),
                 cpus=int(d.get("cpus") or ncpus or 1), isolate_cpu=d.get("isolate_cpu"),
                 budget_class=d.get("budget_class", ""), kind=d.get("kind", ""),
                 features=tuple(d.get("features", ())))


def console_renice(nice: int) -> str:
    """The board command that sets the console shell's niceness. labgrid's
    ShellDriver runs every command as `sh -c CMD` from the console shell, so
    the console is the command's parent ($PPID); `$$` would be the `sh -c`
    that exits at once (which it was until 2026-11-23: the renice did nothing)."""
    return f"renice {int(nice)} -p $PPID > /dev/null 2>&1"


#: what a load that needs no board facts is told (no CPUs to place it on, no console niceness to change)
NO_BOARD_FACTS = {"online": [], "isolated": [], "mem_total_kb": 0, "mem_avail_kb": 0, "tmp_avail_kb": 0,
                  "helper": False, "console_nice": None}


def probe_board(sh) -> dict:
    """Online and isolated CPUs, memory and /tmp space, read off the board."""
    # shell builtins where they do (a process start is ~10 ms on a TCG board)
    out, _ = sh.run(
        "o=; read -r o < /sys/devices/system/cpu/online; echo \"online $o\"; "
        "i=; read -r i 2>/dev/null < /sys/devices/system/cpu/isolated; echo \"isolated $i\"; "
        "while read -r k v _; do case $k in MemTotal:|MemAvailable:) echo \"$k $v\";; esac; done < /proc/meminfo; "
        "echo \"tmp $(df -Pk /tmp | tail -n 1)\"; "
        f"test -f {HELPER_PATH} && echo helper; "
        # the console shell's niceness (see console_renice: it is $PPID here)
        "( read -r l < /proc/$PPID/stat; set -- ${l##*) }; echo \"nice ${17}\" )")
    info = dict(NO_BOARD_FACTS)
    for line in out:
        f = line.split()
        if not f:
            continue
        if f[0] == "online" and len(f) > 1:
            info["online"] = parse_cpulist(f[1])
        elif f[0] == "isolated" and len(f) > 1:
            info["isolated"] = parse_cpulist(f[1])
        elif f[0] == "MemTotal:":
            info["mem_total_kb"] = int(f[1])
        elif f[0] == "MemAvailable:":
            info["mem_avail_kb"] = int(f[1])
        elif f[0] == "tmp" and len(f) >= 5 and f[4].isdigit():
            info["tmp_avail_kb"] = int(f[4])
        elif f == ["helper"]:
            info["helper"] = True
        elif f[0] == "nice" and len(f) == 2 and f[1].lstrip("-").isdigit():
            info["console_nice"] = int(f[1])
    return info


def load_cpus(setting, online: list[int], isolated: list[int]) -> list[int]:
    """The CPUs a load runs on: the campaign's ``load_cpus`` (a list, a cpulist
    string, or "all"), else ("auto") the housekeeping CPUs: every online CPU
    that is not isolated, or all of them when there is no isolation."""
    if setting in (None, "auto"):
        house = [c for c in online if c not in isolated]
        return house or list(online)
    if setting == "all":
        return list(online)
    cpus = parse_cpulist(setting) if isinstance(setting, str) else [int(c) for c in setting]
    missing = [c for c in cpus if c not in online]
    if missing:
        raise LoadDied(f"load_cpus {setting!r}: CPUs {missing} are not online "
                       f"(online: {format_cpulist(online)})")
    return cpus


class LoadRegistry(Registry["Load"]):
    """Loads by name (rtlab.registry); "a+b" names a composition of registered
    loads (:class:`rtlab.loads.catalog.Composite`), made when asked for."""

    def _compose(self, key: str) -> Optional["Load"]:
        names = key.split("+")
        if len(names) < 2 or len(set(names)) != len(names) or "idle" in names:
            return None
        if not all(Registry.__contains__(self, n) for n in names):
            return None
        return Composite(tuple(Registry.__getitem__(self, n) for n in names))

    def __getitem__(self, key: str) -> "Load":
        try:
            return Registry.__getitem__(self, key)
        except KeyError:
            load = self._compose(key) if isinstance(key, str) else None
            if load is None:
                raise
            return load

    def __contains__(self, key: object) -> bool:
        return Registry.__contains__(self, key) or (isinstance(key, str) and self._compose(key) is not None)

    def programme(self) -> list[str]:
        """``loads: all`` in a campaign: every registered load but the
        deliberate breaches (fifo-hog), in registration order."""
        return [n for n, l in self.items() if not l.deliberate_breach]


#: every load, by name: a subclass of Load with a ``name`` registers itself;
#: every module of rtlab/loads is imported on first read (a load in a new
#: file there is registered like the catalog's)
LOADS = LoadRegistry("load", "rtlab.loads")


class Load:
    """A named scenario a suite runs under; ``running()`` brackets the measurement."""

    name: str  # class attributes; a Composite sets them per instance
    description: str = ""
    #: what the health check of this load really measures (README, report)
    measures: ClassVar[str] = ""
    #: options a campaign may set under ``load_opts: {<load>: {...}}``, with defaults
    options: ClassVar[dict[str, Any]] = {}
    #: a load that breaks budgets on purpose (fifo-hog): checks the gate and
    #: evidence chain, never part of a measurement programme of every load
    deliberate_breach: ClassVar[bool] = False
    #: it runs real-time threads of its own (fifo-hog): they can stop every
    #: CPU at once, so the host's stall witness is not trusted under it
    realtime_threads: ClassVar[bool] = False
    #: it needs the board's CPUs, memory and /tmp space (:func:`probe_board`)
    #: to place and size itself; a load that starts nothing (idle) does not,
    #: and saves the console command
    needs_board_facts: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        LOADS.subclass_hook(cls)  # shared bases (StressNg) and Composite have no name: not registered

    def parts(self) -> tuple["Load", ...]:
        return (self,)

    def start(self, env: LoadEnv) -> Any:
        return None

    def begin(self, env: LoadEnv, handle) -> None:
        """Right before the tool starts."""

    def end(self, env: LoadEnv, handle) -> None:
        """Right after the tool ended."""

    def stop(self, env: LoadEnv, handle, measured: bool) -> list[str]:
        """Stop, keep raw files, summarise; return the problems found."""
        return []

    @contextlib.contextmanager
    def running(self, sh, host_dir: Path, run, board: Union[Board, dict, None] = None,
                duration_s: Optional[float] = None) -> Iterator[None]:
        """Start every part of the load, yield for the measurement, stop and
        check them all; raise LoadDied naming every load that failed."""
        params = run.params or {}
        all_opts = params.get("load_opts") or {}
        if any(load.needs_board_facts for load in self.parts()):
            info = probe_board(sh)
            cpus = load_cpus(params.get("load_cpus", "auto"), info["online"], info["isolated"])
        else:  # nothing to place or size
            info, cpus = dict(NO_BOARD_FACTS), []
        started, problems, measured, reniced = [], [], False, False
        try:
            for load in self.parts():
                env = LoadEnv(sh=sh, host_dir=Path(host_dir), run=run, board=as_board(board),
                              duration_s=duration_s, cpus=cpus, opts={**load.options, **all_opts.get(load.name, {})},
                              **info)
                started.append((load, env, load.start(env)))  # LoadDied if it never got going
            if info["console_nice"] is not None and any(isinstance(l, BoardLoad) for l, _, _ in started):
                # the console shell (it starts the tool, then fetches its raw
                # files while the load still runs) must not starve behind the
                # load: nice -20 until the load stops. RT tools do not care;
                # SCHED_OTHER tools reset it (Hackbench.command)
                sh.run(console_renice(CONSOLE_NICE))
                reniced = True
            for load, env, handle in started:
                load.begin(env, handle)
            yield
            for load, env, handle in started:
                load.end(env, handle)
            measured = True
        finally:
            if reniced:
                sh.run(console_renice(info["console_nice"]))
            # every started load is stopped, whatever happened in between
            for load, env, handle in reversed(started):
                try:
                    problems += [f"load {load.name}: {p}" for p in load.stop(env, handle, measured)]
                except Exception as e:  # noqa: BLE001 - keep stopping the others
                    problems.append(f"load {load.name}: could not be stopped: {type(e).__name__}: {e}")
        if problems:
            raise LoadDied("; ".join(problems))


class BoardLoad(Load):
    """A load that runs as processes on the board (see the module docstring)."""

    #: the signals that stop it, in order (graceful first)
    stop_signals: ClassVar[str] = "INT TERM KILL"
    #: its process count must not drop during the window (stress-ng workers)
    stable_procs: ClassVar[bool] = False
    #: raw files of the load directory kept on the host (besides samples.txt)
    files: ClassVar[tuple[str, ...]] = ()
    #: how long a start may take (s): QEMU TCG forks slowly
    ready_timeout_s: ClassVar[float] = 60.0
    #: longest launch line with cmd.sh in it (gzip + base64); a longer script
    #: is written first with put_file: busybox's line editor (QEMU boards)
    #: cuts a console line past 1024 characters, the shell's prompt and the
    #: driver's marker included, and the cut line hangs the console
    launch_line_max: ClassVar[int] = 900
    #: its commands depend on the board's memory or /tmp space (a LAVA job,
    #: rendered before the board runs, needs them from the board description)
    scales_with_memory: ClassVar[bool] = False
    #: it has a host side (host_start/host_stop), which a LAVA job does not have
    host_side: ClassVar[bool] = False

    options: ClassVar[dict[str, Any]] = {
        # longest stretch without a CPU tick of the load that still counts as running
        "stall_s": 5.0,
        # seconds the load runs before the measurement starts
        "settle_s": 1.0,
        # test only: the load's session is killed this many seconds into the measurement
        "die_after_s": None,
    }

    # -- what a concrete load provides -------------------------------------------------
    def commands(self, env: LoadEnv) -> list[tuple[str, str]]:
        """(part name, shell command) of every essential process."""
        raise NotImplementedError

    def settings(self, env: LoadEnv) -> dict[str, Any]:
        """The scaled settings, recorded in load-<name>.json."""
        return {}

    def ready(self, env: LoadEnv, d: str) -> str:
        """A shell condition (run in the load dir) that says the load is going."""
        return "true"

    def raw_files(self, env: LoadEnv) -> tuple[str, ...]:
        return self.files

    def host_start(self, env: LoadEnv) -> Any:
        return None

    def host_stop(self, env: LoadEnv, host: Any) -> None:
        pass

    def throughput(self, env: LoadEnv, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
        """Its own numbers (bogo-ops/s, Mbit/s, rounds…) and problems they show."""
        return {}, []

    # -- mechanics ---------------------------------------------------------------------
    def dir(self, env: LoadEnv) -> str:
        return f"{job_workdir()}/loads/{env.run.id}/{self.name}"

    def script(self, env: LoadEnv) -> str:
        # its own deadline (load_deadline_s): the session killed whole when it
        # is reached, whatever is left to stop it; the sampler reads the same
        # deadline (board uptime, in "deadline") and ends by it too
        limit = load_deadline_s(env)
        lines = [f"# rtlab load {self.name} (generated): started with setsid, so $$ is the",
                 "# session and process group of everything below",
                 "echo $$ > sid",
                 f"read -r up _ < /proc/uptime; echo $((${{up%.*}} + {limit})) > deadline",
                 f"(sleep {limit} && echo 'load deadline of {limit} s reached: the session killed' > died "
                 "&& kill -KILL 0) > /dev/null 2>&1 &"]
        for name, cmd in self.commands(env):
            lines.append(f"taskset -c {env.cpulist} {cmd} &")
            lines.append(f"echo \"{name} $!\" >> parts")
        lines.append("wait")
        return "\n".join(lines) + "\n"

    def _run(self, env: LoadEnv, handle, cmd: str, timeout: float = 60, what: str = "") -> list[str]:
        """A console command of the load's bookkeeping, timed (load-<name>.json)."""
        t = time.monotonic()
        try:
            out, _ = env.sh.run(cmd, timeout=timeout)
        finally:
            dt = time.monotonic() - t
            handle["console_s"] = round(handle.get("console_s", 0.0) + dt, 3)
            handle["console_cmds"] = handle.get("console_cmds", 0) + 1
            handle.setdefault("console_steps", []).append([what or cmd.split()[0], round(dt, 2)])
        return out

    def _helper(self, handle, what: str, extra: str = "") -> str:
        return f"sh {handle['helper']} {what} {handle['dir']}{extra}"

    def start(self, env: LoadEnv) -> dict:
        sh, d = env.sh, self.dir(env)
        host = self.host_start(env)
        handle = {"dir": d, "helper": ensure_helper(sh, env.helper), "host": host, "first": None,
                  "last": None, "settings": self.settings(env)}
        try:
            text = self.script(env)
            packed = base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()
            def launch(fresh_dir: str, write: str) -> str:
                return (f"{fresh_dir} && ( cd {d} && {write} "
                        f"&& (setsid sh ./cmd.sh > cmd.log 2>&1 < /dev/null &) "
                        f"&& (setsid taskset -c {env.cpulist} sh {handle['helper']} sample {d} "
                        f"> /dev/null 2>&1 < /dev/null &) ) && echo LAUNCHED")
            fresh_dir = f"rm -rf {d} && mkdir -p {d}"
            line = launch(fresh_dir, f"printf %s {packed} | base64 -d | gunzip > cmd.sh")
            if len(line) > self.launch_line_max:  # one console line stays short
                sh.check(fresh_dir)
                put_file(sh, f"{d}/cmd.sh", text.encode())
                line = launch("true", ":")  # the directory holds cmd.sh now
            nparts = len(self.commands(env))
            out = self._run(env, handle, line, what="launch")
            if "LAUNCHED" not in [l.strip() for l in out]:
                raise LoadDied(f"load {self.name} could not be launched: {' | '.join(out[-3:])}")
            deadline = time.monotonic() + self.ready_timeout_s
            while True:
                time.sleep(0.3)
                out = self._run(env, handle, f"{self._helper(handle, 'snap')}; cd {d} && "
                                f"{{ {self.ready(env, d)} ; }} > /dev/null 2>&1 && echo READY; cd /",
                            what="ready?")
                snap = health.Snapshot.parse(out)
                s = snap.sample
                going = s is not None and s.parts == nparts and s.alive == nparts and s.procs > 0
                if going and s.ticks > 0 and "READY" in [l.strip() for l in out]:
                    break
                if s is not None and s.parts == nparts and s.alive < nparts:
                    raise LoadDied(f"load {self.name} did not start: "
                                   f"{', '.join(snap.dead) or 'a part'} exited at once "
                                   f"({self._log_tail(env, d)})")
                if time.monotonic() > deadline:
                    raise LoadDied(f"load {self.name} did not start within "
                                   f"{self.ready_timeout_s:g} s ({self._log_tail(env, d)})")
            env.ready = True
            time.sleep(float(env.opts.get("settle_s") or 0))
        except BaseException:
            try:
                self._stop_and_fetch(env, handle)
            finally:
                self.host_stop(env, host)
            raise
        return handle

    def _log_tail(self, env: LoadEnv, d: str) -> str:
        out, _ = env.sh.run(f"cd {d} && tail -n 3 cmd.log {' '.join(self.raw_files(env))} 2>/dev/null; cd /")
        text = " | ".join(l.strip() for l in out if l.strip() and not l.startswith("==>"))
        return text[-400:] or "no output"

    def _snap(self, env: LoadEnv, handle) -> health.Snapshot:
        return health.Snapshot.parse(self._run(env, handle, self._helper(handle, "snap"), what="snap"))

    def begin(self, env: LoadEnv, handle) -> None:
        handle["first"] = self._snap(env, handle)
        die = env.opts.get("die_after_s")
        if die:  # test only: the load's whole session is killed N s into the measurement
            d = handle["dir"]
            self._run(env, handle, (
                f"(setsid sh -c 'sleep {float(die):g}; echo \"die_after_s: killing the load\" > {d}/died; "
                f"kill -KILL -$(cat {d}/sid)' > /dev/null 2>&1 < /dev/null &)"), what="die_after_s")

    def end(self, env: LoadEnv, handle) -> None:
        handle["last"] = self._snap(env, handle)

    def _stop_and_fetch(self, env: LoadEnv, handle) -> dict[str, bytes]:
        """Stop the load, then bring every raw file back in one tar (byte-exact,
        gzip + base64 over the console) and remove the load directory."""
        d = handle["dir"]
        names = " ".join((*LOAD_DIR_FILES, *self.raw_files(env)))
        out = self._run(env, handle, (
            f"{self._helper(handle, 'stop', ' ' + shlex.quote(self.stop_signals))}; "
            f"cd {d} && echo RAW && tar -cf - $(for f in {names}; do [ -f $f ] && echo $f; done) "
            f"| gzip -c | base64; echo END; cd / && rm -rf {d}; rmdir {d.rsplit('/', 1)[0]} 2>/dev/null"),
            timeout=120, what="stop+fetch")
        lines = [l.strip() for l in out]
        files: dict[str, bytes] = {}
        if "RAW" in lines and "END" in lines:
            blob = "".join(lines[lines.index("RAW") + 1:lines.index("END")])
            try:
                with tarfile.open(fileobj=io.BytesIO(gzip.decompress(base64.b64decode(blob)))) as tar:
                    for m in tar.getmembers():
                        f = tar.extractfile(m) if m.isfile() else None
                        if f is not None:
                            files[os.path.basename(m.name)] = f.read()
            except (OSError, EOFError, ValueError, tarfile.TarError) as e:
                handle["fetch_error"] = f"{type(e).__name__}: {e}"
        else:
            handle["fetch_error"] = " | ".join(lines[-3:])
        env.host_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (env.host_dir / f"load-{self.name}-{name}").write_bytes(data)
        return files

    def stop(self, env: LoadEnv, handle, measured: bool) -> list[str]:
        try:
            files = self._stop_and_fetch(env, handle)
        finally:
            self.host_stop(env, handle["host"])
        problems = [f"raw files not fetched: {handle['fetch_error']}"] if handle.get("fetch_error") else []
        return self.judge(env, files, handle.get("first"), handle.get("last"), measured=measured,
                          settings=handle["settings"], problems=problems,
                          extra={"console": {"commands": handle.get("console_cmds", 0),
                                             "seconds": handle.get("console_s", 0.0),
                                             "steps": handle.get("console_steps", [])}})

    def judge(self, env: LoadEnv, files: dict[str, bytes], first: Optional[health.Snapshot],
              last: Optional[health.Snapshot], *, measured: bool, settings: dict,
              problems: Sequence[str] = (), extra: Optional[dict] = None) -> list[str]:
        """The load's window judged from its raw files, whoever drove it (the
        console here, a LAVA job in rtlab.lava.loads): writes
        ``load-<name>.json`` into env.host_dir and returns the problems."""
        problems = list(problems)
        summary: dict[str, Any] = {"load": self.name, "description": self.description,
                                   "measures": self.measures, "cpus": env.cpus, "settings": settings,
                                   **(extra or {})}
        if measured and first is not None and last is not None:
            samples = health.parse_samples(files.get("samples.txt", b"").decode(errors="replace"))
            w = health.check_window(samples, first, last, ncpus=env.ncpus,
                                    stall_s=float(env.opts.get("stall_s") or 5.0),
                                    stable_procs=self.stable_procs)
            summary["window"] = w.to_json()
            summary["board_busy"] = health.cpu_busy(first.cpu, last.cpu)
            problems += w.problems
        elif measured:
            problems.append("no snapshot of the measurement window")
        tp, tp_problems = self.throughput(env, files)
        summary["throughput"] = tp
        if "died" in files:
            problems.insert(0, files["died"].decode(errors="replace").strip())
        problems += [p for p in tp_problems if measured]
        summary["problems"] = problems
        env.host_dir.mkdir(parents=True, exist_ok=True)
        (env.host_dir / f"load-{self.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
        return problems


class Composite(Load):
    """Several loads started together (``stress+network``), each checked."""

    def __init__(self, loads: tuple[Load, ...]):
        self.loads = loads
        self.name = "+".join(l.name for l in loads)
        self.description = " and ".join(l.description for l in loads)

    def parts(self) -> tuple[Load, ...]:
        return self.loads
