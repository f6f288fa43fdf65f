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
    p.add_argument("--board", "-b", action="append", help="only this board (repeatable)")
    p.add_argument("--variant", "-V", action="append", help="only this variant (repeatable)")
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
                         "breach (default: the campaign's `evidence:`, else on when $CI is set)")
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
        if args.resume is not None:
            from ..run.resume import resume_run
            run, run_dir = resume_run(args.resume, progress=progress)
        else:
            run, run_dir = run_campaign(campaign, results_root=args.results or RESULTS_DIR,
                                        progress=progress, commit=commit_from_env(),
                                        places=args.places, kernel_tree=args.kernel_tree,
                                        lock_timeout=args.lock_timeout, evidence=args.evidence)
    print()
    print(comparison_table(run))
    print(f"\nresults: {run_dir}")
    # the verdict before the store is touched: whatever the store does (down,
    # slow, a byte every 2 s), the run's verdict and exit code stand
    print(f"verdict: {run.verdict.value.upper()} (exit {EXIT_CODE[run.verdict]})", flush=True)
    if not args.no_publish:
        try:
            # lazy and optional: a checkout without the store still runs and gates
            from ..store.publish import publish_run  # the store (InfluxDB)
        except ImportError:
            publish_run = None
        if publish_run is not None:
            try:
                publish_run(run_dir, progress=progress)
            except Exception as e:  # noqa: BLE001 - a store outage never changes the verdict
                progress(f"publish failed, results kept on disk ({type(e).__name__}: {e})")
    return EXIT_CODE[run.verdict]
