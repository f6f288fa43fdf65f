"""The runner's side of the sequential verdict: measure until decided.

    measure_until_decided(campaign, run_batch, judge) -> Comparison

The verdict (rtlab.verdict.compare) looks at every key after 5, 10, ... 30
candidate runs (``looks:``) and stops a key at the first look that decides
it. This module spends board time the same way: a first batch of repeats up
to the first look, then a comparison against the baseline, then further
batches of repeats **only** of the board × variant × suite × load
measurements whose key more runs can still decide
(``Comparison.more_runs``), each up to the key's next look, until no key
needs more or the last look is reached. A decided key is never measured
again: its decision stands (the looks it was decided at do not change when
other keys get runs; the error bound is the same Bonferroni-Pocock one).

Each batch is its own ``rtlab run`` (its own run dir and run id: a session
of the verdict's random-effects model, like separate pipelines minutes
apart); the comparison reads every batch's run dir at once.

``run_batch`` and ``judge`` are the caller's (the ``rtlab run`` command
runs a campaign and compares against ``--baseline``/``--baseline-store``/
``--pin``); the scheduling here is plain and unit-tested on its own.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..core.model import MeasurementKey
from ..plan.campaign import Campaign, Job
from .compare import Comparison


@dataclass
class KeyedCampaign(Campaign):
    """A campaign narrowed to some measurement keys: its jobs are the
    board × variant jobs that measure one of them, each with only the suite
    runs (suite @ load) of those keys. Every other setting (budgets,
    parameters, evidence) is the campaign's own, so the runs compare with
    the first batch's: same campaign name, same run parameters."""

    only: frozenset = field(default_factory=frozenset)

    def jobs(self) -> list[Job]:
        out = []
        for job in super().jobs():
            runs = tuple(r for r in job.suites
                         if MeasurementKey(job.board.name, job.variant.name, r.name, r.load) in self.only)
            if runs:
                out.append(dataclasses.replace(job, suites=runs))
        return out


def narrow(campaign: Campaign, keys: Iterable[MeasurementKey], repeat: int) -> Campaign:
    """The jobs that measure *keys* only, *repeat* times each."""
    base = {f.name: getattr(campaign, f.name) for f in dataclasses.fields(Campaign)}
    base["repeat"] = repeat
    return KeyedCampaign(**base, only=frozenset(keys))


def repeats_needed(cmp: Comparison, schedule: Sequence[int]) -> int:
    """Repeats of the next batch: enough for every undecided key to reach
    its next look (keys that lost repeats to INFRA need more than others;
    the extra runs of the rest count at their look after). 0: none needed."""
    need = 0
    for kc in cmp.keys:
        if kc.key not in cmp.more_runs:
            continue
        nxt = next((n for n in schedule if n > kc.n_candidate), None)
        if nxt is not None:
            need = max(need, nxt - kc.n_candidate)
    return need


def key_labels(keys: Iterable[MeasurementKey]) -> list[str]:
    return sorted(k.label() for k in keys)


def measure_until_decided(campaign: Campaign, schedule: Sequence[int],
                          run_batch: Callable[[Campaign], Path],
                          judge: Callable[[list[Path]], Comparison],
                          progress: Callable[[str], None] = print) -> tuple[Comparison, list[Path]]:
    """Batches of repeats until every key is decided or at its last look.

    ``run_batch(campaign)`` runs one batch and returns its run dir;
    ``judge(run_dirs)`` compares every batch so far with the baseline.
    Stops as well when a batch brought no new valid run to any key that
    needed one (the lab lost every repeat: INFRA, not a reason to loop)."""
    batch: Campaign = dataclasses.replace(campaign, repeat=schedule[0])  # the first: every job
    only: "set[MeasurementKey] | None" = None  # the keys the batch measures (None: all)
    before: dict[MeasurementKey, int] = {}
    dirs: list[Path] = []
    log: list[dict] = []
    while True:
        run_dir = Path(run_batch(batch))
        dirs.append(run_dir)
        cmp = judge(list(dirs))
        log.append({"run_dir": str(run_dir), "run_id": run_dir.name, "repeats": batch.repeat,
                    "keys": key_labels(only if only is not None else [k.key for k in cmp.keys])})
        more = cmp.more_runs
        if not more:
            break
        if only is not None and not _progressed(cmp, before, more):
            progress(f"until decided: batch {len(log)} added no valid run to {', '.join(key_labels(more))}: "
                     f"stopping (the lab lost the repeats: INFRA)")
            break
        need = repeats_needed(cmp, schedule)
        if need <= 0:
            break
        before = {kc.key: kc.n_candidate for kc in cmp.keys}
        only = set(more)
        progress(f"until decided: {len(cmp.keys) - len(more)} of {len(cmp.keys)} keys need no more runs; "
                 f"{need} more repeats of {', '.join(key_labels(more))}")
        batch = narrow(campaign, only, need)
    cmp.batches = log
    return cmp, dirs


def _progressed(cmp: Comparison, before: dict, more: list[MeasurementKey]) -> bool:
    now = {kc.key: kc.n_candidate for kc in cmp.keys}
    return any(now.get(k, 0) > before.get(k, 0) for k in more)
