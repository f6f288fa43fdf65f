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
import subprocess
import time
from pathlib import Path

from ..errors import InputError, RtlabError
from ..rack.pdu import FAULTS
from ..rack.control import pdu_request, rack_down, rack_status, rack_up, sync_places
from ..rack.state import coordinator_address, rack_dir, running_state



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
    st.add_argument("--json", action="store_true", help="print the status as one JSON object")
    st.set_defaults(func=cmd_status)
    pw = common(rs.add_parser("power", help="switch a board's PDU outlet"))
    pw.add_argument("board", help="a rack board (vb0, twin-rk356x, ...: rtlab rack status)")
    pw.add_argument("action", choices=["on", "off", "cycle", "get"], help="switch the outlet, or print its state")
    pw.set_defaults(func=cmd_power)
    fl = common(rs.add_parser("fault", help="inject a fault: hang-boot (next power-on hangs), hang-now, clear"))
    fl.add_argument("board", help="a rack board (vb0, twin-rk356x, ...: rtlab rack status)")
    fl.add_argument("fault", choices=FAULTS, help="the fault to inject, or clear to take it away")
    fl.set_defaults(func=cmd_fault)
    common(rs.add_parser("reap", help="release places held by dead rtlab jobs now")).set_defaults(func=cmd_reap)
    pl = common(rs.add_parser("places", help="create/update the places of a places file on a coordinator"))
    pl.add_argument("file", type=Path, help="places file (e.g. labgrid/lab/places.yaml)")
    pl.add_argument("--coordinator", help="HOST:PORT (default: $LG_COORDINATOR, else the running rack's)")
    pl.set_defaults(func=cmd_places)
    common(rs.add_parser("env", help="print shell exports for labgrid-client")).set_defaults(func=cmd_env)


# -- helpers (also used by tests and the benchmark) ------------------------------------

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
