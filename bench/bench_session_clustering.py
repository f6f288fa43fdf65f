"""Do a board's runs cluster by session? The measurement behind the budget
file's ``regression: baseline:`` per class (README "Paired boots").

    python bench/bench_session_clustering.py --board qemu-aarch64 --variant rt \
        [--sessions 7] [--repeat 3] [--gap 60] [--duration 10] [--loaded 2] [--keep DIR]
    python bench/bench_session_clustering.py --analyze DIR     # re-judge kept sessions

Each session is a separate ``rtlab run --repeat R`` (its own boots, as
separate pipelines are), GAP seconds apart with whatever the machine does in
between; the last LOADED sessions run with ``stress-ng --cpu 1`` busy on one
core, as on a busy runner. Prints, per run-level statistic, the sessions'
share of the run-to-run variance (rtlab.verdict.stats.session_ratio: the
estimate, its 90 % upper bound and the F-test p that `rtlab compare` prints
for a store pool), the runs' log sd, and the medians of quiet and loaded
sessions. A share near 0 (F-test p large) says a store baseline serves the
class; a clustering pool says pairs would (`rtlab paired`), where the
board boots built kernels.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.verdict import stats  # noqa: E402
from rtlab.verdict.compare import load_runs, side_from_runs  # noqa: E402

STATISTICS = ("p50", "p99", "p99.9", "max")


def measure(a, out: Path) -> None:
    camp = out / "campaign.yaml"
    camp.write_text(textwrap.dedent(f"""
        name: bench-session-clustering
        boards: [{a.board}]
        variants: [{a.variant}]
        suites:
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: {a.duration}, priority: 90, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
    """))
    loaded: dict[str, bool] = {}
    for i in range(1, a.sessions + 1):
        if i > 1:
            time.sleep(a.gap)
        name = f"s{i}"
        busy = i > a.sessions - a.loaded
        hog = subprocess.Popen(["stress-ng", "--cpu", "1"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if busy else None
        try:
            t0 = time.monotonic()
            res = subprocess.run([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(camp),
                                  "--board", a.board, "--repeat", str(a.repeat), "--results", str(out / name),
                                  "--no-publish"], cwd=ROOT, capture_output=True, text=True)
        finally:
            if hog:
                hog.terminate()
                hog.wait()
        loaded[name] = busy
        (out / "sessions.json").write_text(json.dumps({"loaded": loaded}, indent=2) + "\n")
        print(f"session {i}/{a.sessions}{' (stress-ng --cpu 1)' if busy else ''}: exit {res.returncode}, "
              f"{time.monotonic() - t0:.0f} s", flush=True)


def analyze(out: Path) -> int:
    meta = out / "sessions.json"
    loaded = json.loads(meta.read_text())["loaded"] if meta.is_file() else {}
    dirs = sorted(p.parent for p in out.glob("s*/2*/run.json"))
    side = side_from_runs(load_runs(dirs))
    bench_session = {d.name: d.parent.name for d in dirs}
    for key, reps in sorted(side.keys.items(), key=lambda kv: kv[0].label()):
        # a run's session is its `rtlab run` (run id, the run dir's name), under s<i>/
        busy = {r.session: loaded.get(bench_session.get(r.session, ""), False) for r in reps}
        print(f"{key.label()}: {len(reps)} runs in {len(set(busy))} sessions "
              f"({sum(busy.values())} under stress-ng --cpu 1)")
        for st in STATISTICS:
            vals = [r.values.get(st) for r in reps]
            if any(v is None for v in vals):
                continue
            logs = stats._logs(vals, 0.5)
            sessions = [r.session for r in reps]
            upper, est, p = stats.session_ratio([(logs, sessions)], confidence=0.9)
            quiet = [v for v, s in zip(vals, sessions) if not busy[s]]
            hot = [v for v, s in zip(vals, sessions) if busy[s]]
            share = "n/a (need two sessions of two runs)" if est is None else \
                f"{est:.2g} (90 % upper bound {upper:.2g}), F-test p={p:.2g}"
            print(f"  {st}: between-session variance / within: {share}; log sd {np.std(logs, ddof=1):.2f}; "
                  f"median {np.median(quiet) if quiet else float('nan'):.0f} us quiet"
                  + (f", {np.median(hot):.0f} us loaded" if hot else ""))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", default="qemu-aarch64")
    ap.add_argument("--variant", default="rt")
    ap.add_argument("--sessions", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="runs per session")
    ap.add_argument("--gap", type=float, default=60, help="seconds between sessions")
    ap.add_argument("--duration", type=int, default=10, help="seconds of cyclictest per run")
    ap.add_argument("--loaded", type=int, default=2, help="the last N sessions under stress-ng --cpu 1")
    ap.add_argument("--keep", type=Path, help="where the sessions go (default: a temporary directory)")
    ap.add_argument("--analyze", type=Path, metavar="DIR", help="only re-judge the sessions kept in DIR")
    a = ap.parse_args(argv)
    if a.analyze:
        return analyze(a.analyze)
    out = a.keep or Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    out.mkdir(parents=True, exist_ok=True)
    measure(a, out)
    return analyze(out)


if __name__ == "__main__":
    sys.exit(main())
