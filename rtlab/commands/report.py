"""`rtlab report RESULTS_DIR` and `rtlab gate RESULTS_DIR`: the table, and the
verdict re-judged against (possibly other) budgets, from results on disk."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..plan.budgets import load_budgets
from ..plan.campaign import judging_budgets
from ..errors import InputError, RtlabError
from ..errors import said as cleaned
from ..judge.gate import judge_run, killed_run
from ..core.model import EXIT_CODE, Verdict, combine_verdicts
from ..report.plot import write_html_report
from ..report.table import comparison_table
from ..run.recover import recover_checkpointed
from ..run.results import load_run
from ..report.vendor import DEFAULT_THRESHOLDS, merge_runs, parse_thresholds, vendor_tables, write_vendor_html
from .compare import add_baseline_args, run_comparison, write_outputs
from ..core.rundir import RunDir

#: a table is shown whole; only its terminal escapes go (a LAVA server's or a probe's words)
TABLE_MAX_CHARS = 10 ** 8


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
    g = sub.add_parser("gate", help="judge runs against budgets (and a baseline); exit 0 pass, 1 over budget or "
                                    "a regression, 2 infra or undecided, 3 passed with keys not gated")
    g.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR",
                   help="one or more runs (e.g. every CI test job's): one verdict for all")
    g.add_argument("--paired", nargs="+", type=Path, default=[], metavar="DIR",
                   help="results of `rtlab paired` (a CI test job's on a board class whose baseline "
                        "is paired): their candidate runs judged against budgets with the rest, "
                        "each session's paired verdict against its own baseline commit's runs, "
                        "under the policy of --budgets or else the lab's budgets/default.yaml")
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
    # a run rtlab never finished: what its checkpoints kept, judged by the
    # budgets it was made with as a finished run's report shows them
    # (incomplete: never PASS), or INFRA "run killed" with its raw files
    run_dir = args.run_dir[0]
    recovered = recover_checkpointed(run_dir)
    if recovered is not None:
        judge_run(recovered, load_budgets(RunDir(Path(run_dir)).budgets_copy))
        print(f"report: {run_dir}: incomplete, rtlab stopped before writing run.json: "
              "rebuilt from what its checkpoints kept")
    run = recovered or killed_run(run_dir) or load_run(run_dir)
    print(cleaned(comparison_table(run), TABLE_MAX_CHARS))
    if args.html:
        print(f"report: {write_html_report(run, args.html)}")
    return 0


def gate(args) -> int:
    from ..verdict.compare import OUTCOME_EXIT, UNDECIDED, exit_precedence
    from ..verdict.paired_boots import load_pairs

    if not args.run_dirs and not args.paired:
        raise InputError("rtlab gate", "no runs: give RUN_DIRs, --paired DIRs or both")
    sessions = {Path(d): load_pairs(d) for d in args.paired}  # (baseline dirs, candidate dirs)
    verdicts = []
    for run_dir in [*args.run_dirs, *(c for _, cands in sessions.values() for c in cands)]:
        # a run rtlab never finished: its checkpointed soaks are judged on
        # their kept samples (rtlab.run.recover); otherwise INFRA "run killed"
        recovered = recover_checkpointed(run_dir)
        killed = None if recovered is not None else killed_run(run_dir)
        run = recovered or killed or load_run(run_dir)
        if killed is None:
            judging = judging_budgets(RunDir(Path(run_dir)).budgets_copy, args.budgets)
            print(f"gate: {run_dir} judged by budgets {judging.path} ({judging.why})")
            judge_run(run, load_budgets(judging.path))
        print(cleaned(comparison_table(run), TABLE_MAX_CHARS))
        verdicts.append(run.verdict)
        if not any(not j.only_not_available for j in run.jobs):  # INFRA with nothing below to say why
            na = [f"{n.get('board')}/{n.get('variant')}: {n.get('reason')}" for n in run.not_available]
            print(f"gate: INFRA {run_dir}: no job measured anything"
                  + (f" (not available: {'; '.join(na)})" if na else " (run.json lists no jobs)"))
        for job in run.jobs:  # why, one line each, for the CI log
            where = f"{run_dir}: {job.board}/{job.variant}"
            if job.build_error:
                why = " | ".join(ln.strip() for ln in job.build_error.splitlines() if ln.strip())
                print(f"gate: FAIL {where}: build_error: {cleaned(why, 600)}")
            elif job.infra_error:  # a LAVA server's or a probe's words: no terminal escapes reach the log
                print(f"gate: INFRA {where}: {cleaned(job.infra_error.splitlines()[0])}")
            for m in job.measurements:
                if m.verdict != Verdict.PASS:
                    print(f"gate: {(m.verdict.value if m.verdict else 'infra').upper()} "
                          f"{run_dir}: {cleaned(m.key.label())}: {cleaned('; '.join(m.reasons))}")
    verdict = combine_verdicts(verdicts)
    n = len(verdicts)
    print(f"gate: {verdict.value.upper()} over {n} run{'s' * (n != 1)}")
    store = bool(args.baseline or args.baseline_store or args.pin)
    if not store and not sessions:
        return EXIT_CODE[verdict]
    # the regression verdict against the baseline, on top of the budgets: a
    # broken budget or a regression fails (1); otherwise anything undecided
    # or infra is 2 (a store that is down included); 0 only when both passed
    outcomes = [_paired_verdict(d, base, cand, args.budgets) for d, (base, cand) in sessions.items()]
    not_gated: list[str] = []
    if store and args.run_dirs:
        args.json = None
        try:
            cmp = run_comparison(args, args.run_dirs)
        except RtlabError as e:  # no baseline, a store that is down: undecided, never a pass
            print(f"gate: regression verdict: cannot decide: {e}")
            outcomes.append((UNDECIDED, OUTCOME_EXIT[UNDECIDED]))
        else:
            if cmp.no_baseline:
                # nothing to compare against yet is not a regression, nor
                # infra to retry: the runs are judged on their budgets alone
                print(f"gate: regression verdict: no baseline yet: {cmp.no_baseline}; "
                      f"judged on the budgets only")
                write_outputs(cmp, args, args.run_dirs)
                outcomes.append(("no baseline yet", 0))
            else:
                for line in cmp.lines():
                    print(f"gate: {line}")
                write_outputs(cmp, args, args.run_dirs)
                outcomes.append((cmp.outcome, cmp.exit_code))
                not_gated = cmp.not_gated_lines()
    codes = [code for _, code in outcomes]
    # a broken budget or a regression (1) wins, then infra or undecided (2),
    # then keys passed without being gated (3: GitLab's "passed with warnings")
    rc = exit_precedence([1 if verdict == Verdict.FAIL else 2 if verdict == Verdict.INFRA else 0, *codes])
    said = ", ".join(o.upper() for o, _ in outcomes)
    if rc == 3:  # the merge request's last line leads with what was not gated
        for line in not_gated:
            print(f"gate: {line}")
    print(f"gate: exit {rc} (budgets {verdict.value.upper()}, regression verdict {said}"
          + (f": passed, {len(not_gated)} statistic{'s' * (len(not_gated) != 1)} not gated" if rc == 3 else "")
          + ")")
    return rc


def _paired_verdict(results: Path, baseline: list[Path], candidate: list[Path],
                    budgets: Path | None) -> tuple[str, int]:
    """One paired session's verdict (rtlab.verdict.paired), recomputed from
    its runs, printed and written to ``<results>/compare.json``.

    The policy is the gate's --budgets, else the lab's own
    (budgets/default.yaml of this rtlab checkout). Never the session's:
    both of its sides ran under the campaign the pipeline named, which a
    trigger can point at a file of the merge request's, so unlike a store
    baseline (earlier pipelines) neither side's budget file is the target's."""
    import json

    from ..core.fsutil import write_replacing
    from ..verdict.against import lab_policy
    from ..verdict.compare import load_runs
    from ..verdict.paired import compare_paired

    policy = lab_policy(budgets)
    cmp = compare_paired(load_runs(baseline), load_runs(candidate), policy)
    print(f"gate: paired boots: {results} ({len(candidate)} pair{'s' * (len(candidate) != 1)})")
    for line in cmp.lines():
        print(f"gate: {line}")
    write_replacing(results / "compare.json", (json.dumps(cmp.to_json(), indent=2) + "\n").encode())
    return cmp.outcome, cmp.exit_code
