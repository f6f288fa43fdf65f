#!/usr/bin/env python3
"""Benchmark of the rack: campaign wall time on 2 places relative to 1.

Starts a virtual rack (two U-Boot boards; free ports, temporary directory),
then runs the same campaign on rack-aarch64 twice, `--places 1` and
`--places 2`, each job a cold boot (PDU on, U-Boot, DHCP + TFTP of kernel and
initramfs, shell) and cyclictest. Prints both wall times, the ratio (goal:
<= 0.65 on an idle 2-core host; 0.5 is the floor), and the boot times the rack
measured from its side of the console (power-on -> U-Boot -> kernel -> shell,
TFTP transfer times and rates).

Both QEMU boards run under TCG: on 2 cores two boards cost each other CPU,
which is what the ratio shows (the boards' own boot and tool time stays
the same per job; only the waiting for a place disappears).

    .venv/bin/python bench/bench_rack.py [--jobs 4] [--duration 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.plan.campaign import load_campaign  # noqa: E402
from rtlab.rack.control import rack_down, rack_up  # noqa: E402
from rtlab.images import ensure_images  # noqa: E402
from rtlab.run.runner import run_campaign  # noqa: E402

VARIANTS = ["rt", "rt-iso", "voluntary", "voluntary-iso", "preempt", "preempt-iso", "none", "none-iso"]


def write_campaign(tmp: Path, variants, duration: int) -> Path:
    budgets = tmp / "budgets.yaml"
    budgets.write_text("budgets: {}\n")
    c = tmp / "bench-rack.yaml"
    c.write_text(
        f"name: bench-rack\nbudgets: {budgets}\nboards: [rack-aarch64]\nvariants: {list(variants)}\n"
        "suites:\n  - name: cyclictest\n"
        f"    params: {{interval_us: 1000, duration_s: {duration}, histogram_us: 2000}}\n"
        "    overrides: {qemu-tcg: {histogram_us: 20000}}\n")
    return c


def quiet(_msg):
    pass


def campaign_wall(tmp: Path, camp_file: Path, places: int, tag: str) -> tuple[float, list]:
    camp = load_campaign(camp_file)
    t0 = time.monotonic()
    run, _ = run_campaign(camp, results_root=tmp / f"results-{tag}", progress=quiet, places=places)
    wall = time.monotonic() - t0
    bad = [(j.variant, j.infra_error) for j in run.jobs if j.infra_error]
    if bad or not run.jobs:
        raise SystemExit(f"bench_rack: jobs failed with --places {places}: {bad}")
    return wall, run.jobs


def boot_records(rack_dir: Path, since: float) -> list[dict]:
    recs = []
    for f in sorted(rack_dir.glob("boards/*/boots.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["power_on"] >= since and "shell" in r["t"]:
                recs.append(r)
    return recs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=4, help="jobs in the campaign (variants)")
    ap.add_argument("--duration", type=int, default=3, help="cyclictest seconds per job")
    args = ap.parse_args()
    images = ensure_images("aarch64", progress=quiet)  # cached; not part of a campaign's cost
    with tempfile.TemporaryDirectory(prefix="bench-rack-") as t:
        tmp = Path(t)
        st = rack_up(tmp / "rack", coordinator_port=0, pdu_port=0)
        os.environ["RTLAB_RACK_DIR"] = st["dir"]  # where the runner finds the coordinator
        os.environ.pop("LG_COORDINATOR", None)
        try:
            # variants the aarch64 kernels can be (the others are "not available")
            camp = load_campaign(write_campaign(tmp, VARIANTS, args.duration))
            from rtlab.run.runner import unavailable
            ok = [j.variant.name for j in camp.jobs() if not unavailable(j, {"aarch64": images})]
            variants = ok[:args.jobs]
            camp_file = write_campaign(tmp, variants, args.duration)
            t_start = time.time()
            wall1, jobs1 = campaign_wall(tmp, camp_file, 1, "p1")
            wall2, jobs2 = campaign_wall(tmp, camp_file, 2, "p2")
            recs = boot_records(Path(st["dir"]), t_start)
        finally:
            rack_down(tmp / "rack")
    ratio = wall2 / wall1
    print(f"campaign: rack-aarch64 x {variants}, cyclictest {args.duration} s, 2 virtual boards")
    print(f"  --places 1: {wall1:6.1f} s   (jobs {', '.join(f'{j.duration_s:.0f}' for j in jobs1)} s)")
    print(f"  --places 2: {wall2:6.1f} s   (jobs {', '.join(f'{j.duration_s:.0f}' for j in jobs2)} s)")
    print(f"  wall time on 2 places / on 1 place = {ratio:.2f}  (goal <= 0.65; floor 0.50)")
    m1 = statistics.mean(j.duration_s for j in jobs1)
    m2 = statistics.mean(j.duration_s for j in jobs2)
    print(f"  mean job {m1:.0f} s on 1 place, {m2:.0f} s on 2 (two TCG boards share the CPUs); "
          f"per job outside the job (reserve + lock + release): "
          f"{(wall1 - sum(j.duration_s for j in jobs1)) / len(jobs1):.1f} s")
    if ratio < 0.5:
        print("  (below the floor: the host was busier during the 1-place run; other load, not rtlab)")
    if recs:
        def med(key):
            vals = [r["t"][key] for r in recs if key in r["t"]]
            return statistics.median(vals) if vals else float("nan")
        kern = [x for r in recs for x in r["tftp"] if x["file"].endswith("/kernel") and "end" in x]
        rates = [x["bytes"] / max(x["end"] - x["start"], 1e-3) / 1e6 for x in kern]
        print(f"boot via U-Boot + TFTP, median of {len(recs)} cold boots (rack side, from power-on):")
        print(f"  U-Boot banner {med('uboot'):.1f} s, autoboot prompt {med('autoboot'):.1f} s, "
              f"kernel start {med('kernel_start'):.1f} s, Linux {med('linux'):.1f} s, "
              f"shell {med('shell'):.1f} s")
        if kern:
            print(f"  TFTP kernel {kern[0]['bytes'] / 1e6:.1f} MB: median "
                  f"{statistics.median(x['end'] - x['start'] for x in kern):.1f} s "
                  f"({statistics.median(rates):.1f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
