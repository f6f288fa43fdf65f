"""`rtlab run --repeat-until-decided --baseline RUN_DIR... | --baseline-store
| --pin NAME`: repeats until the regression verdict is decided.

A first batch of repeats up to the verdict's first look, the comparison with
the baseline, then batches of repeats of only the keys more runs can still
decide (rtlab.verdict.sequential), each its own run dir. Exit codes as
`rtlab gate` with a baseline: 1 a budget broke or a key regressed, 2 a key
undecided, infra, or no baseline (store down), 0 only when both passed.
"""
from __future__ import annotations

import argparse
from ..core.model import EXIT_CODE, Verdict, combine_verdicts
from ..errors import InputError, RtlabError
from ..report.table import comparison_table


def check_args(args) -> bool:
    """Whether this run measures until decided; bad combinations are input
    errors (exit 2) before anything boots."""
    given = bool(args.baseline or args.baseline_store or args.pin)
    if not args.repeat_until_decided:
        if given:
            raise InputError("--baseline", "a baseline for `rtlab run` only with --repeat-until-decided "
                                           "(else judge with `rtlab compare`/`rtlab gate`)")
        return False
    if not given:
        raise InputError("--repeat-until-decided", "needs the baseline: --baseline RUN_DIR..., "
                                                   "--baseline-store or --pin NAME")
    if args.resume is not None:
        raise InputError("--repeat-until-decided", "not with --resume")
    if args.repeat is not None:
        raise InputError("--repeat", "not with --repeat-until-decided: the verdict's looks: set the "
                                     "repeats (the first batch is its first look)")
    return True


def run_until_decided(args, campaign, progress, run_once) -> int:
    """`run_once(campaign) -> (RunResult, run_dir)` runs and publishes one
    batch as plain `rtlab run` does."""
    from .compare import policy_for, run_comparison, write_outputs
    from ..verdict.sequential import measure_until_decided

    # the policy (looks, alpha, minimum effects) is the baseline's, as in
    # `rtlab compare`: the run's own --budgets judges its absolute budgets only
    cargs = argparse.Namespace(baseline=args.baseline, baseline_store=args.baseline_store,
                               branch=args.branch, last=args.last, pin=args.pin, budgets=None,
                               json=None, html=None)
    if args.baseline_store or args.pin:
        schedule = _store_schedule(cargs)  # a store that is down: exit 2 before any boot
    else:
        schedule = policy_for(cargs, []).schedule()
    verdicts: list[Verdict] = []

    def run_batch(batch):
        run, run_dir = run_once(batch)
        print()
        print(comparison_table(run))
        print(f"\nresults: {run_dir}")
        verdicts.append(run.verdict)
        return run_dir

    def judge(dirs):
        return run_comparison(cargs, dirs)

    try:
        cmp, dirs = measure_until_decided(campaign, schedule, run_batch, judge, progress=progress)
    except RtlabError as e:
        budgets = combine_verdicts(verdicts) if verdicts else Verdict.INFRA
        print(f"regression verdict: cannot decide: {e}")
        print(f"verdict: budgets {budgets.value.upper()}, regression verdict UNDECIDED")
        return 1 if budgets == Verdict.FAIL else 2
    for line in cmp.lines():
        print(line)
    write_outputs(cmp, cargs, dirs)
    budgets = combine_verdicts(verdicts)
    if budgets == Verdict.FAIL or cmp.exit_code == 1:
        rc = 1
    elif budgets == Verdict.INFRA or cmp.exit_code == 2:
        rc = 2
    else:
        rc = EXIT_CODE[Verdict.PASS]
    print(f"verdict: budgets {budgets.value.upper()} over {len(dirs)} batch{'es' * (len(dirs) != 1)}, "
          f"regression verdict {cmp.outcome.upper()} (exit {rc})", flush=True)
    return rc


def _store_schedule(cargs):
    """The looks of the policy a store baseline brings (a pin's own, else
    built-in), read before anything runs: a store that is down fails here,
    before the board is spent (exit 2)."""
    from .compare import policy_for
    from ..verdict import baseline as bl

    doc = bl.read_pin(bl.open_store(), cargs.pin) if cargs.pin else None
    return policy_for(cargs, [], doc).schedule()

