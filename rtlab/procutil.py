"""Process and port helpers shared by the services rtlab starts and watches
(the local InfluxDB, the rack, labgrid place leases)."""
from __future__ import annotations

import os
import socket
from typing import Optional


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
