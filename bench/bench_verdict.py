"""The regression verdict's false-alarm rate and power, measured on real runs.

    python bench/bench_verdict.py                      # local board, N=5 (pools of 10), 15 s runs
    python bench/bench_verdict.py --small              # N=3, pools of 6, 2 s runs: ~2-3 min
    python bench/bench_verdict.py --board qemu-aarch64 --variant preempt --interval-us 10000 \
        --duration 5 --bad-tree KERNEL_TREE [--good-tree KERNEL_TREE]   # a kernel-side regression
    python bench/bench_verdict.py ... --keep DIR                      # keep the pools
    python bench/bench_verdict.py ... --pools BASE_RUN BAD_RUN        # re-judge kept pools
    python bench/bench_verdict.py ... --alternative p99,max           # also tally other gating statistics
    python bench/bench_verdict.py --sessions                          # as CI uses it: across sessions, 4 keys,
                                                                      #   6 baseline sessions over an hour, 8
                                                                      #   unchanged candidates and 2 per spin
                                                                      #   size (30, 60, 120 us / 3 ms): ~2 h
    python bench/bench_verdict.py --sessions --short                  # the same, small: 3-5 min (make test-long)
    python bench/bench_verdict.py --simulate [--campaigns 1000]        # the closed design on simulated
                                                                      #   40-key campaigns (seconds)

Kernel trees with a planted regression: tests/integration/kernel_project.py
(make_kernel_project: branch `latency`, the 400 ms kthread).

What it does:

1. a baseline pool: ``rtlab run --repeat POOL`` of one cyclictest campaign
   (each repeat a fresh tool run on the local board, a fresh boot on QEMU);
2. a regressed pool of the same size: on the local board with an injected
   regression (bench/stealer.py: a SCHED_FIFO thread per CPU spinning
   SPIN_US every PERIOD_MS, roughly doubling p99 at the defaults), on a
   booting board with the kernel built from --bad-tree;
3. A/A: COMPARISONS random disjoint N vs N subsets of the baseline pool
   through ``rtlab.verdict.compare.compare_runs`` with the shipped policy: the share
   that says "regression" is the false-alarm rate per comparison (every key
   of the campaign at once: a campaign-level rate);
4. power: COMPARISONS random N-subsets of the baseline against random
   N-subsets of the regressed pool: the share that says "regression".

``--sessions``: the verdict **as CI uses it** on the local board (issue 47
item 6), never subsets of one pool: a baseline of BASE_SESSIONS separate
``rtlab run --repeat R`` invocations BASE_GAP seconds apart (6 over an hour
by default), then candidate sessions GAP seconds apart, each its own
``rtlab run --repeat-until-decided --baseline ...`` (batches of repeats only
of the undecided keys): CAMPAIGNS unchanged ones and SPIN_CAMPAIGNS per size
of --spins with a SCHED_FIFO spin on every CPU (bench/stealer.py, every
PERIOD_MS), in a seeded random order; KEYS keys (cyclictest entries k01..kKK
of the shipped local budgets and policy). Prints per candidate its exit and
every key's outcome, then: unchanged green / passed with keys not gated /
red / undecided; the power at p99 x1.3, x1.5, x2 (each unchanged
candidate's own runs scaled, re-judged: a lower bound); per spin size how
many were found (REGRESSION or FAIL) and never INFRA; board-minutes per
decided key; the machine's steal (/proc/stat) and load; the baseline's p99
spread between runs and sessions. ``--short``: the same design at a smoke's
scale (make test-long: tests/integration/test_bench_verdict_sessions.py).

Subsets of one pool are not independent comparisons (they share runs): the
rates are estimates for this host at this time, with that caveat; the pools
are what keeps 20+ comparisons cheap. Prints N, both rates, the p99 ratio the
injection achieved, the wall time of one repeat and of one comparison
(N repeats on the candidate side plus the statistics), and the host's load.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from rtlab.verdict.compare import REGRESSION, UNDECIDED, compare_runs  # noqa: E402
from rtlab.plan.policy import Policy, load_policy  # noqa: E402
from rtlab.core.model import RunResult  # noqa: E402
from rtlab.verdict.stats import median  # noqa: E402
from rtlab.verdict.simulate import scaled_run as scaled  # noqa: E402


def campaign_file(tmp: Path, board: str, variant: str, duration: int, interval_us: int = 1000) -> Path:
    p = tmp / "campaign.yaml"
    p.write_text(textwrap.dedent(f"""
        name: bench-verdict
        budgets: {ROOT / 'budgets' / 'default.yaml'}
        boards: [{board}]
        variants: [{variant}]
        suites:
          - name: cyclictest
            params: {{interval_us: {interval_us}, duration_s: {duration}, histogram_us: 20000}}
    """))
    return p


def run_pool(camp: Path, results: Path, repeat: int, extra=()) -> tuple[Path, float]:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(camp),
                          "--results", str(results), "--no-publish", "--repeat", str(repeat), *extra],
                         cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if "results: " not in res.stdout:
        sys.exit(f"rtlab run failed (exit {res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    (run_dir / "bench-wall.json").write_text(json.dumps({"wall_s": wall}))
    print(f"  {run_dir} ({wall:.0f} s)", flush=True)
    return run_dir, wall


def pool_wall(run_dir: Path) -> float:
    """The wall time a kept pool took (written by run_pool)."""
    f = run_dir / "bench-wall.json"
    return float(json.loads(f.read_text())["wall_s"]) if f.is_file() else float("nan")


def pool_duration(run_dir: Path, default: int) -> int:
    """cyclictest's duration_s in a kept pool's campaign copy."""
    import yaml

    try:
        doc = yaml.safe_load((run_dir / "campaign.yaml").read_text())
        return int(doc["suites"][0]["params"]["duration_s"])
    except (OSError, KeyError, IndexError, TypeError, ValueError):
        return default


def repeats_of(run_dir: Path) -> list[RunResult]:
    """One RunResult per valid repeat (the unit the verdict counts)."""
    run = RunResult.from_json(json.loads((run_dir / "run.json").read_text()))
    out = []
    for j in run.jobs:
        if j.verdict.value == "infra":
            continue
        out.append(RunResult(run_id=f"{run.run_id}#{j.repeat}", started=run.started,
                             campaign=run.campaign, commit=run.commit, jobs=[j]))
    return out


def p99s(runs: list[RunResult]) -> list:
    """p99 per repeat, sorted; beyond the histogram range shown as ">range"."""
    vals = [m.output.combined().percentiles_us["99"] for r in runs for m in r.measurements()]
    return sorted(v for v in vals if v is not None) + [">range"] * sum(v is None for v in vals)


# -- across sessions, as CI uses it ------------------------------------------
def sessions_campaign(tmp: Path, keys: int, duration: int, max_look: int | None) -> Path:
    """KEYS cyclictest keys on the local board, judged by the shipped
    budgets and regression policy (its looks cut at MAX_LOOK for --short)."""
    import yaml

    doc = yaml.safe_load((ROOT / "budgets" / "default.yaml").read_text())
    # every key the shipped local cyclictest idle budget (a host breach is INFRA and retried)
    for i in range(1, keys + 1):
        doc["budgets"]["local"]["*"][f"k{i:02d}"] = doc["budgets"]["local"]["*"]["cyclictest"]
    if max_look:
        doc["regression"]["looks"] = [n for n in doc["regression"]["looks"] if n <= max_look]
    (tmp / "budgets.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    entries = "".join(f"""
          - name: k{i:02d}
            suite: cyclictest
            params: {{interval_us: 1000, duration_s: {duration}, histogram_us: 20000}}""" for i in range(1, keys + 1))
    p = tmp / "campaign.yaml"
    p.write_text(textwrap.dedent("""
        name: bench-verdict-sessions
        budgets: budgets.yaml
        boards: [local]
        suites:""") + entries + "\n")
    return p


def rtlab_cli(*args) -> tuple[subprocess.CompletedProcess, float, list[Path]]:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", *map(str, args)], cwd=ROOT,
                         capture_output=True, text=True)
    dirs = [Path(ln.split("results: ", 1)[1].strip()) for ln in res.stdout.splitlines()
            if ln.startswith("results: ")]
    return res, time.monotonic() - t0, dirs


def cpu_times() -> tuple[float, float]:
    """(steal, total) jiffies of every CPU from /proc/stat: the machine's steal."""
    with open("/proc/stat") as f:
        vals = [float(x) for x in f.readline().split()[1:]]
    return vals[7] if len(vals) > 7 else 0.0, sum(vals[:8])


def run_measurements(dirs: list[Path]) -> list[dict]:
    """Every measurement of the run dirs' run.json (verdict, key)."""
    out = []
    for d in dirs:
        try:
            run = json.loads((d / "run.json").read_text())
        except (OSError, ValueError):
            continue
        out += [m for j in run.get("jobs", []) for m in j.get("measurements", [])]
    return out


def session_p99s(run_dir: Path) -> list[float]:
    """p99 of every valid run of every key of one session (us)."""
    from rtlab.verdict.compare import load_runs, side_from_runs
    side = side_from_runs(load_runs([run_dir]))
    return [float(r.values["p99"]) for reps in side.keys.values() for r in reps if r.values.get("p99") is not None]


def across_sessions(a) -> int:
    """The verdict as CI meets it on the local board: a baseline of separate
    sessions spread over time, then candidate sessions, each its own `rtlab
    run --repeat-until-decided`: unchanged ones and ones with a SCHED_FIFO
    spin per CPU at each size of --spins (bench/stealer.py), interleaved."""
    from rtlab.verdict.compare import BLIND, NO_REGRESSION, load_runs
    from stealer import stealing

    keys, sessions, per = a.keys, a.base_sessions, a.base_repeat
    load0, steal0, wall0 = os.getloadavg(), cpu_times(), time.monotonic()
    out = Path(a.keep or tempfile.mkdtemp(prefix="bench-verdict-sessions-"))
    out.mkdir(parents=True, exist_ok=True)
    camp = sessions_campaign(out, keys, a.duration, a.max_look)
    policy = load_policy(out / "budgets.yaml")
    print(f"campaign {camp}: {keys} keys, cyclictest {a.duration} s, looks {list(policy.schedule())}; "
          f"results under {out}", flush=True)
    base_dirs: list[Path] = []
    for i in range(sessions):
        if i:
            time.sleep(a.base_gap)
        res, wall, dirs = rtlab_cli("run", "--campaign", camp, "--results", out / "base", "--no-publish",
                                    "--repeat", per)
        if not dirs:
            sys.exit(f"baseline session {i + 1}: rtlab run exit {res.returncode}\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
        base_dirs += dirs
        print(f"baseline session {i + 1}/{sessions}: {dirs[0]} ({wall:.0f} s, exit {res.returncode})", flush=True)
    base_runs = load_runs(base_dirs)
    # the candidates: unchanged and each spin size, interleaved (drift of
    # the machine spreads over all of them alike)
    plan = [0.0] * a.campaigns + [s for s in a.spins for _ in range(a.spin_campaigns)]
    random.Random(a.seed).shuffle(plan)
    rows = []
    for c, spin_us in enumerate(plan):
        time.sleep(a.gap)
        args = ("run", "--campaign", camp, "--results", out / f"cand{c + 1}", "--no-publish",
                "--repeat-until-decided", "--baseline", *base_dirs)
        if spin_us:
            with stealing(spin_us=spin_us, period_ms=a.period_ms, max_s=3600):
                res, wall, dirs = rtlab_cli(*args)
        else:
            res, wall, dirs = rtlab_cli(*args)
        meas = run_measurements(dirs)
        infra = sum(1 for m in meas if m.get("verdict") == "infra")
        fail = sum(1 for m in meas if m.get("verdict") == "fail")
        v = json.loads((dirs[-1] / "compare.json").read_text()) if dirs and (dirs[-1] / "compare.json").is_file() \
            else {"keys": []}
        outs = [k["outcome"] for k in v["keys"]]
        row = {"campaign": c + 1, "spin_us": spin_us, "exit": res.returncode, "wall_s": wall, "batches": len(dirs),
               "regression": outs.count(REGRESSION), "ok": outs.count(NO_REGRESSION), "blind": outs.count(BLIND),
               "undecided": outs.count(UNDECIDED), "infra_measurements": infra, "fail_measurements": fail,
               "measurements": len(meas), "runs_per_key": [k["n_candidate"] for k in v["keys"]],
               "detectable": [k.get("detectable") for k in v["keys"]]}
        if not spin_us and dirs:  # the power at known effects: this campaign's own runs scaled
            cand = load_runs(dirs)
            row["power"] = {f: sum(1 for k in compare_runs(base_runs, [scaled(r, f) for r in cand], policy).keys
                                   if k.outcome == REGRESSION) for f in a.factors}
        rows.append(row)
        what = f"spin {spin_us:g} us / {a.period_ms:g} ms" if spin_us else "unchanged"
        print(f"candidate {c + 1}/{len(plan)} ({what}): exit {res.returncode}, {len(dirs)} batches, "
              f"{wall / 60:.1f} min; {row['regression']} regressed, {row['ok']} ok, {row['blind']} not gated, "
              f"{row['undecided']} undecided of {keys} keys; {fail} FAIL, {infra} INFRA of {len(meas)} "
              f"measurements", flush=True)
    if not rows:
        sys.exit("no candidate")
    load1, steal1 = os.getloadavg(), cpu_times()
    steal = (steal1[0] - steal0[0]) / max(1.0, steal1[1] - steal0[1])
    p99_by_session = [session_p99s(d) for d in base_dirs]
    medians = [median(v) for v in p99_by_session if v]
    every = sorted(x for v in p99_by_session for x in v)
    unchanged = [r for r in rows if not r["spin_us"]]
    print()
    print(f"across sessions: {len(base_dirs)} baseline sessions x {per} repeats of {keys} keys, "
          f"{a.base_gap:g} s apart; {len(unchanged)} unchanged candidates and "
          f"{len(rows) - len(unchanged)} with a spin ({', '.join(f'{x:g}' for x in a.spins)} us every "
          f"{a.period_ms:g} ms per CPU), {a.gap:g} s apart; policy {policy.source}, looks {list(policy.schedule())}")
    print(f"machine: steal {steal:.1%} of the CPUs' time over the {(time.monotonic() - wall0) / 60:.0f} min; "
          f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end, on {os.cpu_count()} CPUs")
    if every:
        print(f"baseline p99: runs {every[0]:g}-{every[-1]:g} us; session medians {min(medians):g}-"
              f"{max(medians):g} us (x{max(medians) / max(min(medians), 1e-9):.1f} between sessions)")
    if unchanged:
        green = sum(1 for r in unchanged if r["exit"] == 0)
        blind = sum(1 for r in unchanged if r["exit"] == 3)
        red = sum(1 for r in unchanged if r["exit"] == 1)
        by_budget = sum(1 for r in unchanged if r["exit"] == 1 and not r["regression"])
        und = sum(1 for r in unchanged if r["exit"] == 2)
        print(f"unchanged: {green} green, {blind} passed with keys not gated, {red} red ({by_budget} by a budget "
              f"FAIL alone), {und} undecided/infra of {len(unchanged)}; keys: {sum(r['ok'] for r in unchanged)} ok, "
              f"{sum(r['blind'] for r in unchanged)} not gated, {sum(r['regression'] for r in unchanged)} "
              f"false REGRESSION, {sum(r['undecided'] for r in unchanged)} undecided")
        for f in a.factors:
            found = sum(r.get("power", {}).get(f, 0) for r in unchanged)
            print(f"  power at p99 x{f:g} (its own runs scaled, re-judged): {found}/{len(unchanged) * keys} keys "
                  f"(a lower bound: only the runs the unchanged candidate measured)")
    for spin in a.spins:
        sr = [r for r in rows if r["spin_us"] == spin]
        if not sr:
            continue
        found = sum(1 for r in sr if r["exit"] == 1)
        never_infra = sum(1 for r in sr if r["infra_measurements"] == 0)
        print(f"spin {spin:g} us: found (REGRESSION or FAIL) {found}/{len(sr)}; never INFRA {never_infra}/{len(sr)} "
              f"({sum(r['infra_measurements'] for r in sr)} INFRA of {sum(r['measurements'] for r in sr)} "
              f"measurements); exits {[r['exit'] for r in sr]}")
    decided = sum(r["ok"] + r["blind"] + r["regression"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    print(f"board-minutes per decided key: {wall / 60 / max(1, decided):.2f} ({decided} keys decided in "
          f"{wall / 60:.1f} min of candidates)")
    (out / "bench-sessions.json").write_text(json.dumps(
        {"rows": rows, "keys": keys, "base_dirs": [str(d) for d in base_dirs], "steal": steal,
         "baseline_p99_by_session": p99_by_session, "load": [load0, load1]}, indent=2, default=str))
    print(f"kept: {out / 'bench-sessions.json'}")
    return 0


SIMULATED = (  # (name, Scenario keyword arguments): docs/measurements/verdict.md
    ("no change", {}),
    ("p99 and p99.9 x1.3 on one key", {"ratio": 1.3}),
    ("x1.5", {"ratio": 1.5}),
    ("x2", {"ratio": 2.0}),
    ("sessions: a quarter of the variance", {"tau_share": 0.25}),
    ("sessions: half of the variance", {"tau_share": 0.5}),
    ("half, and x2 on one key", {"tau_share": 0.5, "ratio": 2.0}),
    ("one x20 run in every key", {"wild": True}),
    ("one x20 run, and x1.5 on one key", {"wild": True, "ratio": 1.5}),
    ("15 runs (5 x 3) vs one session", {"pool": (5, 3), "cand_sessions": "one"}),
    ("15 vs one session, a quarter", {"pool": (5, 3), "cand_sessions": "one", "tau_share": 0.25}),
    ("4 keys, 3 x 3 runs vs one session, a quarter", {"keys": 4, "pool": (3, 3), "cand_sessions": "one",
                                                      "tau_share": 0.25}),
    ("1 key, 2 x 4 runs vs one session", {"keys": 1, "pool": (2, 4), "cand_sessions": "one"}),
    ("1 key, 2 x 4 runs vs one session, x3", {"keys": 1, "pool": (2, 4), "cand_sessions": "one", "ratio": 3.0}),
    ("1 key, 2 x 4 runs vs a session per batch, half", {"keys": 1, "pool": (2, 4), "tau_share": 0.5}),
    ("1 key, 2 x 4 runs vs a session per batch, x3", {"keys": 1, "pool": (2, 4), "ratio": 3.0}),
    ("4 keys, 3 x 3 runs vs a session per batch, half", {"keys": 4, "pool": (3, 3), "tau_share": 0.5}),
)
#: a censored p99.9 judged by its share past the range (one gating
#: statistic a key): 3000 samples a run (3 s at 1 ms), counts Poisson around
#: a log-normal rate (run-to-run sd of the log rate 0.6, the local board's
#: 2 ms range on a loaded day: tests/fixtures/verdict-local)
_SHARE = {"sd": (0.6,), "cycles": 3000, "policy": Policy(statistics=("p99.9",))}
SIMULATED_SHARE = (
    ("0.1 % past (3 a run)", {**_SHARE, "share": 0.001}),
    ("0.1 %, x2", {**_SHARE, "share": 0.001, "ratio": 2.0}),
    ("0.1 %, x3", {**_SHARE, "share": 0.001, "ratio": 3.0}),
    ("1 % past (30 a run)", {**_SHARE, "share": 0.01}),
    ("1 %, x1.5", {**_SHARE, "share": 0.01, "ratio": 1.5}),
    ("1 %, x2", {**_SHARE, "share": 0.01, "ratio": 2.0}),
    ("1 %, a steadier tail (log-rate sd 0.3)", {**_SHARE, "share": 0.01, "sd": (0.3,)}),
    ("1 %, sd 0.3, x2", {**_SHARE, "share": 0.01, "sd": (0.3,), "ratio": 2.0}),
    ("0.02 % past (0.6 a run)", {**_SHARE, "share": 0.0002}),
    ("0.02 %, x3", {**_SHARE, "share": 0.0002, "ratio": 3.0}),
    ("0.1 %, sessions half of the variance", {**_SHARE, "share": 0.001, "tau_share": 0.5}),
    ("0.1 %, a wild x20 run in every key", {**_SHARE, "share": 0.001, "wild": True}),
    ("4 keys, 3 x 3 runs vs a session per batch, 0.1 %", {**_SHARE, "share": 0.001, "keys": 4,
                                                         "pool": (3, 3)}),
    ("4 keys, 3 x 3 runs, 0.1 %, x3", {**_SHARE, "share": 0.001, "keys": 4, "pool": (3, 3), "ratio": 3.0}),
)


def simulated(campaigns: int, seed: int, run_s: float) -> int:
    """The shipped policy on simulated 40-key campaigns (rtlab.verdict.simulate):
    per scenario, campaigns green / with a false alarm, keys decided by their
    cap, power on the changed key, candidate runs per key and board-minutes
    per decided key at *run_s* seconds a run, the keys' detectable effect."""
    import numpy as np

    from rtlab.verdict.simulate import Scenario, simulate

    print(f"# {campaigns} simulated campaigns per row (40 keys unless it says), shipped policy, seed {seed}; "
          f"board-minutes at {run_s:g} s per key-run")
    head = ("| scenario | green | false alarms | keys decided | not gated | power | runs per key | board-min per key "
            "| detectable (median, max) |")
    bad = 0
    for table, rows in (("p99 and p99.9", SIMULATED), ("p99.9 judged by its share past the range", SIMULATED_SHARE)):
        print(f"\n{table}:\n\n{head}\n|---|---|---|---|---|---|---|---|---|")
        for i, (name, kw) in enumerate(rows):
            r = simulate(Scenario(**kw), campaigns, seed + i)
            pw = r.power()
            print(f"| {name} | {r.green_rate():.1%} | {r.false_alarm_rate():.1%} | {r.decided_share():.1%} | "
                  f"{r.blind_share():.1%} | {'' if pw != pw else f'{pw:.1%}'} | {r.mean_runs():.1f} | "
                  f"{r.mean_runs() * run_s / 60:.2f} | +{np.nanmedian(r.detectable):.0%}, "
                  f"+{np.nanmax(r.detectable):.0%} |")
            bad += r.false_alarm_rate() > 0.05 or r.decided_share() < 1.0
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="false alarms and power of rtlab compare")
    ap.add_argument("--board", default="local")
    ap.add_argument("--variant", default="host")
    ap.add_argument("--n", type=int, default=5, help="repeats per side of one comparison")
    ap.add_argument("--pool", type=int, help="repeats per pool (default 2N)")
    ap.add_argument("--comparisons", type=int, default=20)
    # 15 s: on this host a 5 s run's p99 varies 4x between repeats, 15 s 1.7x (README)
    ap.add_argument("--duration", type=int, help="seconds per cyclictest run (default 15; --sessions 5, the "
                                                 "default campaign's)")
    ap.add_argument("--spin-us", type=float, default=60, help="injected regression (local board)")
    ap.add_argument("--period-ms", type=float, default=3)
    ap.add_argument("--good-tree", type=Path, help="kernel tree of the baseline (booting boards)")
    ap.add_argument("--bad-tree", type=Path, help="kernel tree with the regression (booting boards)")
    ap.add_argument("--interval-us", type=int, default=1000,
                    help="cyclictest period (10000 on TCG, which misses 1 ms wake-ups under load)")
    ap.add_argument("--keep", type=Path, help="keep the pools' run dirs under this directory")
    ap.add_argument("--base-run", type=Path, help="reuse this run dir as the baseline pool")
    ap.add_argument("--bad-run", type=Path, help="reuse this run dir as the regressed pool")
    ap.add_argument("--alternative", action="append", metavar="STAT,STAT",
                    default=["p99,p99.9", "max", "p99,p99.9,max", "p99.9,max"],
                    help="also tally these gating statistics on the same comparisons")
    ap.add_argument("--small", action="store_true", help="N=3, pools of 6, 2 s runs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pools", type=Path, nargs=2, metavar=("BASE_RUN", "BAD_RUN"),
                    help="re-use two kept pools (run dirs) instead of measuring: other N, same runs")
    ap.add_argument("--sessions", action="store_true",
                    help="as CI uses it: baseline and candidates from separate rtlab run invocations, "
                         "candidates --repeat-until-decided, unchanged and with spins (see the module's doc)")
    ap.add_argument("--keys", type=int, default=4, help="--sessions: keys per campaign (default 4)")
    ap.add_argument("--base-sessions", type=int, default=6, help="--sessions: baseline sessions (default 6)")
    ap.add_argument("--base-repeat", type=int, default=3, help="--sessions: repeats per baseline session")
    ap.add_argument("--base-gap", type=float, default=600,
                    help="--sessions: seconds between baseline sessions (default 600: an hour for 6)")
    ap.add_argument("--campaigns", type=int, default=8, help="--sessions: unchanged candidate sessions")
    ap.add_argument("--spins", type=lambda t: [float(x) for x in t.split(",")], default=[30.0, 60.0, 120.0],
                    help="--sessions: spin sizes (us) of the regressed candidates (default 30,60,120)")
    ap.add_argument("--spin-campaigns", type=int, default=2, help="--sessions: candidates per spin size")
    ap.add_argument("--gap", type=float, default=60, help="--sessions: seconds between candidates")
    ap.add_argument("--max-look", type=int, help="--sessions: cut the policy's looks at this many runs")
    ap.add_argument("--factors", type=lambda t: [float(x) for x in t.split(",")], default=[1.3, 1.5, 2.0],
                    help="--sessions: injected p99 factors re-judged on unchanged runs (default 1.3,1.5,2)")
    ap.add_argument("--simulate", action="store_true",
                    help="the shipped policy on simulated 40-key campaigns (--campaigns, default 1000)")
    ap.add_argument("--run-s", type=float, default=4.5,
                    help="--simulate: board seconds per key-run (the local board's 3 s run: 4.5)")
    ap.add_argument("--short", action="store_true",
                    help="--sessions, small (make test-long, a smoke run of 3-5 min): 2 keys, 3 baseline "
                         "sessions 5 s apart, 2 unchanged candidates and one per spin size, 1 s runs, looks up "
                         "to 6")
    a = ap.parse_args(argv)
    if a.simulate:
        explicit = any(x == "--campaigns" or x.startswith("--campaigns=") for x in (argv or sys.argv[1:]))
        return simulated(a.campaigns if explicit else 1000, a.seed, a.run_s)
    if a.short:
        a.sessions = True
        a.keys, a.base_sessions, a.campaigns, a.spin_campaigns, a.duration = 2, 3, 2, 1, 1
        a.base_gap, a.gap, a.max_look = 5, 5, a.max_look or 6
    if a.sessions:
        a.duration = a.duration or 5
        return across_sessions(a)
    a.duration = a.duration or 15
    if a.small:
        a.n, a.duration = 3, 2
    pool = a.pool or 2 * a.n
    if pool < 2 * a.n and not a.pools:
        sys.exit("--pool must hold two disjoint sides (>= 2N)")
    if a.board != "local" and not (a.bad_tree or a.bad_run or a.pools):
        sys.exit("a booting board needs --bad-tree (a kernel with the regression)")
    rng = random.Random(a.seed)
    policy = load_policy(ROOT / "budgets" / "default.yaml")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-verdict-") as tmpname:
        tmp = Path(tmpname)
        keep = a.keep or tmp / "r"
        camp = campaign_file(tmp, a.board, a.variant, a.duration, a.interval_us)
        good_extra = ("--kernel-tree", str(a.good_tree)) if a.good_tree else ()
        if a.pools:  # both kept pools at once
            a.base_run, a.bad_run = a.pools
        if a.base_run:
            base_dir, base_wall = a.base_run, pool_wall(a.base_run)
        else:
            print(f"baseline pool: {pool} repeats of {a.board}/{a.variant} cyclictest {a.duration} s "
                  f"every {a.interval_us} us ...", flush=True)
            base_dir, base_wall = run_pool(camp, keep, pool, good_extra)
        if a.bad_run:
            bad_dir, bad_wall = a.bad_run, pool_wall(a.bad_run)
            what = f"pool {a.bad_run.name}"
        elif a.board == "local":
            from stealer import stealing
            print(f"regressed pool: {pool} repeats with a SCHED_FIFO spin of {a.spin_us:g} us "
                  f"every {a.period_ms:g} ms per CPU ...", flush=True)
            with stealing(spin_us=a.spin_us, period_ms=a.period_ms):
                bad_dir, bad_wall = run_pool(camp, keep, pool)
            what = f"SCHED_FIFO spin {a.spin_us:g} us / {a.period_ms:g} ms per CPU"
        else:
            print(f"regressed pool: {pool} repeats of the kernel from {a.bad_tree} ...", flush=True)
            bad_dir, bad_wall = run_pool(camp, keep, pool, ("--kernel-tree", str(a.bad_tree)))
            what = f"kernel from {a.bad_tree}"
        if a.keep:
            print(f"kept pools: --pools {base_dir} {bad_dir}", flush=True)
        base, bad = repeats_of(base_dir), repeats_of(bad_dir)
        if a.base_run:  # kept pools: the run length they were measured with
            a.duration = pool_duration(base_dir, a.duration)
        if len(base) < 2 * a.n or len(bad) < a.n:
            sys.exit(f"too few valid repeats: {len(base)} baseline, {len(bad)} regressed (INFRA on a loaded host?)")

        def tally(pairs, pol=policy):
            out = {REGRESSION: 0, UNDECIDED: 0}
            t0 = time.monotonic()
            for b, c in pairs:
                o = compare_runs(b, c, pol).outcome
                if o in out:
                    out[o] += 1
            return out, (time.monotonic() - t0) / len(pairs)

        aa_pairs, pw_pairs = [], []
        for _ in range(a.comparisons):
            s = rng.sample(base, 2 * a.n)
            aa_pairs.append((s[:a.n], s[a.n:]))
            pw_pairs.append((rng.sample(base, a.n), rng.sample(bad, a.n)))
        aa, stat_s = tally(aa_pairs)
        pw, _ = tally(pw_pairs)
        # the same baseline subsets against the other half doubled: power at
        # exactly 2x p99 with the real spread between runs of this host
        x2, _ = tally([(b, [scaled(r, 2.0) for r in c]) for b, c in aa_pairs])
        # the same comparisons with other gating statistics (the shipped
        # min effects and correction): what chose the class's statistics
        alternatives = []
        for stat_set in a.alternative:
            names = tuple(stat_set.split(","))
            alt = dataclasses.replace(policy, statistics=names, class_statistics={})
            alternatives.append((names, tally(aa_pairs, alt)[0], tally(pw_pairs, alt)[0]))
    per_repeat = (base_wall + bad_wall) / (2 * pool)
    known = [v for v in p99s(bad) if v != ">range"], [v for v in p99s(base) if v != ">range"]
    ratio = median(known[0]) / median(known[1]) if known[0] and known[1] else float("nan")
    load1 = os.getloadavg()
    print()
    runs = "kept pools re-judged" if a.pools else f"cyclictest {a.duration} s per repeat"
    print(f"board {a.board}/{a.variant}, {runs}, N={a.n} per side, "
          f"pools of {pool}, {a.comparisons} comparisons each, policy {policy.source}")
    print(f"baseline p99 per repeat (us): {p99s(base)}")
    print(f"regressed p99 per repeat (us): {p99s(bad)}  ({what})")
    print(f"p99 ratio regressed/baseline (medians): {ratio:.2f}x")
    for name, runs_ in (("baseline", base), ("regressed", bad)):
        tails = [(m.output.combined().percentiles_us["99.9"], m.output.combined().max_us)
                 for r in runs_ for m in r.measurements()]
        print(f"{name} p99.9 / max per repeat (us): " + ", ".join(
            f"{'>range' if p is None else f'{p:g}'}/{mx:g}" for p, mx in sorted(tails, key=lambda x: x[1])))
    print(f"A/A false alarms: {aa[REGRESSION]}/{a.comparisons} = {aa[REGRESSION] / a.comparisons:.0%} "
          f"(undecided {aa[UNDECIDED]})   target <= 5 %")
    print(f"power: {pw[REGRESSION]}/{a.comparisons} = {pw[REGRESSION] / a.comparisons:.0%} "
          f"(undecided {pw[UNDECIDED]})   target >= 95 % for 2x p99")
    print(f"power at exactly 2x (disjoint baseline repeats with every latency doubled): "
          f"{x2[REGRESSION]}/{a.comparisons} = {x2[REGRESSION] / a.comparisons:.0%} (undecided {x2[UNDECIDED]})")
    print(f"wall time: {per_repeat:.1f} s per repeat ({a.duration} s of it cyclictest; "
          f"{per_repeat / a.duration:.2f}x the tool time), {a.n * per_repeat + stat_s:.0f} s per comparison "
          f"(N repeats + {stat_s * 1000:.0f} ms of statistics)")
    for names, faa, fpw in alternatives:
        print(f"  gating on {'+'.join(names):<16} A/A false alarms {faa[REGRESSION]:>2}/{a.comparisons} "
              f"(undecided {faa[UNDECIDED]}), power {fpw[REGRESSION]:>2}/{a.comparisons} "
              f"(undecided {fpw[UNDECIDED]})")
    print(f"host load average (1 min) {load0[0]:.1f} at start, {load1[0]:.1f} at end, on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
