"""The rack's services through faults, without booting a board: the
coordinator SIGKILLed comes back (supervised) with its places and the lease
tags on them; the exporter SIGKILLed comes back and its resources reappear;
`rtlab rack down` then `rtlab rack up` on the same ports at once (connections
in TIME-WAIT) works."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.rack.control import rack_down, rack_up
from rtlab.lab import places as P
from rtlab.lab.coordinator import Coordinator, CoordinatorError
from rtlab.core.procutil import free_port
from rtlab.rack.state import read_state

#: minutes of real coordinator and exporter restarts: `make test-long`, not make test
pytestmark = pytest.mark.long

BIN = Path(sys.executable).parent


def resources(addr: str) -> set:
    out = subprocess.run([str(BIN / "labgrid-client"), "resources"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "LG_COORDINATOR": addr})
    return {"/".join(line.split("/")[:2]) for line in out.stdout.split()}


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except CoordinatorError as e:
            last = e
        time.sleep(1.0)
    raise AssertionError(f"{what} within {timeout:g} s (last: {last})")


def test_coordinator_and_exporter_killed_come_back_and_down_up_reuses_the_ports(tmp_path):
    d = tmp_path / "rack"
    cport, pport = free_port(), free_port()
    st = rack_up(d, coordinator_port=cport, pdu_port=pport)
    try:
        addr = st["coordinator"]
        boards = {f"{st['name']}/{b}" for b in st["boards"]}
        owner = "runner-x/rtlab-1-1-1"
        place = next(iter(st["places"]))
        with Coordinator(addr) as c:
            c.set_tags(place, P.lease_tags(owner, time.time(), time.time()))
        time.sleep(P.COORDINATOR_SAVE_S + 2)  # labgrid saves places.yaml every 15 s

        os.killpg(st["pids"]["coordinator"], signal.SIGKILL)
        wait_for(lambda: read_state(d)["pids"]["coordinator"] != st["pids"]["coordinator"], 60,
                 "the coordinator was not restarted")
        with Coordinator(addr) as c:
            c.wait_ready(30)
            places = wait_for(lambda: Coordinator(addr).places(), 30, "no places after the restart")
        assert set(places) == set(st["places"])
        lease = P.read_lease(places[place])
        assert lease is not None and lease.owner == owner  # the lease tags survived
        wait_for(lambda: boards <= resources(addr), 90, "exporter resources did not come back")

        st2 = read_state(d)
        os.killpg(st2["pids"]["exporter"], signal.SIGKILL)
        wait_for(lambda: read_state(d)["pids"]["exporter"] != st2["pids"]["exporter"], 60,
                 "the exporter was not restarted")
        wait_for(lambda: boards <= resources(addr), 90, "exporter resources did not come back")
        assert read_state(d)["state"] == "ready"
        restarts = (d / "reaper.jsonl").read_text()
        assert "restart coordinator" in restarts and "restart exporter" in restarts
    finally:
        rack_down(d)
    # at once, same ports: what TIME-WAIT connections used to make fail
    st = rack_up(d, coordinator_port=cport, pdu_port=pport)
    try:
        assert st["state"] == "ready" and st["coordinator"].endswith(f":{cport}")
    finally:
        rack_down(d)
