"""Points that could not be written yet, kept on disk until they are.

One line-protocol file per batch: ``<spool>/<when>-<run_id>-<batch>.lp``,
written atomically (temporary file, then rename). The first line is a
comment with the precision of the timestamps (``# rtlab-spool precision=s
run=<run_id>``); the rest is exactly what the server would have received.
No credentials and no target: a spool file is sent wherever the store is
configured when it is replayed (``rtlab publish --replay`` or the next
``rtlab publish``).

Replaying the same file twice is harmless: the same series at the same
timestamp overwrite each other in InfluxDB. A lock (``.lock``) keeps two
replays from running at once anyway.

A batch is kept once, however often it fails: the file name ends with the
digest of its content, and a batch already spooled is not written again
(a run published three times against a store that refuses the credentials
leaves one copy, not three). A store that refuses the credentials (HTTP
401/403) stops a replay like a store that is down: every file stays, and
the replay says why.
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .base import StoreUnavailable, WriteRejected
from .config import state_dir

HEADER = "# rtlab-spool"
#: the store refused who we are: every batch will be refused the same way
AUTH_STATUSES = (401, 403)


def default_spool_dir() -> Path:
    return state_dir() / "spool"


@dataclass
class ReplayResult:
    files: int = 0
    points: int = 0
    left_files: int = 0
    left_points: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: Optional[str] = None  # why nothing was tried (another replay running)
    unavailable: bool = False      # stopped because the server is down
    refused: Optional[str] = None  # stopped because the store refused the credentials (401/403)


class Spool:
    def __init__(self, directory: Optional[Path] = None):
        self.dir = Path(directory) if directory else default_spool_dir()
        self._seq = 0

    def put(self, lines: list[str], precision: str, run_id: str = "", batch: int = 0) -> Path:
        """Keep one batch, once: returns the file written, or the file that
        already holds the same batch."""
        self.dir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(("\n".join([precision, *lines])).encode()).hexdigest()[:20]
        same = sorted(self.dir.glob(f"*-{digest}.lp"))
        if same:
            return same[0]
        self._seq += 1
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time_ns() % 1_000_000_000:09d}"
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id or "points")[:80]
        name = f"{stamp}-{os.getpid()}-{self._seq:04d}-{safe}-{batch:05d}-{digest}.lp"
        path = self.dir / name
        tmp = self.dir / f".{name}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{HEADER} precision={precision} run={safe} points={len(lines)}\n")
            f.write("\n".join(lines))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def files(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.glob("*.lp") if p.is_file())

    def pending_points(self) -> int:
        return sum(_read(p)[1].count("\n") for p in self.files())

    def replay(self, store, progress: Callable[[str], None] = lambda s: None) -> ReplayResult:
        """Send every spooled file, oldest first; delete each once accepted.

        Stops at the first "server unavailable"; a rejected file (4xx) stays
        and the others are still tried.
        """
        res = ReplayResult()
        files = self.files()
        if not files:
            return res
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "w") as lockf:
            try:
                fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                res.skipped = "another replay of this spool is running"
                res.left_files = len(files)
                return res
            try:
                down = False
                for path in self.files():  # re-list under the lock
                    if not path.exists():
                        continue
                    precision, body = _read(path)
                    n = body.count("\n")
                    if down:
                        res.left_files += 1
                        res.left_points += n
                        continue
                    target = store
                    if getattr(store, "precision", precision) != precision:
                        target = copy.copy(store)
                        target.precision = precision
                    try:
                        target.write(body)
                    except StoreUnavailable as e:
                        down = res.unavailable = True
                        res.errors.append(f"replay stopped, server unavailable: {e}")
                        res.left_files += 1
                        res.left_points += n
                        continue
                    except WriteRejected as e:
                        if e.status in AUTH_STATUSES:  # no file will get through: stop, keep all
                            down = True
                            res.refused = str(e)
                            res.errors.append(f"replay stopped, the store refused the credentials ({e}): "
                                              f"every spooled file is kept; fix the store configuration "
                                              f"and run rtlab publish --replay")
                            res.left_files += 1
                            res.left_points += n
                            continue
                        res.errors.append(f"{path.name}: rejected: {e}")
                        res.left_files += 1
                        res.left_points += n
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                    res.files += 1
                    res.points += n
            finally:
                fcntl.flock(lockf, fcntl.LOCK_UN)
        if res.files:
            progress(f"replayed {res.points} spooled points ({res.files} files)")
        return res


def _read(path: Path) -> tuple[str, str]:
    """(precision, body without comment lines, newline-terminated)."""
    text = path.read_text(encoding="utf-8")
    precision = "s"
    body = []
    for ln in text.splitlines():
        if ln.startswith(HEADER):
            m = re.search(r"precision=(\w+)", ln)
            if m:
                precision = m.group(1)
        elif ln and not ln.startswith("#"):
            body.append(ln)
    return precision, "".join(x + "\n" for x in body)
