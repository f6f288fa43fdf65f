"""The virtual rack's life and state, for the `rtlab rack` command, the
benchmarks and the tests: bring it up and down, read its status and its
places, talk to its PDU. The command (rtlab.commands.rack) only parses
arguments and prints.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from .. import ROOT
from ..errors import InputError, RtlabError
from ..core.procutil import pid_alive
from .config import load_places
from .state import STATE_FILE, rack_dir, read_state, running_state

UP_TIMEOUT_S = 120


def rack_up(directory=None, *, config=None, coordinator_port=None, pdu_port=None,
            timeout: float = UP_TIMEOUT_S, quiet: bool = False, hosts: Optional[int] = None) -> dict:
    """Start the rack service detached; return its state once ready."""
    d = rack_dir(directory)
    st = running_state(d)
    if st:
        return st
    old = read_state(d)
    if old and pid_alive(old.get("pid")):
        raise RtlabError(f"a rack service (pid {old['pid']}) is {old.get('state')} in {d}; "
                         f"`rtlab rack down --dir {d}` first")
    if old:
        rack_down(d)  # a service that was killed: whatever it left behind goes too
    d.mkdir(parents=True, exist_ok=True)
    (d / STATE_FILE).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "rtlab.rack.service", "--dir", str(d)]
    if hosts is not None:
        from ..rack.multihost import MAX_HOSTS, MIN_HOSTS
        if not MIN_HOSTS <= hosts <= MAX_HOSTS or coordinator_port is not None or pdu_port is not None:
            raise InputError("--hosts", f"must be in [{MIN_HOSTS}, {MAX_HOSTS}] and goes without "
                                        f"--coordinator-port/--pdu-port (each host has its own), got {hosts}")
        cmd = [sys.executable, "-m", "rtlab.rack.multihost", "--dir", str(d), "--hosts", str(hosts)]
        timeout = max(timeout, 60.0 * hosts)  # every exporter host starts its own services
    if config:
        cmd += ["--config", str(config)]
    if coordinator_port is not None:
        cmd += ["--coordinator-port", str(coordinator_port)]
    if pdu_port is not None:
        cmd += ["--pdu-port", str(pdu_port)]
    log = open(d / "service.log", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=str(ROOT))
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = read_state(d)
        if st and st.get("state") == "ready":
            return st
        if st and st.get("state") == "failed" or proc.poll() is not None:
            proc.wait()
            raise RtlabError(f"rack failed to start: {(st or {}).get('error', 'service exited')} "
                             f"(see {d / 'service.log'})\n{_tail(d / 'service.log')}")
        time.sleep(0.3)
    proc.terminate()
    raise RtlabError(f"rack not ready within {timeout:g} s (see {d / 'service.log'})")


def rack_down(directory=None, timeout: float = 30.0) -> bool:
    """Stop the rack service; False if none was running."""
    d = rack_dir(directory)
    st = read_state(d)
    if not st:
        return False
    pid = st.get("pid")
    was = pid_alive(pid)
    if was:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    if st.get("netns_prefix"):
        # a multi-host lab whose service was SIGKILLed: its hosts still stand
        from ..rack.hostssh import reclaim_etc
        from ..rack.hosts import reclaim
        reclaim(st["netns_prefix"])
        reclaim_etc(st["netns_prefix"])
    # whatever the service could not stop (it was SIGKILLed): its process
    # groups, but only processes that are still ours (pids get reused)
    for pgid in (st.get("pids") or {}).values():  # pid == process group (own session)
        for pid in _group_members(pgid, ("labgrid-coordinator", "labgrid-exporter", "ser2net")):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return was


def _group_members(pgid: int, names: tuple) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            cmdline = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) == pgid and any(n in cmdline for n in names):
            pids.append(int(p.name))
    return pids


def pdu_request(state: dict, method: str, path: str, body: str = "") -> str:
    req = urllib.request.Request(state["pdu"] + path, method=method,
                                 data=body.encode() if body else None)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    try:
        with opener.open(req, timeout=30) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        raise RtlabError(f"PDU {method} {path}: {e.code} {e.read().decode().strip()}") from None


def rack_status(directory=None) -> dict:
    from ..lab.coordinator import Coordinator, CoordinatorError  # lazy: grpc, kept out of CLI start-up
    d = rack_dir(directory)
    st = read_state(d) or {}
    alive = pid_alive(st.get("pid"))
    state = st.get("state", "absent")
    if not alive and state in ("starting", "ready", "stopping"):
        state = "dead"  # killed without cleaning up: `rtlab rack down` clears what is left
    out = {"dir": str(d), "state": state,
           "service_pid": st.get("pid"), "coordinator": st.get("coordinator"), "pdu": st.get("pdu"),
           "processes": {k: pid_alive(v) for k, v in (st.get("pids") or {}).items()},
           "places": {}, "reservations": {}, "queue": [], "boards": {}}
    if not alive or st.get("state") != "ready":
        return out
    if st.get("multihost"):
        out["hosts"] = st["hosts"]
        if os.environ.get("LG_HOSTNAME") not in st["hosts"]:
            # the lab's addresses exist only inside its hosts: ask from the coordinator host
            res = subprocess.run(["ip", "netns", "exec", st["hosts"]["coord"]["netns"], sys.executable, "-c",
                                  "import sys; from rtlab.cli import main; sys.exit(main())", "rack", "status",
                                  "--json", "--dir", str(d)], capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "LG_HOSTNAME": "coord"})
            try:
                inner = json.loads(res.stdout)
                out.update({k: inner[k] for k in ("places", "reservations", "queue") if k in inner})
                if "coordinator_error" in inner:
                    out["coordinator_error"] = inner["coordinator_error"]
            except ValueError:
                out["coordinator_error"] = f"status from the coordinator host: {res.stderr.strip()[-300:]}"
            return out
    try:
        with Coordinator(st["coordinator"]) as c:
            out.update(lab_view(c.places(), c.reservations()))
    except CoordinatorError as e:
        out["coordinator_error"] = str(e)
    if st.get("multihost"):
        return out  # each exporter host has its own PDU and boards: <dir>/<host>/rack.json
    try:
        out["boards"] = {b["name"]: b for b in json.loads(pdu_request(st, "GET", "/rack/status"))["outlets"]}
    except (OSError, RtlabError, ValueError) as e:
        out["pdu_error"] = str(e)
    for name in out["boards"]:
        boots = d / "boards" / name / "boots.jsonl"
        if boots.exists():
            lines = boots.read_text().splitlines()
            if lines:
                out["boards"][name]["last_boot"] = json.loads(lines[-1])
    return out


def lab_view(places: dict, reservations: dict, now: Optional[float] = None) -> dict:
    """Places with holder, since when and lease age; the queue of waiting
    reservations in the order labgrid serves them (prio, then age), with
    their waiting times. The same for a real lab's coordinator."""
    from ..lab.places import LEASE_TAGS, holder_since, is_rtlab_owner, lease_age, read_lease
    now = time.time() if now is None else now
    out_places = {}
    for n, p in sorted(places.items()):
        j = p.to_json()
        j["tags"] = {k: v for k, v in p.tags.items() if k not in LEASE_TAGS}
        since = holder_since(p)
        j["holder"] = p.acquired
        j["held_s"] = round(now - since, 1) if since else None
        j["lease_age_s"] = round(lease_age(p, now), 1) if is_rtlab_owner(p.acquired) else None
        lease = read_lease(p)
        j["lease"] = {"owner": lease.owner, "since": lease.since, "renewed": lease.renewed} if lease else None
        out_places[n] = j
    queue = sorted((r for r in reservations.values() if r.state == "waiting"),
                   key=lambda r: (-r.prio, r.created))
    return {"places": out_places,
            "reservations": {t: {**r.to_json(), "prio": r.prio, "waited_s": round(now - r.created, 1)}
                             for t, r in reservations.items()},
            "queue": [{"token": r.token, "owner": r.owner, "prio": r.prio, "filters": r.filters,
                       "waited_s": round(now - r.created, 1)} for r in queue]}


def sync_places(coordinator: str, places_file: Path) -> list[str]:
    """Declare every place of *places_file* on *coordinator* (idempotent)."""
    from ..lab.coordinator import Coordinator  # lazy: grpc, kept out of CLI start-up
    places = load_places(places_file)
    with Coordinator(coordinator) as c:
        for p in places.values():
            c.ensure_place(p.name, list(p.matches), p.tags, p.comment)
    return list(places)

def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
