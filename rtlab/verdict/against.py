"""Which baseline a candidate is judged against and by which policy, and the
comparison itself: the logic behind `rtlab compare`, `rtlab report` and
`rtlab run --repeat-until-decided`, whose commands only read options.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from ..core.rundir import RunDir
from ..plan.policy import Policy, load_policy


@dataclasses.dataclass(frozen=True)
class BaselineChoice:
    """The baseline options: runs on disk, or the store (the last *last*
    runs of *branch*, or the pin *pin*); *budgets* the operator's policy file."""
    runs: tuple[Path, ...] = ()
    store: bool = False
    branch: str = "main"
    last: int = 5
    pin: Optional[str] = None
    budgets: Optional[Path] = None


def lab_policy(budgets: Optional[Path] = None) -> Policy:
    """The regression policy of the operator's budget file *budgets* (the
    gate's --budgets, RTLAB_GATE_BUDGETS), else of the lab's
    budgets/default.yaml; a file without a ``regression:`` section sets
    budgets only, and the lab's policy (which knows its board classes)
    holds for it."""
    from ..core.config import open_node
    from ..plan.campaign import DEFAULT_BUDGETS

    if budgets is not None:
        if open_node(budgets).child("regression").value is not None:
            return load_policy(budgets)
        pol = load_policy(DEFAULT_BUDGETS)
        return dataclasses.replace(pol, source=f"{Path(budgets).name} has no regression: section: the lab's "
                                               f"{pol.source}")
    pol = load_policy(DEFAULT_BUDGETS)
    return dataclasses.replace(pol, source=f"the lab's {pol.source}")


def policy_for(choice: BaselineChoice, pin_doc=None) -> Policy:
    """The verdict's policy: the operator's --budgets, else the baseline's
    (its first run's budgets.yaml, or what was pinned with it), else the
    built-in defaults; never the candidate's, whose budget file is part of
    the change under test. The policy's source names which."""
    if choice.budgets:
        pol = lab_policy(choice.budgets)
        return dataclasses.replace(pol, source=f"operator --budgets {choice.budgets}: {pol.source}")
    if pin_doc is not None and pin_doc.get("regression") is not None:
        from ..core.config import Node
        from ..plan.policy import policy_from_node
        pol = policy_from_node(Node(Path(f"pin {pin_doc.get('name')}"), pin_doc["regression"], "regression"),
                               Path(f"pin {pin_doc.get('name')}"))
        return dataclasses.replace(pol, source=f"baseline pin {pin_doc.get('name')}: {pin_doc.get('policy_source', '')}")
    if choice.runs:
        f = RunDir(Path(choice.runs[0])).budgets_copy
        if f.exists():
            pol = load_policy(f)
            return dataclasses.replace(pol, source=f"baseline run {choice.runs[0]}: {pol.source}")
        return Policy(source="built-in defaults (no --budgets, and the baseline carries no budget file)")
    # a store baseline's runs are in the store, their budget files not: the
    # lab's own policy (this checkout's budgets/default.yaml), which knows
    # its board classes (qemu-tcg gates on the max)
    return lab_policy()


def baseline_side(choice: BaselineChoice, like):
    """The baseline a candidate like *like* (its runs) is judged against,
    and the policy: (Side, Policy, no_baseline: why there is none, or "")."""
    from .compare import side_from_runs, load_runs
    from ..errors import InputError

    from_store = choice.store or choice.pin
    if bool(choice.runs) == bool(from_store):
        raise InputError("--baseline", "give baseline runs (--baseline RUN_DIR...) or --baseline-store/--pin, "
                                       "one of them")
    if not 1 <= choice.last <= 1000:
        raise InputError("--last", f"must be 1..1000, got {choice.last}")
    if choice.runs:
        side = side_from_runs(load_runs(choice.runs), "runs " + ", ".join(str(d) for d in choice.runs))
        return side, policy_for(choice), ""
    from . import baseline as bl

    keys, campaigns = bl.keys_of(like)
    if len(campaigns) != 1:
        raise InputError("runs", f"runs of several campaigns: {', '.join(sorted(campaigns))}")
    (campaign,) = campaigns
    store = bl.open_store()  # down: BaselineUnavailable, exit 2 (never a silent pass)
    pinned, branch, doc = None, choice.branch, None
    if choice.pin:
        doc = bl.read_pin(store, choice.pin)
        pinned, branch = doc.get("runs", {}), doc.get("branch", branch)
        if doc.get("campaign") != campaign:
            raise bl.BaselineUnavailable(f"baseline pin {choice.pin!r} is of campaign {doc.get('campaign')}, "
                                         f"the candidate of {campaign}")
    policy = policy_for(choice, doc)
    # the baseline's keys too: a key the candidate dropped is undecided, never gone
    keys = set(keys) | bl.baseline_keys(store, campaign, branch, pinned)
    side = bl.read_baseline(store, keys, campaign, branch, choice.last,
                            exclude_runs=[r.run_id for r in like], pinned=pinned)
    if choice.pin:
        side.source = f"store: baseline pinned as {choice.pin} ({doc.get('pinned_at', '?')}), " + side.source[7:]
    none = ""
    if not choice.pin and not side.runs:
        # a store that answered, with nothing of this campaign on the branch:
        # a new branch or campaign (a pin that holds nothing is an error)
        none = (f"branch {branch} has no runs of campaign {campaign} in the store yet: the branch's "
                f"pushes publish them and start its baseline")
    return side, policy, none


def run_comparison(choice: BaselineChoice, candidate_dirs):
    from .compare import compare_sides, load_runs, side_from_runs

    candidate = load_runs(candidate_dirs)
    cand_source = "runs " + ", ".join(str(d) for d in candidate_dirs)
    side, policy, none = baseline_side(choice, candidate)
    cmp = compare_sides(side, side_from_runs(candidate, cand_source), policy)
    cmp.no_baseline = none
    if choice.runs:
        from ..report.snapshot import run_differences

        # what changed on the boards between the two sides (snapshot.json of each job)
        cmp.system_changes = run_differences(choice.runs, candidate_dirs)
    return cmp
