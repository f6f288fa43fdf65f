"""The rack's and the lab's labgrid files fit together, without hardware.

* labgrid/rack.yaml, places.yaml and exporter.yaml (rendered by labgrid's own
  exporter config loader) describe the same boards and groups;
* every real-board template in env/boards/ has its board properties and a
  budget class budgets/default.yaml knows, a place in labgrid/lab/places.yaml
  tagged with its name, and an exporter group in labgrid/lab/exporter.yaml;
* each template's drivers bind to that group's *local* resources (the board
  plugged straight into the machine that runs the test: USB resources simply
  unavailable). The same templates bound through a coordinator, as RemotePlace,
  are tests/integration/test_rack_lab.py.
"""
import json
import os
from pathlib import Path

import pytest
import yaml
from labgrid import Environment
from labgrid.remote.config import ResourceConfig
from labgrid.util.yaml import load as lg_load

from rtlab import ROOT
from rtlab.targets.boards import load_board
from rtlab.rack.config import load_places, load_rack_config

BOARDS = sorted(p.stem for p in (ROOT / "env" / "boards").glob("*.yaml"))
LAB = ROOT / "labgrid" / "lab"


def _render(path: Path, env: dict) -> dict:
    data = ResourceConfig(str(path), {"env": env, "isolated": False, "hostname": "h", "name": "n"}).data
    return json.loads(json.dumps(data))  # labgrid's loader gives OrderedDicts


TWINS = {"imx6q0": "twin-imx6q", "am335x0": "twin-am335x", "rk356x0": "twin-rk356x", "ipc0": "twin-x86-ipc"}


def test_rack_files_agree():
    cfg = load_rack_config()
    assert list(cfg.boards) == ["vb0", "vb1", *TWINS]
    for host in (cfg.coordinator, cfg.pdu):
        assert host.startswith("127.0.0.1:") and not host.endswith(":20408")
    env = {"RTLAB_RACK_BOARDS": " ".join(cfg.boards), "RTLAB_RACK_DIR": "/r",
           "RTLAB_RACK_PDU": "http://127.0.0.1:1", "RTLAB_RACK_BIND": "127.0.0.1"}
    for i, b in enumerate(cfg.boards):
        env.update({f"RTLAB_RACK_TTY_{b}": f"/dev/pts/{7 + i}", f"RTLAB_RACK_OUTLET_{b}": str(i)})
    groups = _render(cfg.exporter_config, env)
    assert set(groups) == set(cfg.boards)
    vb1 = groups["vb1"]
    assert vb1["NetworkPowerPort"] == {"model": "simplerest", "index": 1,
                                       "host": "http://127.0.0.1:1/relay/{index}/{value}"}
    assert vb1["RawSerialPort"] == {"port": "/dev/pts/8", "speed": 115200}
    assert vb1["TFTPProvider"] == {"internal": "/r/boards/vb1/tftp/", "external": ""}
    # the RK356x twin's interrupt-response probe, where the rack started one
    assert [b for b in cfg.boards if cfg.boards[b].type.irq_probe] == ["rk356x0"]
    assert "NetworkIrqProbe" not in groups["rk356x0"]
    probed = _render(cfg.exporter_config, {**env, "RTLAB_RACK_IRQPROBE_rk356x0": "4242"})
    assert probed["rk356x0"]["NetworkIrqProbe"] == {"host": "127.0.0.1", "port": 4242}
    # an exporter host of the multi-host lab exports it at its own address
    probed = _render(cfg.exporter_config, {**env, "RTLAB_RACK_IRQPROBE_rk356x0": "4242",
                                           "RTLAB_RACK_BIND": "10.231.1.2"})
    assert probed["rk356x0"]["NetworkIrqProbe"] == {"host": "10.231.1.2", "port": 4242}
    assert "NetworkIrqProbe" not in probed["vb1"]
    # every place owns exactly one board's group; rack-aarch64 jobs can use all
    owned = [m.split("/") for p in cfg.places.values() for m in p.matches]
    assert sorted((e, g) for e, g, *_ in owned) == sorted((cfg.name, b) for b in cfg.boards)
    assert {p.tags["board"] for p in cfg.places.values()} == {"rack-aarch64", *TWINS.values()}
    rack = load_board(ROOT / "env" / "rack-aarch64.yaml")
    assert (rack.kind, rack.arch, rack.budget_class) == ("remote", "aarch64", "qemu-tcg")


def test_ser2net_shim_binds_to_loopback(tmp_path):
    fake = tmp_path / "ser2net"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    import subprocess
    out = subprocess.run([str(ROOT / "labgrid" / "bin" / "ser2net"), "-d", "-n", "-Y",
                          "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp,40123",
                          "-Y", "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local"],
                         capture_output=True, text=True, env={**os.environ, "RTLAB_REAL_SER2NET": str(fake)},
                         check=True).stdout.splitlines()
    assert out[3] == "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp,127.0.0.1,40123"
    assert out[5] == "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local"


@pytest.mark.parametrize("board", BOARDS)
def test_real_board_template_properties_places_and_groups(board):
    b = load_board(ROOT / "env" / "boards" / f"{board}.yaml")
    assert b.kind == "remote" and b.name == board
    budgets = yaml.safe_load((ROOT / "budgets" / "default.yaml").read_text())["budgets"]
    assert b.budget_class in budgets
    places = [p for p in load_places(LAB / "places.yaml").values() if p.tags.get("board") == board]
    assert places, f"no place in labgrid/lab/places.yaml is tagged board={board}"
    groups = _render(LAB / "exporter.yaml", dict(os.environ))
    for p in places:
        for m in p.matches:
            exporter, group, *_ = m.split("/")
            assert exporter == "lab1" and group in groups, m


def _local_env(tmp_path: Path, board: str) -> Environment:
    """The template with its RemotePlace replaced by the lab group's resources."""
    data = yaml.safe_load((ROOT / "env" / "boards" / f"{board}.yaml").read_text()
                          .replace("!template ", ""))
    place = next(p for p in load_places(LAB / "places.yaml").values() if p.tags.get("board") == board)
    group = _render(LAB / "exporter.yaml", dict(os.environ))[place.matches[0].split("/")[1]]
    resources = {k: v for k, v in group.items() if k != "location"}
    main = data["targets"]["main"]
    main["resources"] = resources
    data["images"] = {k: "/nonexistent" for k in data.get("images", {})}
    for drv in main["drivers"].values():
        if isinstance(drv, dict) and "bootargs" in drv:
            drv["bootargs"] = drv["bootargs"].replace("$LG_RTLAB_BOOT_ARGS", "")
    data["imports"] = ["rtlab.lab.drivers", "rtlab.lab.uboot", "rtlab.lab.irqprobe"]
    path = tmp_path / f"{board}-local.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))  # labgrid builds in file order
    return Environment(str(path))


EXPECT = {
    "rk3568": {"RKUSBDriver": "RKUSBLoader", "IrqProbeDriver": "NetworkIrqProbe", "speed": 1500000,
               "strategy": "RtlabUBootStrategy"},
    "rk3566": {"RKUSBDriver": "RKUSBLoader", "speed": 1500000, "strategy": "RtlabUBootStrategy"},
    "imx6q-sabresd": {"UUUDriver": "IMXUSBLoader", "speed": 115200, "strategy": "RtlabUBootStrategy"},
    "am335x-bbb": {"USBSDMuxDriver": "USBSDMuxDevice", "USBStorageDriver": "USBSDMuxDevice",
                   "speed": 115200, "strategy": "RtlabUBootStrategy"},
    "x86-ipc": {"speed": 115200, "strategy": "RtlabNetbootStrategy"},
}


@pytest.mark.parametrize("board", BOARDS)
def test_real_board_template_binds_to_local_resources(tmp_path, board):
    assert board in EXPECT, f"add {board} to EXPECT"
    t = _local_env(tmp_path, board).get_target("main")
    try:
        s = t.get_driver("Strategy", activate=False)
        assert type(s).__name__ == EXPECT[board]["strategy"]
        assert type(s.power).__name__ == "NetworkPowerDriver"
        assert type(s.console.port).__name__ == "USBSerialPort"
        assert s.console.port.speed == EXPECT[board]["speed"]
        assert type(s.staging.provider).__name__ == "TFTPProvider"
        for drv, res in EXPECT[board].items():
            if drv.endswith("Driver"):
                d = t.get_driver(drv, activate=False)
                bound = [type(r).__name__ for r in d.get_bound_resources()]
                assert bound == [res], (drv, bound)
    finally:
        t.cleanup()


@pytest.mark.parametrize("board", sorted(TWINS))
def test_each_twin_is_its_real_board_but_the_hardware(board):
    """A twin (env/twin-*.yaml, a rack board type with twin_of) and its
    real-board template share the board options rtlab schedules and judges
    by but the budget class (TCG), the same staging, and a rack board whose
    QEMU has the real board's CPU count and arch."""
    cfg = load_rack_config()
    spec = cfg.boards[board]
    twin = load_board(ROOT / "env" / f"{TWINS[board]}.yaml")
    real = load_board(ROOT / "env" / "boards" / f"{spec.type.twin_of}.yaml")
    assert "twin" in twin.features and twin.boots_built_kernels and not real.boots_built_kernels
    assert (twin.arch, twin.cpus, twin.isolate_cpu, twin.kind) == (real.arch, real.cpus, real.isolate_cpu, real.kind)
    assert (spec.type.arch, spec.type.smp) == (twin.arch, twin.cpus)
    assert twin.budget_class == "qemu-tcg"
    places = [p for p in cfg.places.values() if any(m.split("/")[1] == board for m in p.matches)]
    assert [p.tags["board"] for p in places] == [twin.name]
    drivers = {}
    for b in (twin, real):
        with open(b.env_file) as f:
            drivers[b.name] = lg_load(f)["targets"]["main"]["drivers"]
    t, r = drivers[twin.name]["TFTPStagingDriver"], drivers[real.name]["TFTPStagingDriver"]
    for key in ("format", "kernel", "initrd", "boot_cmd"):
        assert t.get(key) == r.get(key), key
    # the twin's strategy drives its boot: U-Boot only where its QEMU runs one
    assert ("RtlabUBootDriver" in drivers[twin.name]) == (spec.type.boot == "uboot")
    assert ("RtlabUBootStrategy" in drivers[twin.name]) == (spec.type.boot == "uboot")
    # README's differences table names every twin
    assert f"`{twin.name}`" in (ROOT / "labgrid" / "README.md").read_text()
