"""The rack's configuration: labgrid/rack.yaml (virtual hardware, listeners)
and labgrid/places.yaml (places on the coordinator)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import ROOT
from ..core.config import open_node
from ..errors import InputError

LABGRID_DIR = ROOT / "labgrid"
DEFAULT_CONFIG = LABGRID_DIR / "rack.yaml"
BOARD_TYPE_KEYS = ("arch", "qemu", "machine", "cpu", "smp", "memory", "firmware", "nic", "uart_speed",
                   "boot", "console_uart", "twin_of", "irq_probe")
#: how a board type comes up at power-on (rtlab/rack/board.py):
#:   uboot   the boot ROM is U-Boot (`firmware`, QEMU -bios): DHCP + TFTP from there
#:   pxe     the machine's own firmware netboots (SeaBIOS + the NIC's iPXE ROM):
#:           DHCP hands it the staged iPXE script (rtlab/boot.ipxe)
#:   direct  no bootloader QEMU can run for this machine: QEMU itself loads
#:           what is staged in the TFTP directory (uEnv.txt's kernel, initrd,
#:           dtb, bootargs), as the board's U-Boot would
BOOT_KINDS = ("uboot", "pxe", "direct")


@dataclass(frozen=True)
class BoardType:
    name: str
    arch: str
    qemu: str
    machine: str
    cpu: str
    smp: int
    memory: str
    firmware: str = ""
    nic: str = "virtio-net-pci"
    uart_speed: int = 115200
    boot: str = "uboot"
    #: which of the machine's UARTs is the console (sabrelite: the second, ttymxc1)
    console_uart: int = 0
    #: the real board (env/boards/<name>.yaml) this type is a virtual twin of
    twin_of: str = ""
    #: an interrupt-response probe wired to it: a PCI 16550 whose chardev is
    #: the rack's twin probe (rtlab.lab.irqtwin), exported as NetworkIrqProbe
    irq_probe: bool = False


@dataclass(frozen=True)
class BoardSpec:
    name: str
    type: BoardType
    outlet: int


@dataclass(frozen=True)
class PlaceSpec:
    name: str
    matches: tuple
    tags: dict = field(default_factory=dict, hash=False)
    comment: str = ""


@dataclass(frozen=True)
class RackConfig:
    path: Path
    name: str               # exporter name
    coordinator: str        # host:port
    pdu: str                # host:port
    exporter_config: Path
    places_file: Path
    boards: dict            # name -> BoardSpec (ordered by outlet)
    places: dict            # name -> PlaceSpec
    idle_power_off_s: float = 120.0   # power off boards whose place is unlocked this long (0: never)


def _host_port(node, what: str) -> str:
    text = node.str()
    host, _, port = text.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]") or not port.isdigit():
        raise node.error(f"{what} must be a loopback HOST:PORT (the rack listens on loopback only), got {text!r}")
    return text


def _ranged(node, lo: int, hi: int, default=None) -> int:
    v = node.integer(default=default, minimum=lo)
    if v > hi:
        raise node.error(f"must be <= {hi}, got {v!r}")
    return v


def load_rack_config(path: Optional[Path] = None) -> RackConfig:
    path = Path(path or DEFAULT_CONFIG)
    root = open_node(path).only(["name", "coordinator", "pdu", "exporter", "places", "board_types", "boards",
                                 "idle_power_off_s"])
    types = {}
    for tname, tnode in root.req("board_types").items():
        t = tnode.only(BOARD_TYPE_KEYS)
        boot = t.child("boot").str("uboot")
        if boot not in BOOT_KINDS:
            raise t.child("boot").error(f"must be one of {', '.join(BOOT_KINDS)}, got {boot!r}")
        firmware = t.req("firmware").str() if boot == "uboot" else t.child("firmware").str("")
        types[tname] = BoardType(
            name=tname, arch=t.req("arch").str(), qemu=t.req("qemu").str(), machine=t.req("machine").str(),
            cpu=t.req("cpu").str(), smp=_ranged(t.req("smp"), 1, 64),
            memory=str(t.req("memory").value),
            firmware=firmware, nic=t.child("nic").str("virtio-net-pci"),
            uart_speed=t.child("uart_speed").integer(default=115200), boot=boot,
            console_uart=_ranged(t.child("console_uart"), 0, 3, default=0),
            twin_of=t.child("twin_of").str(""), irq_probe=t.child("irq_probe").boolean(default=False))
    boards = {}
    outlets = set()
    for bname, bnode in root.req("boards").items():
        b = bnode.only(["type", "outlet"])
        tname = b.req("type").str()
        if tname not in types:
            raise b.child("type").error(f"unknown board type {tname!r} (known: {', '.join(sorted(types))})")
        outlet = b.req("outlet").integer(minimum=0)
        if outlet in outlets:
            raise b.child("outlet").error(f"outlet {outlet} is used by two boards")
        outlets.add(outlet)
        if not bname.replace("_", "").isalnum():
            raise bnode.error("board names are letters, digits and _ (they name env variables)")
        boards[bname] = BoardSpec(name=bname, type=types[tname], outlet=outlet)
    boards = dict(sorted(boards.items(), key=lambda kv: kv[1].outlet))
    name = root.req("name").str()
    places_file = path.parent / root.child("places").str("places.yaml")
    places = load_places(places_file)
    return RackConfig(
        path=path.resolve(), name=name,
        coordinator=_host_port(root.req("coordinator"), "coordinator"),
        pdu=_host_port(root.req("pdu"), "pdu"),
        exporter_config=(path.parent / root.child("exporter").str("exporter.yaml")).resolve(),
        places_file=places_file.resolve(), boards=boards, places=places,
        idle_power_off_s=float(root.child("idle_power_off_s").number(default=120.0)))


def load_places(path: Path) -> dict:
    root = open_node(path).only(["places"])
    out = {}
    for pname, pnode in root.req("places").items():
        p = pnode.only(["comment", "matches", "tags"])
        matches = tuple(p.req("matches").str_list())
        for m in matches:
            if not 3 <= len(m.split("/")) <= 4:
                raise p.child("matches").error(f"match {m!r} is not exporter/group/class[/name]")
        tags = {str(k): str(v.value) for k, v in p.child("tags").items()}
        out[pname] = PlaceSpec(name=pname, matches=matches, tags=tags, comment=p.child("comment").str(""))
    if not out:
        raise InputError(path, "no places defined")
    return out
