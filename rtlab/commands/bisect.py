"""`rtlab bisect`: the first bad commit of a latency regression, on the board.

    rtlab bisect --kernel-tree T --good SHA --bad SHA --board B --variant V
                 [--suite S --load L] [--repeat N] [--report DIR]

Exit status: 0 a first bad commit was named and confirmed, 1 the bisect
ended without a confirmed culprit (inconclusive: skipped commits, or the
confirmation disagreed), 2 bad input (unknown SHA, good and bad reversed, a
tree with local changes, no history in the store for the key) or infra; the
tree is left as it was found in every case.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..verdict.bisect import (
    Settings, check_inputs, load_bisect_campaign, report_text, run_bisect, store_history_count,
)
from ..plan.campaign import DEFAULT_CAMPAIGN
from ..errors import InputError
from .regressions import open_store


def register(sub):
    p = sub.add_parser("bisect", help="git bisect a latency regression on a board (build, boot, measure, compare)")
    p.add_argument("--kernel-tree", required=True, type=Path, metavar="T", help="kernel git tree (clean)")
    p.add_argument("--good", required=True, metavar="SHA", help="a commit without the regression")
    p.add_argument("--bad", required=True, metavar="SHA", help="a later commit with it")
    p.add_argument("--board", required=True, help="the board to measure on (one that boots kernels built from source)")
    p.add_argument("--variant", required=True, help="the kernel variant each commit is built into (rt, preempt ...)")
    p.add_argument("--suite", default="cyclictest",
                   help="the campaign's measurement that regressed (default cyclictest)")
    p.add_argument("--load", default="idle", help="the load it regressed under (default idle)")
    p.add_argument("--repeat", type=int, default=2, metavar="N", help="runs (fresh boots) per step (default 2)")
    p.add_argument("--baseline-repeat", type=int, default=5, metavar="N",
                   help="runs of the good commit, the baseline (default 5)")
    p.add_argument("--campaign", help="campaign the suite's parameters come from (default campaigns/default.yaml)")
    p.add_argument("--duration", type=int, metavar="S", help="override the suite's duration_s (seconds)")
    p.add_argument("--budgets", help="budget file the runs are judged by (default: the campaign's)")
    p.add_argument("--report", type=Path, metavar="DIR", help="where the report and runs go "
                   "(default results/bisect-<good>-<bad>)")
    p.add_argument("--store-config", metavar="FILE", help="store settings (YAML)")
    p.set_defaults(func=run)


def run(args) -> int:
    for opt, v, lo, hi in (("--repeat", args.repeat, 1, 50), ("--baseline-repeat", args.baseline_repeat, 1, 100)):
        if not lo <= v <= hi:
            raise InputError(opt, f"{v} is not in {lo}..{hi}")
    if args.duration is not None and not 0 < args.duration <= 3600:
        raise InputError("--duration", f"{args.duration} is not in (0, 3600] s")
    tree = args.kernel_tree.resolve()
    report_dir = (args.report or Path("results") / f"bisect-{args.good[:12]}-{args.bad[:12]}").resolve()
    s = Settings(tree=str(tree), good=args.good, bad=args.bad, board=args.board, variant=args.variant,
                 suite=args.suite, load=args.load, repeat=args.repeat, baseline_repeat=args.baseline_repeat,
                 campaign=str(Path(args.campaign).resolve() if args.campaign else DEFAULT_CAMPAIGN),
                 work=str(report_dir), duration_s=args.duration,
                 budgets=str(Path(args.budgets).resolve()) if args.budgets else None)
    shas = check_inputs(s, has_history=lambda: store_history_count(open_store(args.store_config), s))
    load_bisect_campaign(s)  # the board, variant, suite and load exist together
    report = run_bisect(s, shas)
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    text = report_text(report)
    (report_dir / "report.txt").write_text(text + "\n")
    print(text)
    print(f"report: {report_dir / 'report.json'}, {report_dir / 'report.txt'}")
    if report.get("result") == "confirmed":
        print(f"first bad commit: {report['first_bad']}")
        return 0
    return 1
