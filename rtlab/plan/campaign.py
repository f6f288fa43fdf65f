"""Campaigns: which boards × variants × suites × loads a run covers.

A campaign file is small and declarative (like a tuxrun device/test list);
the runner turns it into jobs (one per board × variant), each a list of
suite runs (one per suite × load).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .. import ROOT
from ..targets.boards import Board, find_board
from ..core.config import Node, open_node, shown
from ..errors import InputError
from ..loads import LOADS
from ..core.params import ParamError, check_cpus_on, check_name, cpus_of
from ..suites import SUITES, SuiteRun
from ..targets.variants import HOST_VARIANT, Variant, load_variants

log = logging.getLogger("rtlab.plan.campaign")

#: repeats per job at most (each a boot): more is a soak, not a baseline
MAX_REPEAT = 100
CAMPAIGN_DIR = ROOT / "campaigns"
DEFAULT_CAMPAIGN = CAMPAIGN_DIR / "default.yaml"
BUDGETS_DIR = ROOT / "budgets"
#: the checkout's own budget file: a campaign's default, and the lab's policy
DEFAULT_BUDGETS = BUDGETS_DIR / "default.yaml"


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    suite: str
    loads: tuple[str, ...]
    params: dict[str, Any]
    #: per board name or budget class: parameter overrides (e.g. a wider
    #: histogram where TCG latencies run to milliseconds)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def params_for(self, board: Board) -> dict[str, Any]:
        p = dict(self.params)
        p.update(self.overrides.get(board.budget_class, {}))
        p.update(self.overrides.get(board.name, {}))
        return SUITES[self.suite].params(p)


@dataclass(frozen=True)
class Job:
    board: Board
    variant: Variant
    suites: tuple[SuiteRun, ...]
    #: 1..N when the campaign repeats (each a fresh boot / fresh tool run), else 0
    repeat: int = 0

    @property
    def id(self) -> str:
        return f"{self.board.name}/{self.variant.name}" + (f"#{self.repeat}" if self.repeat else "")


@dataclass
class Campaign:
    name: str
    path: Path
    description: str
    budgets: Path
    boards: list[Board]
    variants: list[Variant]
    suites: list[SuiteEntry]
    #: every job this many times (campaign key ``repeat:``, ``rtlab run --repeat``)
    repeat: int = 1
    #: evidence at the breach (rtlab.judge.evidence): True/False, None = on in CI only
    evidence: Optional[bool] = None
    #: (board, variant, suite entry, load) -> the histogram range (us) its
    #: budgets need, where the campaign leaves the range to them: every
    #: gated percentile of a passing run lies inside it (load_campaign)
    histogram_ranges: dict[tuple[str, str, str, str], float] = field(default_factory=dict)

    def measured_cpus(self, board: Board, variant: Variant, entry: SuiteEntry) -> tuple[int, ...]:
        """The isolated CPU on isolation variants (what vendors measure on),
        every CPU otherwise. Always named explicitly to the tool."""
        cpus = entry.params.get("cpus", "auto")
        if cpus == "auto":
            if variant.isolated:
                return (board.isolate_cpu,)
            return tuple(range(board.cpus))
        if cpus == "all":  # every CPU, isolated ones included (cyclictest -S style)
            return tuple(range(board.cpus))
        return tuple(cpus_of(cpus) or ())

    def jobs(self) -> list[Job]:
        jobs = []
        for board in self.boards:
            variants = [v for v in self.variants if board.supports(v.name)]
            if board.fixed_kernel:
                variants = [load_variants()[HOST_VARIANT]]
            for variant in variants:
                runs = []
                for entry in self.suites:
                    params = entry.params_for(board)
                    params.pop("cpus", None)
                    for load in entry.loads:
                        need = self.histogram_ranges.get((board.name, variant.name, entry.name, load))
                        runs.append(SuiteRun(
                            id=f"{entry.name}@{load}", name=entry.name, suite=entry.suite,
                            load=load, params=SUITES[entry.suite].with_histogram_range(params, need) if need
                            else params,
                            cpus=self.measured_cpus(board, variant, entry)))
                jobs.append(Job(board=board, variant=variant, suites=tuple(runs)))
        if self.repeat <= 1:
            return jobs
        # repeats interleaved (all jobs once, then again): slow drift of the
        # host or the lab spreads over every variant alike, not onto one
        return [dataclasses.replace(j, repeat=r) for r in range(1, self.repeat + 1) for j in jobs]


def _safe(name: str) -> bool:
    try:
        check_name(name)
        return True
    except ParamError:
        return False


def campaign_budgets(bnode: Node, campaign_path: Path, given: Optional[Path] = None) -> Path:
    """The budget file a campaign is judged by, confined as boards are: a
    file the operator gave (*given*: ``--budgets``) is used as is; the
    campaign's ``budgets:`` (merge-request content) must resolve, symlinks
    included, inside the checkout's budgets/ or the campaign file's own
    directory (the operator chose that one), never to /etc/shadow."""
    if given is not None:
        return Path(given).resolve()
    if bnode.value is None:  # the checkout's default, wherever the campaign lies
        return DEFAULT_BUDGETS.resolve()
    value = bnode.str()
    real = Path(os.path.realpath(campaign_path.parent / value))
    roots = (BUDGETS_DIR, campaign_path.parent)
    if not any(real == Path(os.path.realpath(r)) or Path(os.path.realpath(r)) in real.parents for r in roots):
        raise bnode.error(f"{shown(value)} leads outside {BUDGETS_DIR} and the campaign's directory "
                          f"{campaign_path.parent.absolute()}: refused (give another file with --budgets)")
    return real


@dataclass(frozen=True)
class JudgingBudgets:
    """The budget file the gate judges a run by, and why that one."""

    path: Path
    why: str


def judging_budgets(run_budgets: Path, given: Optional[Path] = None) -> JudgingBudgets:
    """The lab's budgets win: the operator's *given* file (``--budgets``,
    CI's RTLAB_GATE_BUDGETS), else the run's kept budgets.yaml when it is,
    byte for byte, one of the lab's budget files (budgets/ of this checkout),
    else the lab's default. A run's own budget file came from its campaign,
    which a trigger may have pointed into the kernel tree under test: a
    campaign from outside the lab chooses what is measured, not how it is
    judged."""
    from ..core.fsutil import read_bounded, result_max_bytes

    if given is not None:
        return JudgingBudgets(Path(given), "given with --budgets")
    if not run_budgets.exists() and not run_budgets.is_symlink():
        return JudgingBudgets(DEFAULT_BUDGETS, f"the lab's default: {run_budgets} does not exist")
    kept = read_bounded(run_budgets, result_max_bytes())
    for lab in sorted(BUDGETS_DIR.glob("*.yaml")):
        if lab.is_file() and not lab.is_symlink() and lab.read_bytes() == kept:
            return JudgingBudgets(lab, f"the run's {run_budgets.name} is the lab's {lab.name}")
    return JudgingBudgets(DEFAULT_BUDGETS, f"the lab's default: the run's {run_budgets} is none of the "
                                           f"lab's budget files in {BUDGETS_DIR} (give it with --budgets "
                                           "to judge by it)")


def load_campaign(path: Optional[Path] = None, *, boards: Optional[list[str]] = None,
                  variants: Optional[list[str]] = None, repeat: Optional[int] = None,
                  budgets: Optional[Path] = None) -> Campaign:
    """Load a campaign; `boards`/`variants` replace its own lists (any board
    of env/, any variant, named in the file or not), `repeat` overrides
    its ``repeat:`` and `budgets` its ``budgets:`` (command-line options)."""
    path = Path(path or DEFAULT_CAMPAIGN)
    if not path.exists() and (CAMPAIGN_DIR / f"{path}.yaml").exists():
        path = CAMPAIGN_DIR / f"{path}.yaml"  # a preset by name
    root = open_node(path).only(["name", "description", "budgets", "boards", "variants", "suites", "evidence",
                                 "repeat"])
    rnode = root.child("repeat")
    if repeat is not None:  # the command line's
        if not 1 <= repeat <= MAX_REPEAT:
            raise InputError(path, f"--repeat: must be 1..{MAX_REPEAT}, got {repeat}")
    else:
        repeat = rnode.integer(1, minimum=1)
        if repeat > MAX_REPEAT:
            raise rnode.error(f"must be <= {MAX_REPEAT}, got {repeat}")
    all_variants = load_variants()

    board_names = boards or root.req("boards").str_list()
    board_list = []
    for b in board_names:
        try:
            board_list.append(find_board(b))
        except InputError as e:
            raise InputError("--board" if boards else path, f"boards: {e.what}") from None

    vnode = root.child("variants")
    vnames = variants or (list(all_variants) if vnode.value in (None, "all") else vnode.str_list())
    for v in vnames:
        if v not in all_variants:
            raise InputError("--variant" if variants else path, f"variants: unknown variant {shown(v)} "
                             f"(known: {', '.join(sorted(all_variants))})")
    variant_list = [all_variants[v] for v in vnames]

    entries = []
    entry_keys: list[tuple[str, SuiteEntry]] = []
    snode = root.req("suites")
    if not isinstance(snode.value, list) or not snode.value:
        raise snode.error("must be a non-empty list of suites")
    seen = set()
    for i, raw in enumerate(snode.value):
        n = Node(path, raw, f"suites[{i}]").only(["name", "suite", "loads", "params", "overrides"])
        suite = n.child("suite").str("") or n.req("name").str()
        name = n.child("name").str(suite)
        for key, value in (("name", name), ("suite", suite)):
            try:
                check_name(value, f"suite {key}")
            except ParamError as e:
                raise n.child(key if n.child(key).value is not None else "name").error(str(e)) from None
        if suite not in SUITES:
            raise n.child("suite").error(f"unknown suite {shown(suite)} (known: {', '.join(sorted(SUITES))})")
        # "all": every registered load but the deliberate breaches (rtlab.loads.LOADS)
        loads = tuple(x for given in n.child("loads").str_list(["idle"])
                      for x in (LOADS.programme() if given == "all" else [given]))
        for load in loads:
            if not all(_safe(part) for part in load.split("+")) or load not in LOADS:
                raise n.child("loads").error(f"unknown load {shown(load)} (known: {', '.join(sorted(LOADS))})")
        params = dict(n.child("params").mapping())
        overrides = {k: dict(v.mapping()) for k, v in n.child("overrides").items()}
        for k in overrides:
            if not _safe(k):
                raise n.child("overrides").error(f"{shown(k)} is not a board or budget class name")
        for where, p in [("params", params), *((f"overrides.{k}", v) for k, v in overrides.items())]:
            try:
                SUITES[suite].params(p)
            except ParamError as e:
                known = (f" (suite {suite}: {', '.join(sorted(SUITES[suite].defaults))}, cpus, load_cpus, "
                         f"load_opts)" if "unknown parameter" in str(e) else "")
                raise InputError(path, f"{n.key}.{where}.{e}{known}") from None
        entry = SuiteEntry(name=name, suite=suite, loads=loads, params=params, overrides=overrides)
        for board in board_list:  # CPUs named must exist on every board the entry runs on
            merged = {**params, **overrides.get(board.budget_class, {}), **overrides.get(board.name, {})}
            for key in ("cpus", "load_cpus", "other_cpu"):
                try:
                    check_cpus_on(merged.get(key), board.cpus, board.name)
                except ParamError as e:
                    where = next((f"overrides.{o}" for o in (board.name, board.budget_class)
                                  if key in overrides.get(o, {})), "params")
                    raise InputError(path, f"{n.key}.{where}.{key}: {e}") from None
        _warn_unsegmented(path, n.key, entry)
        if name in seen:
            raise n.child("name").error(f"duplicate suite name {shown(name)}")
        seen.add(name)
        entries.append(entry)
        entry_keys.append((n.key, entry))

    name = root.child("name").str(path.stem)
    try:  # a campaign name names directories (rtlab lava render): never a path
        check_name(name, "campaign name")
    except ParamError as e:
        raise root.child("name").error(str(e)) from None
    budgets_path = campaign_budgets(root.child("budgets"), path, budgets)
    return Campaign(
        name=name, path=path.resolve(),
        description=root.child("description").str(""),
        budgets=budgets_path,
        boards=board_list, variants=variant_list, suites=entries, repeat=repeat,
        evidence=None if root.child("evidence").value is None else root.child("evidence").boolean(),
        histogram_ranges=histogram_ranges(path, entry_keys, board_list, variant_list, budgets_path),
    )


def histogram_ranges(path: Path, entries: list[tuple[str, SuiteEntry]], boards: list[Board],
                     variants: list[Variant], budgets_path: Path) -> dict[tuple[str, str, str, str], float]:
    """The histogram range each measurement's budgets need (Budgets.histogram_needs:
    every percentile the gate or the regression verdict judges readable up
    to what a passing run can have there), for the entries that leave the
    range to them. A campaign may ask for more (its own ``histogram_us``,
    ``entries``), never for less: that is refused here, naming the file and
    the key, before anything boots (a percentile censored below its budget
    can neither pass the gate nor show that nothing regressed). A need
    beyond any range the tool keeps (cyclictest: 1,000,000 buckets) gives
    way to the largest need it can hold (a p99 budget under a 10 s max):
    the regression verdict judges a percentile past that range by its share
    of samples past it."""
    from .budgets import load_budgets
    from .policy import load_policy

    if not any(SUITES[e.suite].range_params for _, e in entries) or not budgets_path.exists():
        return {}  # (a missing budget file is named where the run loads it)
    from ..core.config import open_node

    table = load_budgets(budgets_path)
    # the statistics that gate: the file's regression: section, else the
    # lab's (a file without one sets budgets only, as the verdict reads it:
    # rtlab.verdict.against.lab_policy)
    has_policy = open_node(budgets_path).child("regression").value is not None
    policy = load_policy(budgets_path if has_policy or not DEFAULT_BUDGETS.exists() else DEFAULT_BUDGETS)
    out: dict[tuple[str, str, str, str], float] = {}
    for board in boards:
        vs = [load_variants()[HOST_VARIANT]] if board.fixed_kernel else \
            [v for v in variants if board.supports(v.name)]
        gated = policy.statistics_for(board.budget_class)
        for key, entry in entries:
            suite = SUITES[entry.suite]
            if not suite.range_params:
                continue
            raw = {**entry.params, **entry.overrides.get(board.budget_class, {}), **entry.overrides.get(board.name, {})}
            params = entry.params_for(board)
            have = suite.histogram_range_us(params) or 0.0
            given = next((k for k in suite.range_params if k in raw), None)
            for v in vs:
                for load in entry.loads:
                    # the largest need the tool can keep: past a 10 s max
                    # that only catches hangs, a percentile's own budget
                    # still has to be readable (one past the range is
                    # judged by its share)
                    need = next((n for n in table.histogram_needs(board.budget_class, v.name,
                                                                  suite.measurement_names(entry.name), load, gated)
                                 if suite.holds_range(params, n[0])), None)
                    if need is None or have >= need[0]:
                        continue
                    if given is not None:
                        where = next((f"overrides.{o}" for o in (board.name, board.budget_class)
                                      if given in entry.overrides.get(o, {})), "params")
                        raise InputError(path, f"{key}.{where}.{given}: a {have:g} us histogram cannot hold what "
                                               f"{budgets_path.name} asks of board {board.name} "
                                               f"({board.budget_class}), variant {v.name}, load {load}: {need[1]}; "
                                               f"give at least {need[0]:g} us, or leave {given} out (then the "
                                               f"budgets set it)")
                    out[(board.name, v.name, entry.name, load)] = need[0]
    return out


def _warn_unsegmented(path: Path, key: str, entry: SuiteEntry) -> None:
    """A plain cyclictest longer than one checkpoint segment is measured in
    one piece, as asked (its numbers stay comparable with the runs before
    it), but a kill loses all of it: said at load, naming file and key, with
    the suite that keeps what was measured (cyclictest-soak)."""
    soak = SUITES[entry.suite].segmented_by
    if soak is None:
        return
    segment_s = int(SUITES[soak].defaults["checkpoint_s"])
    for where, p in [("params", entry.params), *((f"overrides.{k}", v) for k, v in entry.overrides.items())]:
        seconds = p.get("duration_s")
        if isinstance(seconds, int) and seconds > segment_s:
            log.warning("%s: %s.%s.duration_s: %d s of %s in one piece: a killed run keeps none of it; "
                        "`suite: %s` measures it in checkpointed segments (checkpoint_s, "
                        "default %d s) that a kill keeps", path, key, where, seconds, entry.suite, soak, segment_s)
