"""Paired A/B boots (issue #23, item 3b): the baseline kernel and the
candidate built from one tree and booted alternately on one board, A B,
B A, A B ..., each boot a run of its own; the paired verdict
(rtlab.verdict.paired) then tests the differences within each pair, which
no session effect (host, neighbours, a noisy hour) can fake.

    run_pairs(campaign, tree, baseline_rev, candidate_rev, pairs, results)

The tree is checked out at each side's commit in turn (a clean tree,
refused otherwise, and put back where it was afterwards, even on error or
cancel); both kernels come from rtlab's kernel cache after their first
build, so a pair costs two boots. The order alternates between pairs so
that a drift across the session (the host warming, a neighbour starting)
falls on each side equally. Every run is on disk under
``<results>/baseline`` and ``<results>/candidate`` and ``pairs.json``
names them as they finish, before anything is judged.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from ..core.model import RunResult
from ..kernel import tree_state
from ..plan.campaign import Campaign
from .bisect import _git, commit_of, original_head, require_clean, restore
from ..run.runner import run_campaign
from ..run.results import new_run_id

SIDES = ("baseline", "candidate")


def resolve(tree: Path, baseline: str, candidate: str) -> dict[str, str]:
    """Both commits (full shas) in a clean kernel tree, or InputError."""
    tree_state(tree)  # a kernel tree, a git repository, its top
    require_clean(tree)
    shas = {side: commit_of(tree, f"--{side}", ref) for side, ref in zip(SIDES, (baseline, candidate))}
    if shas["baseline"] == shas["candidate"]:  # refused before a whole vacuous session is booted
        from ..errors import InputError
        raise InputError("--candidate", f"{candidate!r} is the baseline's commit {shas['baseline'][:12]} too: "
                                        "a commit paired with itself has nothing to compare")
    return shas


def run_pairs(campaign: Campaign, tree: Path, baseline: str, candidate: str, pairs: int, results: Path,
              progress: Callable[[str], None], context: Optional[dict] = None
              ) -> tuple[list[RunResult], list[RunResult]]:
    """Measure `pairs` pairs; returns (baseline runs, candidate runs), pair
    i being the i-th of each (a pair whose run raised is not returned).

    *context*: the CI pipeline's commit record (branch, pipeline id and
    source, the candidate's subject): the candidate's runs carry all of it,
    so publishing files them under the branch like any run of the commit;
    the baseline's carry the pipeline but no branch and no subject (they
    are another commit's, and must not enter the branch's baseline)."""
    tree = Path(tree)
    shas = resolve(tree, baseline, candidate)
    campaign = replace(campaign, repeat=1)
    done_pairs: list[dict[str, object]] = []
    record = {"tree": str(tree), "commits": shas, "pairs": done_pairs}
    results.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[RunResult]] = {s: [] for s in SIDES}
    orig = original_head(tree)
    try:
        for i in range(pairs):
            order = SIDES if i % 2 == 0 else tuple(reversed(SIDES))
            done: dict[str, RunResult] = {}
            entry: dict[str, object] = {"pair": i + 1, "order": list(order)}
            for side in order:
                _git(tree, "checkout", "-q", "--detach", shas[side])
                label = f"pair {i + 1}/{pairs} {side}"

                def said(m: str, label: str = label) -> None:
                    progress(f"{label}: {m}")

                # run ids of their own per side and pair: two sides that fail in
                # the same second are never "the same run on both sides"
                run, run_dir = run_campaign(
                    campaign, results_root=results / side, kernel_tree=tree, evidence=False, progress=said,
                    commit=_commit_record(context, side, shas[side], i + 1),
                    run_id=f"{new_run_id()}-{side}{i + 1}")
                done[side] = run
                entry[side] = str(run_dir)
                progress(f"pair {i + 1}/{pairs} {side} ({shas[side][:12]}): {run.verdict.value} -> {run_dir}")
            for side in SIDES:
                out[side].append(done[side])
            done_pairs.append(entry)
            (results / "pairs.json").write_text(json.dumps(record, indent=2) + "\n")
    finally:
        restore(tree, orig)
    return out["baseline"], out["candidate"]


def _commit_record(context: Optional[dict], side: str, sha: str, pair: int) -> dict:
    ctx = dict(context or {"pipeline_kind": "local"})
    if side == "baseline":
        ctx.pop("branch", None)
        ctx.pop("subject", None)
    return {**ctx, "sha": sha, "paired": f"{side} {pair}"}


def load_pairs(results: Path) -> tuple[list[Path], list[Path]]:
    """The run dirs of a paired session's complete pairs, as ``pairs.json``
    names them: (baseline dirs, candidate dirs), pair i the i-th of each.

    The session may have moved (a CI artifact in another job's checkout):
    each run is looked up by its name under ``<results>/<side>``, never by
    the path written at the time; a name that is not a run dir there is
    an InputError naming the file."""
    from ..core.config import load_yaml, shown
    from ..core.modelcheck import load_checked, run as run_check
    from ..core.rundir import RunDir
    from ..errors import InputError

    results = Path(results)
    index = results / "pairs.json"
    if not index.is_file():
        raise InputError(index, "missing: not the results of `rtlab paired`")
    doc = load_yaml(index)  # JSON is YAML; read bounded, duplicate keys refused
    pairs = doc.get("pairs") if isinstance(doc, dict) else None
    if not isinstance(pairs, list):
        raise InputError(index, "pairs: must be a list")
    commits = doc.get("commits") or {}
    if not isinstance(commits, dict) or not all(isinstance(commits.get(s, ""), str) for s in SIDES):
        raise InputError(index, "commits: must map baseline and candidate to commit shas")
    if commits.get("baseline") and commits.get("baseline") == commits.get("candidate"):
        raise InputError(index, f"commits: {shown(commits['baseline'])} is paired with itself: nothing to compare")
    out: dict[str, list[Path]] = {s: [] for s in SIDES}
    seen: dict[str, str] = {}  # a run's measured content -> where it was seen first
    shas: dict[str, set[str]] = {s: set() for s in SIDES}
    for i, entry in enumerate(pairs, 1):
        for side in SIDES:
            name = Path(str(entry.get(side, "")) if isinstance(entry, dict) else "").name
            run_dir = results / side / name
            where = f"pairs: item {i}: {side}"
            if name in ("", ".", "..") or not RunDir(run_dir).run_json.is_file():
                raise InputError(index, f"{where}: not a run under {results / side}")
            if run_dir in out[side]:
                raise InputError(index, f"{where}: run {shown(name)} is named twice: each pair has runs of its own")
            run = load_checked(RunDir(run_dir).run_json, run_check, root=run_dir, what="run result")
            sha = (run.get("commit") or {}).get("sha")
            if commits.get(side) and sha != commits[side]:
                raise InputError(index, f"{where}: run {shown(name)} measured commit {shown(sha)}, "
                                        f"pairs.json says {side} {shown(commits[side])}: the sides contradict")
            if isinstance(sha, str):
                shas[side].add(sha)
            # copies of one run under new run ids would give pairs no spread
            # of their own; real runs never measure the same numbers twice
            content = _measured(run)
            if content is not None:
                key = f"{side}:{content}"
                if key in seen:
                    raise InputError(index, f"{where}: run {shown(name)} measured exactly what {seen[key]} did: "
                                            "a copy, not a pair of its own")
                seen[key] = f"run {shown(name)}"
            out[side].append(run_dir)
    both = shas["baseline"] & shas["candidate"]
    if both:
        raise InputError(index, f"commit {shown(sorted(both)[0])} is on both sides: nothing to compare")
    return out["baseline"], out["candidate"]


def _measured(run: dict) -> Optional[str]:
    """A digest of what a run measured (its outputs, paths left out), None
    when it measured nothing."""
    import hashlib

    outs = [{k: v for k, v in (m.get("output") or {}).items() if k != "path"}
            for j in run.get("jobs") or [] for m in j.get("measurements") or []]
    if not any(o.get("threads") for o in outs):
        return None
    return hashlib.sha256(json.dumps(outs, sort_keys=True).encode()).hexdigest()
