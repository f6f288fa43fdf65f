"""The stall witness's cost to what runs beside it: a CPU-bound job on every
CPU (one process per CPU, pinned, SCHED_OTHER like a QEMU TCG guest's
threads) timed with the witness's samplers watching (rtlab.core.stallwitness:
one SCHED_FIFO sampler per CPU, woken every millisecond) and without,
alternating, and the ratio of the medians printed.

Every measurement of a board on this host (the local board, a QEMU board)
runs its tool under the witness, so a QEMU guest's emulation shares each CPU
with a sampler that preempts it a thousand times a second. Take it on a
quiet machine (needs root for SCHED_FIFO, as the lab's runner has).

    .venv/bin/python bench/bench_stall_witness.py [--pairs 5] [--work 3e7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.core.stallwitness import GAP_MS, Witnesses  # noqa: E402

#: the job of one CPU: a fixed amount of interpreter work, no I/O
JOB = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); n = int(float(sys.argv[2]))\n" \
      "x = 0\nfor i in range(n):\n    x += i * i\n"


def timed_jobs(cpus: list[int], work: float) -> float:
    """Wall seconds of one job per CPU, started together, until the last ends."""
    t = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", JOB, str(c), str(work)]) for c in cpus]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a job failed (exit {p.returncode})")
    return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--work", type=float, default=3e7, help="loop iterations per CPU (about 2 s at 3e7)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    times: dict[str, list[float]] = {"without": [], "with": []}
    gaps = 0
    with tempfile.TemporaryDirectory(prefix="bench-witness-") as tmp:
        for i in range(args.pairs):
            # alternate which goes first: a drift of the host falls on both
            for mode in (("without", "with") if i % 2 == 0 else ("with", "without")):
                if mode == "with":
                    w = Witnesses(cpus, scratch=Path(tmp)).start()
                    try:
                        times[mode].append(timed_jobs(cpus, args.work))
                    finally:
                        summary, timeline = w.stop()
                    if not summary.get("trusted"):  # not SCHED_FIFO: not what a run has
                        raise SystemExit(f"the witness did not run as a run has it: {summary}")
                    gaps += sum(len(g) for g in timeline["cpus"].values())
                else:
                    times[mode].append(timed_jobs(cpus, args.work))
                print(f"pair {i + 1}/{args.pairs} {mode:7s} {times[mode][-1]:.3f} s", file=sys.stderr)
    med = {m: statistics.median(v) for m, v in times.items()}
    print(f"cpus {len(cpus)}, {args.pairs} pairs, work {args.work:g} per CPU")
    for m in ("without", "with"):
        v = times[m]
        print(f"{m:7s} witness: median {med[m]:.3f} s (min {min(v):.3f}, max {max(v):.3f})")
    print(f"the samplers' gaps of {GAP_MS:g} ms or more while the jobs ran: {gaps}")
    print(f"ratio with / without (medians): {med['with'] / med['without']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
