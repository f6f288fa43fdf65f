"""`rtlab paired`: the baseline commit and the candidate booted alternately
on one board (A B, B A, ...), then the paired verdict.

    rtlab paired --campaign F --board B --kernel-tree T --baseline REV --candidate REV --pairs N

Exit like `rtlab compare`, and like `rtlab gate` for the candidate's own
budgets: 1 a regression or a candidate run over its budget, 2 undecided
(too few complete pairs, infra, a censored statistic), 0 none.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.model import Verdict
from ..errors import InputError
from ..plan.campaign import load_campaign
from ..plan.policy import load_policy
from ..run.results import new_run_id
from ..run.runner import Progress
from .run import commit_from_env

#: at most this many pairs (each two boots): more is a soak
MAX_PAIRS = 50


def register(sub):
    p = sub.add_parser("paired", help="baseline and candidate commits booted alternately on one board, "
                                      "then the paired regression verdict",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--campaign", "-c", help="campaign file or preset (default: campaigns/default.yaml)")
    p.add_argument("--board", "-b", required=True, help="the board (one that boots kernels built from source)")
    p.add_argument("--variant", "-V", action="append", help="only this variant (repeatable)")
    p.add_argument("--kernel-tree", type=Path, required=True, metavar="PATH",
                   help="the kernel tree both commits are in (clean; put back as it was afterwards)")
    p.add_argument("--baseline", required=True, metavar="REV", help="the baseline commit")
    p.add_argument("--candidate", required=True, metavar="REV", help="the candidate commit")
    p.add_argument("--pairs", type=int, default=5, help=f"pairs to boot (default 5, at most {MAX_PAIRS})")
    p.add_argument("--results", type=Path, help="where the runs go (default: results/paired/<time>)")
    p.add_argument("--budgets", type=Path, metavar="FILE",
                   help="budget file whose regression: section sets the policy (default: the campaign's)")
    p.set_defaults(func=paired)


def paired(args) -> int:
    from ..verdict.paired_boots import run_pairs
    from ..verdict.paired import compare_paired

    if not 1 <= args.pairs <= MAX_PAIRS:
        raise InputError("--pairs", f"must be 1..{MAX_PAIRS}, got {args.pairs}")
    campaign = load_campaign(args.campaign, boards=[args.board], variants=args.variant, repeat=1)
    policy = load_policy(args.budgets or campaign.budgets)  # typed and ranged before any boot
    for board in campaign.boards:
        if not board.boots_built_kernels:
            # every run would say "not available" and the verdict UNDECIDED:
            # refused before the first checkout, naming why
            raise InputError("--board", f"{board.name} cannot boot kernels built from source "
                                        f"(a {board.kind} board): paired boots need one that can")
    results = args.results or Path("results") / "paired" / new_run_id()
    progress = Progress()
    base, cand = run_pairs(campaign, args.kernel_tree, args.baseline, args.candidate, args.pairs, results,
                           progress, context=commit_from_env())
    cmp = compare_paired(base, cand, policy)
    for line in cmp.lines():
        print(line)
    over = [f"{r.run_id}: {j.board}/{j.variant}" for r in cand for j in r.jobs if j.verdict == Verdict.FAIL]
    for what in over:
        print(f"FAIL candidate run {what} broke its budget (or did not build)")
    doc = {**cmp.to_json(), "candidate_over_budget": over}
    (results / "paired.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {results}")
    return 1 if over else cmp.exit_code
