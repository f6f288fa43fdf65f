"""`rtlab report RESULTS_DIR` and `rtlab gate RESULTS_DIR`: the table, and the
verdict re-judged against (possibly other) budgets, from results on disk."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..plan.budgets import load_budgets
from ..errors import InputError, RtlabError
from ..judge.gate import judge_run, killed_run
from ..core.model import EXIT_CODE, Verdict, combine_verdicts
from ..report.plot import write_html_report
from ..report.table import comparison_table
from ..run.recover import recover_checkpointed
from ..run.results import load_run
from ..report.vendor import DEFAULT_THRESHOLDS, merge_runs, parse_thresholds, vendor_tables, write_vendor_html
from .compare import add_baseline_args, run_comparison, write_outputs
from ..core.rundir import RunDir


def register(sub):
    p = sub.add_parser("report", help="print the variant comparison table of a run")
    p.add_argument("run_dir", type=Path, nargs="+", metavar="RUN_DIR",
                   help="results/<run_id> (or results/latest); with --vendor several runs of a "
                        "campaign, merged as repeats")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write an HTML report: the table plus latency histograms (log-scale counts)")
    p.add_argument("--vendor", action="store_true",
                   help="the vendor reports' tables instead: per test, variants side by side, "
                        "min/avg/max per thread, samples, share at or above each threshold, "
                        "log-count histograms (with --html: drawn)")
    p.add_argument("--thresholds", type=_thresholds, metavar="US,US,...",
                   help="with --vendor: thresholds in µs (default 10,70,100)")
    p.set_defaults(func=report)
    g = sub.add_parser("gate", help="judge runs against budgets; exit 0 pass, 1 over budget, 2 infra")
    g.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="one or more runs (e.g. every CI test job's): one verdict for all")
    g.add_argument("--budgets", type=Path, help="budget file (default: the one each run used)")
    add_baseline_args(g)  # --baseline RUN_DIR... | --baseline-store [--branch B] [--last K] | --pin NAME
    g.add_argument("--html", type=Path, metavar="FILE",
                   help="with a baseline: the comparison report (histograms overlaid, one point per run)")
    g.set_defaults(func=gate)


def _thresholds(text: str):
    try:
        return parse_thresholds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def report(args) -> int:
    if args.vendor:
        thresholds = args.thresholds or DEFAULT_THRESHOLDS
        # raw files (command lines) beside each run.json, also when run.json itself is given
        run, dirs = merge_runs([(load_run(d), d.parent if d.is_file() else d) for d in args.run_dir])
        print(vendor_tables(run, thresholds, run_dir=dirs))
        if args.html:
            print(f"report: {write_vendor_html(run, args.html, thresholds, run_dir=dirs)}")
        return 0
    if args.thresholds:
        raise InputError("--thresholds", "only with --vendor")
    if len(args.run_dir) != 1:
        raise InputError(" ".join(map(str, args.run_dir)), "one RUN_DIR (several only with --vendor)")
    run = load_run(args.run_dir[0])
    print(comparison_table(run))
    if args.html:
        print(f"report: {write_html_report(run, args.html)}")
    return 0


def gate(args) -> int:
    verdicts = []
    for run_dir in args.run_dirs:
        # a run rtlab never finished: its checkpointed soaks are judged on
        # their kept samples (rtlab.run.recover); otherwise INFRA "run killed"
        recovered = recover_checkpointed(run_dir)
        killed = None if recovered is not None else killed_run(run_dir)
        run = recovered or killed or load_run(run_dir)
        if killed is None:
            judge_run(run, load_budgets(args.budgets or RunDir(Path(run_dir)).budgets_copy))
        print(comparison_table(run))
        verdicts.append(run.verdict)
        if not any(not j.only_not_available for j in run.jobs):  # INFRA with nothing below to say why
            na = [f"{n.get('board')}/{n.get('variant')}: {n.get('reason')}" for n in run.not_available]
            print(f"gate: INFRA {run_dir}: no job measured anything"
                  + (f" (not available: {'; '.join(na)})" if na else " (run.json lists no jobs)"))
        for job in run.jobs:  # why, one line each, for the CI log
            where = f"{run_dir}: {job.board}/{job.variant}"
            if job.build_error:
                why = " | ".join(ln.strip() for ln in job.build_error.splitlines() if ln.strip())
                print(f"gate: FAIL {where}: build_error: {why[:600]}")
            elif job.infra_error:
                print(f"gate: INFRA {where}: {job.infra_error.splitlines()[0]}")
            for m in job.measurements:
                if m.verdict != Verdict.PASS:
                    print(f"gate: {(m.verdict.value if m.verdict else 'infra').upper()} "
                          f"{run_dir}: {m.key.label()}: {'; '.join(m.reasons)}")
    verdict = combine_verdicts(verdicts)
    n = len(args.run_dirs)
    print(f"gate: {verdict.value.upper()} over {n} run{'s' * (n != 1)}")
    if not (args.baseline or args.baseline_store or args.pin):
        return EXIT_CODE[verdict]
    # the regression verdict against the baseline, on top of the budgets: a
    # broken budget or a regression fails (1); otherwise anything undecided
    # or infra is 2 (a store that is down included); 0 only when both passed

    args.json = None
    try:
        cmp = run_comparison(args, args.run_dirs)
    except RtlabError as e:
        print(f"gate: regression verdict: cannot decide: {e}")
        return 1 if verdict == Verdict.FAIL else 2
    for line in cmp.lines():
        print(f"gate: {line}")
    write_outputs(cmp, args, args.run_dirs)
    if verdict == Verdict.FAIL or cmp.exit_code == 1:
        rc = 1
    elif verdict == Verdict.INFRA or cmp.exit_code == 2:
        rc = 2
    else:
        rc = 0
    print(f"gate: exit {rc} (budgets {verdict.value.upper()}, regression verdict {cmp.outcome.upper()})")
    return rc
