"""Where a soak's checkpoints go as they come: sinks the caller registers.

The runner reads the board tests' checkpoint events (rtlab.soak.checkpoint.
checkpoint_event) and hands each one to :func:`checkpoint` with the job's
context (run id, board, variant, repeat); `rtlab run` registers the store's
live publisher (rtlab.store.live) unless ``--no-publish``. A sink that fails
is logged and never stops the run: the checkpoint on disk is the record,
the live view only shows it.
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterator

log = logging.getLogger("rtlab.soak.live")

Sink = Callable[[dict[str, Any]], None]

_SINKS: list[Sink] = []


def checkpoint(event: dict[str, Any], **context: Any) -> None:
    """*event* (a checkpoint) with *context* merged in, to every sink."""
    if event.get("event") != "checkpoint" or not _SINKS:
        return
    ev = {**event, **context}
    for sink in list(_SINKS):
        try:
            sink(ev)
        except Exception as e:  # noqa: BLE001 - a live view never breaks the measurement
            log.warning("live checkpoint sink %r failed: %s: %s", sink, type(e).__name__, e)


@contextlib.contextmanager
def publishing(sink: Sink) -> Iterator[Sink]:
    """*sink* gets every checkpoint while the block runs."""
    _SINKS.append(sink)
    try:
        yield sink
    finally:
        _SINKS.remove(sink)
