"""`rtlab compare --baseline RUN_DIR... --candidate RUN_DIR...`: did the
candidate's latency get worse than the baseline's?

Exit codes: 0 no regression, 1 regression (key, statistic and effect named),
2 cannot decide (too few valid runs, keys on one side only, runs of
different campaigns or histogram buckets, no baseline, store down).
"""
from __future__ import annotations

import json
from pathlib import Path


def register(sub):
    p = sub.add_parser("compare", help="regression verdict: candidate runs against baseline runs "
                                       "(exit 0 none, 1 regression, 2 cannot decide)")
    add_baseline_args(p)
    p.add_argument("--candidate", nargs="+", type=Path, required=True, metavar="RUN_DIR",
                   help="the runs under test (results/<run_id>)")
    p.add_argument("--budgets", type=Path, metavar="FILE",
                   help="budget file whose regression: section sets the policy "
                        "(default: the one the first candidate run used)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write an HTML report: histograms overlaid, one point per run")
    p.set_defaults(func=compare)


def add_baseline_args(p) -> None:
    p.add_argument("--baseline", nargs="+", type=Path, metavar="RUN_DIR",
                   help="baseline runs (results/<run_id>)")


def policy_for(args, candidate_dirs):
    from ..compare import load_policy

    budgets = args.budgets or Path(candidate_dirs[0]) / "budgets.yaml"
    if not Path(budgets).exists():
        from ..compare import Policy
        return Policy(source="built-in defaults (no budget file)")
    return load_policy(budgets)


def run_comparison(args, candidate_dirs):
    from ..compare import compare_runs, load_runs
    from ..errors import InputError

    if not args.baseline:
        raise InputError("--baseline", "no baseline runs given")
    candidate = load_runs(candidate_dirs)
    baseline = load_runs(args.baseline)
    policy = policy_for(args, candidate_dirs)
    return compare_runs(baseline, candidate, policy,
                        baseline_source="runs " + ", ".join(str(d) for d in args.baseline),
                        candidate_source="runs " + ", ".join(str(d) for d in candidate_dirs))


def write_outputs(cmp, args, candidate_dirs=()) -> None:
    """--json, --html, and in every candidate run dir compare.json (the
    verdict and the baseline it used) and a report.html that shows it."""
    verdict = cmp.to_json()
    if getattr(args, "html", None):
        from ..plot import write_compare_html
        html = write_compare_html(cmp, args.html)
        verdict["html"] = str(Path(html).absolute())
        print(f"compare report: {html}")
    if getattr(args, "json", None):
        Path(args.json).write_text(json.dumps(verdict, indent=2) + "\n")
    from ..plot import write_html_report
    from ..results import load_run

    for d in candidate_dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        (d / "compare.json").write_text(json.dumps(verdict, indent=2) + "\n")
        if (d / "report.html").exists():
            write_html_report(load_run(d), d / "report.html")


def compare(args) -> int:
    cmp = run_comparison(args, args.candidate)
    for line in cmp.lines():
        print(line)
    write_outputs(cmp, args, args.candidate)
    return cmp.exit_code
