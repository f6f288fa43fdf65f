"""Bulk data off the console: raw files come home over a faster path where
the board has one, the serial console keeps control.

A TCG serial console carries ~19 kB/s; a 20,000-row cyclictest histogram
takes seconds over it, and every console round trip costs ~50 ms. Two
faster paths, each checked against what the board says over the console,
falling back to the console (gzip + base64) on any doubt, so a raw file is
never lost nor altered by the faster path:

* :class:`TcpChannel` (QEMU boards, user networking): the host listens on a
  loopback port, the board sends gzip'd data with ``nc`` to the host's address
  as the guest sees it (10.0.2.2: QEMU's slirp maps it to the host's
  loopback). No ssh server is needed in the board's busybox image. A
  suite's raw files come as one tar in one round trip, checked by their
  ``wc -c`` sizes and gzip's CRC-32; a single file by its ``sha256sum``.
  Scripts go the other way, checked by their sha256sum on the board
  before they run, and their output comes back over nc, in the same
  round trip.
* :class:`LocalChannel` (the local board): the board's files are on this
  machine already; they are read directly and checked by their sizes (or
  digest) as the board's shell reports them.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import logging
import posixpath
import shlex
import socket
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

log = logging.getLogger("rtlab.board")

#: smaller files are not worth a second channel
BULK_MIN_BYTES = 4096
#: seconds the board's nc may take to reach the host
CONNECT_TIMEOUT_S = 5


#: the line a fused push-and-run prints between the file's check and the command's output
PUSHED_MARK = "==rtlab-pushed=="
#: the line before the file list of a one-trip fetch
FILES_MARK = "==rtlab-files=="


class Channel:
    """How files cross between board and host besides the console. Every
    method may answer None (or False): the caller then takes the console's
    way, so a faster path can fail without losing or altering anything."""

    name = "console"

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        """The *size* bytes of the board's file *path*."""
        raise NotImplementedError

    def fetch_files(self, sh: Any, wd: str, names: Sequence[str], timeout: float) -> Optional[dict[str, bytes]]:
        """Each of *names* (plain file names) that is a regular file in the
        board directory *wd*, in one console round trip."""
        return None

    def push(self, sh: Any, path: str, data: bytes, timeout: float = 30.0) -> bool:
        """Put *data* at *path* on the board, its directory made: True when
        it arrived whole (False: use the console)."""
        return False

    def run_script(self, sh: Any, path: str, data: bytes, on_board: bool,
                   timeout: float = 60.0) -> Optional[tuple[list[str], int]]:
        """Run the shell script *data* at *path* on the board, putting it
        there first unless it is *on_board* already: its (output lines, exit
        code), None when the script did not arrive whole (it did not run) or
        its output did not come."""
        if not on_board and not self.push(sh, path, data, timeout):
            return None
        return sh.run(f"sh {shlex.quote(path)}", timeout=timeout)


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


def wc_sizes(lines: Sequence[str], names: Sequence[str]) -> dict[str, int]:
    """`wc -c NAMES` lines: name -> bytes (its "total" line is no name asked for)."""
    sizes = {}
    for line in lines:
        words = line.split()
        if len(words) == 2 and words[0].isdigit() and words[1] in names:
            sizes[words[1]] = int(words[0])
    return sizes


def untar_gz(data: bytes) -> dict[str, bytes]:
    """The regular files of a gzip'd tar stream, by name. Raises (OSError,
    EOFError, ValueError, tarfile.TarError) on a stream that is not whole:
    gzip checks its CRC-32 and length, tar its headers."""
    got = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isfile() else None
            if f is not None:
                got[m.name] = f.read()
    return got


#: what untar_gz raises on a stream that is not whole
UNTAR_ERRORS = (OSError, EOFError, ValueError, tarfile.TarError)


class _Listener:
    """A one-shot loopback listener the board's nc connects to once: it
    receives the stream (or sends *data*) on a thread of its own while the
    console command that starts the board's side runs."""

    def __init__(self, bind: str, timeout: float, data: Optional[bytes] = None):
        self.bind, self.timeout, self.data = bind, timeout, data
        self.got = bytearray()

    def __enter__(self) -> "_Listener":
        self.srv = socket.socket()
        try:
            self.srv.bind((self.bind, 0))
            self.srv.listen(1)
        except OSError:
            self.srv.close()
            raise
        self.srv.settimeout(self.timeout)
        self.port = self.srv.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def _serve(self) -> None:
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(self.timeout)
            try:
                if self.data is not None:
                    conn.sendall(self.data)
                    return
                while True:  # to the end (nc closes when the board's side is sent)
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    self.got.extend(chunk)
            except OSError:
                pass

    def done(self, ok: bool) -> None:
        """The board's nc has finished: what it sent is arriving or here; a
        failed nc sent nothing worth waiting for."""
        self.thread.join(self.timeout if ok else 1.0)

    def __exit__(self, *exc) -> None:
        self.srv.close()
        self.thread.join(1.0)  # the listener is closed: accept() gives up


class TcpChannel(Channel):
    """The board connects to a one-shot listener on the host and sends the file."""

    name = "tcp"

    def __init__(self, host_addr: str = "10.0.2.2", bind: str = "127.0.0.1"):
        self.host_addr = host_addr  # the host as the board reaches it
        self.bind = bind            # where the host listens

    def _nc(self, port: int) -> str:
        # -w: a board whose network does not reach the host gives up in seconds, then the console
        return f"nc -w {CONNECT_TIMEOUT_S} {shlex.quote(self.host_addr)} {port}"

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        with _Listener(self.bind, timeout) as rx:
            # one console round trip: the board's digest, then the file gzip'd
            # (a TCG board's user network is slow; histograms shrink ~10x)
            q = shlex.quote(path)
            out, rc = sh.run(f"sha256sum {q} && gzip -1 -c {q} | {self._nc(rx.port)}", timeout=timeout)
            rx.done(rc == 0)
        digest = _digest(out)
        if rc != 0 or digest is None:
            log.warning("%s: sha256sum/gzip/nc to %s exited with %s: falling back to the console",
                        path, self.host_addr, rc)
            return None
        try:
            data = gzip.decompress(bytes(rx.got))
        except (OSError, EOFError, ValueError) as e:
            log.warning("%s: the stream from the board is not whole (%s): falling back to the console", path, e)
            return None
        return _verified(path, size, data, digest, self.name)

    def fetch_files(self, sh: Any, wd: str, names: Sequence[str], timeout: float) -> Optional[dict[str, bytes]]:
        """One console round trip for a suite's raw files: the board prints
        each file's size (wc -c) on the console and sends one tar of them,
        gzip'd, over nc. Checked on the host by gzip's CRC-32 and length of
        the whole tar stream, tar's header checksums, and every member's size
        against the board's wc -c; no sha256sum (hashing 0.4 MB takes ~30 ms
        on a TCG board, and a stream that passes these checks is whole)."""
        listed = " ".join(shlex.quote(n) for n in names)
        with _Listener(self.bind, timeout) as rx:
            out, rc = sh.run(
                f"cd {shlex.quote(wd)} && wc -c {listed} 2>/dev/null; "
                f"s=$(find {listed} -maxdepth 0 -type f 2>/dev/null); echo \"{FILES_MARK} \"$s; "
                f"[ -z \"$s\" ] || tar -cf - $s | gzip -1 | {self._nc(rx.port)}", timeout=timeout)
            marks = [line.split()[1:] for line in out if line.split()[:1] == [FILES_MARK]]
            files = marks[-1] if marks else []
            rx.done(rc == 0 and bool(files))
        if rc != 0 or not marks:
            log.warning("%s: wc/tar/nc to %s exited with %s: the console instead", wd, self.host_addr, rc)
            return None
        sizes = wc_sizes(out, names)
        if set(files) - set(sizes) or not set(files) <= set(names):
            log.warning("%s: the board listed %s with sizes %s: the console instead", wd, files, sizes)
            return None
        if not files:
            return {}
        try:
            got = untar_gz(bytes(rx.got))
        except UNTAR_ERRORS as e:
            log.warning("%s: the tar from the board is not whole (%s): the console instead", wd, e)
            return None
        if set(got) != set(files) or any(len(got[n]) != sizes[n] for n in files):
            log.warning("%s: the tar brought %s, the board has %s: the console instead",
                        wd, {n: len(d) for n, d in got.items()}, {n: sizes[n] for n in files})
            return None
        return got

    def run_script(self, sh: Any, path: str, data: bytes, on_board: bool,
                   timeout: float = 60.0) -> Optional[tuple[list[str], int]]:
        """One console round trip: the directory made, the script received
        and its sha256sum compared on the board with the host's (unless it
        is on the board already), then run, its output sent back over nc:
        a batch's few kB take a quarter of a second on a TCG console. Its
        exit code is nc's (a batch's commands mark their own)."""
        # in the script's directory (the console line stays short, whatever its path)
        d, name = posixpath.split(path)
        q, o = shlex.quote(name), shlex.quote(f"{name}.out")
        with contextlib.ExitStack() as stack:
            rx = stack.enter_context(_Listener(self.bind, timeout))
            put = f"cd {shlex.quote(d)} && "
            if not on_board:
                tx = stack.enter_context(_Listener(self.bind, timeout, data=data))
                expected = shlex.quote(f"{hashlib.sha256(data).hexdigest()}  {name}")
                put = (f"mkdir -p {shlex.quote(d)} && cd {shlex.quote(d)} && "
                       f"{self._nc(tx.port)} < /dev/null > {q} && [ \"$(sha256sum {q})\" = {expected} ] && ")
            # the output into a file, then sent whole: piped, every line the
            # script writes became a packet of its own through QEMU's slirp (~60 ms more)
            out, rc = sh.run(f"{put}echo {PUSHED_MARK} && {{ sh {q} > {o} 2>&1; {self._nc(rx.port)} < {o}; }}",
                             timeout=timeout)
            rx.done(rc == 0)
        if PUSHED_MARK not in [line.strip() for line in out]:
            log.warning("%s: pushing %d bytes over nc did not arrive whole: the console instead", path, len(data))
            return None
        if rc != 0:
            log.warning("%s: its output did not come over nc (exit %s): the console instead", path, rc)
            return None
        return bytes(rx.got).decode(errors="replace").splitlines(), rc


class LocalChannel(Channel):
    """The local board's files are this machine's files."""

    name = "local"

    def fetch(self, sh: Any, path: str, size: int, timeout: float) -> Optional[bytes]:
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        return _verified(path, size, data, board_sha256(sh, path), self.name)

    def fetch_files(self, sh: Any, wd: str, names: Sequence[str], timeout: float) -> Optional[dict[str, bytes]]:
        """The board's sizes (one console round trip), the bytes read here:
        the console's shell and this process see the same files."""
        listed = " ".join(shlex.quote(n) for n in names)
        out, _ = sh.run(f"cd {shlex.quote(wd)} && wc -c {listed} 2>/dev/null; true", timeout=timeout)
        got = {}
        for name, size in wc_sizes(out, names).items():
            try:
                data = (Path(wd) / name).read_bytes()
            except OSError:
                return None
            if len(data) != size:
                return None
            got[name] = data
        return got

    def push(self, sh: Any, path: str, data: bytes, timeout: float = 30.0) -> bool:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)
        except OSError:
            return False
        return True


def channel_for(board: Any) -> Optional[Channel]:
    """The faster path of a board (a rtlab.targets.boards.Board), None: the console only."""
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
