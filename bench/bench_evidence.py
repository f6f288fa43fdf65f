"""Benchmark: does armed evidence distort a measurement that does not break?

    .venv/bin/python bench/bench_evidence.py [--rounds 6] [--duration 5] [--interval 1000]

On this machine as a board (the local board), cyclictest runs in alternating
rounds (plain, armed, plain, armed, ...: host noise drifts, so the pairs are
interleaved) with the rtlab command line:

  plain  cyclictest ... (no tracing)
  armed  the board's tracefs records the scheduler and IRQ events that
         rtlab.judge.evidence enables, and cyclictest runs with -b at a budget no
         sample reaches (10 s) and --tracemark: everything evidence does
         except stopping

Prints p50/p99/p99.9/max of every round side by side (nearest-rank
percentiles of cyclictest's own histogram, via rtlab's parser), the median
of each over the rounds, and the armed/plain ratio of the medians. A
benchmark, not a test: nothing is asserted. The local board's numbers move
with whatever else the host runs; read the ratio of medians, not one round.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.judge import evidence  # noqa: E402
from rtlab.parsers import parse_file  # noqa: E402
import rtlab.suites  # noqa: E402,F401  the suites register their tools' parsers


class LocalShell:
    def run(self, cmd, timeout=30.0):
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.returncode


def one(armed: bool, duration: int, interval: int, d: Path, i: int) -> dict:
    out = d / f"round{i}-{'armed' if armed else 'plain'}.json"
    cmd = ["cyclictest", "-q", "-m", "-p", "90", "-i", str(interval), "-D", str(duration),
           "-h", "2000", "-a", "0", "-t", "1", f"--json={out}"]
    sh = LocalShell()
    if armed:
        why = evidence.start_tracing(sh)
        if why:
            sys.exit(f"cannot arm tracing here: {why}")
        cmd += ["-b", "10000000", "--tracemark"]
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    finally:
        if armed:
            evidence.stop_tracing(sh)
    t = parse_file(out).combined()
    p = t.percentiles_us
    return {"p50": p["50"], "p99": p["99"], "p99.9": p["99.9"], "max": t.max_us}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--interval", type=int, default=1000)
    a = ap.parse_args()
    rows = {"plain": [], "armed": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for armed in (False, True) if i % 2 == 0 else (True, False):
                rows["armed" if armed else "plain"].append(one(armed, a.duration, a.interval, Path(tmp), i))
    keys = ("p50", "p99", "p99.9", "max")
    print(f"cyclictest on CPU 0 of this machine, {a.rounds} x {a.duration} s per mode, "
          f"interval {a.interval} us (us)")
    print(f"{'round':>5}  " + "  ".join(f"{m + ' ' + k:>12}" for k in keys for m in ("plain", "armed")))
    for i in range(a.rounds):
        cells = [rows[m][i][k] for k in keys for m in ("plain", "armed")]
        print(f"{i:>5}  " + "  ".join(f"{'-' if c is None else f'{c:g}':>12}" for c in cells))
    print("median " + "  ".join(
        f"{statistics.median([r[k] for r in rows[m] if r[k] is not None] or [float('nan')]):>12g}"
        for k in keys for m in ("plain", "armed")))
    for k in keys:
        pm = statistics.median([r[k] for r in rows["plain"] if r[k] is not None] or [float("nan")])
        am = statistics.median([r[k] for r in rows["armed"] if r[k] is not None] or [float("nan")])
        print(f"armed/plain {k}: {am / pm if pm else float('nan'):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
