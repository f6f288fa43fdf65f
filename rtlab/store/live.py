"""A soak's checkpoints published as they come (#25 item 4, live).

`rtlab run` (unless ``--no-publish``) registers a :class:`LivePublisher` as a
sink of rtlab.soak.live: each checkpoint of a running soak becomes
``soak_progress`` points (rtlab.store.schema.checkpoint_points: the soak so
far and one point per thread), stamped when they are written, so the
dashboard "rtlab · Soak in progress" (dashboards/json/soak.json) draws the
current maximum, the samples and the ETA of a run still going. The run's
own points (stamped with its start) follow at its end as before.

The store is opened at the first checkpoint (a run without a soak never
touches it), each write under a short deadline of its own (a soak is hours:
the publisher's session lives that long); what cannot be written goes to
the spool like any batch, and the end-of-run publish replays it first.
Nothing here can stop or slow the measurement for long: a store found down
is not tried again until the run's own publish.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .publish import PublishReport, Session
from .schema import checkpoint_points, pipeline_kind

#: seconds one checkpoint's write may take (RTLAB_PUBLISH_DEADLINE_S covers a whole publish)
WRITE_DEADLINE_S = 10.0

_UNIT = {"s": 1, "ms": 10 ** 3, "us": 10 ** 6, "u": 10 ** 6, "ns": 10 ** 9, "n": 10 ** 9}


class LivePublisher:
    """A sink for rtlab.soak.live: every checkpoint to the store, or the spool."""

    def __init__(self, progress: Callable[[str], None] = print, commit: Optional[dict] = None,
                 session_factory: Optional[Callable[[], Session]] = None,
                 clock: Callable[[], float] = time.time):
        self.progress = progress
        self.pipeline = pipeline_kind(commit or {})
        self._factory = session_factory or (lambda: Session(progress=progress, deadline_s=WRITE_DEADLINE_S))
        self._clock = clock
        self.session: Optional[Session] = None
        self.points = 0      # written
        self.spooled = 0     # kept in the spool for the run's own publish
        self._told_down = False

    def __call__(self, ev: dict[str, Any]) -> None:
        if self.session is None:
            self.session = self._factory()
        sess = self.session
        precision = sess.config.precision
        stamp = int(self._clock() * _UNIT.get(precision, 1))
        lines = [ln for ln in (p.to_line() for p in checkpoint_points(ev, stamp, self.pipeline)) if ln]
        report = PublishReport(run_id=ev.get("run_id"), target=sess.target)
        if sess.store is not None and hasattr(sess.store, "set_deadline"):
            sess.store.set_deadline(WRITE_DEADLINE_S)  # this write's own, not the session's first
        sess.write_lines([lines], f"{ev.get('run_id') or 'live'}-checkpoint-{ev.get('segments', 0)}", report)
        self.points += report.written
        self.spooled += report.spooled
        for e in sess.take_errors():
            if not self._told_down:
                self.progress(f"live checkpoints: {e} (kept in the spool; the run's publish sends them)")
                self._told_down = True
