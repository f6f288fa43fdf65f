"""Latency budgets as data: budget class × variant × suite × load → limits.

    budgets:
      <budget class>:          # a board's budget_class (env/<board>.yaml)
        <variant | "*">:
          <suite | "*">:
            <load | "*">:
              max_us: 100                     # every sample must stay below
              percentiles_us: {"99.9": 50}    # nearest-rank percentile below

    unbudgeted:               # suites measured without a budget ON PURPOSE
      <budget class | "*">: [<suite>, ...]   # ("*": every suite of the class)
    regression: {...}          # the regression verdict's policy (rtlab/verdict/compare.py)
    host_noise:               # when a breach is the host's, not the kernel's (rtlab/core/hostnoise.py)
      steal_infra_ms: 20      # one CPU stolen this long within 0.25 s: a breached max it explains is INFRA

A measurement that has no budget and is not listed under ``unbudgeted`` is
an error naming its key (INFRA, exit 2): a typo in a budget class must not
turn the gate green. Limits are finite numbers (``.nan``/``.inf`` rejected).

The most specific entry wins: an exact variant beats "*", then an exact
suite, then an exact load. A budget is a strict upper bound: a sample at the
budget already breaks it, which matches "share of samples at or above".
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Optional

from ..core.config import open_node
from ..core.hostnoise import DEFAULT_STEAL_INFRA_MS
from ..core.model import PERCENTILES, Budget
from .policy import policy_from_node

WILDCARD = "*"


class Budgets:
    def __init__(self, table: dict, path: Path, unbudgeted: Optional[dict] = None,
                 steal_infra_ms: float = DEFAULT_STEAL_INFRA_MS):
        self.table = table
        self.path = Path(path)
        #: hypervisor steal (ms, one CPU, within hostnoise.BURST_WINDOW_S) that makes a breach INFRA
        self.steal_infra_ms = steal_infra_ms
        #: budget class (or "*") -> suites measured without a budget on purpose
        self.unbudgeted_suites: dict[str, set[str]] = unbudgeted or {}

    def unbudgeted(self, budget_class: str, suite: str) -> bool:
        return any(suite in self.unbudgeted_suites.get(c, ()) or WILDCARD in self.unbudgeted_suites.get(c, ())
                   for c in (budget_class, WILDCARD))

    def lookup(self, budget_class: str, variant: str, suite: str, load: str) -> Optional[Budget]:
        by_variant = self.table.get(budget_class)
        if not by_variant:
            return None
        # exact before wildcard at each level, earlier levels weigh more
        for v, s, l in itertools.product((variant, WILDCARD), (suite, WILDCARD), (load, WILDCARD)):
            b = by_variant.get(v, {}).get(s, {}).get(l)
            if b is not None:
                return b
        return None

    def histogram_needs(self, budget_class: str, variant: str, names: list[str], load: str,
                        gated: tuple[str, ...]) -> list[tuple[float, str]]:
        """The histogram ranges (us) a measurement's budgets need, and why,
        the largest first: every percentile the gate judges (its
        ``percentiles_us``) and every percentile the regression verdict
        gates (*gated*, e.g. p99, p99.9) must be readable up to the most a
        passing run can have there: its own budget, a higher percentile's,
        or the max's, the smallest of them (:func:`percentile_bound`). Where
        the tool cannot keep the largest (a 10 s max that only catches
        hangs), the next ones still keep the percentiles with budgets of
        their own readable. Empty: nothing needs a range (no budget, or only
        a max with no percentile gated, as on qemu-tcg)."""
        needs: list[tuple[float, str]] = []
        for name in names:
            budget = self.lookup(budget_class, variant, name, load)
            if budget is None:
                continue
            for p in sorted({*budget.percentiles_us, *(g[1:] for g in gated if g != "max")}, key=float):
                bound = percentile_bound(budget, p)
                if bound is not None:
                    needs.append((bound[0], f"p{p} of {name} up to {bound[1]} {bound[0]:g} us ({budget.source})"))
        return sorted(needs, key=lambda n: -n[0])

    def check_covers(self, jobs) -> None:
        """Before anything boots: every (board, variant, suite, load) the
        campaign's *jobs* will measure has a budget or is unbudgeted on
        purpose, and no variant or load key of the file is a typo. Otherwise
        an InputError naming this file and the key (exit 2), not an INFRA
        "no budget" for every job after all of them have measured."""
        from ..errors import InputError
        from ..loads import LOADS
        from ..targets.variants import load_variants

        variants = set(load_variants())
        for cls, by_variant in self.table.items():
            for v, by_suite in by_variant.items():
                if v != WILDCARD and v not in variants:
                    raise InputError(self.path, f"budgets.{cls}.{v}: unknown variant (known: "
                                                f"{', '.join(sorted(variants))}, or \"*\")")
                for s, by_load in by_suite.items():
                    for ld in by_load:
                        if ld != WILDCARD and ld not in LOADS:
                            raise InputError(self.path, f"budgets.{cls}.{v}.{s}.{ld}: unknown load (known: "
                                                        f"{', '.join(sorted(LOADS))}, or \"*\")")
        missing = self.uncovered(jobs)
        if missing:
            raise InputError(self.path, missing[0])

    def uncovered(self, jobs) -> list[str]:
        """One message per (budget class, variant, suite, load) the *jobs*
        will measure with neither a budget nor an ``unbudgeted:`` entry,
        each naming the key to add (``rtlab doctor`` lists them all)."""
        from ..suites import METRICS, SUITES

        seen = set()
        missing = []
        for job in jobs:
            cls = job.board.budget_class
            for run in job.suites:
                key = (cls, job.variant.name, run.name, run.load)
                if key in seen:
                    continue
                seen.add(key)
                suite = SUITES.get(run.suite)
                if suite is not None and suite.result_kind == METRICS:
                    continue  # a whole-run number: shown, never budgeted (rtlab.judge.gate)
                # the names the gate judges: suites with several outputs are
                # budgeted per output (<name>-irq, <name>-thread); any key
                # merely starting with <name>- is not one of them
                names = suite.measurement_names(run.name) if suite is not None else [run.name]
                for name in names:
                    if self.lookup(cls, job.variant.name, name, run.load) is not None \
                            or self.unbudgeted(cls, name):
                        continue
                    where = (f"budgets.{cls}" if cls not in self.table
                             else f"budgets.{cls}.{job.variant.name}.{name}.{run.load}")
                    missing.append(f"{where}: no budget for board {job.board.name} ({cls}), variant "
                                   f"{job.variant.name}, suite {name}, load {run.load}: add one, "
                                   f"or list the suite under unbudgeted: (found before any boot)")
        return missing


def percentile_bound(budget: Budget, p: str) -> Optional[tuple[float, str]]:
    """What percentile *p* ("99.9") of a run that keeps *budget* is below:
    its own limit, a higher percentile's (p99 <= p99.9) or the max's, the
    smallest; with which (``percentiles_us.99.9``, ``max_us``). None: the
    budget bounds it nowhere."""
    bounds = [(v, f"percentiles_us.{q}") for q, v in budget.percentiles_us.items() if float(q) >= float(p)]
    if budget.max_us is not None:
        bounds.append((budget.max_us, "max_us"))
    return min(bounds) if bounds else None


def load_budgets(path) -> Budgets:
    path = Path(path)
    root = open_node(path).only(["budgets", "unbudgeted", "regression", "host_noise"])
    table: dict = {}
    for cls, cnode in root.req("budgets").items():
        for variant, vnode in cnode.items():
            for suite, snode in vnode.items():
                for load, lnode in snode.items():
                    lnode.only(["max_us", "percentiles_us"])
                    max_us = lnode.child("max_us")
                    pct = {}
                    for p, pnode in lnode.child("percentiles_us").items():
                        if str(p) not in PERCENTILES:
                            raise pnode.error(f"unknown percentile (known: {', '.join(PERCENTILES)})")
                        pct[str(p)] = pnode.number(positive=True)
                    if max_us.value is None and not pct:
                        raise lnode.error("a budget needs max_us or percentiles_us")
                    budget = Budget(
                        max_us=None if max_us.value is None else max_us.number(positive=True),
                        percentiles_us=pct,
                        source=f"{path.name}: {cls}.{variant}.{suite}.{load}")
                    table.setdefault(str(cls), {}).setdefault(str(variant), {}) \
                        .setdefault(str(suite), {})[str(load)] = budget
    unbudgeted = {str(cls): set(n.str_list()) for cls, n in root.child("unbudgeted").items()}
    if root.child("regression").value is not None:  # checked here: a bad policy fails before any boot
        policy_from_node(root.child("regression"), path)
    noise = root.child("host_noise")
    steal_ms = DEFAULT_STEAL_INFRA_MS
    if noise.value is not None:
        noise.only(["steal_infra_ms"])
        node = noise.child("steal_infra_ms")
        if node.value is not None:
            steal_ms = node.number(positive=True)
            if steal_ms > 60_000:  # a minute of steal explains anything: that is no gate
                raise node.error("must be at most 60000 ms")
    return Budgets(table, path, unbudgeted, steal_infra_ms=steal_ms)
