"""The running rack's state file (``<rack dir>/rack.json``), for clients.

The rack service writes it (atomically) when it starts, is ready, stops or
fails; ``rtlab rack status``, the runner and tests read it to find the
coordinator and the PDU.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from .. import ROOT
from ..core.fsutil import atomic_write
from ..core.procutil import pid_alive

DEFAULT_DIR = ROOT / ".cache" / "rack"
STATE_FILE = "rack.json"


def rack_dir(path=None) -> Path:
    """The rack directory: *path*, else $RTLAB_RACK_DIR, else .cache/rack."""
    return Path(path or os.environ.get("RTLAB_RACK_DIR") or DEFAULT_DIR).resolve()


def read_state(directory) -> Optional[dict]:
    try:
        return json.loads((Path(directory) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_state(directory, state: dict) -> None:
    atomic_write(Path(directory) / STATE_FILE, (json.dumps(state, indent=2) + "\n").encode())


def running_state(directory=None) -> Optional[dict]:
    """The state of a rack that is up and ready, else None."""
    state = read_state(rack_dir(directory))
    if state and state.get("state") == "ready" and pid_alive(state.get("pid")):
        return state
    return None


def coordinator_address(directory=None) -> Optional[str]:
    """$LG_COORDINATOR if set (a real lab), else the running local rack's."""
    if os.environ.get("LG_COORDINATOR"):
        return os.environ["LG_COORDINATOR"]
    state = running_state(directory)
    return state["coordinator"] if state else None
