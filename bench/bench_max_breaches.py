"""How often quiet runs of the local board break the max budget, and what
explains each breach: the kernel (FAIL), the hypervisor's steal, or a
whole-machine stall the per-CPU witness saw (rtlab.core.stallwitness).

    python bench/bench_max_breaches.py [--runs 122] [--duration 2] [--budget-us 20000]

Runs idle cyclictest (1 ms, SCHED_FIFO 90, every CPU) RUNS times on the local
board as one `rtlab run --repeat RUNS`, then reads every attempt's raw
outputs: the runner measures a host-explained breach again, and the earlier
attempts stay in the run (measured-again/). Each attempt whose max reached
the budget is judged twice by the gate's own rules: without the witness
(the gate as it was: steal only) and with it. Prints the counts and the
ratio breaches-that-fail / runs for both. Take it with nothing else running.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.core import hostnoise  # noqa: E402
from rtlab.core.hostnoise import DEFAULT_STEAL_INFRA_MS, stalled_breach, stolen_breach  # noqa: E402
from rtlab.parsers import parse_file  # noqa: E402


def campaign(tmp: Path, duration: int, budget_us: int) -> Path:
    (tmp / "budgets.yaml").write_text(textwrap.dedent(f"""
        budgets:
          local: {{"*": {{"*": {{"*": {{max_us: {budget_us}}}}}}}}}
    """))
    c = tmp / "campaign.yaml"
    c.write_text(textwrap.dedent(f"""
        name: max-breaches
        budgets: budgets.yaml
        boards: [local]
        variants: [host]
        suites:
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: {duration}, priority: 90, histogram_us: 100000}}
    """))
    return c


def attempts(run_dir: Path):
    """Every measured attempt's suite dir: the kept runs and the earlier attempts."""
    for noise in sorted(run_dir.rglob(hostnoise.HOST_NOISE_FILE)):
        yield noise.parent


def max_us_of(d: Path):
    for raw in sorted(d.glob("*.json")) + sorted(d.glob("*.txt")) + sorted(d.glob("*.out")):
        try:
            out = parse_file(raw, "cyclictest")
        except Exception:
            continue
        c = out.combined() if out else None
        if c is not None and c.cycles:
            return float(c.max_us)
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=122)
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--budget-us", type=int, default=20000)
    ap.add_argument("--keep", type=Path, help="keep the run under this directory")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="rtlab-breaches-"))
    res_dir = a.keep or tmp / "results"
    t0 = time.monotonic()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    r = subprocess.run([str(ROOT / ".venv/bin/rtlab"), "run", "--campaign", str(campaign(tmp, a.duration, a.budget_us)),
                        "--results", str(res_dir), "--no-publish", "--repeat", str(a.runs)],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    run_dir = Path(r.stdout.split("results: ")[-1].split()[0]) if "results: " in r.stdout else None
    if run_dir is None:
        print(r.stdout[-3000:], r.stderr[-3000:])
        return 2
    n = breaches = fail_before = fail_after = steal = stall = 0
    for d in attempts(run_dir):
        noise = hostnoise.load(d)
        mx = max_us_of(d)
        if mx is None:
            continue
        n += 1
        if mx < a.budget_us:
            continue
        breaches += 1
        stolen = stolen_breach(noise, DEFAULT_STEAL_INFRA_MS, max_us=mx, budget_max_us=a.budget_us)
        stalled = None if stolen else stalled_breach(noise, DEFAULT_STEAL_INFRA_MS, max_us=mx,
                                                     budget_max_us=a.budget_us)
        steal += bool(stolen)
        stall += bool(stalled)
        fail_before += not stolen
        fail_after += not stolen and not stalled
        print(f"breach: {d.relative_to(run_dir)}: max {mx:,.0f} us; steal burst {noise.get('burst_ms')} ms; "
              f"witness {json.dumps((noise or {}).get('stall'))}")
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    print(f"# {a.runs} runs of {a.duration} s idle cyclictest on the local board ({n} attempts measured), "
          f"max budget {a.budget_us} us; load {' '.join(load0)} -> {' '.join(load1)}; {wall:.0f} s; rtlab exit "
          f"{r.returncode}")
    print("| | breaches of the max | explained by steal | by the stall witness | FAIL | FAIL per attempt |")
    print("|---|---|---|---|---|---|")
    print(f"| steal only (before) | {breaches} | {steal} | - | {fail_before} | {fail_before / max(n, 1):.3f} |")
    print(f"| steal and witness (after) | {breaches} | {steal} | {stall} | {fail_after} | "
          f"{fail_after / max(n, 1):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
