"""`rtlab run [--campaign FILE]`: the main job.

Exit codes: 0 every budget held, 1 a budget broke, 2 infra error (no boot,
lost console, load died, tool crash) or bad input. A broken budget wins over
infra errors elsewhere in the run: it is definitive, a retry cannot fix it.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..plan.campaign import load_campaign
from ..run.joblife import become_subreaper
from ..core.model import EXIT_CODE
from ..report.table import comparison_table
from ..run.runner import RESULTS_DIR, Progress, run_campaign
from ..soak.checkpoint import full_length


def register(sub):
    p = sub.add_parser("run", help="run a campaign: boot, measure, store, report, gate")
    p.add_argument("--campaign", "-c", help="campaign file or preset name (default: campaigns/default.yaml)")
    p.add_argument("--board", "-b", action="append",
                   help="run on this board instead of the campaign's `boards:` (repeatable; any board of env/ "
                        "or $RTLAB_ENV_PATH, in the campaign or not)")
    p.add_argument("--variant", "-V", action="append",
                   help="run this kernel variant instead of the campaign's `variants:` (repeatable; any variant "
                        "of kernel-configs/variants.yaml; a board with a fixed kernel, local, runs its own)")
    p.add_argument("--results", type=Path, help="results root (default: results/)")
    p.add_argument("--budgets", type=Path, metavar="FILE",
                   help="budget file (default: the campaign's budgets:, which must lie in budgets/ or "
                        "beside the campaign)")
    p.add_argument("--no-publish", action="store_true", help="do not publish to the store")
    p.add_argument("--kernel-tree", type=Path, metavar="PATH",
                   help="build every variant's kernel from this git tree (the commit under test) "
                        "with its kernel-configs fragments, instead of Debian's prebuilt kernels")
    ev = p.add_mutually_exclusive_group()
    ev.add_argument("--evidence", dest="evidence", action="store_true", default=None,
                    help="stop and trace at the budget: keep the kernel trace and a culprit line of every "
                         "breach (default: the campaign's `evidence:`, else on when $CI is set, except on the local board, "
                         "whose tracefs is the host's own)")
    ev.add_argument("--no-evidence", dest="evidence", action="store_false", help="never trace at the budget")
    p.add_argument("--places", type=int, default=1, metavar="N",
                   help="run up to N jobs at once, never two on one place/board (default 1)")
    p.add_argument("--repeat", type=int, metavar="N",
                   help="run every job N times, each a fresh boot (a fresh tool run on the local "
                        "board): the runs a regression verdict needs (default: the campaign's repeat:, 1)")
    p.add_argument("--lock-timeout", type=float, metavar="S",
                   help="seconds a job waits for a board another job holds, then INFRA "
                        "(default: $RTLAB_LOCK_TIMEOUT_S or 3600)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="finish a run that broke off (board lost, rtlab killed): keep its finished jobs, "
                        "continue its soaks after their last checkpoint (rtlab.soak.checkpoint)")
    p.add_argument("--full", action="store_true",
                   help="soaks at the report's own length: each suite's full_duration_s instead of "
                        "its scaled duration_s")
    # the regression verdict's repeats, spent where they decide something
    p.add_argument("--repeat-until-decided", action="store_true",
                   help="repeat until the regression verdict against the baseline (--baseline RUN_DIR... | "
                        "--baseline-store | --pin NAME) decides every key: the first look's repeats, then "
                        "more repeats only of the keys still undecided, up to the last look (regression: "
                        "looks:), a key that cannot see what its class asks not beyond its first look that "
                        "excludes what it can see; exit 0 budgets held and nothing regressed, 1 either "
                        "failed, 2 undecided/infra, 3 passed with keys not gated")
    from .compare import add_baseline_args
    add_baseline_args(p)
    p.set_defaults(func=run)


def commit_from_env() -> dict:
    """The kernel commit under test, from CI variables where there are some."""
    keys = {"sha": "RTLAB_KERNEL_SHA", "subject": "RTLAB_KERNEL_SUBJECT",
            "branch": "RTLAB_KERNEL_BRANCH", "pipeline_id": "CI_PIPELINE_ID",
            "pipeline_source": "CI_PIPELINE_SOURCE"}
    return {k: os.environ[v] for k, v in keys.items() if os.environ.get(v)}


def _live_checkpoints(args, progress):
    """The store's live publisher as a sink of soak checkpoints (rtlab.store.live),
    unless --no-publish; nothing where the store is not installed."""
    import contextlib

    if args.no_publish:
        return contextlib.nullcontext()
    try:
        from ..soak import live
        from ..store.live import LivePublisher
    except ImportError:
        return contextlib.nullcontext()
    return live.publishing(LivePublisher(progress=progress, commit=commit_from_env()))


def run(args) -> int:
    if args.resume is None:
        campaign = load_campaign(args.campaign, boards=args.board, variants=args.variant,
                                 repeat=args.repeat, budgets=args.budgets)
        if args.full or os.environ.get("RTLAB_FULL") == "1":  # the nightly schedule's variable
            campaign = full_length(campaign)
    # what the jobs start in sessions of their own comes back to us when its
    # parent dies, so a cancelled or finished job leaves nothing running
    become_subreaper()
    progress = Progress()
    with _live_checkpoints(args, progress):  # a soak's checkpoints to the store as they come
        if check_args(args):
            return run_until_decided(args, campaign, progress,
                                     lambda batch: _run_published(args, batch, progress))
        if args.resume is not None:
            from ..run.resume import resume_run
            run, run_dir = resume_run(args.resume, progress=progress)
        else:
            run, run_dir = _run_campaign(args, campaign, progress)
    print()
    print(comparison_table(run))
    print(f"\nresults: {run_dir}")
    # the verdict before the store is touched: whatever the store does (down,
    # slow, a byte every 2 s), the run's verdict and exit code stand
    print(f"verdict: {run.verdict.value.upper()} (exit {EXIT_CODE[run.verdict]})", flush=True)
    _publish(args, run_dir, progress)
    return EXIT_CODE[run.verdict]


def _run_campaign(args, campaign, progress):
    return run_campaign(campaign, results_root=args.results or RESULTS_DIR, progress=progress,
                        commit=commit_from_env(), places=args.places, kernel_tree=args.kernel_tree,
                        lock_timeout=args.lock_timeout, evidence=args.evidence)


def _publish(args, run_dir, progress) -> None:
    """The run to the store, unless --no-publish; a store outage is said and
    never changes the verdict."""
    if args.no_publish:
        return
    try:
        # lazy and optional: a checkout without the store still runs and gates
        from ..store.publish import publish_run  # the store (InfluxDB)
    except ImportError:
        return
    try:
        publish_run(run_dir, progress=progress)
    except Exception as e:  # noqa: BLE001 - a store outage never changes the verdict
        progress(f"publish failed, results kept on disk ({type(e).__name__}: {e})")


def _run_published(args, campaign, progress):
    """One batch of --repeat-until-decided: run and publish as a plain run."""
    run, run_dir = _run_campaign(args, campaign, progress)
    _publish(args, run_dir, progress)
    return run, run_dir


# -- --repeat-until-decided -------------------------------------------------
# A first batch of repeats up to the regression verdict's first look, the
# comparison with the baseline, then batches of repeats of only the keys more
# runs can still decide (rtlab.verdict.sequential), each its own run dir.
# Exit codes as `rtlab gate` with a baseline: 1 a budget broke or a key
# regressed, 2 a key undecided, infra, or no baseline (store down), 3 both
# passed but a key was not gated (it cannot see what its class asks), 0
# only when both passed with every key gated.
def check_args(args) -> bool:
    """Whether this run measures until decided; bad combinations are input
    errors (exit 2) before anything boots."""
    from ..errors import InputError

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
    import argparse
    import dataclasses

    from .compare import policy_for, run_comparison, write_outputs
    from ..core.model import Verdict, combine_verdicts
    from ..plan.policy import Policy
    from ..errors import RtlabError
    from ..verdict.compare import exit_precedence
    from ..verdict.sequential import measure_until_decided

    # the policy (looks, alpha, minimum effects) is the baseline's, as in
    # `rtlab compare`: the run's own --budgets judges its absolute budgets only
    cargs = argparse.Namespace(baseline=args.baseline, baseline_store=args.baseline_store,
                               branch=args.branch, last=args.last, pin=args.pin, budgets=None,
                               json=None, html=None)
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

    if args.baseline_store or args.pin:
        try:
            schedule = _store_schedule(cargs)
        except RtlabError as e:
            # the store is down: the first look's repeats are still measured
            # (kept, publishable, gated on budgets), the verdict is undecided
            first = Policy().schedule()[0]
            progress(f"baseline unavailable ({e}): measuring the first look's {first} repeats only")
            run_batch(dataclasses.replace(campaign, repeat=first))
            budgets = combine_verdicts(verdicts)
            print(f"regression verdict: cannot decide: {e}")
            print(f"verdict: budgets {budgets.value.upper()}, regression verdict UNDECIDED")
            return 1 if budgets == Verdict.FAIL else 2
    else:
        schedule = policy_for(cargs, []).schedule()
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
    rc = exit_precedence([1 if budgets == Verdict.FAIL else 2 if budgets == Verdict.INFRA else 0, cmp.exit_code])
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

