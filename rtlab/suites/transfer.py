"""Bulk data off the console: raw files come home over a faster path where
the board has one, the serial console keeps control.

A TCG serial console carries ~19 kB/s; a 20,000-row cyclictest histogram
takes seconds over it. Two faster paths, each checked against the board's
own ``wc -c`` and ``sha256sum`` (read over the console), falling back to the
console (gzip + base64) on any doubt, so a raw file is never lost nor
altered by the faster path:

* :class:`TcpChannel` (QEMU boards, user networking): the host listens on a
  loopback port, the board sends the file gzip'd with ``nc`` to the host's address
  as the guest sees it (10.0.2.2: QEMU's slirp maps it to the host's
  loopback). No ssh server is needed in the board's busybox image.
* :class:`LocalChannel` (the local board): the board's files are on this
  machine already; they are read directly.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import shlex
import socket
import threading
import time
from pathlib import Path
from typing import Any, Optional

log = logging.getLogger("rtlab.board")

#: smaller files are not worth a second channel
BULK_MIN_BYTES = 4096
#: seconds the board's nc may take to reach the host
CONNECT_TIMEOUT_S = 5


class Channel:
    """How a file of *size* bytes at *path* on the board reaches the host,
    or None (the caller falls back to the console)."""

    name = "console"

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        raise NotImplementedError

    def push(self, sh: Any, path: str, data: bytes, timeout: float = 30.0) -> bool:
        """Put *data* at *path* on the board (its directory exists): True when
        the board's sha256sum of it is the host's (False: use the console)."""
        return False


def _digest(out: list[str]) -> Optional[str]:
    """The digest of `sha256sum FILE`'s output line (the last one that has one)."""
    for line in reversed(out or []):
        words = line.split()
        if words and len(words[0]) == 64 and all(c in "0123456789abcdef" for c in words[0]):
            return words[0]
    return None


def board_sha256(sh: Any, path: str) -> Optional[str]:
    out, rc = sh.run(f"sha256sum {shlex.quote(path)}")
    return _digest(out) if rc == 0 else None


def _verified(path: str, size: int, data: Optional[bytes], digest: Optional[str], how: str) -> Optional[bytes]:
    if data is None:
        return None
    if len(data) != size:
        log.warning("%s: %s brought %d bytes, the board has %d: falling back to the console",
                    path, how, len(data), size)
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        log.warning("%s: %s brought other bytes than the board has: falling back to the console", path, how)
        return None
    return data


class TcpChannel(Channel):
    """The board connects to a one-shot listener on the host and sends the file."""

    name = "tcp"

    def __init__(self, host_addr: str = "10.0.2.2", bind: str = "127.0.0.1"):
        self.host_addr = host_addr  # the host as the board reaches it
        self.bind = bind            # where the host listens

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        got = bytearray()
        with socket.socket() as srv:
            srv.bind((self.bind, 0))
            srv.listen(1)
            srv.settimeout(timeout)
            port = srv.getsockname()[1]

            def receive() -> None:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(timeout)
                    try:
                        while True:  # gzip's stream, to the end (nc closes when the board's file is sent)
                            chunk = conn.recv(1 << 16)
                            if not chunk:
                                break
                            got.extend(chunk)
                    except OSError:
                        pass

            t = threading.Thread(target=receive, daemon=True)
            t.start()
            # one console round trip: the board's digest, then the file gzip'd
            # (a TCG board's user network is slow; histograms shrink ~10x).
            # -w: a board whose network does not reach the host gives up in seconds, then the console
            q = shlex.quote(path)
            out, rc = sh.run(f"sha256sum {q} && gzip -1 -c {q} | nc -w {CONNECT_TIMEOUT_S} "
                             f"{shlex.quote(self.host_addr)} {port}", timeout=timeout)
            # nc is done: what it sent is arriving or here; a failed nc sent nothing worth waiting for
            t.join(timeout if rc == 0 else 1.0)
        t.join(1.0)  # the listener is closed: accept() gives up
        digest = _digest(out)
        if rc != 0 or digest is None:
            log.warning("%s: sha256sum/gzip/nc to %s exited with %s: falling back to the console",
                        path, self.host_addr, rc)
            return None
        try:
            data = gzip.decompress(bytes(got))
        except (OSError, EOFError, ValueError) as e:
            log.warning("%s: the stream from the board is not whole (%s): falling back to the console", path, e)
            return None
        return _verified(path, size, data, digest, self.name)


    def push(self, sh: Any, path: str, data: bytes, timeout: float = 30.0) -> bool:
        with socket.socket() as srv:
            srv.bind((self.bind, 0))
            srv.listen(1)
            srv.settimeout(timeout)
            port = srv.getsockname()[1]

            def serve() -> None:
                try:
                    conn, _ = srv.accept()
                    with conn:
                        conn.sendall(data)
                except OSError:
                    pass

            t = threading.Thread(target=serve, daemon=True)
            t.start()
            q = shlex.quote(path)
            out, rc = sh.run(f"nc -w {CONNECT_TIMEOUT_S} {shlex.quote(self.host_addr)} {port} < /dev/null > {q} "
                             f"&& sha256sum {q}", timeout=timeout)
        t.join(1.0)
        ok = rc == 0 and _digest(out) == hashlib.sha256(data).hexdigest()
        if not ok:
            log.warning("%s: pushing %d bytes over nc did not arrive whole: the console instead", path, len(data))
        return ok


class LocalChannel(Channel):
    """The local board's files are this machine's files."""

    name = "local"

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        return _verified(path, size, data, board_sha256(sh, path), self.name)

    def push(self, sh: Any, path: str, data: bytes, timeout: float = 30.0) -> bool:
        try:
            Path(path).write_bytes(data)
        except OSError:
            return False
        return True


def channel_for(board: Any) -> Optional[Channel]:
    """The faster path of a board (a rtlab.boards.Board), None: the console only."""
    kind = getattr(board, "kind", None)
    if kind == "qemu":
        return TcpChannel()
    if kind == "local":
        return LocalChannel()
    return None


class Transfers:
    """What came home which way (bytes, seconds), for exit.json and benchmarks."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}

    def note(self, path: str, how: str, size: int, t0: float) -> None:
        self.files[path] = {"via": how, "bytes": size, "s": round(time.monotonic() - t0, 3)}
