"""`rtlab compare --baseline RUN_DIR... --candidate RUN_DIR...`: did the
candidate's latency get worse than the baseline's?

Exit codes: 0 no regression, 1 regression (key, statistic and effect named),
2 cannot decide (too few valid runs, keys on one side only, runs of
different campaigns or histogram buckets, no baseline, store down), 3 no
regression found but a key not gated (its detectable effect above its
class's ``detectable_limit``; the lab's cure named).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.rundir import RunDir
from ..plan.policy import load_policy
from ..verdict import against
from ..verdict.against import BaselineChoice


def register(sub):
    b = sub.add_parser("baseline", help="pin the baseline a branch is compared against")
    bsub = b.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    pin = bsub.add_parser("pin", help="store the last K runs per key of a branch as baseline NAME")
    pin.add_argument("name", type=pin_name, help="the pin's name (e.g. main-6.12)")
    pin.add_argument("--like", nargs="+", type=Path, required=True, metavar="RUN_DIR",
                     help="runs whose keys and campaign the baseline covers")
    pin.add_argument("--branch", default="main", help="the branch whose stored runs are pinned (default main)")
    pin.add_argument("--last", type=int, default=5, metavar="K", help="runs pinned per key (default 5)")
    pin.add_argument("--budgets", type=Path, metavar="FILE",
                     help="the budget file whose regression: section is pinned with the runs "
                          "(default: the first --like run's budgets.yaml)")
    pin.set_defaults(func=baseline_pin)
    meth = bsub.add_parser("method", help="print the baseline method the policy sets for a board's "
                                          "budget class: store or paired (CI's test job asks)")
    meth.add_argument("--campaign", "-c", help="campaign file or preset (default: campaigns/default.yaml)")
    meth.add_argument("--board", "-b", required=True, help="the board whose budget class is asked about")
    meth.add_argument("--budgets", type=Path, metavar="FILE",
                      help="budget file whose regression: section says (default: the campaign's)")
    meth.set_defaults(func=baseline_method)
    plan = bsub.add_parser("plan", help="what each key of a baseline can see: its detectable effect, the "
                                        "candidate runs it takes (expected, at most), keys flagged to the lab")
    add_baseline_args(plan)
    plan.add_argument("--like", nargs="+", type=Path, metavar="RUN_DIR",
                      help="with --baseline-store/--pin: runs whose keys and campaign the baseline covers")
    plan.add_argument("--budgets", type=Path, metavar="FILE",
                      help="the policy (default: as the verdict chooses it: the pin's, the baseline runs', "
                           "else the lab's budgets/default.yaml)")
    plan.add_argument("--json", type=Path, metavar="FILE", help="also write the plan as JSON")
    plan.set_defaults(func=baseline_plan)
    der = bsub.add_parser("derive", help="absolute budgets from repeated runs: per key the p99 and "
                                         "p99.9 one more run stays below with 99 %% probability")
    der.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                     help="repeated runs of an unchanged kernel on a quiet board (3 or more per key)")
    der.add_argument("--level", type=float, default=0.99,
                     help="probability that one more run stays within the derived budget, "
                          "between 0.5 and 1 (default 0.99)")
    der.add_argument("--class", dest="budget_class", metavar="NAME",
                     help="print the bounds as budget class NAME, YAML to paste under the budget file's "
                          "budgets: (a new board's first budgets, docs/adding-a-board.md)")
    der.set_defaults(func=baseline_derive)

    p = sub.add_parser("compare", help="regression verdict: candidate runs against baseline runs "
                                       "(exit 0 none, 1 regression, 2 cannot decide, 3 none found but a key "
                                       "not gated)")
    add_baseline_args(p)
    p.add_argument("--candidate", nargs="+", type=Path, required=True, metavar="RUN_DIR",
                   help="the runs under test (results/<run_id>)")
    p.add_argument("--budgets", type=Path, metavar="FILE",
                   help="budget file whose regression: section sets the policy (default: the "
                        "baseline's: the first baseline run's budgets.yaml, or the pin's; never the "
                        "candidate's own, which a merge request could loosen)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write an HTML report: histograms overlaid, one point per run")
    p.set_defaults(func=compare)


def pin_name(text: str) -> str:
    """A pin name is a tag value in the store: a safe name like suites and
    boards (a newline was stored as a space, then broke the InfluxQL query)."""
    import argparse

    from ..core.params import ParamError, check_name
    try:
        return check_name(text, "pin name")
    except ParamError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_baseline_args(p) -> None:
    p.add_argument("--baseline", nargs="+", type=Path, metavar="RUN_DIR",
                   help="baseline runs (results/<run_id>)")
    p.add_argument("--baseline-store", action="store_true",
                   help="the baseline from the store (RTLAB_INFLUX_URL/store.yaml): per key the last "
                        "--last runs of the same board, variant, suite, load and campaign on --branch")
    p.add_argument("--branch", default="main", help="baseline branch in the store (default main)")
    p.add_argument("--last", type=int, default=5, metavar="K", help="baseline runs per key (default 5)")
    p.add_argument("--pin", metavar="NAME", type=pin_name, help="the baseline pinned as NAME (rtlab baseline pin)")


def choice_of(args) -> BaselineChoice:
    """The baseline options of `rtlab compare`/`report`/`run` as one value."""
    return BaselineChoice(runs=tuple(Path(d) for d in (getattr(args, "baseline", None) or ())),
                          store=bool(getattr(args, "baseline_store", False)),
                          branch=getattr(args, "branch", "main"), last=getattr(args, "last", 5),
                          pin=getattr(args, "pin", None), budgets=getattr(args, "budgets", None))


def policy_for(args, candidate_dirs, pin_doc=None):
    return against.policy_for(choice_of(args), pin_doc)


def run_comparison(args, candidate_dirs):
    return against.run_comparison(choice_of(args), candidate_dirs)


def write_outputs(cmp, args, candidate_dirs=()) -> None:
    """--json, --html, and in every candidate run dir compare.json (the
    verdict and the baseline it used) and a report.html that shows it."""
    verdict = cmp.to_json()
    if getattr(args, "html", None):
        from ..report.plot import write_compare_html
        html = write_compare_html(cmp, args.html)
        verdict["html"] = str(Path(html).absolute())
        print(f"compare report: {html}")
    if getattr(args, "json", None):
        Path(args.json).write_text(json.dumps(verdict, indent=2) + "\n")
    from ..core.fsutil import write_replacing
    from ..report.plot import write_html_report
    from ..run.results import load_run

    for d in candidate_dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        # the run dir's files may be symlinks someone planted (to ~/.bashrc):
        # each is replaced by a new file, its target never written
        write_replacing(d / "compare.json", (json.dumps(verdict, indent=2) + "\n").encode())
        if (d / "report.html").exists():
            write_html_report(load_run(d), d / "report.html")  # written by write_replacing too


def compare(args) -> int:
    cmp = run_comparison(args, args.candidate)
    for line in cmp.lines():
        print(line)
    write_outputs(cmp, args, args.candidate)
    return cmp.exit_code


def baseline_pin(args) -> int:
    from ..verdict import baseline as bl
    from ..verdict.compare import load_runs
    from ..errors import InputError

    if not 1 <= args.last <= 1000:
        raise InputError("--last", f"must be 1..1000, got {args.last}")
    keys, campaigns = bl.keys_of(load_runs(args.like))
    if len(campaigns) != 1:
        raise InputError(args.like[0], f"runs of several campaigns: {', '.join(sorted(campaigns))}")
    budgets = args.budgets or RunDir(Path(args.like[0])).budgets_copy
    regression = None
    if Path(budgets).exists():
        load_policy(budgets)  # typed and ranged before it is pinned
        from ..core.config import open_node
        regression = open_node(budgets).child("regression").value
    doc = bl.pin(bl.open_store(), args.name, keys, campaigns.pop(), args.branch, args.last,
                 regression=regression, policy_source=str(budgets))
    print(f"baseline {args.name}: campaign {doc['campaign']}, branch {doc['branch']}, pinned {doc['pinned_at']}")
    for label, ids in sorted(doc["runs"].items()):
        print(f"  {label}: {len(ids)} runs ({', '.join(ids)})")
    return 0


def baseline_plan(args) -> int:
    """`rtlab baseline plan`: per key what it can see and what it costs;
    exit 0, 2 where a key cannot be judged (or no baseline at all)."""
    from ..errors import InputError
    from ..verdict.compare import load_runs
    from ..verdict.planning import plan_baseline

    choice = choice_of(args)
    if (choice.store or choice.pin) and not args.like:
        raise InputError("--like", "a store baseline needs --like RUN_DIR... (the keys and campaign it covers)")
    like = load_runs(args.like) if args.like else []
    side, policy, none = against.baseline_side(choice, like)
    if none:
        print(f"baseline plan: no baseline yet: {none}")
        return 2
    plan = plan_baseline(side, policy)
    for line in plan.lines():
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"source": plan.source, "policy": policy.to_json(),
                                               "keys": [k.to_json() for k in plan.keys]}, indent=2) + "\n")
    return plan.exit_code


def baseline_method(args) -> int:
    """``paired`` when the policy's ``baseline:`` says so for the board's
    budget class and the board boots built kernels; otherwise ``store``
    (and why, on stderr)."""
    import sys

    from ..plan.campaign import load_campaign

    campaign = load_campaign(args.campaign, boards=[args.board])
    policy = load_policy(args.budgets or campaign.budgets)
    board = campaign.boards[0]
    method = policy.baseline_for(board.budget_class)
    why = f"{policy.source}: {board.budget_class}: {method}"
    if method == "paired" and not board.boots_built_kernels:
        method, why = "store", f"{why}, but {board.name} cannot boot kernels built from source"
    print(method)
    print(f"baseline method for {board.name}: {method} ({why})", file=sys.stderr)
    return 0


def derived_limits(label: str, reps: list, level: float) -> tuple[dict[str, float], list[str]]:
    """One key's budget from its repeated runs: per run-level statistic
    (p99, p99.9, max) the upper prediction bound at *level*, and a line
    for each statistic left out because some run censors it."""
    from ..verdict.stats import upper_prediction_bound

    limits: dict[str, float] = {}
    left_out = []
    for stat in ("p99", "p99.9", "max"):
        past = [r.censored[stat] for r in reps if stat in r.censored]
        if past:
            # a percentile past the histogram is only "at least the range":
            # a bound from lower bounds would be a budget the board does not
            # hold, so none is derived, and the cure named
            left_out.append(f"{label}: {stat} past the {max(past):g} us histogram in {len(past)} of {len(reps)} "
                            f"runs: not derived; measure again with the suite's histogram_us above it "
                            f"(docs/adding-a-board.md)")
            continue
        vals = [r.values.get(stat) for r in reps]
        if all(v is not None for v in vals):
            limits[stat] = upper_prediction_bound(vals, level)
    if "max" in limits:
        # each statistic's bound is its own: a noisy day's p99.9 bound can lie
        # above the max's, and no percentile of a run exceeds its max
        limits = {k: min(v, limits["max"]) for k, v in limits.items()}
    return limits, left_out


def baseline_derive(args) -> int:
    """Budgets with teeth (budgets/README.md): from >= 3 repeated runs of
    an unchanged kernel, per key the upper prediction bound of each run-level
    statistic, printed as a budget entry to paste into the budget file."""
    from ..verdict.compare import load_runs, side_from_runs
    from ..errors import InputError

    if not 0.5 < args.level < 1:
        raise InputError("--level", f"must be in (0.5, 1), got {args.level}")
    if args.budget_class is not None:
        from ..core.params import ParamError, check_name
        try:
            check_name(args.budget_class, "budget class")
        except ParamError as e:
            raise InputError("--class", str(e)) from None
    side = side_from_runs(load_runs(args.run_dirs))
    derived: dict[str, dict[str, dict[str, str]]] = {}  # variant -> suite -> load -> limits
    too_few = []
    censored: list[str] = []
    for key, reps in sorted(side.keys.items(), key=lambda kv: kv[0].label()):
        if len(reps) < 3:
            too_few.append(f"{key.label()}: {len(reps)} runs, need 3")
            continue
        limits, why_not = derived_limits(key.label(), reps, args.level)
        censored += why_not
        pct = ", ".join(f'"{s[1:]}": {v:.0f}' for s, v in limits.items() if s != "max")
        text = f'{{max_us: {limits.get("max", 0):.0f}, percentiles_us: {{{pct}}}}}'
        if args.budget_class is None:
            print(f"{key.label()} ({reps[0].budget_class}, {len(reps)} runs): {text}")
        else:
            derived.setdefault(key.variant, {}).setdefault(key.suite, {})[key.load] = \
                f"{text}   # {len(reps)} runs of {key.board}"
    if args.budget_class is None:
        for line in too_few + censored:
            print(line)
        return 0
    if not derived:
        raise InputError("RUN_DIR", "no key has 3 runs: nothing to derive a class from")
    # indented to sit under the budget file's budgets: (budgets/README.md);
    # what was left out follows as comments, for the review
    print(f"  {args.budget_class}:   # rtlab baseline derive, {args.level:g} prediction bounds: review them")
    for variant, suites in derived.items():
        print(f'    "{variant}":')
        for suite, loads in suites.items():
            print(f'      "{suite}":')
            for load, text in loads.items():
                print(f'        "{load}": {text}')
    for line in too_few + censored:
        print(f"  # {line}")
    return 0
