"""Soak validation (rtlab.soak.checkpoint, rtlab.soak.pwcet) on real runs of the local board.

1. Does the estimate hold? For each finished soak run given (a run dir whose
   cyclictest-soak checkpoint holds N segments), the pWCET is estimated from
   the first *fraction* of its segments only (their merged histogram and
   block maxima) and compared with the maximum observed over the rest:
   covered when the estimate's upper bound is at least that maximum, and by
   how much the point estimate over-estimates it (estimate / later max).
   The per-sample 1e-9 level is compared with a maximum over far fewer than
   1e9 samples, so covering is expected; a miss says the tail changed (or
   the estimate is too low).
2. What checkpoints cost: the gaps between segments, from the checkpoints
   (each an upper bound, measured on the host: fetch + start of the next tool).

    python bench/bench_soak.py RUN_DIR... [--fraction 0.5]

3. Do memory and disk stay flat over a soak? ``--flat SECONDS`` runs a soak
   of that length on the local board (``rtlab run``, ``--checkpoint`` s
   segments, no publish) and at each checkpoint samples: the RSS of rtlab
   itself and of its board-test process, the RSS of the running cyclictest
   (each segment is a new one: its RSS, mlockall'd, is what the board keeps
   resident), the board's MemAvailable (the local board is this host), and
   the disk used by the run directory and by the job's work dir on the
   board. It prints one line per checkpoint and a least-squares slope per
   hour of each series with its first and last value: flat is a slope
   whose 12 h extrapolation is small next to the first value.

    python bench/bench_soak.py --flat 300 [--checkpoint 5] [--out flat.json]

4. Both at once, as a validation: ``--validate ROUNDS`` makes ROUNDS
   separate ``rtlab run`` sessions on ``--board``, each one soak of
   ``--duration`` s in ``--checkpoint`` s segments and one plain cyclictest
   of the same length, interval and histogram, in alternating order (A B,
   B A, ...: neither always runs on a fresher or warmer board). It prints
   each round's estimate from the soak's first *fraction* against the
   maximum over its rest (as 1.), and the p99 and max with and without
   checkpoints, paired by round (the checkpoint overhead: the ratio's
   median and a Wilcoxon signed-rank p over the rounds).

    python bench/bench_soak.py --validate 4 --board local --duration 240 [--checkpoint 5] [--out v.json]

Run it on runs made with campaigns using cyclictest-soak (e.g. 60 s in 3 s
segments). Any figure from a shared, loaded machine says so.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Optional

import scipy.stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rtlab.suites  # noqa: E402,F401 - the suites register the parsers' tools
from rtlab.soak import pwcet, checkpoint as soak  # noqa: E402
from rtlab.parsers import parse_file  # noqa: E402


def first_part(cp_path: Path, fraction: float):
    state = json.loads(cp_path.read_text())
    segs = state["segments"]
    k = max(1, int(len(segs) * fraction))
    head = soak.new_state(state["planned_s"], state["segment_s"], state["interval_us"], state["command"])
    for s in segs[:k]:
        out = parse_file(cp_path.parent / soak.SEGMENTS_DIR / f"{s['index']:04d}" / "cyclictest.json",
                         tool="cyclictest")
        soak.add_segment(head, s["index"], out, duration_s=s["duration_s"], elapsed_s=s["elapsed_s"],
                         gap_before_s=s.get("gap_before_s"))
    rest_max = max((s["max_us"] for s in segs[k:]), default=None)
    return head, rest_max, state


def predicted_max(fit: dict, n_rest: int, rest_max: float) -> dict:
    """What the tail fitted to the first part says of the maximum over the
    rest's *n_rest* samples: P(max <= x) = (1 - zeta * S(x - u)) ** n_rest for
    the GPD survival S above the threshold u. Its 5 %, 50 % and 95 % points,
    and where the observed *rest_max* falls in it (its PIT: uniform over
    rounds when the fitted tail extrapolates right, near 1 when it is too
    light). Taken whether or not the estimate was refused: it checks the
    tail model at the length the rest really ran, not at 1e-9."""
    u, xi, sigma, zeta = fit["threshold_us"], fit["shape_xi"], fit["scale_us"], fit["zeta"]

    def level(q: float) -> float:  # the q-quantile of the rest's maximum
        return pwcet._gpd_level(u, xi, sigma, zeta, -math.log(q) / n_rest)
    surv = float(sps.genpareto.sf(max(0.0, rest_max - u), xi, scale=sigma))
    pit = math.exp(n_rest * math.log1p(-min(zeta * surv, 1 - 1e-300)))
    return {"max_q05": level(0.05), "max_q50": level(0.5), "max_q95": level(0.95), "pit": pit,
            "in_90": level(0.05) <= rest_max <= level(0.95), "shape_xi": xi}


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines)}


def _kib(v: str | None) -> int | None:
    return int(v.split()[0]) if v else None


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """Every live descendant of *root* (and root): pid -> (ppid, comm)."""
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _status(int(d.name))
            if st.get("PPid"):
                procs[int(d.name)] = (int(st["PPid"]), st.get("Name", ""))
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in procs:
            out[p] = procs[p]
            todo += [c for c, (pp, _) in procs.items() if pp == p]
    return out


def _du(path: Path) -> int | None:
    if not path.exists():
        return None
    total = 0
    for f in path.rglob("*"):
        try:
            if f.is_file() and not f.is_symlink():
                total += f.stat().st_size
        except OSError:
            pass
    return total


def _mem_available_kib() -> int:
    for ln in Path("/proc/meminfo").read_text().splitlines():
        if ln.startswith("MemAvailable:"):
            return int(ln.split()[1])
    return 0


def write_campaign(path: Path, name: str, board: str, suites: list[tuple[str, dict]],
                   variant: Optional[str] = None) -> Path:
    """A campaign of *suites* ((suite, params), in order) on *board*, with a
    budget file beside it that no run breaches: these runs measure, the gate
    is not the point."""
    from rtlab.targets.boards import find_board
    budgets = path.parent / "budgets.yaml"
    budgets.write_text(f'budgets:\n  {find_board(board).budget_class}: {{"*": {{"*": {{"*": {{max_us: 10000000}}}}}}}}\n')
    path.write_text(json.dumps({"name": name, "budgets": str(budgets), "boards": [board],
                                **({"variants": [variant]} if variant else {}),
                                "suites": [{"name": n, "params": p} for n, p in suites]}, indent=1) + "\n")
    return path


def measure_flat(seconds: int, checkpoint_s: int, board: str, work: Path, out: Path | None,
                 histogram_us: int = 2000) -> int:
    """A soak of *seconds* on *board*, sampled at each checkpoint (see the module doc)."""
    import os
    import subprocess
    import time

    from rtlab.run.joblife import board_workdir

    work.mkdir(parents=True, exist_ok=True)
    write_campaign(work / "campaign.yaml", "bench-soak-flat", board, [("cyclictest-soak", {
        "interval_us": 1000, "duration_s": seconds, "checkpoint_s": checkpoint_s, "histogram_us": histogram_us})])
    log = open(work / "rtlab.log", "w")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(work / "campaign.yaml"),
                             "--results", str(work / "results"), "--no-publish", "--lock-timeout", "1800"],
                            cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    samples: list[dict] = []
    seen, cp, cyclictest_rss = 0, None, None
    t0 = time.monotonic()
    while proc.poll() is None:
        tree = _tree(proc.pid)
        for pid, (_, name) in tree.items():  # the running segment's cyclictest (between segments: none)
            if name == "cyclictest":
                cyclictest_rss = _kib(_status(pid).get("VmRSS")) or cyclictest_rss
        if cp is None:
            found = list((work / "results").glob("*/*/*/*/checkpoint.json"))
            cp = found[0] if found else None
        try:
            n = len(json.loads(cp.read_text())["segments"]) if cp else 0
        except (OSError, ValueError):
            n = seen
        if n > seen:
            seen = n
            run_dir = cp.parents[3]
            pytest_pids = [p for p, (pp, name) in tree.items() if pp == proc.pid and name.startswith("py")]
            row = {"checkpoint": n, "t_s": round(time.monotonic() - t0, 1),
                   "rtlab_rss_kib": _kib(_status(proc.pid).get("VmRSS")),
                   "board_tests_rss_kib": sum(_kib(_status(p).get("VmRSS")) or 0 for p in pytest_pids) or None,
                   "cyclictest_rss_kib": cyclictest_rss,
                   "board_mem_available_kib": _mem_available_kib(),
                   "run_dir_bytes": _du(run_dir),
                   "board_workdir_bytes": _du(Path(board_workdir(run_dir.name, board, "host")))}
            samples.append(row)
            print(json.dumps(row), flush=True)
        time.sleep(0.2)
    rc = proc.wait()
    print(f"rtlab run exited {rc} after {time.monotonic() - t0:.0f} s; {len(samples)} checkpoints sampled "
          f"(log: {work / 'rtlab.log'})")
    summary = {}
    # the last checkpoint is read while the board tests end (their RSS falls
    # as they exit): the slopes are of the checkpoints before it
    fit = samples[:-1] if len(samples) > 4 else samples
    for key in ("rtlab_rss_kib", "board_tests_rss_kib", "cyclictest_rss_kib", "board_mem_available_kib",
                "run_dir_bytes", "board_workdir_bytes"):
        pts = [(r["t_s"], r[key]) for r in fit if r.get(key) is not None]
        if len(pts) < 3:
            continue
        import numpy as np
        t, v = np.array(pts, dtype=float).T
        slope = float(np.polyfit(t, v, 1)[0]) * 3600  # per hour
        summary[key] = {"first": v[0], "last": v[-1], "max": float(v.max()), "slope_per_h": round(slope, 1),
                        "12h_extrapolated_change": round(slope * 12, 1)}
        print(f"{key:26s} first {v[0]:>12,.0f} last {v[-1]:>12,.0f} max {v.max():>12,.0f} "
              f"slope {slope:>+12,.1f}/h (12 h: {slope * 12:+,.0f})")
    if out:
        out.write_text(json.dumps({"seconds": seconds, "checkpoint_s": checkpoint_s, "board": board, "rc": rc,
                                   "samples": samples, "summary": summary,
                                   "loadavg": os.getloadavg()}, indent=1) + "\n")
    return 0 if rc in (0, 1) else 2


def estimate_row(cp: Path, fraction: float) -> tuple[dict, list[float]]:
    """The estimate from the first *fraction* of the soak at *cp* against the
    maximum over the rest, and the soak's checkpoint gaps."""
    head, rest_max, state = first_part(cp, fraction)
    gaps = [s["gap_before_s"] for s in state["segments"] if s.get("gap_before_s") is not None]
    allt = soak.output_of(head, str(cp)).combined()
    rest_samples = sum(s["cycles"] for s in state["segments"][len(head["segments"]):])
    bm = [s["max_us"] for s in head["segments"]]
    est = pwcet.estimate(histogram=allt.histogram if allt else None, block_maxima=bm,
                         interval_us=head["interval_us"], observed_max_us=allt.max_us if allt else None)
    row = {"run": str(cp.parent), "segments_fit": len(head["segments"]),
           "samples_fit": allt.cycles if allt else 0, "max_fit": allt.max_us if allt else None,
           "max_rest": rest_max, "estimate": est.per_sample_us, "ci": est.per_sample_ci_us,
           "refused": est.refused}
    if est.ok and rest_max is not None:
        row["covered"] = (est.per_sample_ci_us or (0, est.per_sample_us))[1] >= rest_max
        row["over_estimate"] = est.per_sample_us / rest_max
    if est.fit and est.method == "pot-gpd" and rest_max is not None and rest_samples:
        row["rest_max_predicted"] = predicted_max(est.fit, rest_samples, rest_max)
    return row, gaps


def print_predictions(rows: list[dict]) -> None:
    pr = [r["rest_max_predicted"] for r in rows if r.get("rest_max_predicted")]
    if pr:
        print(f"the first part's fitted tail, asked for the rest's max (whether or not refused): inside its 90 % "
              f"range {sum(p['in_90'] for p in pr)}/{len(pr)}; PIT " + ", ".join(f"{p['pit']:.2f}" for p in pr)
              + " (uniform when the tail extrapolates right; near 1: too light, near 0: too heavy)")


def validate(rounds: int, board: str, duration_s: int, checkpoint_s: int, interval_us: int,
             histogram_us: int, fraction: float, work: Path, out: Optional[Path],
             variant: Optional[str] = None) -> int:
    """ROUNDS sessions of soak + plain cyclictest, alternating (see the module doc)."""
    import os
    import subprocess
    import time

    from rtlab.run.results import load_run

    root = Path(__file__).resolve().parents[1]
    work.mkdir(parents=True, exist_ok=True)
    common = {"interval_us": interval_us, "duration_s": duration_s, "histogram_us": histogram_us}
    entries = {"soak": ("cyclictest-soak", {**common, "checkpoint_s": checkpoint_s}),
               "plain": ("cyclictest", common)}
    rows, gaps = [], []
    for r in range(rounds):
        order = ["soak", "plain"] if r % 2 == 0 else ["plain", "soak"]
        campaign = write_campaign(work / f"campaign-{r}.yaml", "bench-soak-validate", board,
                                  [entries[k] for k in order], variant)
        results = work / f"round-{r}"
        t0 = time.monotonic()
        with open(work / f"rtlab-{r}.log", "w") as log:
            rc = subprocess.run([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(campaign),
                                 "--results", str(results), "--no-publish", "--lock-timeout", "1800"],
                                cwd=root, stdout=log, stderr=subprocess.STDOUT).returncode
        row: dict = {"round": r, "order": "-".join(order), "rc": rc, "wall_s": round(time.monotonic() - t0, 1),
                     "loadavg": round(os.getloadavg()[0], 2)}
        runs = sorted(p.parent for p in results.glob("*/run.json"))
        if runs:
            for m in load_run(runs[-1]).measurements():
                t = m.output.combined()
                kind = "soak" if m.key.suite == "cyclictest-soak" else "plain"
                if t is not None:
                    row[f"{kind}_p99_us"] = t.histogram.percentile(99) if t.histogram else None
                    row[f"{kind}_max_us"] = t.max_us
                    row[f"{kind}_samples"] = t.cycles
        cps = sorted(results.rglob(soak.CHECKPOINT_FILE))
        if cps:
            est, g = estimate_row(cps[0], fraction)
            gaps += g
            row.update({k: est[k] for k in est if k != "run"})
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = [r for r in rows if "covered" in r]
    print(f"\n{rounds} rounds on {board}, {duration_s} s each way, segments of {checkpoint_s} s")
    print(f"estimate from the first {fraction:.0%} of each soak: {len(ok)} estimated "
          f"({len(rows) - len(ok)} refused or failed), covered the rest's max {sum(r['covered'] for r in ok)}"
          f"/{len(ok)}" + (f", over-estimate median x{statistics.median(r['over_estimate'] for r in ok):.2f}"
                           f" (x{min(r['over_estimate'] for r in ok):.2f}-x{max(r['over_estimate'] for r in ok):.2f})"
                           if ok else ""))
    for r in rows:
        if r.get("refused"):
            print(f"  round {r['round']}: {r['refused']}")
    print_predictions(rows)
    summary: dict = {"rounds": rounds, "estimated": len(ok), "covered": sum(r["covered"] for r in ok)}
    for stat in ("p99", "max"):
        pairs = [(r[f"soak_{stat}_us"], r[f"plain_{stat}_us"]) for r in rows
                 if r.get(f"soak_{stat}_us") and r.get(f"plain_{stat}_us")]
        if not pairs:
            continue
        ratios = [a / b for a, b in pairs]
        p = float(sps.wilcoxon([a - b for a, b in pairs]).pvalue) if len(pairs) >= 5 and \
            any(a != b for a, b in pairs) else None
        summary[f"{stat}_ratio_median"] = statistics.median(ratios)
        print(f"{stat} with / without checkpoints, paired by round: median x{statistics.median(ratios):.3f} "
              f"(x{min(ratios):.3f}-x{max(ratios):.3f}, {len(pairs)} pairs"
              + (f", Wilcoxon p {p:.2f})" if p is not None else ", too few pairs for a test)"))
    if gaps:
        gaps.sort()
        summary["gap_median_s"], summary["gap_max_s"] = statistics.median(gaps), gaps[-1]
        print(f"checkpoint gaps: {len(gaps)}, median {statistics.median(gaps):.3f} s, max {gaps[-1]:.3f} s "
              f"({sum(gaps) / (rounds * duration_s):.2%} of the soaks' time unsampled)")
    if out:
        out.write_text(json.dumps({"board": board, "duration_s": duration_s, "checkpoint_s": checkpoint_s,
                                   "interval_us": interval_us, "histogram_us": histogram_us,
                                   "fraction": fraction, "rows": rows, "summary": summary}, indent=1) + "\n")
    return 0 if all(r["rc"] in (0, 1) for r in rows) else 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="*", type=Path)
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--flat", type=int, metavar="SECONDS",
                    help="run a soak this long on the board and sample memory and disk at each checkpoint")
    ap.add_argument("--checkpoint", type=int, default=5, help="segment length of the --flat soak (s)")
    ap.add_argument("--board", default="local", help="the --flat soak's board (memory read on this host)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/rtlab-bench-soak-flat"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--histogram-us", type=int, default=2000, help="the --flat/--validate histogram range (µs)")
    ap.add_argument("--validate", type=int, metavar="ROUNDS",
                    help="ROUNDS sessions of a soak and a plain cyclictest on --board, alternating")
    ap.add_argument("--variant", help="the --validate runs' kernel variant (a QEMU board's: rt)")
    ap.add_argument("--duration", type=int, default=240, help="each --validate run's length (s)")
    ap.add_argument("--interval-us", type=int, default=1000, help="the --validate runs' cyclictest interval")
    args = ap.parse_args()
    if args.validate:
        work = args.work if args.work != ap.get_default("work") else Path("/tmp/rtlab-bench-soak-validate")
        return validate(args.validate, args.board, args.duration, args.checkpoint, args.interval_us,
                        args.histogram_us, args.fraction, work, args.out, args.variant)
    if args.flat:
        return measure_flat(args.flat, args.checkpoint, args.board, args.work, args.out, args.histogram_us)
    if not args.run_dirs:
        ap.error("RUN_DIR... or --flat SECONDS or --validate ROUNDS")
    rows, gaps = [], []
    for d in args.run_dirs:
        for cp in sorted(Path(d).rglob(soak.CHECKPOINT_FILE)):
            row, g = estimate_row(cp, args.fraction)
            gaps += g
            rows.append(row)
            print(json.dumps(row))
    ok = [r for r in rows if "covered" in r]
    print_predictions(rows)
    print(f"\n{len(rows)} runs, {len(ok)} estimated, covered {sum(r['covered'] for r in ok)}/{len(ok)}"
          + (f", over-estimate median x{statistics.median(r['over_estimate'] for r in ok):.2f}" if ok else ""))
    if gaps:
        gaps.sort()
        print(f"checkpoint gaps: {len(gaps)}, median {statistics.median(gaps):.3f} s, "
              f"max {gaps[-1]:.3f} s (host-measured upper bounds: fetch + next tool start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
