"""`rtlab rack up|down|status|power|fault|reap|env`: the virtual rack.

    rtlab rack up        coordinator + exporter + PDU + virtual boards (labgrid/rack.yaml)
    rtlab rack status    services, places (locks, reservations), boards (power, last boot)
    rtlab rack down      power off, stop everything
    eval "$(rtlab rack env)"   LG_COORDINATOR for labgrid-client

The rack directory is --dir, else $RTLAB_RACK_DIR, else .cache/rack.
"""
from __future__ import annotations

import argparse
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
from ..rack.config import load_places
from ..rack.pdu import FAULTS
from ..rack.state import STATE_FILE, coordinator_address, rack_dir, read_state, running_state

UP_TIMEOUT_S = 120


def register(sub):
    p = sub.add_parser("rack", help="the virtual rack: labgrid coordinator, exporter, PDU, U-Boot boards")
    rs = p.add_subparsers(dest="rack_command", required=True, metavar="ACTION")

    def common(sp):
        sp.add_argument("--dir", type=Path, help="rack directory (default: $RTLAB_RACK_DIR or .cache/rack)")
        return sp

    up = common(rs.add_parser("up", help="start the rack (returns when it is ready)"))
    up.add_argument("--config", type=Path, help="rack config (default: labgrid/rack.yaml)")
    up.add_argument("--coordinator-port", type=int, help="coordinator port (0: any free port; default: rack.yaml)")
    up.add_argument("--pdu-port", type=int, help="PDU port (0: any free port; default: rack.yaml)")
    up.add_argument("--hosts", type=int, metavar="N",
                    help="a lab of several hosts (network namespaces; needs CAP_NET_ADMIN): a coordinator "
                         "host, N exporter hosts sharing the boards, each with its own PDU, and N runner hosts")
    up.set_defaults(func=cmd_up)
    ex = common(rs.add_parser("exec", help="run a command on a host of a multi-host lab (rack up --hosts)"))
    ex.add_argument("host", help="a host name of the lab (runner1, exp1, coord, ...)")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    ex.set_defaults(func=cmd_exec)
    common(rs.add_parser("down", help="power off the boards and stop the rack")).set_defaults(func=cmd_down)
    st = common(rs.add_parser("status", help="services, places, locks, boards"))
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    pw = common(rs.add_parser("power", help="switch a board's PDU outlet"))
    pw.add_argument("board")
    pw.add_argument("action", choices=["on", "off", "cycle", "get"])
    pw.set_defaults(func=cmd_power)
    fl = common(rs.add_parser("fault", help="inject a fault: hang-boot (next power-on hangs), hang-now, clear"))
    fl.add_argument("board")
    fl.add_argument("fault", choices=FAULTS)
    fl.set_defaults(func=cmd_fault)
    common(rs.add_parser("reap", help="release places held by dead rtlab jobs now")).set_defaults(func=cmd_reap)
    pl = common(rs.add_parser("places", help="create/update the places of a places file on a coordinator"))
    pl.add_argument("file", type=Path, help="places file (e.g. labgrid/lab/places.yaml)")
    pl.add_argument("--coordinator", help="HOST:PORT (default: $LG_COORDINATOR, else the running rack's)")
    pl.set_defaults(func=cmd_places)
    common(rs.add_parser("env", help="print shell exports for labgrid-client")).set_defaults(func=cmd_env)


# -- helpers (also used by tests and the benchmark) ------------------------------------
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
        from ..rack.hosts import reclaim
        reclaim(st["netns_prefix"])
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


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _running(args) -> dict:
    st = running_state(args.dir)
    if not st:
        raise RtlabError(f"no rack is running in {rack_dir(args.dir)} (`rtlab rack up`)")
    return st


# -- commands ---------------------------------------------------------------------------
def cmd_up(args) -> int:
    st = rack_up(args.dir, config=args.config, coordinator_port=args.coordinator_port,
                 pdu_port=args.pdu_port, hosts=args.hosts)
    if st.get("multihost"):
        print(f"lab {st['name']} ready in {st['dir']} (service pid {st['pid']}), coordinator {st['coordinator']}")
        for name, h in st["hosts"].items():
            boards = f": boards {', '.join(h['boards'])}" if h["boards"] else ""
            print(f"  {h['role']:11} host {name:8} netns {h['netns']:14} {h['address']}{boards}")
        print("  jobs: rtlab rack exec runner1 -- rtlab run ...")
        return 0
    print(f"rack {st['name']} ready in {st['dir']} (service pid {st['pid']})")
    print(f"  coordinator {st['coordinator']}   PDU {st['pdu']}")
    for name, b in st["boards"].items():
        print(f"  board {name}: place {b['place']}, outlet {b['outlet']}, uart {b['tty']}")
    print(f"  export LG_COORDINATOR={st['coordinator']}")
    return 0


def cmd_exec(args) -> int:
    """Run a command on a host of the multi-host lab, as a job there would:
    in its namespace, LG_HOSTNAME its name, LG_COORDINATOR the lab's."""
    st = running_state(args.dir)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not st or not st.get("multihost"):
        raise RtlabError(f"no multi-host lab runs in {rack_dir(args.dir)} (`rtlab rack up --hosts N`)")
    host = st["hosts"].get(args.host)
    if host is None:
        raise InputError("host", f"no host {args.host!r} in the lab (hosts: {', '.join(st['hosts'])})")
    if not argv:
        raise InputError("argv", "a command to run is needed: rtlab rack exec HOST -- COMMAND")
    env = {**os.environ, "LG_HOSTNAME": args.host, "LG_COORDINATOR": st["coordinator"],
           "RTLAB_RACK_DIR": str(rack_dir(args.dir))}
    return subprocess.call(["ip", "netns", "exec", host["netns"], *argv], env=env)


def cmd_down(args) -> int:
    was = rack_down(args.dir)
    print(f"rack in {rack_dir(args.dir)} {'stopped' if was else 'was not running'}")
    return 0


def cmd_status(args) -> int:
    s = rack_status(args.dir)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0 if s["state"] == "ready" else 1
    print(f"rack {s['dir']}: {s['state']}" + (f" (pid {s['service_pid']})" if s["state"] == "ready" else ""))
    if s["state"] != "ready":
        return 1
    print(f"  coordinator {s['coordinator']}   PDU {s['pdu']}   "
          + "  ".join(f"{k} {'up' if v else 'DOWN'}" for k, v in s["processes"].items()))
    for name, h in (s.get("hosts") or {}).items():
        print(f"  {h['role']:11} host {name:8} netns {h['netns']} {h['address']} {' '.join(h['boards'])}")
    if s.get("coordinator_error"):
        print(f"  coordinator: {s['coordinator_error']}")
    from ..lab.places import lease_seconds, stale_owner  # lazy: grpc, kept out of CLI start-up
    lease_s = lease_seconds()
    for name, p in s["places"].items():
        lock = f"held by {p['holder']} for {p['held_s']:.0f} s" if p["holder"] else "free"
        if p["lease_age_s"] is not None:
            lock += f", lease renewed {p['lease_age_s']:.0f} s ago (T={lease_s:g} s)"
            if p["lease_age_s"] > lease_s:
                lock += " EXPIRED: the next reaper releases it"
        if p["holder"] and stale_owner(p["holder"]):
            lock += " (job process gone: the reaper releases it)"
        if not p["holder"] and p.get("lease") and time.time() - p["lease"]["renewed"] <= lease_s:
            lock += f" (live lease of {p['lease']['owner']}: it locks it again)"
        res = f", reserved {p['reservation']}" if p["reservation"] else ""
        tags = " ".join(f"{k}={v}" for k, v in sorted(p["tags"].items()))
        print(f"  place {name}: {lock}{res}  [{tags}]")
    for name, b in s["boards"].items():
        lb = b.get("last_boot")
        boot = ""
        if lb:
            t = lb["t"]
            boot = "  last boot: " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items())
        print(f"  board {name}: power {b['power']}{' FROZEN' if b['frozen'] else ''}"
              f"{' (fault ' + b['pending_fault'] + ' pending)' if b['pending_fault'] else ''}"
              f", power-ons {b['power_ons']}{boot}")
    for t, r in s["reservations"].items():
        if r["state"] != "waiting":
            print(f"  reservation {t}: {r['owner']} {r['state']} {r['allocations'] or ''}")
    print(f"  queue: {len(s['queue'])} waiting" + (" (served in this order)" if s["queue"] else ""))
    for k, q in enumerate(s["queue"], 1):
        want = " ".join(f"{a}={b}" for a, b in sorted(q["filters"].get("main", {}).items()))
        print(f"    {k}. {q['owner']} prio {q['prio']:g} waiting {q['waited_s']:.0f} s for {want}")
    return 0


def cmd_power(args) -> int:
    st = _running(args)
    b = st["boards"].get(args.board)
    if b is None:
        raise RtlabError(f"no board {args.board!r} (boards: {', '.join(st['boards'])})")
    o = b["outlet"]
    if args.action == "cycle":
        pdu_request(st, "GET", f"/relay/{o}/0")
        time.sleep(1)
        args.action = "on"
    if args.action in ("on", "off"):
        pdu_request(st, "GET", f"/relay/{o}/{1 if args.action == 'on' else 0}")
    print(f"{args.board}: {'on' if pdu_request(st, 'GET', f'/relay/{o}') == '1' else 'off'}")
    return 0


def cmd_fault(args) -> int:
    st = _running(args)
    s = json.loads(pdu_request(st, "POST", f"/rack/fault/{args.board}", args.fault))
    print(f"{args.board}: fault {args.fault} ({'frozen' if s['frozen'] else 'pending: ' + str(s['pending_fault'])})")
    return 0


def cmd_reap(args) -> int:
    from ..lab.coordinator import Coordinator  # lazy: grpc, kept out of CLI start-up
    from ..lab.places import reap_stale
    addr = coordinator_address(args.dir)
    if not addr:
        raise RtlabError("no coordinator: start the rack (`rtlab rack up`) or set LG_COORDINATOR")
    with Coordinator(addr) as c:
        done = reap_stale(c, say=print)
    if not done:
        print("nothing to reap")
    return 0


def sync_places(coordinator: str, places_file: Path) -> list[str]:
    """Declare every place of *places_file* on *coordinator* (idempotent)."""
    from ..lab.coordinator import Coordinator  # lazy: grpc, kept out of CLI start-up
    places = load_places(places_file)
    with Coordinator(coordinator) as c:
        for p in places.values():
            c.ensure_place(p.name, list(p.matches), p.tags, p.comment)
    return list(places)


def cmd_places(args) -> int:
    addr = args.coordinator or coordinator_address(args.dir)
    if not addr:
        raise RtlabError("no coordinator: give --coordinator, set LG_COORDINATOR or start the rack")
    for name in sync_places(addr, args.file):
        print(f"place {name}: declared on {addr}")
    return 0


def cmd_env(args) -> int:
    st = _running(args)
    print(f"export LG_COORDINATOR={st['coordinator']}")
    return 0
