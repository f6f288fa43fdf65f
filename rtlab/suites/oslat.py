"""oslat: OS latency seen by a busy loop (no timer, no wake-up): how long
the measured CPUs were taken away from a thread that never sleeps. It
catches what cyclictest cannot (SMIs, interrupts and kernel threads on a
nohz_full CPU between two timer ticks). One thread per measured CPU, named
explicitly with -c; the parsers read its JSON (rtlab.parsers.rtjson).

Without ``priority`` the loops run SCHED_OTHER: a SCHED_FIFO busy loop
holds its CPU for the whole run (RT throttling leaves 5 %), which a lab
board may take but a shared machine used as a board should not.
"""
from __future__ import annotations

from typing import Optional

from ..targets.boards import Board
from ..core.config import format_cpulist
from ..parsers import rt_tests
from . import DURATION_S, Args, Int, Suite, SuiteRun


class Oslat(Suite):
    """oslat: busy-loop latency, one thread per measured CPU (-c)."""

    name = "oslat"
    tool = "oslat"
    json_file = "oslat.json"
    parser = staticmethod(rt_tests)
    json_layout = text_layout = "frequency"
    json_shape = staticmethod(lambda doc, t: t is not None and "freq" in t)
    text_marker = r"^oslat V|^Counter Freq:"
    defaults = {
        "duration_s": 10,
        "priority": 0,      # -f: SCHED_FIFO priority of the loops; 0 = SCHED_OTHER (see above)
        "buckets": 32,      # -b: 1 us histogram buckets; longer stalls count in the last one
        "extra_args": [],
    }
    spec = {"duration_s": DURATION_S, "priority": Int(0, 99), "buckets": Int(4, 1024), "extra_args": Args()}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        prio = ["-f", str(p["priority"])] if p["priority"] > 0 else []
        return ["oslat", "-q", "-D", str(p["duration_s"]), "-c", format_cpulist(run.cpus), *prio,
                "-b", str(p["buckets"]), "-z", f"--json={self.json_file}", *p["extra_args"]]
