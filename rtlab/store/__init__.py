"""rtlab's result store: every result in InfluxDB.

- :mod:`.base` — the store protocol (``write``, ``query``, ``ping``) and errors;
- :mod:`.influx` — InfluxDB over plain HTTP: 1.x ``/write``+``/query``,
  2.x/3.x ``/api/v2/write``;
- :mod:`.local` — :class:`LocalInfluxd`, Debian's influxd on loopback;
- :mod:`.config` — :class:`StoreConfig` from env/``store.yaml``, secrets redacted;
- :mod:`.schema` — a RunResult as points (see ``dashboards/SCHEMA.md``);
- :mod:`.spool` — points not written yet, on disk;
- :mod:`.publish` — :func:`publish_run`, used by ``rtlab publish`` and ``rtlab run``.
"""
from .base import QueryError, Store, StoreError, StoreUnavailable, WriteRejected, rows, series
from .config import StoreConfig, state_dir
from .influx import InfluxV1, InfluxV2, store_from_config
from .lineproto import Point
from .local import LocalInfluxd, LocalInfluxdError
from .publish import PublishReport, Session, load_run, publish_run
from .schema import MEASUREMENTS, chunks_for_run, lines_for_run, points_for_run
from .spool import Spool

__all__ = [
    "Store", "StoreError", "StoreUnavailable", "WriteRejected", "QueryError", "rows", "series",
    "StoreConfig", "state_dir", "InfluxV1", "InfluxV2", "store_from_config", "Point",
    "LocalInfluxd", "LocalInfluxdError", "PublishReport", "Session", "load_run", "publish_run",
    "MEASUREMENTS", "chunks_for_run", "lines_for_run", "points_for_run", "Spool",
]
