"""How often `make run`'s local-board measurement exits 0 when nothing
regressed: quiet, and under the load of a busy CI runner.

    python bench/bench_make_run.py                 # 10 runs quiet, 10 under stress-ng
    python bench/bench_make_run.py --runs 5 --load "stress-ng --cpu 2 --vm 1 --vm-bytes 256M --io 1"

Each run is ``rtlab run --campaign default --board local --no-publish`` (the
default campaign's cyclictest on this machine as a board: 5 s, 1 ms, idle,
judged by budgets/default.yaml), a separate invocation, as a user or a CI job
starts it. "Loaded": the --load command runs at normal priority during the
runs (a CI runner building and testing other things), started before the
first and stopped after the last. Nothing regressed in either condition (the
same kernel, the same machine), so every exit that is not 0 is a false
failure; the bench prints each one's reason, and per condition: exits 0/1/2,
the runs the runner measured again because the host stole the breach
(rtlab.core.hostnoise), the largest maximum, the largest steal burst, and the load
average. Exit 2 after retries is INFRA (the host kept stealing), never a pass.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RTLAB = [sys.executable, "-m", "rtlab.cli"]


def one_run(results: Path) -> dict:
    t0 = time.monotonic()
    out = {"rc": None, "wall_s": 0.0, "load1": os.getloadavg()[0], "reasons": [], "max_us": None,
           "burst_ms": None, "retries": 0}
    try:
        # (the local board is locked while another run holds it: that wait is not the measurement's)
        res = subprocess.run([*RTLAB, "run", "--campaign", "default", "--board", "local", "--no-publish",
                              "--results", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=7200)
    except subprocess.TimeoutExpired:
        out["reasons"].append("timed out after 7200 s (the board busy?)")
        return out
    out.update(rc=res.returncode, wall_s=round(time.monotonic() - t0, 1))
    try:
        run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
        run = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError, IndexError):
        out["reasons"].append("no run.json: " + " | ".join((res.stdout + res.stderr).splitlines()[-3:]))
        return out
    for job in run["jobs"]:
        out["retries"] += len((job.get("retries") or job.get("host_noise_retries")) or [])
        if job.get("infra_error"):
            out["reasons"].append(job["infra_error"])
        for m in job["measurements"]:
            threads = m["output"].get("threads") or []
            mx = max((t.get("max_us") or 0 for t in threads), default=None)
            if mx is not None:
                out["max_us"] = max(out["max_us"] or 0, mx)
            noise = m.get("host_noise") or {}
            if noise.get("burst_ms") is not None:
                out["burst_ms"] = max(out["burst_ms"] or 0, noise["burst_ms"])
            if m["verdict"] != "pass":
                out["reasons"].append(f"{m['verdict'].upper()} {m['key']['suite']}: {'; '.join(m['reasons'])}")
    return out


def condition(name: str, n: int, results: Path, load: str | None) -> list[dict]:
    proc = None
    if load:
        proc = subprocess.Popen(shlex.split(load), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(2)  # the load going before the first measurement
    runs = []
    try:
        for i in range(n):
            r = one_run(results / name)
            runs.append(r)
            print(f"{name} {i + 1}/{n}: exit {r['rc']}, max {r['max_us']} us, steal burst {r['burst_ms']} ms, "
                  f"measured again {r['retries']}x, load {r['load1']:.1f}, {r['wall_s']} s"
                  + (f" -- {' | '.join(r['reasons'])}" if r["rc"] else ""), flush=True)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    return runs


def summary(name: str, runs: list[dict]) -> str:
    n = len(runs)
    rc = {c: sum(1 for r in runs if r["rc"] == c) for c in (0, 1, 2, None)}
    maxes = [r["max_us"] for r in runs if r["max_us"] is not None]
    bursts = [r["burst_ms"] for r in runs if r["burst_ms"] is not None]
    loads = [r["load1"] for r in runs]
    return (f"{name}: exit 0 in {rc[0]} of {n} ({100 * rc[0] / max(1, n):.0f} %), exit 1 {rc[1]}, exit 2 {rc[2]}, no exit {rc[None]}; "
            f"measured again {sum(r['retries'] for r in runs)}x; max latency "
            f"{min(maxes, default=0):g}-{max(maxes, default=0):g} us; steal burst up to "
            f"{max(bursts, default=0):g} ms; load average {min(loads):.1f}-{max(loads):.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="runs per condition (default 10)")
    p.add_argument("--load", default="stress-ng --cpu 2 --io 1 --vm 1 --vm-bytes 256M",
                   help="the busy runner's load (default: %(default)s)")
    p.add_argument("--only", choices=["quiet", "loaded"], help="one condition only")
    p.add_argument("--results", type=Path, default=Path("/tmp/bench_make_run"))
    a = p.parse_args(argv)
    if not 1 <= a.runs <= 1000:
        p.error("--runs must be 1..1000")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start "
          f"(other work on this machine is not stopped: 'quiet' means no load of ours)", flush=True)
    out = {}
    if a.only in (None, "quiet"):
        out["quiet"] = condition("quiet", a.runs, a.results, None)
    if a.only in (None, "loaded"):
        out["loaded"] = condition("loaded", a.runs, a.results, a.load)
    print()
    for name, runs in out.items():
        print(summary(name, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
