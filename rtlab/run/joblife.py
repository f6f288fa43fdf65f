"""A job's life on the host: one job per board at a time, its own work dir
on the board, and nothing of it left running after it ends or is cancelled.

Board locks
    ``<lock dir>/<board>.lock`` (RTLAB_LOCK_DIR, default /tmp/rtlab-locks),
    held with flock(2) for as long as the job runs, so a killed holder frees
    it with its last file descriptor. The holder writes who it is (pid, run
    id, job) into the file; a second job waits, saying who holds the board,
    and gives up after the lock timeout (RTLAB_LOCK_TIMEOUT_S, ``rtlab run
    --lock-timeout``) as INFRA. QEMU boards are machines the job itself
    creates: nothing to share, no lock. Rack boards are locked by their
    labgrid place (the coordinator's reservation and lock, for every host
    of the lab); a host lock by board name would serialise jobs the rack
    runs on two places of one board kind.

Processes
    The runner makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
    what a job starts in sessions of its own (the local board's pty shell,
    loads under setsid, QEMU) is re-parented to the runner, not to init,
    when its parent goes. :func:`kill_tree` finds every descendant through
    /proc and kills them all, whatever their session.

A killed runner (rtlab.run.jobkeeper)
    A runner killed with SIGKILL cleans up nothing. Each job therefore has a
    keeper, a small process of its own that holds the job's board lock too
    (the same flock'd descriptor, inherited) and, when the runner goes
    without saying the job is done, ends every process of the job (in its
    cgroup where rtlab can make one, else those it saw: see jobkeeper) and
    only then exits, freeing the board. The job's pytest process also dies
    with the runner (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..core.rundir import RUN_STARTED
from ..errors import InfraError

LOCK_DIR_ENV = "RTLAB_LOCK_DIR"
LOCK_TIMEOUT_ENV = "RTLAB_LOCK_TIMEOUT_S"
DEFAULT_LOCK_TIMEOUT_S = 3600.0
#: seconds a cancelled job's board tests get to interrupt the tool and fetch
#: its raw files before everything of the job is killed
CANCEL_GRACE_ENV = "RTLAB_CANCEL_GRACE_S"
DEFAULT_CANCEL_GRACE_S = 30.0
#: seconds a killed runner's job processes get between SIGTERM and SIGKILL
KILL_GRACE_ENV = "RTLAB_KILL_GRACE_S"
DEFAULT_KILL_GRACE_S = 2.0
#: in the environment of every process of a job (the keeper's last look)
JOB_TOKEN_ENV = "RTLAB_JOB_TOKEN"
JOB_CGROUPS_ENV = "RTLAB_JOB_CGROUPS"
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or "/tmp/rtlab-locks")


def lock_timeout(given: Optional[float] = None) -> float:
    if given is not None:
        return given
    try:
        return float(os.environ.get(LOCK_TIMEOUT_ENV) or DEFAULT_LOCK_TIMEOUT_S)
    except ValueError:
        return DEFAULT_LOCK_TIMEOUT_S


def needs_lock(board) -> bool:
    """Only the local board: QEMU machines are per job, rack places are
    locked through the labgrid coordinator (rtlab.lab.places)."""
    return board.kind == "local"


def holder_of(path: Path, wait_s: float = 2.0) -> str:
    """Who holds a board lock, as its file says. A holder writes its name
    just after it takes the lock: a file still empty is read again (two runs
    started in the same second), for up to *wait_s*."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            h = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            h = {}
        if isinstance(h, dict) and h.get("pid"):
            return f"pid {h['pid']}, run {h.get('run_id', '?')}, job {h.get('job', '?')}"
        if time.monotonic() >= deadline:
            return "a holder that has not named itself"
        time.sleep(0.05)


@contextlib.contextmanager
def board_lock(board, run_id: str, job: str, progress: Callable[[str], None] = print,
               timeout: Optional[float] = None, poll_s: float = 0.5) -> Iterator[Optional[int]]:
    """Hold *board* for one job (see the module doc); InfraError after *timeout*.
    Yields the lock's descriptor (None: no lock), for the job's keeper to hold too."""
    if not needs_lock(board):
        yield None
        return
    timeout = lock_timeout(timeout)
    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{board.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        t0 = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if not said:
                progress(f"board {board.name} is busy ({holder_of(path)}): waiting up to {timeout:g} s")
                said = True
            if time.monotonic() - t0 >= timeout:
                raise InfraError(board.name, f"busy for more than {timeout:g} s, held by {holder_of(path)}")
            time.sleep(poll_s)
        # written over, then cut: never an empty file while a holder has the lock
        name = json.dumps({"pid": os.getpid(), "run_id": run_id, "job": job,
                           "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()
        os.pwrite(fd, name, 0)
        os.ftruncate(fd, len(name))
        if said:
            progress(f"board {board.name}: lock taken after {time.monotonic() - t0:.0f} s")
        try:
            yield fd
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _cgroup2_base() -> Optional[Path]:
    """This process's own cgroup in the cgroup v2 hierarchy (the unified one
    of a hybrid set-up too), where cgroup.kill exists; None without one."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        mine = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                    if ln.startswith("0::"))
    except (OSError, StopIteration):
        return None
    for ln in mounts:
        parts = ln.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            base = Path(parts[1]) / mine.lstrip("/")
            if (base / "cgroup.procs").is_file():
                return base
    return None


def job_cgroup(token: str) -> Optional[str]:
    """A new cgroup for one job (its processes, whatever they start, stay in
    it), or None where this machine does not let rtlab make one, or
    RTLAB_JOB_CGROUPS=0 says not to (the keeper then watches the processes)."""
    if os.environ.get(JOB_CGROUPS_ENV, "1") == "0":
        return None
    base = _cgroup2_base()
    if base is None:
        return None
    path = base / f"rtlab-job-{token}"
    try:
        path.mkdir()
    except OSError:
        return None
    if not (path / "cgroup.kill").exists():  # kernels before 5.14: the keeper watches instead
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return str(path)


def enter_cgroup(path: Optional[str]) -> None:
    """In the job process, before it starts anything: into the job's cgroup."""
    if path:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


def kill_grace() -> float:
    try:
        return max(0.0, float(os.environ.get(KILL_GRACE_ENV) or DEFAULT_KILL_GRACE_S))
    except ValueError:
        return DEFAULT_KILL_GRACE_S


class JobKeeper:
    """The runner's side of a job's keeper (rtlab.run.jobkeeper): started when the
    job holds its board, told the job's processes, told ``done`` at its end."""

    def __init__(self, lock_fd: Optional[int], salvage: Optional[tuple[str, Path]] = None):
        self.token = uuid.uuid4().hex
        self.cgroup = job_cgroup(self.token)
        script = Path(__file__).resolve().with_name("jobkeeper.py")
        # its own session (the terminal's Ctrl-C is the runner's), no
        # environment or cwd of the run (nothing of the run to find in it),
        # the lock's descriptor and nothing else
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(script), str(os.getpid()), f"{kill_grace():g}"],
            stdin=subprocess.PIPE, env={}, cwd="/", start_new_session=True,
            pass_fds=(lock_fd,) if lock_fd is not None else ())
        lines = [f"exclude {' '.join(map(str, my_children()))}", f"token {self.token}"]
        if self.cgroup:
            lines.append(f"cgroup {self.cgroup}")
        if salvage is not None:
            lines.append("salvage " + json.dumps([str(salvage[0]), str(salvage[1])]))
        self._say(*lines)

    def _say(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{ln}\n" for ln in lines).encode())
        self.proc.stdin.flush()

    def add(self, pid: int) -> None:
        """A process of the job (its pytest)."""
        self._say(f"pid {pid}")

    def done(self) -> None:
        """The runner ended the job: the keeper removes the job's cgroup (and
        kills strays left in it) and exits; the board lock is the runner's again."""
        try:
            self._say("done")
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        self.proc.wait()


@contextlib.contextmanager
def job_keeper(lock_fd: Optional[int], salvage: Optional[tuple[str, Path]] = None) -> Iterator[JobKeeper]:
    keeper = JobKeeper(lock_fd, salvage)
    try:
        yield keeper
    finally:
        keeper.done()


def mark_run_started(run_dir: Path, run_id: str, campaign: str) -> None:
    from ..core.procutil import process_start
    (Path(run_dir) / RUN_STARTED).write_text(json.dumps({
        "run_id": run_id, "campaign": campaign, "pid": os.getpid(), "pid_start": process_start(os.getpid()),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")


def board_workdir(run_id: str, board: str, variant: str) -> str:
    """The job's own work dir on the board (all parts are safe names)."""
    return f"/tmp/rtlab/jobs/{run_id}-{board}-{variant}"


def become_subreaper() -> bool:
    """Orphans of this process's descendants come back to it (see the module doc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Is this process a child subreaper (:func:`become_subreaper`)?"""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value != 0
    except (OSError, AttributeError):
        return False


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(p.name))
    return kids


def descendants(root: int) -> list[int]:
    kids = _children()
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(root: Optional[int] = None, sig: int = signal.SIGKILL) -> list[int]:
    """Signal every descendant of *root* (default: this process), in every
    session; reap the ones re-parented to us. Returns the pids signalled."""
    me = os.getpid()
    root = me if root is None else root
    hit: list[int] = []
    for _ in range(5):  # a dying shell may spawn or re-parent one more
        pids = [p for p in descendants(root) if p != me]
        if root != me:
            pids.append(root)
        # only what still runs: a job that ended cleanly costs no signal and
        # no wait (the 0.1 s below was paid at the end of every job)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            _reap_orphans()
            break
        for p in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
            hit.append(p)
        time.sleep(0.1)
        _reap_orphans()
    return sorted(set(hit))


def my_children() -> set[int]:
    return set(_children().get(os.getpid(), []))


#: pids of the job processes this process started and waits for itself
#: (other jobs' pytest processes under --places): never killed as orphans,
#: never reaped here
JOB_PIDS: set[int] = set()


def kill_job(proc_pid: int, children_before: set[int], token: Optional[str] = None) -> list[int]:
    """Everything a job started: the tree under its pytest process, and what
    was re-parented to this (subreaper) process since the job began (loads
    that setsid made orphans), minus the other jobs' processes.

    With *token* (the job's RTLAB_JOB_TOKEN), a new child of this process is
    the job's orphan only if it carries the token: under ``--places N`` the
    other jobs' threads start children here too (labgrid-client reserving,
    locking, powering; their keepers), and a job that ended SIGKILLed them
    (a parallel job's lock failed "exit -9" in bench_rack at 2 and 4 places)."""
    hit = kill_tree(proc_pid)
    for pid in sorted(my_children() - children_before - JOB_PIDS - {proc_pid}):
        if token is not None and not carries_token(pid, token):
            continue
        hit += kill_tree(pid)
    return hit


def carries_token(pid: int, token: str) -> bool:
    """Whether process *pid* has the job's token in its environment (every
    process the job starts inherits it)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{JOB_TOKEN_ENV}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _reap_orphans() -> None:
    """Reap zombies re-parented to us (never our own subprocess.Popen
    children: those are reaped by their Popen objects)."""
    for pid in _children().get(os.getpid(), []):
        if pid in JOB_PIDS or _alive(pid):
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def salvage_local(workdir: str, job_dir: Path, suite_ids: list[str]) -> list[str]:
    """The local board's work dir is on this machine: copy what the tools
    wrote but no fetch brought home (a cancelled or hung job), then remove
    it. Returns the files copied (relative to job_dir)."""
    src_root = Path(workdir)
    copied: list[str] = []
    if not src_root.is_dir():
        return copied
    for sid in suite_ids:
        src = src_root / sid
        if not src.is_dir():
            continue
        dst = job_dir / sid
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            target = dst / f.name
            if f.is_file() and not target.exists():
                shutil.copyfile(f, target)
                copied.append(str(target.relative_to(job_dir)))
    shutil.rmtree(src_root, ignore_errors=True)
    return copied
