"""The LAVA side of rtlab's boards (lava/boards.yaml).

A :class:`LavaBoard` pairs an rtlab :class:`~rtlab.targets.boards.Board` with what a
LAVA job for it needs: device type, boot method, device dictionary, and for
QEMU boards the machine and kernel command line of the board's labgrid env
file, so both paths boot the same thing.
"""
from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from labgrid.util.yaml import load as lg_load

from .. import ROOT
from ..targets.arch import get_or_none
from ..targets.boards import Board, find_board
from ..core.config import Node, open_node
from ..errors import InputError
from ..rack.config import load_rack_config

LAVA_DIR = ROOT / "lava"
BOARDS_FILE = LAVA_DIR / "boards.yaml"



def lava_arch_name(arch: str) -> str:
    """LAVA's architecture name (job context.arch) of an rtlab arch (rtlab/targets/arch.py)."""
    a = get_or_none(arch)
    return a.lava if a else arch


@dataclass(frozen=True)
class QemuMachine:
    """What the board's labgrid QEMUDriver runs, read from its env file."""

    binary: str
    machine: str
    cpu: str
    memory: str
    #: extra QEMU arguments, with -initrd taken out (LAVA passes the ramdisk)
    extra: tuple[str, ...]
    #: the kernel command line with `$LG_RTLAB_BOOT_ARGS` left to fill in
    boot_args_template: str

    @property
    def memory_mb(self) -> int:
        """QEMU's -m in MiB ("1024", "1024M", "1G"; QEMU's default unit is MiB)."""
        m = self.memory.strip().upper().removesuffix("B")
        mult = {"G": 1024, "M": 1, "K": 1 / 1024}.get(m[-1:], 1)
        try:
            return int(float(m.rstrip("GMK")) * mult)
        except ValueError:
            raise InputError(self.memory, "QEMU memory is not a size (-m)") from None

    def kernel_args(self, variant_args: str) -> str:
        text = string.Template(self.boot_args_template).safe_substitute(LG_RTLAB_BOOT_ARGS=variant_args)
        return " ".join(text.split())


@dataclass(frozen=True)
class LavaBoard:
    name: str
    board: Board
    device_type: str
    #: device dictionary (rendered form) for lava-run, absolute path
    device: Path
    lava_arch: str
    boot: str                      # "qemu" | "u-boot"
    kernel_type: str = "image"     # u-boot: image | zimage | uimage
    dtb: Optional[str] = None      # u-boot: path inside the kernel package's /usr/lib/linux-image-<release>/
    lab: bool = False              # only LAVA drives it (no labgrid env file)
    #: lava-run can run its jobs on this machine (QEMU boards, QEMU as a U-Boot board)
    runs_here: bool = False
    #: lava-run --dispatcher configuration, absolute path
    dispatcher: Optional[Path] = None
    qemu: Optional[QemuMachine] = field(default=None, compare=False)


def _qemu_machine(board: Board) -> QemuMachine:
    from labgrid.util.yaml import load as lg_load

    with open(board.env_file) as f:
        env = lg_load(f)
    node = Node(board.env_file, env).req("targets").req("main").req("drivers")
    drv = node.req("QEMUDriver").mapping()
    tools = env.get("tools") or {}

    def text(v) -> str:
        return v.template if isinstance(v, string.Template) else str(v or "")

    extra = text(drv.get("extra_args")).split()
    keep: list[str] = []
    skip = False
    for tok in extra:  # drop "-initrd <path>": LAVA adds the ramdisk itself
        if skip:
            skip = False
            continue
        if tok == "-initrd":
            skip = True
            continue
        keep.append(tok)
    pairs = []
    i = 0
    while i < len(keep):  # "-smp 2" stays one option, as LAVA device dictionaries list them
        if keep[i].startswith("-") and i + 1 < len(keep) and not keep[i + 1].startswith("-"):
            pairs.append(f"{keep[i]} {keep[i + 1]}")
            i += 2
        else:
            pairs.append(keep[i])
            i += 1
    binary = tools.get(drv.get("qemu_bin"), drv.get("qemu_bin"))
    return QemuMachine(binary=str(binary), machine=str(drv["machine"]), cpu=str(drv["cpu"]),
                       memory=str(drv["memory"]), extra=tuple(pairs),
                       boot_args_template=text(drv.get("boot_args")))


def _twin_machine(twin: Board, where: Node) -> QemuMachine:
    """The QEMU machine of a rack twin (labgrid/rack.yaml board type of the
    place tagged board=<twin>) and the kernel command line its env file stages."""
    cfg = load_rack_config()
    groups = [m.split("/")[1] for p in cfg.places.values() if p.tags.get("board") == twin.name
              for m in p.matches]
    spec = next((cfg.boards[g] for g in groups if g in cfg.boards), None)
    if spec is None:
        raise where.error(f"no rack board has a place tagged board={twin.name} ({cfg.places_file})")
    t = spec.type
    with open(twin.env_file) as f:
        env = lg_load(f)
    staging = Node(twin.env_file, env).req("targets").req("main").req("drivers").req("TFTPStagingDriver")
    args = staging.mapping().get("bootargs")
    template = args.template if isinstance(args, string.Template) else str(args or "")
    nic = "user" if t.nic == "onboard" else f"user,model={t.nic}"
    # the console UART on stdio (LAVA's serial), earlier UARTs unconnected
    serial = ["-serial null"] * t.console_uart + (["-serial mon:stdio"] if t.console_uart else [])
    return QemuMachine(binary=t.qemu, machine=t.machine, cpu=t.cpu, memory=t.memory,
                       extra=(f"-smp {t.smp}", "-accel tcg", "-no-reboot", f"-nic {nic}", *serial),
                       boot_args_template=template)


def load_lava_boards(path: Path = BOARDS_FILE) -> dict[str, LavaBoard]:
    """Every board LAVA can run, by rtlab board name."""
    root = open_node(path).only(["qemu", "lab"])
    out: dict[str, LavaBoard] = {}
    for name, n in root.child("qemu").items():
        n.only(["device_type", "device", "arch"])
        board = find_board(name)
        if board.kind != "qemu":
            raise n.error(f"board {name} is a {board.kind} board, not a QEMU one")
        lava_arch = n.child("arch").str(lava_arch_name(board.arch))
        out[name] = LavaBoard(name=name, board=board, device_type=n.req("device_type").str(),
                              device=(path.parent / n.req("device").str()).resolve(),
                              lava_arch=lava_arch, boot="qemu", runs_here=True, qemu=_qemu_machine(board))
    for name, n in root.child("lab").items():
        n.only(["device_type", "device", "dispatcher", "runs_here", "arch", "boot", "kernel_type", "dtb",
                "board"])
        if isinstance(n.req("board").value, str):  # the properties of an env/ board
            same = find_board(n.req("board").str())
            board = dataclasses.replace(same, name=name, env_file=path.resolve(), kind="remote",
                                        features=("lava",), options={**same.options, "kind": "remote"})
        else:
            b = n.req("board").only(["arch", "cpus", "isolate_cpu", "budget_class"])
            cpus = b.req("cpus").integer(minimum=1)
            iso = b.child("isolate_cpu")
            isolate = None if iso.value is None else iso.integer(minimum=0)
            if isolate is not None and isolate >= cpus:
                raise iso.error(f"CPU {isolate} does not exist on a {cpus}-CPU board")
            board = Board(name=name, env_file=path.resolve(), arch=b.req("arch").str(), cpus=cpus,
                          isolate_cpu=isolate, budget_class=b.req("budget_class").str(), kind="remote",
                          features=("lava",), options=dict(b.mapping()))
        boot = n.req("boot").str()
        if boot not in ("u-boot", "qemu"):
            raise n.child("boot").error(f"lab boards boot with u-boot, or qemu for a rack twin (got {boot!r})")
        qemu = None
        if boot == "qemu":  # a rack twin whose boot path LAVA cannot drive: its machine, direct boot
            if not isinstance(n.req("board").value, str) or "twin" not in same.features:
                raise n.child("boot").error("boot: qemu is for the rack's twins (board: twin-...)")
            qemu = _twin_machine(same, n.child("board"))
        kernel_type = n.child("kernel_type").str("image")
        if kernel_type not in ("image", "zimage", "uimage"):
            raise n.child("kernel_type").error(f"must be image, zimage or uimage, got {kernel_type!r}")
        dispatcher = n.child("dispatcher")
        out[name] = LavaBoard(name=name, board=board, device_type=n.req("device_type").str(),
                              device=(path.parent / n.req("device").str()).resolve(),
                              lava_arch=n.child("arch").str(lava_arch_name(board.arch)),
                              boot=boot, kernel_type=kernel_type,
                              dtb=n.child("dtb").value and n.child("dtb").str(), lab=True,
                              runs_here=n.child("runs_here").boolean(False), qemu=qemu,
                              dispatcher=(path.parent / dispatcher.str()).resolve() if dispatcher.value else None)
    return out
