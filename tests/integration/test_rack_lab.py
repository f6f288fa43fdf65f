"""Real-board templates through labgrid's remote infrastructure, without boards.

A coordinator and an exporter run labgrid/lab/exporter.yaml (the lab host
template: USB serial ports, RK/i.MX boot ROMs, an SD mux, PDU outlets, TFTP
dirs); the places of labgrid/lab/places.yaml are declared and locked; each
env/boards/*.yaml is then loaded as a job would load it (RemotePlace, LG_PLACE):
the target instantiates and every driver binds to the resources the place
brings. USB resources are exported as unavailable (no hardware), so nothing is
activated: no power switched, no console opened, no loader run.

A second exporter runs labgrid/lab/examples/exporter.yaml (one group per
kind of resource real labs use: USB serial and a host UART through ser2net,
a console server's NetworkSerialPort, a network PDU, a USB-SD-Mux, TFTP and
NFS staging), and labgrid/lab/examples/env.yaml's drivers bind to each
through its place.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.rack.control import sync_places
from rtlab.lab.coordinator import Coordinator
from rtlab.rack.config import load_places
from rtlab.core.procutil import free_port

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light

BIN = Path(sys.executable).parent
LAB = ROOT / "labgrid" / "lab"

PROBE = r"""
import json, os, sys
from labgrid import Environment

out = {}
for board, place in json.loads(sys.argv[1]).items():
    os.environ["LG_PLACE"] = place
    t = Environment(f"env/boards/{board}.yaml").get_target("main")
    drivers = {}
    for d in t.drivers:
        drivers[type(d).__name__] = {k: type(getattr(d, k)).__name__
                                     for k in getattr(d, "bindings", {}) if getattr(d, k, None) is not None}
    ser = t.get_driver("ConsoleProtocol", activate=False).port
    out[board] = {"drivers": drivers, "speed": ser.speed, "serial": type(ser).__name__,
                  "resources": {type(r).__name__: bool(r.avail) for r in t.resources}}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("lab")
    addr = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "LG_COORDINATOR": addr}
    procs = [subprocess.Popen([str(BIN / "labgrid-coordinator"), "-l", addr], cwd=d,
                              stdout=open(d / "coordinator.log", "wb"), stderr=subprocess.STDOUT,
                              start_new_session=True)]
    try:
        with Coordinator(addr) as c:
            c.wait_ready(30)
        procs.append(subprocess.Popen(
            [str(BIN / "labgrid-exporter"), "-c", addr, "-n", "lab1", "--hostname", "127.0.0.1",
             str(LAB / "exporter.yaml")], cwd=d, stdout=open(d / "exporter.log", "wb"),
            stderr=subprocess.STDOUT, start_new_session=True, env=env))
        procs.append(subprocess.Popen(
            [str(BIN / "labgrid-exporter"), "-c", addr, "-n", "lab2", "--hostname", "127.0.0.1",
             str(LAB / "examples" / "exporter.yaml")], cwd=d, stdout=open(d / "exporter-examples.log", "wb"),
            stderr=subprocess.STDOUT, start_new_session=True, env=env))
        places = sync_places(addr, LAB / "places.yaml")
        examples = sync_places(addr, LAB / "examples" / "places.yaml")
        deadline = time.monotonic() + 60
        while True:  # until the exporters' groups are on the coordinator
            # -vv: unavailable resources too (the USB ones: no hardware here),
            # else a group of only USB resources never shows and this waits 60 s
            out = subprocess.run([str(BIN / "labgrid-client"), "-vv", "resources"], env=env,
                                 capture_output=True, text=True).stdout
            if all(f"lab1/{p}/" in out for p in places) and all(f"lab2/{p.removeprefix('example-')}/" in out
                                                                 for p in examples):
                break
            assert time.monotonic() < deadline, f"the exporters' groups never came: {out}"
            time.sleep(1)
        yield addr, env, d
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def test_real_board_templates_bind_through_remote_places(lab):
    addr, env, d = lab
    places = load_places(LAB / "places.yaml")
    boards = {p.tags["board"]: p.name for p in places.values()}
    assert set(boards) == {f.stem for f in (ROOT / "env" / "boards").glob("*.yaml")}
    env = {**env, "LG_USERNAME": "templates", "LG_RTLAB_KERNEL": "/nonexistent/kernel",
           "LG_RTLAB_INITRD": "/nonexistent/initrd", "LG_RTLAB_BOOT_ARGS": ""}
    for place in boards.values():
        lock = subprocess.run([str(BIN / "labgrid-client"), "-p", place, "lock"], env=env,
                              capture_output=True, text=True)
        assert lock.returncode == 0, lock.stderr
    try:
        res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(boards)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
        got = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        with Coordinator(addr) as c:
            for place in boards.values():
                c.release_from(place, f"{os.uname().nodename}/templates")
    for board, info in got.items():
        drv = info["drivers"]
        strategy = drv.get("RtlabUBootStrategy") or drv.get("RtlabNetbootStrategy")
        assert strategy, (board, drv)
        assert strategy["power"] == "NetworkPowerDriver" and strategy["shell"] == "RtlabShellDriver"
        assert strategy["staging"] == "TFTPStagingDriver"
        assert drv["NetworkPowerDriver"] == {"port": "NetworkPowerPort"}
        assert drv["TFTPStagingDriver"] == {"provider": "RemoteTFTPProvider"}
        assert info["serial"] == "NetworkSerialPort"       # ser2net on the exporter
        assert info["resources"]["NetworkPowerPort"] is True
        assert info["resources"]["NetworkSerialPort"] is False  # no USB serial adapter here
    assert got["rk3568"]["speed"] == got["rk3566"]["speed"] == 1500000
    assert got["rk3568"]["drivers"]["RKUSBDriver"] == {"loader": "NetworkRKUSBLoader"}
    assert got["imx6q-sabresd"]["drivers"]["UUUDriver"] == {"loader": "NetworkIMXUSBLoader"}
    assert got["am335x-bbb"]["drivers"]["USBSDMuxDriver"] == {"mux": "NetworkUSBSDMuxDevice"}
    assert got["am335x-bbb"]["drivers"]["USBStorageDriver"] == {"storage": "NetworkUSBSDMuxDevice"}
    assert "RtlabUBootDriver" not in got["x86-ipc"]["drivers"]  # PXE: no bootloader to drive
    with Coordinator(addr) as c:
        assert not any(p.acquired for p in c.places().values())


EXAMPLES = r"""
import json, sys
from labgrid import Environment

env = Environment("labgrid/lab/examples/env.yaml")
out = {}
for name in json.loads(sys.argv[1]):
    t = env.get_target(name)
    drivers = {}
    for d in t.drivers:
        drivers[type(d).__name__] = {k: type(getattr(d, k)).__name__
                                     for k in getattr(d, "bindings", {}) if getattr(d, k, None) is not None}
    out[name] = {"drivers": drivers,
                 "resources": {type(r).__name__: {"avail": bool(r.avail),
                                                  **{k: getattr(r, k) for k in ("host", "port", "internal", "external")
                                                     if isinstance(getattr(r, k, None), (str, int))}}
                               for r in t.resources if type(r).__name__ != "RemotePlace"}}
print(json.dumps(out))
"""


def test_resource_examples_bind_through_remote_places(lab):
    """Each resource of the examples, exported by labgrid's exporter from
    examples/exporter.yaml, reached through its place by the driver rtlab's
    env files use for it (examples/env.yaml)."""
    addr, env, d = lab
    places = load_places(LAB / "examples" / "places.yaml")
    targets = [p.removeprefix("example-") for p in places]
    env = {**env, "LG_USERNAME": "examples"}
    for place in places:
        lock = subprocess.run([str(BIN / "labgrid-client"), "-p", place, "lock"], env=env,
                              capture_output=True, text=True)
        assert lock.returncode == 0, lock.stderr
    try:
        res = subprocess.run([sys.executable, "-c", EXAMPLES, json.dumps(targets)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
        got = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        with Coordinator(addr) as c:
            for place in places:
                c.release_from(place, f"{os.uname().nodename}/examples")
    serial = {"RtlabSerialDriver": {"port": "NetworkSerialPort"}}
    # USB serial and the host's UART: ser2net on the exporter, at the exporter's address (no adapter
    # here: unavailable; a device path is exported as it is, ser2net opens it when the place is locked)
    assert got["usb-serial"]["drivers"] == got["host-uart"]["drivers"] == serial
    assert not got["usb-serial"]["resources"]["NetworkSerialPort"]["avail"]
    uart = got["host-uart"]["resources"]["NetworkSerialPort"]
    assert uart["avail"] and uart["host"] == "127.0.0.1" and isinstance(uart["port"], int), uart
    # a console server's own ser2net, passed through as it is
    assert got["console-server"]["drivers"] == serial
    assert got["console-server"]["resources"]["NetworkSerialPort"] == {"avail": True, "host": "console1.lab.example",
                                                                       "port": 3001}
    assert got["pdu"]["drivers"] == {"NetworkPowerDriver": {"port": "NetworkPowerPort"}}
    assert got["pdu"]["resources"]["NetworkPowerPort"] == {"avail": True, "host": "pdu-a.lab.example"}
    assert got["sd-mux"]["drivers"] == {"USBSDMuxDriver": {"mux": "NetworkUSBSDMuxDevice"},
                                        "USBStorageDriver": {"storage": "NetworkUSBSDMuxDevice"}}
    assert got["tftp"]["drivers"] == {"TFTPStagingDriver": {"provider": "RemoteTFTPProvider"}}
    assert got["tftp"]["resources"]["RemoteTFTPProvider"] == {"avail": True, "host": "127.0.0.1",
                                                              "internal": "/srv/tftp/board-1/",
                                                              "external": "board-1/"}
    assert got["nfs"]["drivers"] == {"NFSProviderDriver": {"provider": "RemoteNFSProvider"}}
    assert got["nfs"]["resources"]["RemoteNFSProvider"] == {"avail": True, "host": "127.0.0.1"}
