"""A witness of whole-machine stalls that /proc/stat does not show as steal.

    with Witnesses(cpus) as w: ...; w.result() -> {"stall_ms": ..., ...}

A hypervisor that pauses the whole VM (or a host stall beneath it) stops
every vCPU at once, and steal may stay put (measured here: idle local runs
broke a 20 ms max twice in 122, with no steal). A latency of the kernel
under test (a preempt-off section, an interrupt storm, a lock) stops one CPU,
or a few, rarely all at the same instant. So one small sampler process per
CPU, pinned to it, sleeps 1 ms at a time and records every oversleep of at
least GAP_MS as an interval of CLOCK_MONOTONIC; the machine stalled for as
long as **every** CPU's sampler was stopped at once (the intersection of
the intervals). That, and only that, is the witness the gate uses
(rtlab.core.hostnoise.stalled_breach).

Why processes, one per CPU: Python threads share one lock, so a thread
would see the others' turns as gaps. Why SCHED_FIFO priority 1: above every
SCHED_OTHER load (a stress-ng hog does not starve it), below every
measuring thread (it never delays cyclictest). A load with real-time threads
of its own (fifo-hog) can starve every sampler at once: there the witness
is not trusted (``trusted: false``), and a breach stays the kernel's.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

#: the sampler's sleep, s
PERIOD_S = 0.001
#: an oversleep at least this long is recorded, ms
GAP_MS = 1.0
#: intervals kept per CPU (a soak's hours): the longest ones
KEEP = 2000
#: tests: a file holding a witness result to use instead of measuring
#: (a stall of the whole machine cannot be made on demand)
WITNESS_ENV = "RTLAB_HOST_STALL"


def intersect(per_cpu: dict[str, list[tuple[float, float]]]) -> float:
    """The longest time (ms) that every CPU's sampler was in a gap at once."""
    if not per_cpu or any(not iv for iv in per_cpu.values()):
        return 0.0
    common = sorted(next(iter(per_cpu.values())))
    for ivs in list(per_cpu.values())[1:]:
        out = []
        for a0, a1 in common:
            for b0, b1 in ivs:
                lo, hi = max(a0, b0), min(a1, b1)
                if hi > lo:
                    out.append((lo, hi))
        common = out
        if not common:
            return 0.0
    return round(max(hi - lo for lo, hi in common) * 1000, 1)


def _die_with_parent() -> None:
    # nothing a dead job started lives on: the kernel sends SIGTERM when the
    # process that started the sampler dies (prctl PR_SET_PDEATHSIG)
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def sample(cpu: int, out: Path) -> None:
    """The sampler of one CPU, until SIGTERM or its parent is gone: its gaps
    to *out* (JSON)."""
    gaps: list[tuple[float, float]] = []
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
    t = time.monotonic()
    while not stop and os.getppid() == parent:
        time.sleep(PERIOD_S)
        now = time.monotonic()
        if (now - t - PERIOD_S) * 1000 >= GAP_MS:
            gaps.append((t + PERIOD_S, now))
        t = now
    gaps.sort(key=lambda g: g[0] - g[1])
    out.write_text(json.dumps({"cpu": cpu, "rt": rt, "gaps": sorted(gaps[:KEEP])}))


class Witnesses:
    """One sampler process per CPU while a tool runs."""

    def __init__(self, cpus: Optional[list[int]] = None):
        self.cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.procs: list[tuple[int, subprocess.Popen, Path]] = []
        #: the samplers' scratch directory while they run (start() makes it)
        self.dir = Path(tempfile.gettempdir())

    def start(self) -> "Witnesses":
        # scratch files only: the summary goes to host-noise.json
        self.dir = Path(tempfile.mkdtemp(prefix="rtlab-witness-"))
        for cpu in self.cpus:
            out = self.dir / f"stall-witness-cpu{cpu}.json"
            p = subprocess.Popen([sys.executable, "-m", "rtlab.core.stallwitness", str(cpu), str(out)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append((cpu, p, out))
        return self

    def stop(self) -> dict[str, Any]:
        per_cpu: dict[str, list[tuple[float, float]]] = {}
        rt = True
        for _cpu, p, _out in self.procs:
            p.send_signal(signal.SIGTERM)
        for cpu, p, out in self.procs:
            try:
                p.wait(timeout=5)
                d = json.loads(out.read_text())
                per_cpu[f"cpu{cpu}"] = [(float(a), float(b)) for a, b in d.get("gaps", [])]
                rt = rt and bool(d.get("rt"))
            except (subprocess.TimeoutExpired, OSError, ValueError, TypeError):
                p.kill()
                shutil.rmtree(self.dir, ignore_errors=True)
                return {"stall_ms": 0.0, "trusted": False, "why_not": f"the sampler of cpu{cpu} gave no record"}
        shutil.rmtree(self.dir, ignore_errors=True)
        return {"stall_ms": intersect(per_cpu), "trusted": rt and len(per_cpu) >= 1,
                "max_gap_ms": {c: round(max((b - a for a, b in iv), default=0.0) * 1000, 1)
                               for c, iv in per_cpu.items()},
                "witness": f"a SCHED_FIFO 1 sampler pinned to each of {len(per_cpu)} CPUs, every "
                           f"{PERIOD_S * 1000:g} ms",
                **({} if rt else {"why_not": "the samplers could not run SCHED_FIFO (not root)"})}


def injected() -> Optional[dict[str, Any]]:
    """The witness result a test put in $RTLAB_HOST_STALL, else None."""
    path = os.environ.get(WITNESS_ENV)
    if not path:
        return None
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


if __name__ == "__main__":
    sample(int(sys.argv[1]), Path(sys.argv[2]))
