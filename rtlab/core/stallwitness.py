"""A witness of the host's stalls, placed in time and on their CPU.

    w = Witnesses(cpus, scratch_dir).start(); ...; w.stop() -> (summary, timeline)

One small sampler process per CPU, pinned to it, SCHED_FIFO priority 1,
sleeps 1 ms at a time and records every oversleep of at least GAP_MS as an
interval of CLOCK_MONOTONIC: the time that CPU's sampler did not run. It also
reads its own CPU's ``steal`` column of /proc/stat every STEAL_READ_S, so
each gap carries the steal that CPU's counter gained across it.

What a gap means, and what rtlab.core.hostattr makes of it:

- every CPU's sampler stopped at once (the intersection of the gaps) is a
  stall of the whole machine: a hypervisor that pauses the VM stops every
  vCPU, with or without steal to show for it (measured here: idle local runs
  broke a 20 ms max twice in 122 with no steal). A latency of the kernel
  under test stops one CPU, or a few, rarely all at the same instant;
- a gap on one CPU whose own steal grew by about as much as the gap lasted
  is that CPU stolen by the hypervisor, placed to the millisecond, which
  steal's 10 ms ticks alone cannot do;
- any other gap is something on that CPU of a higher priority than the
  sampler (a kernel latency, an interrupt storm, a real-time thread): never
  the host's.

Why processes, one per CPU: Python threads share one lock, so a thread
would see the others' turns as gaps. Why SCHED_FIFO priority 1: above every
SCHED_OTHER load (a stress-ng hog does not starve it), below every
measuring thread (it never delays cyclictest). A load with real-time threads
of its own (fifo-hog) can starve every sampler at once: there the
whole-machine reading is not trusted (``trusted: false``); a gap its own
steal explains still is.

The samplers' scratch files live in a directory the caller gives (the
measurement's raw directory on the host), never in the temporary
directory: they go with the job whatever kills it.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from .fsutil import read_json

#: the sampler's sleep, s
PERIOD_S = 0.001
#: an oversleep at least this long is recorded, ms
GAP_MS = 1.0
#: how often a sampler reads its CPU's steal, s (steal counts in 10 ms ticks)
STEAL_READ_S = 0.01
#: steal is accounted at the first tick after the vCPU runs again: a gap's
#: steal is read at least this long after it ended, s
STEAL_LAG_S = 0.01
#: gaps kept per CPU (a soak's hours): the longest ones
KEEP = 5000
#: the largest sampler record read back (KEEP gaps of ~60 bytes, and room)
RECORD_MAX_BYTES = 4 * 1024 * 1024
#: the steal counters every sampler reads. Tests point it at a file of
#: /proc/stat's format in their own process (monkeypatch): nothing a run is
#: given (environment, campaign, budgets) can
PROC_STAT = "/proc/stat"
#: the largest /proc/stat (or test file) read
STAT_MAX_BYTES = 1024 * 1024
#: /proc/stat cpu line: user nice system idle iowait irq softirq steal ...
STEAL_COLUMN = 7
#: seconds the samplers may take to start (a Python start on a loaded host)
READY_TIMEOUT_S = 10.0
#: the scratch directory's name inside the caller's directory
SCRATCH = ".stall-witness"


def merge(intervals) -> list[tuple[float, float]]:
    """Sorted, overlapping intervals joined."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def common(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The intersection of two sorted lists of disjoint intervals (linear)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def every_cpu(per_cpu: dict[str, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The intervals in which every CPU's list has an interval at once."""
    if not per_cpu or any(not iv for iv in per_cpu.values()):
        return []
    lists = [merge(iv) for iv in per_cpu.values()]
    out = lists[0]
    for other in lists[1:]:
        out = common(out, other)
        if not out:
            break
    return out


def intersect(per_cpu: dict[str, list[tuple[float, float]]]) -> float:
    """The longest time (ms) that every CPU's sampler was in a gap at once."""
    return round(max((hi - lo for lo, hi in every_cpu(per_cpu)), default=0.0) * 1000, 1)


def read_steal(path: str, cpu: int) -> Optional[int]:
    """The steal ticks of one CPU in a /proc/stat text at *path*, read
    bounded (a file outside /proc must be a regular one: never a FIFO that
    blocks, never a device that does not end)."""
    try:
        if not path.startswith("/proc/"):
            import stat
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            text = os.read(fd, STAT_MAX_BYTES).decode(errors="replace")
        finally:
            os.close(fd)
    except OSError:
        return None
    name = f"cpu{cpu} "
    for line in text.splitlines():
        if line.startswith(name):
            vals = line.split()[1:]
            if len(vals) > STEAL_COLUMN and vals[STEAL_COLUMN].isdigit():
                return int(vals[STEAL_COLUMN])
            return None
    return None


def _die_with_parent() -> None:
    # nothing a dead job started lives on: the kernel sends SIGTERM when the
    # process that started the sampler dies (prctl PR_SET_PDEATHSIG)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _keep(gaps: list[list[float]]) -> None:
    """The KEEP longest gaps, in time order (amortised: trimmed at twice KEEP)."""
    gaps.sort(key=lambda g: g[0] - g[1])
    del gaps[KEEP:]
    gaps.sort()


def sample(cpu: int, out: Path, stat_path: str = PROC_STAT) -> None:
    """The sampler of one CPU, until SIGTERM or its parent is gone: its gaps
    ``[start, end, steal ticks gained across it]`` to *out* (JSON).

    A gap runs from the sampler's last run before it (the stall began after
    that) to its first run after it. Its steal is the CPU's counter read at
    least STEAL_LAG_S after the gap, less the last reading before it: a
    reading every STEAL_READ_S, so it spans the gap and at most ~20 ms more.
    ``steal_reads: 0`` says the counter could not be read (no steal column)."""
    gaps: list[list[float]] = []
    pending: list[list[float]] = []  # gaps waiting for their steal reading
    dropped = reads = 0
    rt = True
    parent = os.getppid()
    _die_with_parent()
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        rt = False  # not root: a SCHED_OTHER sampler, said in the result
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    t = t_read = time.monotonic()
    steal = read_steal(stat_path, cpu)
    reads += steal is not None
    try:  # watching from now on: the tool may start (Witnesses.start waits for this)
        os.write(1, b"ready\n")
        os.close(1)
    except OSError:
        pass
    while not stop and os.getppid() == parent:
        time.sleep(PERIOD_S)
        now = time.monotonic()
        if (now - t - PERIOD_S) * 1000 >= GAP_MS:
            pending.append([t, now, float(steal if steal is not None else -1)])
        if now - t_read >= STEAL_READ_S:
            cur = read_steal(stat_path, cpu)
            t_read = now
            if cur is not None:
                reads += 1
                done = [g for g in pending if g[1] + STEAL_LAG_S <= now]
                for g in done:
                    g[2] = float(cur - g[2]) if g[2] >= 0 else 0.0
                    gaps.append(g)
                pending = [g for g in pending if g[1] + STEAL_LAG_S > now]
                steal = cur
                if len(gaps) > 2 * KEEP:
                    dropped += len(gaps) - KEEP
                    _keep(gaps)
        t = now
    gaps += [[a, b, 0.0] for a, b, _ in pending]  # no reading after them: no steal known
    if len(gaps) > KEEP:
        dropped += len(gaps) - KEEP
    _keep(gaps)
    out.write_text(json.dumps({"cpu": cpu, "rt": rt, "gaps": gaps, "dropped": dropped, "steal_reads": reads}))


class Witnesses:
    """One sampler process per CPU while a tool runs; scratch files under
    *scratch* (the measurement's directory), removed by :meth:`stop`."""

    def __init__(self, cpus: Optional[list[int]] = None, scratch: Optional[Path] = None):
        self.cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.procs: list[tuple[int, subprocess.Popen, Path]] = []
        self.dir = Path(scratch if scratch is not None else Path.cwd()) / SCRATCH
        self.t0 = 0.0

    def start(self) -> "Witnesses":
        """Every sampler started and watching (each says so once it is
        pinned and at its priority): the tool starts after this, so no
        stall of the tool's run falls before the witness looked."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for cpu in self.cpus:
            out = self.dir / f"cpu{cpu}.json"
            p = subprocess.Popen([sys.executable, "-m", "rtlab.core.stallwitness", str(cpu), str(out), PROC_STAT],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self.procs.append((cpu, p, out))
        deadline = time.monotonic() + READY_TIMEOUT_S
        for _cpu, p, _out in self.procs:
            assert p.stdout is not None
            if select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                p.stdout.readline()
            p.stdout.close()
        self.t0 = time.monotonic()
        return self

    def _clean(self) -> None:
        for _cpu, _p, out in self.procs:
            try:
                out.unlink()
            except OSError:
                pass
        try:
            self.dir.rmdir()
        except OSError:
            pass

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the summary for host-noise.json, the timeline for host-stalls.json)."""
        gaps: dict[str, list[list[float]]] = {}
        rt, dropped, blind = True, 0, []
        for _cpu, p, _out in self.procs:
            p.send_signal(signal.SIGTERM)
        for cpu, p, out in self.procs:
            try:
                p.wait(timeout=5)
                d = read_json(out, RECORD_MAX_BYTES)
                gaps[f"cpu{cpu}"] = [[float(a), float(b), float(s)] for a, b, s in d.get("gaps", [])]
                rt = rt and bool(d.get("rt"))
                dropped += int(d.get("dropped") or 0)
                if not d.get("steal_reads"):
                    blind.append(f"cpu{cpu}")
            except (subprocess.TimeoutExpired, OSError, ValueError, TypeError):
                p.kill()
                p.wait()
                self._clean()
                why = f"the sampler of cpu{cpu} gave no record"
                return {"stall_ms": 0.0, "trusted": False, "why_not": why}, {"cpus": {}, "why_not": why}
        self._clean()
        per_cpu = {c: [(a, b) for a, b, _ in g] for c, g in gaps.items()}
        summary: dict[str, Any] = {
            "stall_ms": intersect(per_cpu), "trusted": rt and len(per_cpu) >= 1,
            "max_gap_ms": {c: round(max((b - a for a, b in iv), default=0.0) * 1000, 1)
                           for c, iv in per_cpu.items()},
            "witness": f"a SCHED_FIFO 1 sampler pinned to each of {len(per_cpu)} CPUs, every "
                       f"{PERIOD_S * 1000:g} ms, reading its CPU's steal every {STEAL_READ_S * 1000:g} ms",
            **({} if rt else {"why_not": "the samplers could not run SCHED_FIFO (not root)"})}
        timeline: dict[str, Any] = {"t0": self.t0, "t1": time.monotonic(), "cpus": gaps, "rt": rt,
                                    "dropped": dropped, **({"steal_unread": blind} if blind else {})}
        return summary, timeline


if __name__ == "__main__":
    sample(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else PROC_STAT)
