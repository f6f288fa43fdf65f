"""`rtlab bisect`: name the commit that made latency worse, on the board.

    rtlab bisect --kernel-tree T --good SHA --bad SHA --board B --variant V
                 [--suite S --load L] [--repeat N]

1. Checks, before touching anything (each a one-line error, exit 2, the tree
   untouched): T is a clean kernel git tree with no bisect under way, both
   SHAs are commits of T, good is an ancestor of bad, and the store holds a
   history for board × variant × suite × load (a typo in a key would
   otherwise bisect something nobody measured).
2. Baseline: the good commit, built (``rtlab kernel build``: ccache, the
   in-tree object dir) and measured ``--baseline-repeat`` times, each run a
   fresh boot.
3. ``git bisect start BAD GOOD`` and ``git bisect run`` with this module as
   the step command (``python -m rtlab.verdict.bisect step STATE``): build the
   checked-out commit, measure it ``--repeat`` times, compare against the
   baseline. Regression -> bad (exit 1), no regression -> good (exit 0).
   An undecidable step (a build that fails, infra, or no clear difference
   either way) is measured once more; still undecidable -> ``git bisect
   skip`` (exit 125): never guessed.
4. Confirmation: the first bad commit and its parent measured again; the
   culprit must be a regression and its parent not.
5. The tree goes back to where it was (``git bisect reset`` to the original
   branch or commit), whatever happened; the report (every step: commit,
   verdict, numbers, time) is written as JSON and text.

The oracle is the regression verdict of ``rtlab.verdict.compare.compare_runs`` where
that module exists; until then a thin stand-in with the same contract
(:func:`fallback_compare`): per run-level statistic (p99, p99.9, max of the
measurement, all threads combined) a one-sided Mann–Whitney U (scipy) of the
candidate's runs against the baseline's, regression when p <= alpha and the
ratio of medians >= 1 + min_effect; no regression when no statistic's
median rose by min_effect; anything else undecided.
"""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .. import kernel as kbuild
from ..plan.campaign import load_campaign
from ..errors import InputError, RtlabError
from ..kernel import tree_state
from ..kernel.git import _git, git_argv
from ..core.params import ParamError
from ..plan.policy import Policy, load_policy
from ..run.runner import run_campaign
from ..store.base import rows
from ..store.publish import load_run

GOOD, BAD, SKIP = 0, 1, 125
ABORT = 255  # >= 128: `git bisect run` stops
STATS = ("p99", "p99.9", "max")
ALPHA = 0.05
MIN_EFFECT = 0.5


class BisectInputError(InputError):
    pass


# ------------------------------------------------------------------ the oracle
@dataclass
class Verdict:
    outcome: str                 # "regression" | "no-regression" | "blind" | "undecided"
    lines: list[str]
    numbers: dict[str, Any] = field(default_factory=dict)
    oracle: str = "fallback"


def run_stats(run, suite: str, load: str) -> Optional[dict[str, float]]:
    """Run-level statistics of the measurement (None: infra, nothing measured)."""
    for job in run.jobs:
        if job.infra_error or job.build_error:
            return None
        for m in job.measurements:
            if m.key.suite != suite or m.key.load != load:
                continue
            if m.verdict is not None and m.verdict.value == "infra":
                return None
            t = m.output.combined() if hasattr(m.output, "combined") else m.output.worst()
            if t is None or not t.cycles:
                return None
            pct = t.percentiles_us
            out = {"p99": pct.get("99"), "p99.9": pct.get("99.9"), "max": t.max_us}
            # a percentile among the histogram's overflows is unknown: the max says it
            return {k: float(v if v is not None else t.max_us) for k, v in out.items()}
    return None


def fallback_compare(baseline: list, candidate: list, suite: str, load: str,
                     alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> Verdict:
    """The stand-in for rtlab.verdict.compare (see the module doc)."""
    import numpy as np  # lazy: numpy/scipy stay out of the CLI start-up
    from scipy import stats

    b = [s for s in (run_stats(r, suite, load) for r in baseline)]
    c = [s for s in (run_stats(r, suite, load) for r in candidate)]
    if any(s is None for s in b + c) or not b or not c:
        return Verdict("undecided", ["infra: a run measured nothing"], {})
    numbers: dict[str, Any] = {}
    lines, regress, rose = [], [], []
    for k in STATS:
        bv, cv = [s[k] for s in b], [s[k] for s in c]
        mb, mc = float(np.median(bv)), float(np.median(cv))
        ratio = mc / mb if mb > 0 else (math.inf if mc > 0 else 1.0)
        p = float(stats.mannwhitneyu(cv, bv, alternative="greater").pvalue)
        numbers[k] = {"baseline": bv, "candidate": cv, "ratio": ratio, "p": p}
        lines.append(f"{k} {ratio - 1:+.0%} ({mb:.0f} -> {mc:.0f} us), {len(cv)} runs vs {len(bv)}, p={p:.3f}")
        if ratio >= 1 + min_effect:
            rose.append(k)
            if p <= alpha:
                regress.append(k)
    if regress:
        outcome = "regression"
    elif not rose:
        outcome = "no-regression"
    else:
        outcome = "undecided"
    return Verdict(outcome, lines, numbers)


def _knowable(baseline: list, suite: str, load: str, stat: str) -> bool:
    """Every baseline run can read this statistic (a percentile beyond the
    histogram range cannot be read)."""
    if stat == "max" or not stat.startswith("p"):
        return True
    for run in baseline:
        for job in run.jobs:
            for m in job.measurements:
                if m.key.suite == suite and m.key.load == load:
                    t = m.output.combined() if hasattr(m.output, "combined") else m.output.worst()
                    if t is None or t.percentiles_us.get(stat[1:]) is None:
                        return False
    return True


def bisect_policy(budgets: Optional[Path], baseline: list, n_cand: int, suite: str, load: str) -> Policy:
    """The campaign's regression policy (its budget file), for one key of a
    bisect: the run-level max joins the gating statistics (a bisect hunts a
    regression already seen, often a rare long section only the max shows);
    a statistic the good commit's own runs cannot read (a percentile beyond
    the histogram range, as under TCG) cannot decide a step and is left out;
    min_runs follows the runs a step has (at least 2: the test stays honest,
    it says "regression" less often with fewer runs)."""
    policy = load_policy(budgets) if budgets is not None else Policy()
    stats_ = tuple(st for st in dict.fromkeys((*policy.statistics, "max")) if _knowable(baseline, suite, load, st))
    # class_statistics cleared: the list above, made for this key, gates
    return dataclasses.replace(policy, statistics=stats_, class_statistics={},
                               min_runs=max(2, min(policy.min_runs, len(baseline), n_cand)))


def compare(baseline: list, candidate: list, suite: str, load: str,
            budgets: Optional[Path] = None, looks: Optional[tuple[int, ...]] = None) -> Verdict:
    """The regression verdict of rtlab.verdict.compare; the stand-in's run-level
    numbers go into the report (and decide a step that is infra only)."""
    from . import compare as cmpmod  # lazy: rtlab.verdict.compare imports scipy (CLI start-up)

    fb = fallback_compare(baseline, candidate, suite, load)  # the numbers for the report
    if fb.outcome == "undecided" and not fb.numbers:  # infra: nothing to compare
        return fb
    policy = bisect_policy(budgets, baseline, len(candidate), suite, load)
    if looks:
        # a step looks after its first runs and after measuring as many again
        policy = dataclasses.replace(policy, looks=tuple(n for n in looks if n >= policy.min_runs) or looks)
    cmp = cmpmod.compare_runs(baseline, candidate, policy)
    keys = [k for k in cmp.keys if k.key.suite == suite and k.key.load == load]
    outcome = keys[0].outcome if len(keys) == 1 else cmp.outcome
    return Verdict(outcome, [k.line() for k in keys] or fb.lines, fb.numbers, oracle="rtlab.verdict.compare")


# ------------------------------------------------------------------ state and measuring
@dataclass
class Settings:
    tree: str
    good: str
    bad: str
    board: str
    variant: str
    suite: str
    load: str
    repeat: int
    baseline_repeat: int
    campaign: str
    work: str
    duration_s: Optional[int] = None
    budgets: Optional[str] = None


def load_bisect_campaign(s: Settings):
    """The campaign narrowed to one board, variant, suite and load."""
    camp = load_campaign(Path(s.campaign), boards=[s.board], variants=[s.variant])
    entries = [e for e in camp.suites if e.name == s.suite and s.load in e.loads]
    if not entries:
        raise BisectInputError("--suite", f"campaign {camp.path} has no suite {s.suite!r} with load {s.load!r}")
    e = entries[0]
    params = dict(e.params)
    if s.duration_s:
        params["duration_s"] = s.duration_s
    camp.suites = [dataclasses.replace(e, loads=(s.load,), params=params)]
    if s.budgets:
        camp.budgets = Path(s.budgets)
    try:
        jobs = camp.jobs()
    except ParamError as e:
        raise BisectInputError(camp.path, f"suite {s.suite}: {e}") from None
    if len(jobs) != 1:
        raise BisectInputError("--board", f"{s.board} × {s.variant}: {len(jobs)} jobs in campaign {camp.path}, "
                                          "need exactly one (does the board support the variant?)")
    return camp, jobs[0]


def say(msg: str) -> None:
    print(f"bisect: {msg}", file=sys.stderr, flush=True)


def build(s: Settings, job) -> dict[str, Any]:
    """Build the checked-out commit for the job (cached by commit)."""
    frags = kbuild.with_base(job.board.arch, job.variant.fragments_for(job.board.arch), job.board.name)
    t0 = time.monotonic()
    bk = kbuild.build_kernel(Path(s.tree), job.board.arch, frags, progress=lambda m: say(m))
    return {"seconds": round(time.monotonic() - t0, 1), "cached": bk.cached,
            "ccache": bk.build_json.get("ccache")}


def measure(s: Settings, label: str, n: int) -> tuple[list, dict[str, Any]]:
    """Build HEAD of the tree and measure it n times (fresh boot each)."""
    camp, job = load_bisect_campaign(s)
    commit = _git(Path(s.tree), "rev-parse", "HEAD").stdout.strip()
    timing: dict[str, Any] = {"build": 0.0, "boot": 0.0, "measure": 0.0, "other": 0.0}
    t_all = time.monotonic()
    try:
        b = build(s, job)
    except RtlabError as e:
        timing["build"] = round(time.monotonic() - t_all, 1)
        return [], {"commit": commit, "build_error": str(e).splitlines()[0][:300], "timing": timing}
    timing["build"] = b["seconds"]
    runs: list = []
    dirs: list = []
    tool_s = float(camp.suites[0].params.get("duration_s") or 0)
    attempts = 0
    while len(runs) < n and attempts < 2 * n:
        # a run that came back INFRA (no boot, a run cut short) is not a
        # measurement: measured again, up to n more times in all
        attempts += 1
        i = len(runs)
        t0 = time.monotonic()
        run, run_dir = run_campaign(camp, results_root=Path(s.work) / "runs",
                                    progress=lambda m: say(f"{label} run {i + 1}/{n}: {m}"),
                                    commit={"sha": commit, "pipeline_kind": "local", "bisect": label},
                                    kernel_tree=Path(s.tree), evidence=False)
        wall = time.monotonic() - t0
        jd = sum(j.duration_s for j in run.jobs)
        measured = min(tool_s, jd) if run.jobs and run.jobs[0].measurements else 0.0
        timing["measure"] += measured
        timing["boot"] += max(jd - measured, 0.0)
        timing["other"] += max(wall - jd, 0.0)
        if run_stats(run, s.suite, s.load) is None:
            say(f"{label} run {i + 1}/{n}: infra, measured again ({run_dir})")
            continue
        runs.append(run)
        dirs.append(str(run_dir))
    timing["other"] += max(time.monotonic() - t_all - sum(timing.values()), 0.0)
    timing = {k: round(v, 1) for k, v in timing.items()}
    return runs, {"commit": commit, "runs": dirs, "timing": timing, "build": b, "budgets": str(camp.budgets),
                  "infra_runs": attempts - len(runs)}


def load_runs(dirs: list[str]) -> list:
    return [load_run(Path(d)) for d in dirs]


def subject(tree: Path, sha: str) -> str:
    return _git(tree, "log", "-1", "--format=%s", sha).stdout.strip()


def judge_head(s: Settings, baseline: list, label: str) -> dict[str, Any]:
    """Measure HEAD, compare; when undecided, measure more and compare all
    of HEAD's runs (the sequential verdict's next look), once. Still
    undecided: the step is skipped, never called good."""
    attempts = []
    measured: list = []
    for attempt in (1, 2):
        t0 = time.monotonic()
        runs, info = measure(s, f"{label} (attempt {attempt})", s.repeat)
        measured += runs
        if info.get("build_error"):
            v = Verdict("undecided", [f"build error: {info['build_error']}"])
        else:
            v = compare(baseline, measured, s.suite, s.load, info.get("budgets"),
                        looks=(s.repeat, 2 * s.repeat))
        info.update(outcome=v.outcome, lines=v.lines, numbers=v.numbers, oracle=v.oracle,
                    seconds=round(time.monotonic() - t0, 1))
        attempts.append(info)
        say(f"{label} {info['commit'][:12]}: {v.outcome}: " + "; ".join(v.lines))
        if v.outcome != "undecided":
            break
    last = attempts[-1]
    return {"commit": last["commit"], "outcome": last["outcome"], "attempts": attempts,
            "lines": last["lines"], "seconds": round(sum(a["seconds"] for a in attempts), 1),
            "timing": {k: round(sum(a["timing"][k] for a in attempts), 1) for k in attempts[0]["timing"]}}


# ------------------------------------------------------------------ the step command
def step_main(state_file: str) -> int:
    """What `git bisect run` calls: exit 0 good, 1 bad, 125 skip, 255 abort."""
    try:
        state = json.loads(Path(state_file).read_text())
        s = Settings(**state["settings"])
        baseline = load_runs(state["baseline"]["runs"])
        head = _git(Path(s.tree), "rev-parse", "HEAD").stdout.strip()
        step = judge_head(s, baseline, f"step {len(state['steps']) + 1}")
        step["subject"] = subject(Path(s.tree), head)
        # not gated (blind): its runs show no regression of what the step
        # can see; a bisect hunts a regression that was seen: good
        step["verdict"] = {"regression": "bad", "no-regression": "good", "blind": "good"}.get(step["outcome"], "skip")
        state["steps"].append(step)
        tmp = Path(state_file).with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(state_file)
        return {"good": GOOD, "bad": BAD}.get(step["verdict"], SKIP)
    except Exception as e:  # noqa: BLE001 - anything unexpected stops the bisect, never a verdict
        print(f"bisect step: {type(e).__name__}: {e}", file=sys.stderr)
        return ABORT


# ------------------------------------------------------------------ checks
def check_inputs(s: Settings, store=None, has_history: Optional[Callable[[], int]] = None) -> dict[str, str]:
    """Everything that can be wrong before the tree is touched."""
    tree = Path(s.tree)
    if not tree.is_dir():
        raise BisectInputError("--kernel-tree", f"{tree}: no such directory")
    tree_state(tree)  # a kernel tree, a git repository, its top, not configured in-tree
    gitdir = Path(_git(tree, "rev-parse", "--absolute-git-dir").stdout.strip())
    if (gitdir / "BISECT_START").exists():
        raise BisectInputError("--kernel-tree", f"{tree}: a git bisect is under way (git bisect reset first)")
    require_clean(tree, BisectInputError)
    shas = {opt: commit_of(tree, opt, ref, BisectInputError) for opt, ref in (("--good", s.good), ("--bad", s.bad))}
    g, b = shas["--good"], shas["--bad"]
    if g == b:
        raise BisectInputError("--bad", f"good and bad are the same commit {g[:12]}")
    if _git(tree, "merge-base", "--is-ancestor", g, b, check=False).returncode != 0:
        if _git(tree, "merge-base", "--is-ancestor", b, g, check=False).returncode == 0:
            raise BisectInputError("--good", f"good {g[:12]} and bad {b[:12]} are reversed: bad is an "
                                             "ancestor of good")
        raise BisectInputError("--good", f"good {g[:12]} is not an ancestor of bad {b[:12]}")
    if has_history is not None and has_history() == 0:
        raise BisectInputError("store", f"no history for {s.board}/{s.variant}/{s.suite}/{s.load} in the store "
                                        "(nothing was ever measured for this key: check board, variant, "
                                        "suite and load)")
    return {"good": g, "bad": b}


def require_clean(tree: Path, error: type[InputError] = InputError) -> None:
    """A tree rtlab may check out commits in: no local changes."""
    # not stripped: "XY path" keeps its columns (" M a" stripped lost the path: "e.g. )")
    dirty = [ln for ln in _git(tree, "status", "--porcelain").stdout.splitlines() if ln.strip()]
    if dirty:
        n = len(dirty)
        raise error("--kernel-tree", f"{tree}: has local changes ({n} path{'s' * (n != 1)}, "
                                     f"e.g. {dirty[0][3:]}); commit or stash them")


def commit_of(tree: Path, opt: str, ref: str, error: type[InputError] = InputError) -> str:
    """The full sha of *ref* (a user's option *opt*) in *tree*, or *error*."""
    if not ref or ref.startswith("-"):
        raise error(opt, f"{ref!r} is not a commit")
    r = _git(tree, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
    if r.returncode != 0:
        raise error(opt, f"unknown commit {ref!r} in {tree}")
    return r.stdout.strip()


def store_history_count(store, s: Settings) -> int:
    from .regressions import _lit, check_name  # lazy: scipy and ruptures (CLI start-up)

    for opt, v in (("--board", s.board), ("--variant", s.variant), ("--suite", s.suite), ("--load", s.load)):
        check_name(opt, v)
    q = (f'SELECT count("verdict") FROM "verdict" WHERE "scope" = \'measurement\' AND "board" = {_lit(s.board)} '
         f'AND "variant" = {_lit(s.variant)} AND "suite" = {_lit(s.suite)} AND "load" = {_lit(s.load)}')
    r = rows(store.query(q))
    return int(r[0]["count"]) if r else 0


# ------------------------------------------------------------------ the whole bisect
def original_head(tree: Path) -> dict[str, str]:
    branch = _git(tree, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    return {"branch": branch, "commit": _git(tree, "rev-parse", "HEAD").stdout.strip()}


def restore(tree: Path, orig: dict[str, str]) -> None:
    """Back to the original branch or commit, no bisect state left."""
    gitdir = Path(_git(tree, "rev-parse", "--absolute-git-dir").stdout.strip())
    if (gitdir / "BISECT_START").exists():
        _git(tree, "bisect", "reset", orig["branch"] or orig["commit"], check=False)
    if orig["branch"]:
        _git(tree, "checkout", "-q", orig["branch"], check=False)
    else:
        _git(tree, "checkout", "-q", "--detach", orig["commit"], check=False)
    head = _git(tree, "rev-parse", "HEAD").stdout.strip()
    branch = _git(tree, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    if head != orig["commit"] or branch != orig["branch"] or (gitdir / "BISECT_START").exists():
        raise RtlabError(f"{tree}: could not restore {orig['branch'] or orig['commit'][:12]} "
                         f"(now {branch or head[:12]}): restore it by hand (git bisect reset)")


def run_bisect(s: Settings, shas: dict[str, str]) -> dict[str, Any]:
    tree = Path(s.tree)
    work = Path(s.work)
    work.mkdir(parents=True, exist_ok=True)
    state_file = work / "state.json"
    orig = original_head(tree)
    t_start = time.monotonic()
    report: dict[str, Any] = {"settings": dataclasses.asdict(s), "good": shas["good"], "bad": shas["bad"],
                              "original_head": orig}
    candidates = int(_git(tree, "rev-list", "--count", f"{shas['good']}..{shas['bad']}").stdout.strip())
    report["commits"] = candidates
    report["max_steps"] = math.ceil(math.log2(candidates)) + 2 if candidates > 1 else 2
    try:
        _git(tree, "checkout", "-q", "--detach", shas["good"])
        say(f"baseline: good {shas['good'][:12]}, {s.baseline_repeat} runs")
        t0 = time.monotonic()
        base_runs, base = measure(s, "baseline", s.baseline_repeat)
        base["seconds"] = round(time.monotonic() - t0, 1)
        if base.get("build_error") or any(run_stats(r, s.suite, s.load) is None for r in base_runs):
            raise RtlabError(f"baseline {shas['good'][:12]} could not be measured: "
                             f"{base.get('build_error') or 'infra in a baseline run'}")
        report["baseline"] = base
        state_file.write_text(json.dumps({"settings": dataclasses.asdict(s), "baseline": base, "steps": []}))
        _git(tree, "bisect", "start", shas["bad"], shas["good"])
        r = subprocess.run(git_argv(tree, "bisect", "run", sys.executable, "-m", "rtlab.verdict.bisect",
                                    "step", str(state_file)), capture_output=True, text=True)
        log = _git(tree, "bisect", "log", check=False).stdout
        (work / "git-bisect-run.log").write_text(r.stdout + r.stderr)
        (work / "git-bisect.log").write_text(log)
        state = json.loads(state_file.read_text())
        report["steps"] = state["steps"]
        first_bad = _git(tree, "rev-parse", "-q", "--verify", "refs/bisect/bad", check=False).stdout.strip()
        found = "is the first bad commit" in r.stdout
        report["git_bisect_exit"] = r.returncode
        if not found:
            report["result"] = "inconclusive"
            report["message"] = ("git bisect could not name one commit: "
                                 + (r.stdout.strip().splitlines() or [""])[-1][:300])
            return report
        restore(tree, orig)
        report["first_bad"] = first_bad
        report["subject"] = subject(tree, first_bad)
        # confirmation: the culprit and its parent, measured again
        confirm = {}
        for role, sha in (("culprit", first_bad), ("parent", f"{first_bad}^")):
            _git(tree, "checkout", "-q", "--detach", sha)
            confirm[role] = judge_head(s, base_runs, f"confirm {role}")
        report["confirm"] = confirm
        ok = confirm["culprit"]["outcome"] == "regression" and confirm["parent"]["outcome"] in ("no-regression",
                                                                                                 "blind")
        report["result"] = "confirmed" if ok else "not-confirmed"
        report["effect"] = confirm["culprit"]["lines"]
        return report
    finally:
        restore(tree, orig)
        report["restored"] = True
        report["wall_s"] = round(time.monotonic() - t_start, 1)
        report["measured_steps"] = len(report.get("steps", []))
        report["timing"] = total_timing(report)


def total_timing(report: dict[str, Any]) -> dict[str, float]:
    parts = [report.get("baseline", {}), *report.get("steps", []), *report.get("confirm", {}).values()]
    tot = {"build": 0.0, "boot": 0.0, "measure": 0.0}
    for p in parts:
        for k in tot:
            tot[k] += (p.get("timing") or {}).get(k, 0.0)
    tot = {k: round(v, 1) for k, v in tot.items()}
    tot["other"] = round(max(report.get("wall_s", 0.0) - sum(tot.values()), 0.0), 1)
    return tot


def report_text(r: dict[str, Any]) -> str:
    s = r["settings"]
    out = [f"rtlab bisect {s['board']}/{s['variant']}/{s['suite']}/{s['load']} in {s['tree']}",
           f"good {r['good'][:12]}  bad {r['bad'][:12]}  ({r['commits']} commits, at most {r['max_steps']} steps)"]
    if r.get("baseline"):
        b = r["baseline"]
        out.append(f"baseline {b['commit'][:12]}: {len(b.get('runs', []))} runs, {b.get('seconds', 0):.0f} s")
    for i, st in enumerate(r.get("steps", []), 1):
        out.append(f"step {i}: {st['commit'][:12]} {st.get('subject', '')[:60]!r}: {st['verdict']} "
                   f"({st['outcome']}, {len(st['attempts'])} attempt{'s' * (len(st['attempts']) != 1)}, "
                   f"{st['seconds']:.0f} s)")
        out += [f"    {ln}" for ln in st["lines"]]
    for role, c in (r.get("confirm") or {}).items():
        out.append(f"confirm {role} {c['commit'][:12]}: {c['outcome']} ({c['seconds']:.0f} s)")
        out += [f"    {ln}" for ln in c["lines"]]
    if r.get("first_bad"):
        out.append(f"first bad commit: {r['first_bad']} {r.get('subject', '')!r} ({r['result']})")
        out += [f"    effect: {ln}" for ln in r.get("effect", [])]
    else:
        out.append(f"no first bad commit: {r.get('result')}: {r.get('message', '')}")
    t = r.get("timing", {})
    out.append(f"{r.get('measured_steps', 0)} measured steps; wall {r.get('wall_s', 0):.0f} s: build {t.get('build', 0):.0f} s, "
               f"boot {t.get('boot', 0):.0f} s, measure {t.get('measure', 0):.0f} s, other {t.get('other', 0):.0f} s")
    out.append(f"tree restored to {r['original_head']['branch'] or r['original_head']['commit'][:12]}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "step":
        sys.exit(step_main(sys.argv[2]))
    print("usage: python -m rtlab.verdict.bisect step STATE_FILE (called by git bisect run)", file=sys.stderr)
    sys.exit(ABORT)
