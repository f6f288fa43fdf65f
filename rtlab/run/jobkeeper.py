"""The job keeper: a small process per job that outlives its runner only to
end the job, and holds the job's board until the job's last process is gone.

Why a process of its own: a runner killed with SIGKILL runs no clean-up, and
the flock on its board lock goes with its last descriptor. The keeper holds
a copy of that descriptor (the same open file description, inherited), so the
board stays locked while the keeper lives; it lives until every process of
the job is gone.

How it knows the job's processes: where this machine lets rtlab make cgroups
(cgroup v2 with cgroup.kill), the job runs in a cgroup of its own, which
holds every process the job starts, whatever its session or parent; the
keeper kills what is in it. Elsewhere it watches them while the runner lives
(every TICK_S: the job processes the runner names, their descendants, and
whatever is re-parented to the runner, a child subreaper, since the job
began: loads under setsid, a QEMU whose parent died), and at the end it also
looks for the job's token in every process's environment (a QEMU started in
the last tick). Processes of other keepers are never the job's.

How it knows the runner died: its stdin is a pipe whose write end only the
runner holds (close-on-exec, never inherited). End of file without a ``done``
line means the runner is gone, however it died: then the job's processes get
SIGTERM, after ``grace`` seconds SIGKILL, and the keeper waits until none is
left before it exits and frees the board. After ``done`` (the runner ended
the job itself) it exits at once.

On the local board the job's work dir is on this machine: what the tools
wrote there is copied into the job's results directory before it is removed
(what reached the disk is kept, as the runner does after a cancel).

Standard library only, started as ``python -I -S jobkeeper.py RUNNER_PID GRACE_S``
(tens of milliseconds; rtlab is not imported; a third argument, the job's
token, only marks whose keeper it is). Lines on stdin::

    exclude PID...        the runner's children that are not this job's
    token TOKEN           RTLAB_JOB_TOKEN in the job's environment
    pid PID               a process of the job (its pytest)
    cgroup PATH           the job's cgroup (rtlab.run.joblife.job_cgroup)
    salvage [WORKDIR, JOBDIR]  (JSON) the local board's work dir and the job dir
    record [PATH, TOKEN]  (JSON) the board's job record (rtlab.run.joblife.JobKeeper):
                          removed once the keeper has ended the job of a dead runner
    done                  the runner ended the job: exit (what is left in the
                          job's cgroup is killed first: strays of a job that ended)

A keeper SIGKILLed with its runner leaves the record: whoever takes the
board next does this keeper's work (rtlab.run.joblife.take_over).
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import time

#: how often the job's processes are looked for where there is no cgroup (a look
#: reads /proc: about 1 ms per process on a loaded host, paid on the board the
#: local jobs measure)
TICK_S = 0.5
#: a process that is a keeper (of this or another job), never killed by one
KEEPER_MARK = os.path.basename(__file__)


def _stat(pid: int):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[19])  # state, ppid, start time


def _processes() -> dict[int, tuple[str, int, int]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def _is_keeper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return KEEPER_MARK.encode() in f.read()
    except OSError:
        return False


def _has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return token in f.read().split(b"\0")
    except OSError:
        return False


class Keeper:
    def __init__(self, runner: int, grace_s: float):
        self.runner = runner
        self.grace_s = grace_s
        self.me = os.getpid()
        st = _stat(runner)
        #: the runner's start time: a pid reused after its death is not the runner
        self.runner_start = st[2] if st is not None else None
        #: None until the runner said which of its children are not the job's
        self.exclude: set[int] | None = None
        self.token: bytes = b""
        self.cgroup: str = ""
        self.salvage: list[str] = []
        self.record: list[str] = []
        #: pid -> start time of every process of the job seen so far
        self.job: dict[int, int] = {}

    def line(self, text: str) -> bool:
        """One line from the runner; False on ``done``."""
        word, _, rest = text.strip().partition(" ")
        if word == "done":
            return False
        if word == "exclude":
            self.exclude = {int(p) for p in rest.split()}
        elif word == "token":
            self.token = f"RTLAB_JOB_TOKEN={rest}".encode()
        elif word == "pid":
            st = _stat(int(rest))
            if st is not None:
                self.job[int(rest)] = st[2]
        elif word == "cgroup":
            self.cgroup = rest
        elif word == "salvage":
            self.salvage = json.loads(rest)
        elif word == "record":
            self.record = json.loads(rest)
        return True

    def track(self, final: bool = False) -> None:
        """Add what the job started since the last look (see the module doc)."""
        if self.cgroup:
            return  # the cgroup holds them all
        procs = _processes()
        kids: dict[int, list[int]] = {}
        for pid, (_, ppid, _) in procs.items():
            kids.setdefault(ppid, []).append(pid)
        roots = [p for p, start in self.job.items() if procs.get(p, ("", 0, -1))[2] == start]
        exclude = self.exclude or set()
        if self.exclude is not None and procs.get(self.runner, ("", 0, None))[2] == self.runner_start:
            roots += [p for p in kids.get(self.runner, []) if p not in exclude and p != self.me]
        if final and self.token:
            roots += [p for p in procs if p not in exclude and p != self.me and _has_token(p, self.token)]
        todo, seen = list(roots), set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid == self.me:
                continue
            seen.add(pid)
            st = procs.get(pid)
            if st is None or st[0] == "Z" or (pid not in self.job and _is_keeper(pid)):
                continue
            self.job[pid] = st[2]
            todo.extend(kids.get(pid, []))

    def alive(self) -> list[int]:
        if self.cgroup:
            return self._cgroup_pids()
        out = []
        for pid, start in self.job.items():
            st = _stat(pid)
            if st is not None and st[0] != "Z" and st[2] == start:
                out.append(pid)
        return out

    def _cgroup_pids(self) -> list[int]:
        try:
            with open(os.path.join(self.cgroup, "cgroup.procs")) as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def end_job(self, grace_s: float) -> None:
        """SIGTERM, SIGKILL after *grace_s*, until no process of the job is left."""
        deadline = time.monotonic() + grace_s
        sig = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
        while True:
            self.track(final=True)
            left = self.alive()
            if not left:
                break
            if sig == signal.SIGTERM and time.monotonic() >= deadline:
                sig = signal.SIGKILL
            if sig == signal.SIGKILL and self.cgroup:
                try:  # the whole cgroup at once: nothing forks past it
                    with open(os.path.join(self.cgroup, "cgroup.kill"), "w") as f:
                        f.write("1")
                except OSError:
                    pass
            for pid in left:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            time.sleep(0.05 if sig == signal.SIGKILL else 0.1)
            self._reap()
        if self.cgroup:
            # a killed task may still be counted for a moment after it left cgroup.procs (EBUSY)
            for _ in range(100):
                try:
                    os.rmdir(self.cgroup)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)

    def _reap(self) -> None:
        # killed processes re-parented to the keeper (it is nobody's subreaper; harmless)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass

    def keep_raw_files(self) -> None:
        """The local board's work dir into the job dir (files the job dir lacks), then gone."""
        if len(self.salvage) != 2:
            return
        workdir, job_dir = self.salvage
        if not os.path.isdir(workdir):
            return
        for root, _dirs, files in os.walk(workdir):
            rel = os.path.relpath(root, workdir)
            for name in files:
                src = os.path.join(root, name)
                dst = os.path.normpath(os.path.join(job_dir, rel, name))
                if os.path.islink(src) or os.path.lexists(dst) or not os.path.isfile(src):
                    continue
                try:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copyfile(src, dst)
                except OSError:
                    pass
        shutil.rmtree(workdir, ignore_errors=True)

    def drop_record(self) -> None:
        """The board's job record, if it is still this job's: the job is ended."""
        if len(self.record) != 2:
            return
        path, token = self.record
        try:
            with open(path, "rb") as f:
                rec = json.loads(f.read(65536))
            if isinstance(rec, dict) and rec.get("token") == token:
                os.unlink(path)
        except (OSError, ValueError):
            pass


def main(argv: list[str]) -> int:
    runner, grace_s = int(argv[0]), float(argv[1])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the terminal's signals are the runner's to act on
    keeper = Keeper(runner, grace_s)
    stdin = sys.stdin.fileno()
    buf = b""
    while True:
        ready = select.select([stdin], [], [], None if keeper.cgroup else TICK_S)[0]
        if ready:
            chunk = os.read(stdin, 65536)
            if not chunk:
                break  # the runner is gone
            buf += chunk
            while b"\n" in buf:
                text, buf = buf.split(b"\n", 1)
                if not keeper.line(text.decode()):
                    if keeper.cgroup:
                        keeper.end_job(0)
                    return 0
        keeper.track()
    keeper.end_job(keeper.grace_s)
    keeper.keep_raw_files()
    keeper.drop_record()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
