"""The store protocol: what rtlab needs from a time-series database.

Three calls, nothing else::

    store.write(lines)   # line protocol; returns the number of points sent
    store.query(q)       # InfluxQL; returns the parsed JSON ("results": [...])
    store.ping()         # the server version; raises StoreUnavailable if down

Errors tell the publisher what to do with the points:

- :class:`StoreUnavailable` — cannot reach the server, timeout, 5xx: spool
  this batch *and the rest* (no point in trying every batch against a server
  that is down);
- :class:`WriteRejected` — the server answered 4xx (bad credentials, unknown
  database, field type conflict): spool this batch, go on with the next one.

Messages never contain credentials (implementations redact them).
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol, Union, runtime_checkable

from ..errors import RtlabError


class StoreError(RtlabError):
    """Base of store errors."""


class StoreUnavailable(StoreError):
    """The server cannot be reached or failed (connection, timeout, 5xx)."""


class WriteRejected(StoreError):
    """The server refused the request (4xx); retrying unchanged will not help
    until the configuration (or the data) is fixed."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(f"HTTP {status}: {message}")


class QueryError(StoreError):
    """An InfluxQL statement returned an error."""


Lines = Union[str, bytes, Iterable[str]]


@runtime_checkable
class Store(Protocol):
    """A time-series store rtlab publishes to."""

    #: "s", "ms", "us" or "ns": the unit of the timestamps handed to write()
    precision: str

    def write(self, lines: Lines) -> int:
        """Send points (line protocol). Returns the number of points sent."""

    def query(self, q: str) -> dict[str, Any]:
        """Run InfluxQL; raises QueryError on a statement error."""

    def ping(self) -> str:
        """The server version; raises StoreUnavailable when it is down."""


def series(result: dict[str, Any]) -> list[dict[str, Any]]:
    """All series of all statements of a /query answer, flattened."""
    out: list[dict[str, Any]] = []
    for r in result.get("results", []):
        out.extend(r.get("series", []) or [])
    return out


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row of every series as a dict (column -> value, tags merged in)."""
    out = []
    for s in series(result):
        tags = s.get("tags") or {}
        for v in s.get("values", []) or []:
            row = dict(tags)
            row.update(zip(s["columns"], v))
            out.append(row)
    return out
