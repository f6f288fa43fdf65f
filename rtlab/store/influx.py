"""InfluxDB over plain HTTP (urllib): the 1.x API and the 2.x/3.x write API.

:class:`InfluxV1` — ``POST /write?db=&rp=&precision=`` and ``/query``
(InfluxQL). Works with InfluxDB 1.x (Debian's 1.6.7 included), 1.8+, 2.x
(v1-compatibility API with a DBRP mapping) and 3.x (``/write``, ``/query``).
Credentials go in an ``Authorization: Basic`` header, never in the URL: URLs
end up in access logs and error messages.

:class:`InfluxV2` — ``POST /api/v2/write?org=&bucket=&precision=`` with
``Authorization: Token``. For InfluxDB 2.x, 3.x and 1.8+ (there the token is
``user:password``, the org ``-`` and the bucket ``db/rp``). InfluxQL queries
go to the v1-compatible ``/query`` with the same token (2.x needs a DBRP
mapping for the bucket; 3.x maps a database to its bucket by name).
"""
from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Optional
from urllib.parse import urlencode

from .base import Lines, QueryError, StoreUnavailable, WriteRejected
from .config import StoreConfig

_V2_PRECISION = {"s": "s", "ms": "ms", "us": "us", "ns": "ns", "u": "us", "n": "ns"}


def _body(lines: Lines) -> tuple[bytes, int]:
    if isinstance(lines, list) and all(type(x) is str for x in lines):
        # the publisher's batches: one point per element, nothing to filter
        lines = [x for x in lines if x] if not all(lines) else lines
        return "\n".join(lines).encode(), len(lines)
    if isinstance(lines, bytes):
        text = lines.decode()
    elif isinstance(lines, str):
        text = lines
    else:  # any iterable of lines or Points
        text = "\n".join(x if isinstance(x, str) else (x.to_line() or "") for x in lines)
    n = sum(1 for ln in text.split("\n") if ln and not ln.startswith("#"))
    return text.encode(), n


def _shut(sockets: list) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # a blocked recv() returns at once
        except OSError:
            pass



def network_words(e: BaseException) -> str:
    """A network error in words a person can act on, never a bare fragment
    of the peer's bytes (BadStatusLine's 'HT')."""
    reason = getattr(e, "reason", None)
    if isinstance(e, urllib.error.URLError) and isinstance(reason, BaseException):
        e = reason
    elif isinstance(e, urllib.error.URLError) and reason:
        return str(reason)
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "no answer in time (timed out)"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(e, ConnectionResetError):
        return "the connection was reset by the store"
    if isinstance(e, http.client.RemoteDisconnected):
        return "the store closed the connection without an answer"
    if isinstance(e, http.client.HTTPException):
        return f"the store's answer is not HTTP ({type(e).__name__}: {str(e)[:60]!r})"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {str(e)[:200]}"


class _Handler(urllib.request.HTTPHandler):
    """urllib's HTTP handler, handing each connection's socket to the
    request's watchdog (proxies and the rest of urllib stay as they are)."""

    def __init__(self, sockets: list):
        super().__init__()
        self.sockets = sockets

    def http_open(self, req):
        return self.do_open(_conn_class(http.client.HTTPConnection, self.sockets), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, sockets: list):
        super().__init__()
        self.sockets = sockets

    def https_open(self, req):
        return self.do_open(_conn_class(http.client.HTTPSConnection, self.sockets), req,
                            context=self._context)


def _conn_class(base, sockets: list):
    class Connection(base):
        def connect(self):
            super().connect()
            sockets.append(self.sock)
    return Connection


class _Http:
    """Shared plumbing: one request, errors mapped, secrets redacted."""

    #: monotonic time after which no request is made or waited for (set_deadline)
    deadline: Optional[float] = None
    deadline_s: float = 0.0

    def __init__(self, url: str, timeout_s: float, config: Optional[StoreConfig]):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._config = config or StoreConfig(url=url)
        self._auth: Optional[str] = None

    def _request(self, method: str, path: str, params: dict[str, Any],
                 body: Optional[bytes] = None, content_type: Optional[str] = None
                 ) -> tuple[int, dict[str, str], bytes]:
        query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
        url = f"{self.url}{path}" + (f"?{query}" if query else "")
        req = urllib.request.Request(url, data=body, method=method)
        if self._auth:
            req.add_header("Authorization", self._auth)
        if content_type:
            req.add_header("Content-Type", content_type)
        timeout = self.timeout_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise StoreUnavailable(self._redact(f"{self.url}: {self._deadline_text()}"))
        # the timeout is per socket operation: a store answering a byte every
        # 2 s never hits it. The watchdog shuts the request's sockets at the
        # deadline, which ends any read in progress (one deadline per publish)
        sockets: list[socket.socket] = []
        watchdog = None
        if self.deadline is not None:
            watchdog = threading.Timer(timeout, _shut, (sockets,))
            watchdog.daemon = True
            watchdog.start()
        try:
            opener = urllib.request.build_opener(_Handler(sockets), _HttpsHandler(sockets))
            with opener.open(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            try:
                payload = e.read()
            except Exception:
                payload = b""
            if self._past_deadline():
                raise StoreUnavailable(self._redact(f"{self.url}: {self._deadline_text()}")) from None
            return e.code, dict(e.headers or {}), payload
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError, http.client.HTTPException) as e:
            reason = self._deadline_text() if self._past_deadline() else network_words(e)
            raise StoreUnavailable(self._redact(f"{self.url}: {reason}")) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline - 0.05

    def _deadline_text(self) -> str:
        return f"no complete answer before the publish deadline ({self.deadline_s:g} s, RTLAB_PUBLISH_DEADLINE_S)"

    def set_deadline(self, seconds: Optional[float]) -> None:
        """One deadline for everything from now on (every request of a
        publish: ping, create database, replay, each batch), not per read."""
        self.deadline_s = seconds or 0.0
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def _redact(self, text: str) -> str:
        return self._config.redact(text)

    def _error_text(self, payload: bytes) -> str:
        text = payload.decode(errors="replace").strip()
        try:
            text = json.loads(text).get("error", text) or text
        except (ValueError, AttributeError):
            pass
        return self._redact(str(text)[:500])

    def _check_write(self, status: int, payload: bytes) -> None:
        if status in (200, 204):
            return
        msg = self._error_text(payload)
        if 400 <= status < 500:
            raise WriteRejected(status, msg)
        raise StoreUnavailable(f"{self.url}: HTTP {status}: {msg}")

    def _ping(self, paths=("/ping",)) -> str:
        last = None
        for path in paths:
            status, headers, _ = self._request("GET", path, {})
            if status in (200, 204):
                h = {k.lower(): v for k, v in headers.items()}
                return h.get("x-influxdb-version", "unknown")
            last = status
        raise StoreUnavailable(f"{self.url}: ping answered HTTP {last}")

    def _query(self, q: str, db: Optional[str], rp: Optional[str] = None,
               epoch: Optional[str] = None) -> dict[str, Any]:
        head = q.lstrip().split(None, 1)[0].upper() if q.strip() else ""
        params = {"db": db, "rp": rp, "epoch": epoch}
        if head in ("SELECT", "SHOW") and not _has_into(q):
            status, _, payload = self._request("GET", "/query", dict(params, q=q))
        else:
            status, _, payload = self._request(
                "POST", "/query", params, urlencode({"q": q}).encode(),
                "application/x-www-form-urlencoded")
        if status >= 500:
            raise StoreUnavailable(f"{self.url}: HTTP {status}: {self._error_text(payload)}")
        try:
            result = json.loads(payload.decode() or "{}")
        except ValueError:
            raise QueryError(f"HTTP {status}: not JSON: {self._error_text(payload)}") from None
        if status >= 400 or "error" in result:
            raise QueryError(self._redact(f"{result.get('error', f'HTTP {status}')} (query: {q})"))
        for r in result.get("results", []):
            if "error" in r:
                raise QueryError(self._redact(f"{r['error']} (query: {q})"))
        return result


def _has_into(q: str) -> bool:
    return " into " in f" {q.lower()} "


class InfluxV1(_Http):
    """InfluxDB 1.x HTTP API: ``/write`` (line protocol) and ``/query``."""

    def __init__(self, url: str, database: str = "rtlab", retention_policy: Optional[str] = None,
                 user: Optional[str] = None, password: Optional[str] = None,
                 precision: str = "s", timeout_s: float = 30.0,
                 config: Optional[StoreConfig] = None):
        super().__init__(url, timeout_s, config or StoreConfig(
            url=url, user=user, password=password))
        self.database = database
        self.retention_policy = retention_policy or None
        self.precision = precision
        if user or password:
            cred = f"{user or ''}:{password or ''}".encode()
            self._auth = "Basic " + base64.b64encode(cred).decode()

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> "InfluxV1":
        return cls(cfg.url, cfg.database, cfg.retention_policy, cfg.user, cfg.password,
                   cfg.precision, cfg.timeout_s, cfg)

    def write(self, lines: Lines) -> int:
        body, n = _body(lines)
        if n == 0:
            return 0
        status, _, payload = self._request(
            "POST", "/write",
            {"db": self.database, "rp": self.retention_policy, "precision": self.precision},
            body, "text/plain; charset=utf-8")
        self._check_write(status, payload)
        return n

    def query(self, q: str, epoch: Optional[str] = None) -> dict[str, Any]:
        return self._query(q, self.database, self.retention_policy, epoch)

    def ping(self) -> str:
        return self._ping()

    def create_database(self) -> None:
        """``CREATE DATABASE`` (idempotent). Needs admin rights where auth is on."""
        name = self.database.replace("\\", "\\\\").replace('"', '\\"')
        self._query(f'CREATE DATABASE "{name}"', None)

    def __repr__(self) -> str:
        return f"InfluxV1({self.url!r}, database={self.database!r})"


class InfluxV2(_Http):
    """The 2.x write API (``/api/v2/write``, token auth): InfluxDB 2.x, 3.x, 1.8+."""

    def __init__(self, url: str, bucket: str, org: Optional[str] = None,
                 token: Optional[str] = None, precision: str = "s", timeout_s: float = 30.0,
                 config: Optional[StoreConfig] = None):
        super().__init__(url, timeout_s, config or StoreConfig(url=url, token=token))
        self.bucket = bucket
        self.org = org
        self.precision = precision
        if token:
            self._auth = f"Token {token}"

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> "InfluxV2":
        return cls(cfg.url, cfg.bucket, cfg.org, cfg.token, cfg.precision, cfg.timeout_s, cfg)

    def write(self, lines: Lines) -> int:
        body, n = _body(lines)
        if n == 0:
            return 0
        status, _, payload = self._request(
            "POST", "/api/v2/write",
            {"org": self.org, "bucket": self.bucket,
             "precision": _V2_PRECISION.get(self.precision, self.precision)},
            body, "text/plain; charset=utf-8")
        self._check_write(status, payload)
        return n

    def query(self, q: str, epoch: Optional[str] = None) -> dict[str, Any]:
        # v1-compatible InfluxQL endpoint; "db/rp" buckets split back
        db, _, rp = self.bucket.partition("/")
        return self._query(q, db, rp or None, epoch)

    def ping(self) -> str:
        return self._ping(("/ping", "/health"))

    def create_database(self) -> None:
        """Buckets are created by the server's administrators: nothing to do."""

    def __repr__(self) -> str:
        return f"InfluxV2({self.url!r}, bucket={self.bucket!r})"


def store_from_config(cfg: StoreConfig):
    if not cfg.url:
        raise ValueError("store_from_config needs a URL (start LocalInfluxd first)")
    return InfluxV2.from_config(cfg) if cfg.api == "v2" else InfluxV1.from_config(cfg)
