"""Publishing runs to the store, with nothing lost.

:func:`publish_run` is what ``rtlab publish`` and the end of ``rtlab run``
call. Order of work:

1. load ``<run_dir>/run.json``;
2. open the configured store, or start/reuse the local influxd when nothing
   is configured; create the database (v1);
3. replay the spool (earlier failures) first;
4. write the run's points in batches (``batch_size``, 5,000 by default);
   a batch the server rejects is spooled and the next one tried; when the
   server is unreachable, this and every later batch go to the spool;
5. tell the user where to look.

Never raises for store trouble (that is what the spool is for); raises
:class:`~rtlab.errors.InputError` for a run directory without a valid
``run.json``.
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional
from urllib.parse import quote

from ..errors import RtlabError
from ..core.model import RunResult
from ..run.results import load_run
from .base import QueryError, StoreUnavailable, WriteRejected
from .config import StoreConfig, state_dir
from .influx import store_from_config
from .local import LocalInfluxd
from .schema import chunks_for_run
from .spool import AUTH_STATUSES, Spool

log = logging.getLogger("rtlab.store")

Progress = Callable[[str], None]

#: one deadline for a whole publish, every request included (RTLAB_PUBLISH_DEADLINE_S)
DEFAULT_DEADLINE_S = 120.0


def publish_deadline_s() -> float:
    try:
        v = float(os.environ.get("RTLAB_PUBLISH_DEADLINE_S") or DEFAULT_DEADLINE_S)
    except ValueError:
        return DEFAULT_DEADLINE_S
    return v if math.isfinite(v) and v > 0 else DEFAULT_DEADLINE_S


@dataclass
class PublishReport:
    run_id: Optional[str] = None
    target: str = ""
    points: int = 0          # points of the run
    written: int = 0         # of them, accepted by the server now
    spooled: int = 0         # of them, kept in the spool
    batches: int = 0
    replayed: int = 0        # earlier spooled points sent now
    spool_left: int = 0      # points still waiting in the spool afterwards
    errors: list[str] = field(default_factory=list)
    local_url: Optional[str] = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Everything of this run is in the store and nothing waits."""
        return self.spooled == 0 and self.spool_left == 0 and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "run_id", "target", "points", "written", "spooled", "batches", "replayed",
            "spool_left", "errors", "local_url", "elapsed_s")} | {"ok": self.ok}


def batched(chunks: Iterable[list[str]], size: int) -> Iterator[list[str]]:
    """Lists of lines regrouped into batches of ``size`` lines (the last one shorter)."""
    buf: list[str] = []
    for chunk in chunks:
        buf.extend(chunk)
        if len(buf) >= size:
            start = 0
            while len(buf) - start >= size:
                yield buf[start:start + size]
                start += size
            buf = buf[start:]
    if buf:
        yield buf


class Session:
    """An opened store plus its spool, reusable across runs (and the bench)."""

    def __init__(self, config: Optional[StoreConfig] = None, config_file=None,
                 store=None, spool: Optional[Spool] = None, progress: Progress = print,
                 start_local: bool = True, deadline_s: Optional[float] = None):
        # a copy: opening the local influxd fills in its URL
        self.config = replace(config) if config else StoreConfig.load(config_file)
        self.progress = progress
        self.local: Optional[LocalInfluxd] = None
        self.local_url: Optional[str] = None
        self.errors: list[str] = []
        self._reported = 0  # errors already handed out in a report
        self.spool = spool or Spool(Path(self.config.spool_dir) if self.config.spool_dir
                                    else state_dir() / "spool")
        self.store = store
        self.down = False
        self.deadline_s = deadline_s or publish_deadline_s()
        self._fresh = True  # the deadline armed here covers the first publish
        self._arm()
        if self.store is None:
            self._open(start_local)

    def _arm(self) -> None:
        """One overall deadline from now for every request to the store (a
        store that dribbles a byte every 2 s would hang a per-read timeout
        for ever); what misses it is spooled."""
        if hasattr(self.store, "set_deadline"):
            self.store.set_deadline(self.deadline_s)

    # -- opening -----------------------------------------------------------
    def _open(self, start_local: bool) -> None:
        cfg = self.config
        if not cfg.configured:
            if not start_local:
                self.down = True
                return
            try:
                self.local = LocalInfluxd(database=cfg.database).start()
            except RtlabError as e:
                self._error(f"local influxd: {e}")
                self.down = True
                return
            self.progress(("using the running" if self.local.reused else "started a")
                          + f" local influxd at {self.local.url} (state {self.local.root})")
            cfg.url, cfg.api = self.local.url, "v1"
            self.local_url = self.local.url
        self.store = store_from_config(cfg)
        self._arm()
        if cfg.api == "v1" and cfg.create_database:
            try:
                self.store.create_database()
            except StoreUnavailable as e:
                self._error(str(e))
                self.down = True
            except QueryError as e:  # e.g. 403 without admin rights: the DB may exist
                log.info("CREATE DATABASE refused (%s); writing anyway", self.config.redact(str(e)))

    def _error(self, msg: str) -> None:
        msg = self.config.redact(msg)
        self.errors.append(msg)
        log.warning("%s", msg)

    def take_errors(self) -> list[str]:
        """Errors not yet handed out (in a report or here)."""
        new = self.errors[self._reported:]
        self._reported = len(self.errors)
        return new

    @property
    def target(self) -> str:
        return self.config.describe()

    # -- work --------------------------------------------------------------
    def replay(self) -> tuple[int, int]:
        """Send the spool. Returns (points sent, points left)."""
        if self.store is None or self.down:
            return 0, self.spool.pending_points()
        res = self.spool.replay(self.store, self.progress)
        for e in res.errors:
            self._error(e)
        if res.skipped:
            self.progress(f"spool not replayed: {res.skipped}")
        if res.unavailable or res.refused:
            self.down = True
        return res.points, res.left_points

    def write_lines(self, chunks: Iterable[list[str]], run_id: str, report: PublishReport) -> None:
        """Send lists of lines in batches; what cannot be sent is spooled."""
        precision = self.config.precision
        for n, batch in enumerate(batched(chunks, self.config.batch_size)):
            report.batches += 1
            report.points += len(batch)
            if self.down or self.store is None:
                self.spool.put(batch, precision, run_id, n)
                report.spooled += len(batch)
                continue
            try:
                report.written += self.store.write(batch)
            except StoreUnavailable as e:
                self._error(f"server unavailable, spooling: {e}")
                self.down = True
                self.spool.put(batch, precision, run_id, n)
                report.spooled += len(batch)
            except WriteRejected as e:
                if e.status in AUTH_STATUSES:
                    # the credentials, not this batch: the rest is spooled untried
                    self._error(f"the store refused the credentials ({e}): run {run_id} spooled "
                                f"(each batch once); fix the store configuration and run "
                                f"rtlab publish --replay")
                    self.down = True
                else:
                    self._error(f"batch {n} of run {run_id} rejected, spooled: {e}")
                self.spool.put(batch, precision, run_id, n)
                report.spooled += len(batch)

    def publish(self, run: RunResult, replay: bool = True, regression: Optional[dict] = None) -> PublishReport:
        t0 = time.monotonic()
        if not self._fresh:  # a session reused for another run: a deadline of its own
            self._arm()
        self._fresh = False
        report = PublishReport(run_id=run.run_id, target=self.target)
        if replay:
            report.replayed, _ = self.replay()
        self.write_lines(chunks_for_run(run, self.config.precision, regression), run.run_id, report)
        report.spool_left = self.spool.pending_points()
        report.errors = self.take_errors()
        report.local_url = self.local_url
        report.elapsed_s = time.monotonic() - t0
        return report

    def how_to_look(self) -> list[str]:
        """Commands showing the data; no credentials, ever."""
        cfg = self.config
        if not cfg.url:
            return []
        from urllib.parse import urlsplit
        u = urlsplit(cfg.url)
        db = cfg.database if cfg.api == "v1" else cfg.bucket.split("/")[0]
        cmd = f"influx -host {u.hostname} -port {u.port or (443 if u.scheme == 'https' else 8086)}"
        if u.scheme == "https":
            cmd += " -ssl"
        cmd += f" -database {db} -precision rfc3339"
        if cfg.user or cfg.password or cfg.token:
            cmd = "INFLUX_USERNAME=... INFLUX_PASSWORD=... " + cmd
        q = quote('SELECT max("max_us") FROM "latency" GROUP BY "board","variant","load","suite"')
        return [f"  influx CLI: {cmd} -execute 'SHOW MEASUREMENTS'",
                f"  HTTP:       {cfg.url}/query?db={quote(db)}&q={q}",
                "  Grafana:    dashboards/README.md (docker-compose with InfluxDB + Grafana)"]


def publish_run(run_dir, progress: Progress = print, config: Optional[StoreConfig] = None,
                config_file=None, store=None, spool: Optional[Spool] = None,
                session: Optional[Session] = None) -> PublishReport:
    """Publish ``<run_dir>/run.json`` (and what its compare.json says of each
    key's regression verdict); points that cannot be written are spooled."""
    from ..core.modelcheck import load_comparison

    run = load_run(run_dir)
    sess = session or Session(config, config_file, store, spool, progress)
    report = sess.publish(run, regression=load_comparison(run_dir))
    summarize(report, progress, sess)
    return report


def summarize(report: PublishReport, progress: Progress, sess: Session, how_to_look: bool = True) -> None:
    """Tell the user what happened (and, once, where to look)."""
    if report.written == report.points and report.points:
        progress(f"published run {report.run_id}: {report.points} points in "
                 f"{report.batches} batch{'es' if report.batches != 1 else ''} to {report.target} "
                 f"({report.elapsed_s:.1f}s)")
    elif report.spooled:
        progress(f"run {report.run_id}: {report.written} of {report.points} points written, "
                 f"{report.spooled} spooled in {sess.spool.dir} "
                 "(sent by `rtlab publish --replay` or the next publish)")
    if report.replayed:
        progress(f"  plus {report.replayed} points from the spool")
    if report.spool_left:
        progress(f"  {report.spool_left} points wait in the spool {sess.spool.dir}")
    for e in report.errors:
        progress(f"  error: {e}")
    if how_to_look and (report.written or report.replayed):
        progress("look at it:")
        for line in sess.how_to_look():
            progress(line)
