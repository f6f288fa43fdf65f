"""File helpers shared by the content-keyed caches (images, kernel builds)."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator, Optional


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One process at a time per path (CI jobs and tests share the caches)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def try_locked(path: Path) -> Iterator[bool]:
    """Like locked(), but never waits: yields False when another process
    holds the lock. Lock files are never deleted (a process may have one
    open, waiting: deleting it would let a second lock the same thing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def atomic_write(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --- inputs that may be hostile (run directories, budgets, campaigns) -------
#
# A run directory can come from anywhere (a CI artifact, a merge request's
# campaign, another user's results): a file in it may be a symlink to
# /etc/shadow, a FIFO that never ends or /dev/zero. Every such file is
# resolved and checked to stay inside its directory, opened without following
# a last symlink, refused unless it is a regular file, and read up to a limit
# counted in bytes actually read (st_size is 0 for /proc files and says
# nothing about devices).

#: the largest run.json / job.json / compare.json read (RTLAB_INPUT_MAX_MB):
#: histograms of many jobs fit, a runaway file does not
DEFAULT_RESULT_MAX_MB = 256
#: the largest campaign / budget / small text file read
DEFAULT_TEXT_MAX_BYTES = 16 * 1024 * 1024


def result_max_bytes() -> int:
    try:
        mb = int(os.environ.get("RTLAB_INPUT_MAX_MB") or DEFAULT_RESULT_MAX_MB)
    except ValueError:
        mb = DEFAULT_RESULT_MAX_MB
    return (mb if mb > 0 else DEFAULT_RESULT_MAX_MB) * 1024 * 1024


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or os.path.commonpath([real, real_root]) == real_root


def resolve_inside(path, root=None) -> Path:
    """*path* with every symlink resolved, refused (InputError naming *path*)
    when that leaves *root* (default: the directory *path* is in). Symlinks
    that stay inside are fine (``results/latest/run.json``)."""
    from ..errors import InputError

    path = Path(path)
    root = Path(root) if root is not None else path.absolute().parent
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not _inside(real, real_root):
        raise InputError(path, f"leads outside {root} (a symlink or '..'): refused, nothing outside is read "
                               "or written")
    return Path(real)


def read_bounded(path, max_bytes: int, *, root=None) -> bytes:
    """The content of a regular file inside *root* (see resolve_inside), at
    most *max_bytes* of it: more is an InputError naming the file and the
    limit, found by reading one byte past it (never by trusting st_size).
    Devices, FIFOs, sockets and directories are refused before they are read."""
    from ..errors import InputError

    real = resolve_inside(path, root)
    try:
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):  # before open: opening a device or FIFO can block or act
            raise InputError(path, f"not a regular file ({_kind(st.st_mode)}): refused")
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(path, "cannot read: file not found") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
            raise InputError(path, "not a regular file: refused")
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise InputError(path, f"over the limit of {_size(max_bytes)}: refused before memory runs out")
    return data


def read_text_bounded(path, max_bytes: int = DEFAULT_TEXT_MAX_BYTES, *, root=None) -> str:
    from ..errors import InputError

    data = read_bounded(path, max_bytes, root=root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not a text file (byte {e.start} is not UTF-8)") from None


def tail_text(path, max_bytes: int, *, root=None) -> str:
    """The last *max_bytes* of a regular file inside *root* (a tool's
    stderr.txt: its end says why it failed, however long it ran)."""
    from ..errors import InputError

    real = resolve_inside(path, root)
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            raise InputError(path, "not a regular file: refused")
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        f.seek(max(0, size - max_bytes))
        return f.read(max_bytes).decode(errors="replace")


def write_replacing(path: Path, data: bytes) -> None:
    """Write *path* in its directory as a new file that replaces whatever is
    there: a symlink planted at *path* is replaced, its target never written.
    The temporary file is created exclusively (O_EXCL), so no planted name
    redirects it either."""
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


def _size(n: int) -> str:
    return f"{n // 1024 // 1024} MB" if n >= 1024 * 1024 else f"{n} bytes"


def read_json(path, max_bytes: Optional[int] = None, *, root=None) -> Any:
    """``json.loads`` of a result file (exit.json, kernel.json, a checkpoint),
    read as :func:`read_bounded` reads (regular file, inside its directory,
    at most *max_bytes*, default :func:`result_max_bytes`). Keeps the errors
    of the ``json.loads(path.read_text())`` it replaces, so callers' handling
    stays as it was: missing -> FileNotFoundError; too large, not a regular
    file or leading outside -> ValueError naming the file, as invalid JSON is."""
    from ..errors import InputError

    p = Path(path)
    if not os.path.lexists(p):
        raise FileNotFoundError(2, "No such file or directory", str(p))
    try:
        data = read_bounded(p, max_bytes if max_bytes is not None else result_max_bytes(), root=root)
    except InputError as e:
        raise ValueError(str(e)) from None
    return json.loads(data)


def cache_root() -> Path:
    """The machine's rtlab cache, shared by every checkout (kernels, kernel
    trees, board images): ``$RTLAB_CACHE`` or ``~/.cache/rtlab``."""
    env = os.environ.get("RTLAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rtlab"
