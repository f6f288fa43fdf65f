"""An injected latency regression for the local board: on each given CPU a
SCHED_FIFO thread (priority above cyclictest's 90) that spins SPIN_US every
PERIOD_MS. A timer wake-up landing in a spin waits for it: with 150 us every
3 ms, ~5 % of wake-ups are late by up to 150 us, so p99 rises several-fold,
the way a kernel that disables preemption too long would look.

    python bench/stealer.py [--cpus 0,1] [--spin-us 150] [--period-ms 3] [--max-s 600]

Runs until killed (SIGTERM/SIGINT) or --max-s. Each spinner has RLIMIT_RTTIME
set, so a bug can never hog a CPU for more than half a second unblocked.
Used by bench/bench_verdict.py and tests/integration/test_compare_local.py.
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time
from contextlib import contextmanager


def spin(cpu: int, spin_us: float, period_ms: float, max_s: float, priority: int) -> None:
    os.sched_setaffinity(0, {cpu})
    # soft limit: SIGXCPU (kills us) after 0.5 s of RT CPU time without blocking
    resource.setrlimit(resource.RLIMIT_RTTIME, (500_000, 600_000))
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    spin_ns, period_s = int(spin_us * 1000), period_ms / 1000
    end = time.monotonic() + max_s
    while time.monotonic() < end:
        t0 = time.perf_counter_ns()
        while time.perf_counter_ns() - t0 < spin_ns:
            pass
        time.sleep(period_s)


def start(cpus, spin_us: float = 150, period_ms: float = 3, max_s: float = 600,
          priority: int = 95) -> list[int]:
    """One forked spinner per CPU; returns their pids."""
    pids = []
    for cpu in cpus:
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                spin(cpu, spin_us, period_ms, max_s, priority)
            finally:
                os._exit(0)
        pids.append(pid)
    return pids


def stop(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


@contextmanager
def stealing(cpus=None, **kw):
    pids = start(sorted(cpus if cpus is not None else os.sched_getaffinity(0)), **kw)
    try:
        time.sleep(0.2)  # the spinners are in SCHED_FIFO before the measurement starts
        yield pids
    finally:
        stop(pids)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpus", default=None, help="cpulist, e.g. 0,1 (default: every CPU we may use)")
    p.add_argument("--spin-us", type=float, default=150)
    p.add_argument("--period-ms", type=float, default=3)
    p.add_argument("--max-s", type=float, default=600)
    a = p.parse_args(argv)
    cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else sorted(os.sched_getaffinity(0))
    pids = start(cpus, a.spin_us, a.period_ms, a.max_s)
    signal.signal(signal.SIGTERM, lambda *_: (stop(pids), sys.exit(0)))
    try:
        for pid in pids:
            os.waitpid(pid, 0)
    except KeyboardInterrupt:
        stop(pids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
