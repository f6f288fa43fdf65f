"""The regression verdict's policy: the ``regression:`` section of a budget
file (budgets/README.md), typed and ranged at load. It sits below both the
budgets (which check it when they load) and the verdict (rtlab.verdict.compare)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import Node, open_node, shown

#: the run-level statistics a policy can name (rtlab.verdict.stats computes them)
RUN_STATISTICS = ("p50", "p99", "p99.9", "p99.99", "max")

#: where a candidate's baseline comes from (issue #23 item 3): ``store``, the
#: branch's earlier runs (or a pin) with the between-session spread
#: estimated; ``paired``, the baseline commit booted in the same job,
#: alternately with the candidate (`rtlab paired`), which no session effect
#: can fake but which costs a boot per run and needs a board that boots
#: built kernels
BASELINE_METHODS = ("store", "paired")

#: a key that cannot see a doubling is not gated (BLIND, exit 3) and flagged to the lab
DEFAULT_DETECTABLE_LIMIT = 1.0


@dataclass(frozen=True)
class MinEffect:
    """Below this nothing gates: both must be exceeded."""

    relative: float = 0.20   # +20 %
    abs_us: float = 2.0      # and +2 us


@dataclass(frozen=True)
class Policy:
    """How the verdict is reached; from the budget file's ``regression:``.

    ``statistics``: the run-level statistics that gate (p50, p99, p99.9,
    p99.99, max); the others are shown. ``alpha``: the campaign-wide false
    alarm rate. ``min_runs``: valid runs per side below which a key is
    undecided. ``beta``, ``looks``: the sequential verdict's (rtlab.verdict.compare).
    ``trim`` (read, no longer used by the sequential verdict): Yuen trimming of each side (0.2 drops the most
    extreme run of five at each end); 0 by default: at 5 runs a side the
    trimmed test keeps 3, and its power for a doubled p99 fell from 96 % to
    38 % in simulation (30 keys, log sd 0.15), while the plain Welch test
    already refuses to call one wild run a shift (its variance explodes)."""

    statistics: tuple[str, ...] = ("p99", "p99.9")
    alpha: float = 0.05
    #: the error of NO-REGRESSION: a regression of the minimum effect shown
    #: as none (per statistic, over all looks)
    beta: float = 0.05
    min_runs: int = 3
    trim: float = 0.0
    #: candidate run counts at which the sequential verdict looks; the last
    #: is the most a key is ever measured (then UNDECIDED, exit 2)
    looks: tuple[int, ...] = (5, 10, 15, 20, 25, 30)
    min_effect: dict[str, MinEffect] = field(default_factory=dict)
    source: str = "built-in defaults"
    #: budget class -> the statistics that gate there, where they differ
    #: from ``statistics`` (qemu-tcg gates on the max: under TCG a
    #: kernel-side stall shows in the tail only, far beyond the histogram)
    class_statistics: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: (budget class, statistic) -> its own minimum effect, where a class
    #: sets one (qemu-tcg's max: the host's stalls reach tens of ms there)
    statistic_effect: dict[tuple[str, str], MinEffect] = field(default_factory=dict)
    #: budget class -> its baseline method (BASELINE_METHODS; "*" every
    #: other class; a class named nowhere: ``store``)
    baseline: dict[str, str] = field(default_factory=dict)
    #: budget class -> the detectable effect (ratio - 1) above which a key
    #: is not gated ("*" every other class): its baseline is too noisy or
    #: too small for a useful verdict; it ends BLIND (exit 3), never
    #: NO-REGRESSION, with the cure named (rtlab.verdict.cure)
    detectable_limit: dict[str, float] = field(default_factory=dict)

    def limit_for(self, budget_class: str) -> float:
        return self.detectable_limit.get(budget_class, self.detectable_limit.get("*", DEFAULT_DETECTABLE_LIMIT))

    def baseline_for(self, budget_class: str) -> str:
        return self.baseline.get(budget_class) or self.baseline.get("*") or "store"

    def effect_for(self, budget_class: str, statistic: str = "") -> MinEffect:
        for cls in (budget_class, "*"):
            if (cls, statistic) in self.statistic_effect:
                return self.statistic_effect[(cls, statistic)]
            if cls in self.min_effect:
                return self.min_effect[cls]
        return MinEffect()

    def schedule(self) -> tuple[int, ...]:
        """The looks this policy takes (at least min_runs runs each)."""
        return tuple(n for n in self.looks if n >= self.min_runs) or (self.min_runs,)

    def statistics_for(self, budget_class: str) -> tuple[str, ...]:
        return self.class_statistics.get(budget_class) or self.statistics

    def to_json(self) -> dict[str, Any]:
        return {"statistics": list(self.statistics), "alpha": self.alpha, "beta": self.beta,
                "looks": list(self.looks), "min_runs": self.min_runs,
                "class_statistics": {k: list(v) for k, v in self.class_statistics.items()},
                "trim": self.trim, "source": self.source, "baseline": dict(self.baseline),
                "detectable_limit": dict(self.detectable_limit),
                "min_effect": {k: {"relative": v.relative, "abs_us": v.abs_us}
                               for k, v in self.min_effect.items()},
                "statistic_min_effect": {f"{c}/{st}": {"relative": v.relative, "abs_us": v.abs_us}
                                         for (c, st), v in self.statistic_effect.items()}}


def policy_from_node(node: Node, path: Path) -> Policy:
    """``regression:`` of a budget file, every value typed and ranged."""
    node.only(["statistics", "alpha", "beta", "looks", "min_runs", "trim", "min_effect", "baseline",
               "detectable_limit"])
    d = Policy()

    def stat_list(n: Node) -> tuple[str, ...]:
        st = tuple(n.str_list(list(d.statistics)))
        for s in st:
            if s not in RUN_STATISTICS:
                raise n.error(f"unknown statistic {shown(s)} (known: {', '.join(RUN_STATISTICS)})")
        if not st:
            raise n.error("needs at least one statistic")
        return st

    # a list (every class) or a mapping budget class -> list, "*" the default
    snode = node.child("statistics")
    by_class: dict[str, tuple[str, ...]] = {}
    if isinstance(snode.value, dict):
        for cls, cnode in snode.items():
            by_class[str(cls)] = stat_list(cnode)
        st = by_class.pop("*", d.statistics)
    else:
        st = stat_list(snode)
    alpha = node.child("alpha").number(d.alpha, positive=True)
    if not alpha < 0.5:
        raise node.child("alpha").error(f"must be below 0.5, got {shown(alpha)}")
    min_runs = node.child("min_runs").integer(d.min_runs, minimum=2)
    beta = node.child("beta").number(d.beta, positive=True)
    if not beta < 0.5:
        raise node.child("beta").error(f"must be below 0.5, got {shown(beta)}")
    looks = d.looks
    if node.child("looks").value is not None:
        ln = node.child("looks")
        if not isinstance(ln.value, list) or not ln.value:
            raise ln.error("must be a non-empty list of candidate run counts")
        for i, v in enumerate(ln.value):
            if not isinstance(v, int) or isinstance(v, bool) or v < 2:
                raise ln.error(f"item {i}: must be an integer >= 2, got {shown(v)}")
        looks = tuple(ln.value)
        if list(looks) != sorted(set(looks)) or looks[-1] > 200:
            raise ln.error(f"must increase, at most 200 runs: got {list(looks)}")
    trim = node.child("trim").number(d.trim) if node.child("trim").value is not None else d.trim
    if not 0 <= trim < 0.5:
        raise node.child("trim").error(f"must be in [0, 0.5), got {shown(trim)}")
    def effect(enode: Node, default: MinEffect) -> MinEffect:
        rel = enode.child("relative")
        ab = enode.child("abs_us")
        e = MinEffect(relative=rel.number(default.relative) if rel.value is not None else default.relative,
                      abs_us=ab.number(default.abs_us) if ab.value is not None else default.abs_us)
        if e.relative < 0 or e.abs_us < 0:
            raise enode.error("minimum effects must not be negative")
        return e

    effects, stat_effects = {}, {}
    for cls, enode in node.child("min_effect").items():
        # relative, abs_us; and optionally per statistic its own (in the
        # statistic's unit, us), defaulting to the class's
        enode.only(["relative", "abs_us", *RUN_STATISTICS])
        effects[str(cls)] = effect(enode, MinEffect())
        for name in RUN_STATISTICS:
            if enode.child(name).value is not None:
                enode.child(name).only(["relative", "abs_us"])
                stat_effects[(str(cls), name)] = effect(enode.child(name), effects[str(cls)])
    # budget class -> store | paired
    baseline: dict[str, str] = {}
    for cls, bnode in node.child("baseline").items():
        if bnode.value not in BASELINE_METHODS:
            raise bnode.error(f"must be one of {', '.join(BASELINE_METHODS)}, got {shown(bnode.value)}")
        baseline[str(cls)] = str(bnode.value)
    # budget class -> the detectable effect above which a key is flagged
    limits: dict[str, float] = {}
    lnode = node.child("detectable_limit")
    if lnode.value is not None and not isinstance(lnode.value, dict):
        limits["*"] = lnode.number(DEFAULT_DETECTABLE_LIMIT, positive=True)
    else:
        for cls, cnode in lnode.items():
            limits[str(cls)] = cnode.number(DEFAULT_DETECTABLE_LIMIT, positive=True)
    for cls, v in limits.items():
        if not v <= 1000:
            raise (lnode.child(cls) if isinstance(lnode.value, dict) else lnode).error(
                f"must be at most 1000 (a ratio - 1), got {shown(v)}")
    return Policy(statistics=st, alpha=float(alpha), beta=float(beta), looks=looks, detectable_limit=limits,
                  min_runs=min_runs, trim=float(trim), baseline=baseline,
                  min_effect=effects, class_statistics=by_class, statistic_effect=stat_effects,
                  source=f"{Path(path).name}: regression")


def load_policy(budgets_path) -> Policy:
    """The ``regression:`` section of a budget file (defaults without one)."""
    root = open_node(budgets_path)
    node = root.child("regression")
    if node.value is None:
        return Policy(source=f"{Path(budgets_path).name}: built-in defaults (no regression: section)")
    return policy_from_node(node, budgets_path)
