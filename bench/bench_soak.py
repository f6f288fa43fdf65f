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

Run it on runs made with campaigns using cyclictest-soak (e.g. 60 s in 3 s
segments). Any figure from a shared, loaded machine says so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rtlab.suites  # noqa: E402,F401 - the suites register the parsers' tools
from rtlab.soak import pwcet, checkpoint as soak  # noqa: E402
from rtlab.core.model import ThreadResult  # noqa: E402
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--fraction", type=float, default=0.5)
    args = ap.parse_args()
    rows, gaps = [], []
    for d in args.run_dirs:
        for cp in sorted(Path(d).rglob(soak.CHECKPOINT_FILE)):
            head, rest_max, state = first_part(cp, args.fraction)
            gaps += [s["gap_before_s"] for s in state["segments"] if s.get("gap_before_s") is not None]
            threads = [ThreadResult.from_json(t) for t in head["threads"]]
            allt = soak.output_of(head, str(cp)).combined()
            bm = [s["max_us"] for s in head["segments"]]
            est = pwcet.estimate(histogram=allt.histogram if allt else None, block_maxima=bm,
                                 interval_us=head["interval_us"], observed_max_us=allt.max_us if allt else None)
            row = {"run": str(cp.parent), "segments_fit": len(head["segments"]),
                   "samples_fit": sum(t.cycles for t in threads), "max_fit": allt.max_us if allt else None,
                   "max_rest": rest_max, "estimate": est.per_sample_us, "ci": est.per_sample_ci_us,
                   "refused": est.refused}
            if est.ok and rest_max is not None:
                row["covered"] = (est.per_sample_ci_us or (0, est.per_sample_us))[1] >= rest_max
                row["over_estimate"] = est.per_sample_us / rest_max
            rows.append(row)
            print(json.dumps(row))
    ok = [r for r in rows if "covered" in r]
    print(f"\n{len(rows)} runs, {len(ok)} estimated, covered {sum(r['covered'] for r in ok)}/{len(ok)}"
          + (f", over-estimate median x{statistics.median(r['over_estimate'] for r in ok):.2f}" if ok else ""))
    if gaps:
        gaps.sort()
        print(f"checkpoint gaps: {len(gaps)}, median {statistics.median(gaps):.3f} s, "
              f"max {gaps[-1]:.3f} s (host-measured upper bounds: fetch + next tool start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
