"""Process and port helpers shared by the services rtlab starts and watches
(the local InfluxDB, the rack, labgrid place leases)."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Optional

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the thread that started it dies
    (a job's pytest, a rack's QEMU: nothing outlives what owns its place)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:  # pragma: no cover - non-glibc
        pass


def venv_tool(name: str) -> str:
    """A program of this Python environment (the venv's), else PATH's."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def labgrid_client() -> str:
    return venv_tool("labgrid-client")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound (SO_REUSEADDR, not listening) to a free port of *host*,
    held until the server that will listen there has bound it (a server that
    sets SO_REUSEADDR can bind it meanwhile) or is about to: while held, no
    other bind to port 0 gets it. free_port()'s port, released at once, went
    to the rack's own next port-0 listener (a board's console relay), and
    the PDU's bind then failed with EADDRINUSE."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, 0))
    except OSError:
        s.close()
        raise
    return s


def _stat_fields(pid: int) -> Optional[list[str]]:
    """/proc/<pid>/stat from field 3 (state) on; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int) -> Optional[int]:
    """Start time of *pid* in clock ticks since boot; None if it does not
    exist or is a zombie (a zombie holds nothing any more)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    return int(fields[19])  # field 22 of stat(5); fields[0] is field 3


def pid_alive(pid: Optional[int]) -> bool:
    """Is *pid* a running process (not a zombie)? Also for other users' processes."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's: it exists
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def processes_in_dir(directory: Path) -> list[int]:
    """Processes (not zombies, not this one) whose working directory is
    *directory* or below it."""
    directory = Path(directory).resolve()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            continue
        if (cwd == directory or directory in cwd.parents) and pid_alive(int(entry)):
            found.append(int(entry))
    return found
