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
    path = Path(directory) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def pid_alive(pid: Optional[int]) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
