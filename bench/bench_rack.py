#!/usr/bin/env python3
"""Benchmark of the rack: campaign wall time on 1, 2 and 4 places.

Starts a virtual rack of four rack-aarch64 boards (QEMU virt + U-Boot; free
ports, temporary directory), then runs the same campaign on rack-aarch64
with `--places 1`, `--places 2` and `--places 4`: every job a cold boot (PDU
on, U-Boot, DHCP + TFTP of kernel and initramfs, shell) and cyclictest.
Prints for each place count the wall time, its ratio to one place (the floor
is 1/places), the places' utilisation (job time / (places x wall)), the mean
job time (how much the boards slow each other down) and the host's CPU use
during the run, then the boot times the rack measured from its side of the
console (power-on -> U-Boot -> kernel -> shell, TFTP transfer times and rates).

What limits it here: every board is a QEMU under TCG on a 2-core host, so
from 2 places on the boards compete for the same two CPUs; the waiting for a
place disappears, but each job takes longer (the mean job time rises with
the places). On a real rack each board has its own CPU and only the
runner's few seconds per job are shared.

    .venv/bin/python bench/bench_rack.py [--places 1 2 4] [--repeat 2] [--duration 3]
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

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.plan.campaign import load_campaign  # noqa: E402
from rtlab.rack.control import rack_down, rack_up  # noqa: E402
from rtlab.images import ensure_images  # noqa: E402
from rtlab.run.runner import run_campaign  # noqa: E402

VARIANTS = ["rt", "rt-iso", "voluntary", "voluntary-iso", "preempt", "preempt-iso", "none", "none-iso"]


def write_campaign(tmp: Path, variants, duration: int, repeat: int = 1) -> Path:
    budgets = tmp / "budgets.yaml"
    # a budget no TCG board misses: the bench times the rack, not latency
    budgets.write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    c = tmp / "bench-rack.yaml"
    c.write_text(
        f"name: bench-rack\nbudgets: {budgets}\nboards: [rack-aarch64]\nvariants: {list(variants)}\n"
        f"repeat: {repeat}\n"
        "suites:\n  - name: cyclictest\n"
        f"    params: {{interval_us: 1000, duration_s: {duration}, histogram_us: 2000}}\n"
        "    overrides: {qemu-tcg: {histogram_us: 20000}}\n")
    return c


def write_rack(tmp: Path, boards: int) -> Path:
    """A rack of *boards* rack-aarch64 boards: labgrid/rack.yaml's board type
    and exporter, places of its own."""
    base = yaml.safe_load((ROOT / "labgrid" / "rack.yaml").read_text())
    places = {f"rack-vb{i}": {"comment": f"bench board vb{i}", "matches": [f"rtlab-rack/vb{i}/*"],
                              "tags": {"board": "rack-aarch64", "arch": "aarch64", "rack": "virtual"}}
              for i in range(boards)}
    (tmp / "places.yaml").write_text(yaml.safe_dump({"places": places}))
    rack = {"name": base["name"], "coordinator": base["coordinator"], "pdu": base["pdu"],
            "exporter": str(ROOT / "labgrid" / base["exporter"]), "places": "places.yaml",
            "idle_power_off_s": base.get("idle_power_off_s", 120),
            "board_types": {"aarch64-virt": base["board_types"]["aarch64-virt"]},
            "boards": {f"vb{i}": {"type": "aarch64-virt", "outlet": i} for i in range(boards)}}
    path = tmp / "rack.yaml"
    path.write_text(yaml.safe_dump(rack))
    return path


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def quiet(_msg):
    pass


def campaign_wall(tmp: Path, camp_file: Path, places: int, tag: str) -> tuple[float, list, float]:
    camp = load_campaign(camp_file)
    b0, t0_ticks = cpu_ticks()
    t0 = time.monotonic()
    run, _ = run_campaign(camp, results_root=tmp / f"results-{tag}", progress=quiet, places=places)
    wall = time.monotonic() - t0
    b1, t1_ticks = cpu_ticks()
    bad = [(j.variant, j.infra_error) for j in run.jobs if j.infra_error]
    if bad or not run.jobs:
        raise SystemExit(f"bench_rack: jobs failed with --places {places}: {bad}")
    return wall, run.jobs, (b1 - b0) / max(t1_ticks - t0_ticks, 1)


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
    ap.add_argument("--places", type=int, nargs="+", default=[1, 2, 4], help="place counts to compare")
    ap.add_argument("--variants", type=int, default=4, help="variants in the campaign (at most the 4 "
                                                             "Debian's arm64 kernels can be)")
    ap.add_argument("--repeat", type=int, default=2, help="repeats of each variant (jobs = variants x repeat)")
    ap.add_argument("--duration", type=int, default=3, help="cyclictest seconds per job")
    args = ap.parse_args()
    if sorted(args.places)[0] != 1:
        raise SystemExit("bench_rack: the ratios are to one place: --places must include 1")
    images = ensure_images("aarch64", progress=quiet)  # cached; not part of a campaign's cost
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-rack-") as t:
        tmp = Path(t)
        st = rack_up(tmp / "rack", config=write_rack(tmp, max(args.places)), coordinator_port=0, pdu_port=0)
        os.environ["RTLAB_RACK_DIR"] = st["dir"]  # where the runner finds the coordinator
        os.environ.pop("LG_COORDINATOR", None)
        try:
            # variants the aarch64 kernels can be (the others are "not available")
            camp = load_campaign(write_campaign(tmp, VARIANTS, args.duration))
            from rtlab.run.runner import unavailable
            ok = [j.variant.name for j in camp.jobs() if not unavailable(j, {"aarch64": images})]
            variants = ok[:args.variants]
            camp_file = write_campaign(tmp, variants, args.duration, args.repeat)
            t_start = time.time()
            for n in sorted(args.places):
                results[n] = campaign_wall(tmp, camp_file, n, f"p{n}")
            recs = boot_records(Path(st["dir"]), t_start)
        finally:
            rack_down(tmp / "rack")
    wall1, jobs1, _ = results[1]
    m1 = statistics.mean(j.duration_s for j in jobs1)
    print(f"campaign: rack-aarch64 x {variants} x {args.repeat} repeats = {len(jobs1)} jobs, cyclictest "
          f"{args.duration} s, rack of {max(args.places)} virtual boards (TCG) on {os.cpu_count()} CPUs")
    print(f"  {'places':>6} {'wall s':>8} {'ratio':>6} {'floor':>6} {'util':>6} {'job s':>7} {'x job@1':>8} "
          f"{'host CPU':>9}")
    for n, (wall, jobs, cpu) in sorted(results.items()):
        busy = sum(j.duration_s for j in jobs)
        mean = statistics.mean(j.duration_s for j in jobs)
        print(f"  {n:>6} {wall:8.1f} {wall / wall1:6.2f} {1 / n:6.2f} {busy / (n * wall):6.0%} {mean:7.1f} "
              f"{mean / m1:8.2f} {cpu:9.0%}")
    print(f"  per job outside the job on 1 place (reserve + lock + release): "
          f"{(wall1 - sum(j.duration_s for j in jobs1)) / len(jobs1):.1f} s")
    print("  ratio: wall / wall on 1 place; util: job time / (places x wall); x job@1: mean job time / "
          "on 1 place; host CPU: share of all CPUs busy during the run")
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
