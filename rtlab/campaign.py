"""Campaigns: which boards × variants × suites × loads a run covers.

A campaign file is small and declarative (like a tuxrun device/test list);
the runner turns it into jobs (one per board × variant), each a list of
suite runs (one per suite × load).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import ROOT
from .boards import Board, find_board
from .config import Node, format_cpulist, open_node, parse_cpulist
from .errors import InputError
from .loads import LOADS
from .suites import SUITES, SuiteRun
from .variants import HOST_VARIANT, Variant, load_variants

CAMPAIGN_DIR = ROOT / "campaigns"
DEFAULT_CAMPAIGN = CAMPAIGN_DIR / "default.yaml"


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

    @property
    def id(self) -> str:
        return f"{self.board.name}/{self.variant.name}"


@dataclass
class Campaign:
    name: str
    path: Path
    description: str
    budgets: Path
    boards: list[Board]
    variants: list[Variant]
    suites: list[SuiteEntry]

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
        return tuple(pinned_cpus(cpus))

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
                        runs.append(SuiteRun(
                            id=f"{entry.name}@{load}", name=entry.name, suite=entry.suite,
                            load=load, params=params,
                            cpus=self.measured_cpus(board, variant, entry)))
                jobs.append(Job(board=board, variant=variant, suites=tuple(runs)))
        return jobs


def pinned_cpus(value) -> list[int]:
    """A campaign's explicit CPU list: [2, 3], 2 or "2-3" (kernel cpulist)."""
    if isinstance(value, bool):
        raise ValueError("must be auto, all, a CPU number, a list of them or a cpulist")
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        try:
            return parse_cpulist(value)
        except ValueError:
            raise ValueError("is not a cpulist (e.g. 2 or 2-3,5)") from None
    if isinstance(value, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in value):
        return sorted(set(value))
    raise ValueError("must be auto, all, a CPU number, a list of them or a cpulist")


def _check_pinned_cpus(node: Node, boards: list[Board]) -> None:
    """A suite pinned to CPUs every board of the campaign must have (the
    vendor reports pin: `taskset -c 2 cyclictest ...`)."""
    if node.value in (None, "auto", "all"):
        return
    try:
        cpus = pinned_cpus(node.value)
    except ValueError as e:
        raise node.error(f"{e}, got {node.value!r}") from None
    if not cpus or cpus[0] < 0:
        raise node.error(f"no valid CPU in {node.value!r}")
    for b in boards:
        missing = [c for c in cpus if c >= b.cpus]
        if missing:
            raise node.error(f"CPU {format_cpulist(missing)} does not exist on board {b.name} "
                             f"({b.cpus} CPU{'s' * (b.cpus != 1)}: 0-{b.cpus - 1})")


def load_campaign(path: Optional[Path] = None, *, boards: Optional[list[str]] = None,
                  variants: Optional[list[str]] = None) -> Campaign:
    """Load a campaign; `boards`/`variants` narrow it (command-line filters)."""
    path = Path(path or DEFAULT_CAMPAIGN)
    if not path.exists() and (CAMPAIGN_DIR / f"{path}.yaml").exists():
        path = CAMPAIGN_DIR / f"{path}.yaml"  # a preset by name
    root = open_node(path).only(["name", "description", "budgets", "boards", "variants", "suites"])
    all_variants = load_variants()

    board_names = boards or root.req("boards").str_list()
    board_list = []
    for b in board_names:
        try:
            board_list.append(find_board(b))
        except InputError as e:
            raise InputError(path, f"boards: {e}") from None

    vnode = root.child("variants")
    vnames = variants or (list(all_variants) if vnode.value in (None, "all") else vnode.str_list())
    for v in vnames:
        if v not in all_variants:
            raise InputError(path, f"variants: unknown variant {v!r} "
                                   f"(known: {', '.join(sorted(all_variants))})")
    variant_list = [all_variants[v] for v in vnames]

    entries = []
    snode = root.req("suites")
    if not isinstance(snode.value, list) or not snode.value:
        raise snode.error("must be a non-empty list of suites")
    seen = set()
    for i, raw in enumerate(snode.value):
        n = Node(path, raw, f"suites[{i}]").only(["name", "suite", "loads", "params", "overrides"])
        suite = n.child("suite").str("") or n.req("name").str()
        name = n.child("name").str(suite)
        if suite not in SUITES:
            raise n.child("suite").error(f"unknown suite {suite!r} (known: {', '.join(sorted(SUITES))})")
        loads = tuple(n.child("loads").str_list(["idle"]))
        for load in loads:
            if load not in LOADS:
                raise n.child("loads").error(f"unknown load {load!r} (known: {', '.join(sorted(LOADS))})")
        params = dict(n.child("params").mapping())
        overrides = {k: dict(v.mapping()) for k, v in n.child("overrides").items()}
        for where, p in [("params", params), *((f"overrides.{k}", v) for k, v in overrides.items())]:
            try:
                SUITES[suite].params({k: v for k, v in p.items() if k != "cpus"})
            except KeyError as e:
                raise n.child(where.split(".")[0]).error(
                    f"unknown parameter(s) {e.args[0]} for suite {suite} "
                    f"(known: {', '.join(sorted(SUITES[suite].defaults))}, cpus)") from None
        _check_pinned_cpus(n.child("params").child("cpus"), board_list)
        if name in seen:
            raise n.child("name").error(f"duplicate suite name {name!r}")
        seen.add(name)
        entries.append(SuiteEntry(name=name, suite=suite, loads=loads, params=params, overrides=overrides))

    budgets = root.child("budgets").str("../budgets/default.yaml")
    return Campaign(
        name=root.child("name").str(path.stem), path=path.resolve(),
        description=root.child("description").str(""),
        budgets=(path.parent / budgets).resolve(),
        boards=board_list, variants=variant_list, suites=entries,
    )
