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
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..core.fsutil import read_json, write_replacing
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
            # a holder that died with its keeper left its job: its keeper's work is ours
            take_over(board, progress)
            # and nothing of another dead job may be loading the board's CPUs
            busy = busy_with_dead_jobs()
            if busy:
                raise InfraError(board.name, "CPUs busy before the measurement with what a job whose runner and "
                                             "keeper are gone left running: " + "; ".join(busy))
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
    job holds its board, told the job's processes, told ``done`` at its end.

    *record*: (the board's record path, who holds it) for a locked board:
    written here, removed when the job ended, by the runner or, if the
    runner died, by the keeper once it ended the job. A record still there
    when the lock is taken names a job whose runner and keeper both died:
    :func:`take_over` does the keeper's work then."""

    def __init__(self, lock_fd: Optional[int], salvage: Optional[tuple[str, Path]] = None,
                 record: Optional[tuple[Path, dict]] = None):
        self.token = uuid.uuid4().hex
        self.cgroup = job_cgroup(self.token)
        self.record = record[0] if record is not None else None
        script = Path(__file__).resolve().with_name("jobkeeper.py")
        # its own session (the terminal's Ctrl-C is the runner's), no
        # environment or cwd of the run (nothing of the run to find in it),
        # the lock's descriptor and nothing else; the token in its command
        # line says whose keeper it is (busy_with_dead_jobs)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(script), str(os.getpid()), f"{kill_grace():g}", self.token],
            stdin=subprocess.PIPE, env={}, cwd="/", start_new_session=True,
            pass_fds=(lock_fd,) if lock_fd is not None else ())
        lines = [f"exclude {' '.join(map(str, my_children()))}", f"token {self.token}"]
        if self.cgroup:
            lines.append(f"cgroup {self.cgroup}")
        if salvage is not None:
            lines.append("salvage " + json.dumps([str(salvage[0]), str(salvage[1])]))
        if record is not None:
            write_replacing(record[0], json.dumps({**record[1], "token": self.token, "cgroup": self.cgroup,
                                                   "runner": os.getpid(), "keeper": self.proc.pid}).encode())
            lines.append("record " + json.dumps([str(record[0]), self.token]))
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
        if self.record is not None:
            drop_record(self.record, self.token)


@contextlib.contextmanager
def job_keeper(lock_fd: Optional[int], salvage: Optional[tuple[str, Path]] = None,
               record: Optional[tuple[Path, dict]] = None) -> Iterator[JobKeeper]:
    keeper = JobKeeper(lock_fd, salvage, record)
    try:
        yield keeper
    finally:
        keeper.done()


def record_path(board_name: str) -> Path:
    """Beside the board's lock: who holds it and what their job is (see JobKeeper)."""
    return lock_dir() / f"{board_name}.job.json"


def drop_record(path: Path, token: str) -> None:
    """Remove a board's job record if it is still this job's."""
    try:
        rec = read_json(path, RECORD_MAX_BYTES, root=path.parent)
        if isinstance(rec, dict) and rec.get("token") == token:
            path.unlink()
    except (OSError, ValueError):
        pass


#: the largest job record read
RECORD_MAX_BYTES = 64 * 1024
#: seconds a dead job's processes get to go after SIGKILL before the board is INFRA
TAKEOVER_TIMEOUT_S = 30.0
_TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")
_WORKDIR_RE = re.compile(r"^/tmp/rtlab/jobs/[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _checked_record(path: Path) -> Optional[dict]:
    """The record at *path* if it is one rtlab wrote (a regular file of this
    user, in the lock directory, each value of the shape rtlab gives it),
    else None: a record planted to make the next holder kill a cgroup or
    write files elsewhere is never acted on."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return None
    try:
        rec = read_json(path, RECORD_MAX_BYTES, root=path.parent)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("token"), str) or not _TOKEN_RE.match(rec["token"]):
        return None
    base = _cgroup2_base()
    cg = rec.get("cgroup")
    if cg is not None and (base is None or cg != str(base / f"rtlab-job-{rec['token']}")):
        return None
    wd = rec.get("workdir")
    if wd is not None and (not isinstance(wd, str) or not _WORKDIR_RE.match(wd) or ".." in wd):
        return None
    return rec


def _with_token(token: str) -> list[int]:
    """Processes whose environment carries the job's token."""
    want = f"{JOB_TOKEN_ENV}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if want in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found


def _cgroup_procs(cgroup: Optional[str]) -> list[int]:
    if not cgroup:
        return []
    try:
        return [int(p) for p in Path(cgroup, "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _record_processes(rec: dict) -> list[int]:
    """What a dead job left: its cgroup's processes, those carrying its
    token, those working in its work dir (the local board's pty shell starts
    the loads with a clean environment)."""
    from ..core.procutil import pid_alive, processes_in_dir
    pids = set(_cgroup_procs(rec.get("cgroup"))) | set(_with_token(rec["token"]))
    if rec.get("workdir") and Path(rec["workdir"]).is_dir():
        pids |= set(processes_in_dir(Path(rec["workdir"])))
    return sorted(p for p in pids if p != os.getpid() and pid_alive(p))


def take_over(board, progress: Callable[[str], None] = print, timeout_s: float = TAKEOVER_TIMEOUT_S) -> list[str]:
    """The keeper's work for a job whose runner and keeper both died while
    they held *board* (its record still beside the lock): every process of
    that job ended (its cgroup killed, SIGKILL), its work dir's raw files
    kept in its job directory, its cgroup removed. InfraError when a process
    of it outlives *timeout_s*: the board is not given to a new job while a
    dead one's processes (its load, the load's sampler) live. Returns what
    was ended ("stress-ng (pid N)")."""
    path = record_path(board.name)
    if not os.path.lexists(path):
        return []
    rec = _checked_record(path)
    if rec is None:
        with contextlib.suppress(OSError):
            path.unlink()
        return []
    who = f"job {rec.get('job', '?')} of run {rec.get('run_id', '?')}"
    pids = _record_processes(rec)
    ended = [f"{_comm(p)} (pid {p})" for p in pids]
    if pids:
        progress(f"board {board.name}: {who} died with its keeper and left {', '.join(ended[:8])}"
                 + (f" and {len(ended) - 8} more" if len(ended) > 8 else "") + ": ending them before this job")
    deadline = time.monotonic() + timeout_s
    while pids:
        if rec.get("cgroup"):
            with contextlib.suppress(OSError):
                Path(rec["cgroup"], "cgroup.kill").write_text("1")
        for p in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.05)
        _reap_orphans()
        pids = _record_processes(rec)
        if pids and time.monotonic() > deadline:
            raise InfraError(board.name, f"busy: {who} died with its keeper, and "
                                         f"{', '.join(f'{_comm(p)} (pid {p})' for p in pids)} outlived SIGKILL "
                                         f"for {timeout_s:g} s")
    if rec.get("workdir") and isinstance(rec.get("job_dir"), str):
        _keep_raw_files(Path(rec["workdir"]), Path(rec["job_dir"]), rec.get("run_id"))
    if rec.get("cgroup"):
        for _ in range(100):  # a killed task may be counted a moment after it left (EBUSY)
            try:
                os.rmdir(rec["cgroup"])
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
    with contextlib.suppress(OSError):
        path.unlink()
    return ended


def _keep_raw_files(workdir: Path, job_dir: Path, run_id) -> None:
    """The dead local job's work dir into its job directory, only where that
    is a job directory of the run the record names, then the work dir gone."""
    if not workdir.is_dir() or workdir.is_symlink():
        return
    if job_dir.is_absolute() and job_dir.is_dir() and not job_dir.is_symlink() and ".." not in job_dir.parts:
        run_dir = next((d for d in job_dir.parents if (d / RUN_STARTED).is_file()), None)
        if run_dir is not None and run_dir.name == run_id:
            for src in sorted(p for p in workdir.iterdir() if p.is_dir() and not p.is_symlink()):
                _copy_new(src, job_dir / src.name)
    shutil.rmtree(workdir, ignore_errors=True)


def _copy_new(src: Path, dst: Path) -> None:
    for f in src.rglob("*"):
        target = dst / f.relative_to(src)
        if f.is_file() and not f.is_symlink() and not os.path.lexists(target):
            with contextlib.suppress(OSError):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)


def busy_with_dead_jobs(sample_s: float = 0.5, min_share: float = 0.05) -> list[str]:
    """Processes of jobs whose runner and keeper are both gone (a job
    cgroup no keeper watches) that use a CPU: each as "stress-ng (pid N)
    87 % of a CPU, left in rtlab-job-T". Idle leftovers (a sleeping shell)
    load nothing and are not named; a machine without job cgroups has
    nothing to say here. Other users' load is not a job's: on a shared VM
    it is always there, and it is the host's noise, measured as such."""
    base = _cgroup2_base()
    if base is None:
        return []
    groups = {}
    for g in base.glob("rtlab-job-*"):
        pids = _cgroup_procs(str(g))
        if pids:
            groups[g.name[len("rtlab-job-"):]] = (g, pids)
    if not groups:
        return []
    keepers: set[str] = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"jobkeeper.py" in cmd:
                keepers.update(t for t in groups if t.encode() in cmd)
    # a live job's board tests are its runner's child (or the fork server's,
    # re-parented to the runner): a process of the cgroup whose parent lives
    # outside it. A dead job's processes are orphans: their parents are init,
    # or each other
    dead = {t: v for t, v in groups.items() if t not in keepers and not _started_from_outside(v[1])}
    if not dead:
        return []
    before = {p: _cpu_ticks(p) for _, pids in dead.values() for p in pids}
    time.sleep(sample_s)
    hz = os.sysconf("SC_CLK_TCK")
    out = []
    for g, pids in dead.values():
        for p in pids:
            a, b = before.get(p), _cpu_ticks(p)
            if a is None or b is None:
                continue
            share = (b - a) / hz / sample_s
            if share >= min_share:
                out.append(f"{_comm(p)} (pid {p}) {share:.0%} of a CPU, left in {g.name}")
    return out


def _started_from_outside(pids: list[int]) -> bool:
    """Whether a process of the group has a live parent outside it (not init)."""
    inside = set(pids)
    for p in pids:
        try:
            ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid > 1 and ppid not in inside and Path(f"/proc/{ppid}").exists():
            return True
    return False


def _cpu_ticks(pid: int) -> Optional[int]:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


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
