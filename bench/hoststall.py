"""A stall of the host, as the local board sees one: every process of a
run's job (its board tests, the console shell, the tool, the stall
witness's samplers) stopped at once for STALL_MS, every PERIOD_MS, then
continued, as a hypervisor that pauses the VM stops every vCPU while
CLOCK_MONOTONIC runs on. Steal does not move (nothing here can make a
hypervisor steal); the witness sees every CPU stop at once.

    python bench/hoststall.py PID [--stall-ms 30] [--period-ms 80] [--max-s 600]

PID is `rtlab run`'s; the job is stopped by freezing its cgroup
(rtlab.run.joblife.job_cgroup: cgroup.freeze), not with SIGSTOP: a stopped
foreground job makes the console's interactive shell print "Stopped" and
take the console back, a frozen one does not. Without a job cgroup (cgroup
v2 with cgroup.freeze) it refuses. Used by tests/faults/test_host_attribution.py.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _descends(pid: int, root: int) -> bool:
    for _ in range(32):
        if pid == root:
            return True
        if pid <= 1:
            return False
        pid = _parent(pid)
    return False


def _cgroup2_base() -> Path:
    for m in Path("/proc/self/mounts").read_text().splitlines():
        if m.split()[2:3] == ["cgroup2"]:
            return Path(m.split()[1]) / Path("/proc/self/cgroup").read_text().split("0::", 1)[1].split()[0].lstrip("/")
    raise RuntimeError("no cgroup v2 hierarchy: the job cannot be frozen")


def job_cgroups(root: int) -> list[Path]:
    """The job cgroups (rtlab-job-*, rtlab.run.joblife.job_cgroup) whose
    processes descend from *root*. Found from the cgroups and a few
    processes' parents, never by reading all of /proc: a scan of every
    process held a CPU from the samplers for 35-50 ms here."""
    found = []
    for g in sorted(_cgroup2_base().glob("rtlab-job-*")):
        try:
            pids = [int(x) for x in (g / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
        if any(_descends(pid, root) for pid in pids[:3]) and (g / "cgroup.freeze").exists():
            found.append(g)
    return found


def _freeze(groups, on: bool) -> None:
    for g in groups:
        try:
            (g / "cgroup.freeze").write_text("1" if on else "0")
        except OSError:
            pass


def stall(root: int, ms: float) -> int:
    """Freeze the job cgroups of *root*'s tree for *ms*; how many were frozen."""
    groups = job_cgroups(root)
    _freeze(groups, True)
    time.sleep(ms / 1000)
    _freeze(groups, False)
    return len(groups)


class Stalling:
    """``with Stalling(pid, stall_ms, period_ms):`` the tree stalled over and
    over on a thread of its own until the block ends (then continued)."""

    def __init__(self, root: int, stall_ms: float = 30, period_ms: float = 80, max_s: float = 600):
        self.root, self.stall_ms, self.period_ms, self.max_s = root, stall_ms, period_ms, max_s
        self.done = threading.Event()
        self.stalls = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        end = time.monotonic() + self.max_s
        while not self.done.wait(max(0.0, (self.period_ms - self.stall_ms) / 1000)) and time.monotonic() < end:
            if stall(self.root, self.stall_ms):
                self.stalls += 1

    def __enter__(self) -> "Stalling":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        _freeze(job_cgroups(self.root), False)  # nothing left frozen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pid", type=int)
    p.add_argument("--stall-ms", type=float, default=30)
    p.add_argument("--period-ms", type=float, default=80)
    p.add_argument("--max-s", type=float, default=600)
    a = p.parse_args(argv)
    with Stalling(a.pid, a.stall_ms, a.period_ms, a.max_s) as s:
        try:
            while s.thread.is_alive() and os.path.exists(f"/proc/{a.pid}"):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    print(f"{s.stalls} stalls of {a.stall_ms:g} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
