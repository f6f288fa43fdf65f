"""Boards: labgrid environment files in env/ plus the properties rtlab needs.

A board is a labgrid target (resources + drivers + strategy); rtlab keeps its
own properties in the target's ``options`` (labgrid's place for them), so one
file describes the hardware for labgrid and the board for rtlab.
"""
from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from labgrid.util.yaml import load as lg_load

from .. import ROOT
from ..core.config import Node, shown
from ..errors import InputError
from ..core.params import ParamError, check_name
from ..registry import Registry
from .variants import HOST_VARIANT

BOARD_WORKDIR = "/tmp/rtlab"
#: the job's own directory on the board, named by the runner per job so two
#: jobs never share files (the local board runs every job in this machine's /tmp)
WORKDIR_ENV = "RTLAB_BOARD_WORKDIR"
_WORKDIR_RE = re.compile(r"^/[A-Za-z0-9._/@+-]+$")


def job_workdir() -> str:
    """This job's work dir on the board (RTLAB_BOARD_WORKDIR, set by the
    runner), BOARD_WORKDIR outside a job (LAVA definitions, tests)."""
    wd = os.environ.get(WORKDIR_ENV) or BOARD_WORKDIR
    if not _WORKDIR_RE.match(wd) or ".." in wd:
        raise ValueError(f"{WORKDIR_ENV}={wd!r} is not a plain absolute path")
    return wd

ENV_DIR = ROOT / "env"
KINDS = ("qemu", "local", "remote")


@dataclass(frozen=True)
class Board:
    name: str
    env_file: Path
    arch: str
    cpus: int
    isolate_cpu: Optional[int]
    budget_class: str
    kind: str
    features: tuple = ()
    options: dict = field(default_factory=dict, compare=False)
    #: why kernels built from source cannot run on this board (None: they
    #: can): a machine fact, e.g. a twin whose emulated console UART the
    #: newer kernels' driver cannot drive. Variants that need a built kernel
    #: are then "not available" with this reason, never booted to hang.
    built_kernels_unusable: Optional[str] = None

    @property
    def fixed_kernel(self) -> bool:
        """Boards that cannot boot another kernel run only the `host` variant."""
        return self.kind == "local"

    @property
    def boots_built_kernels(self) -> bool:
        """Can boot a kernel built from source for this job (`--kernel-tree`)?
        QEMU boards and the rack's virtual twins boot what the job stages,
        LAVA's boards what the job deploys; other rack boards boot Debian's
        kernels the rack's flashing step stages, the local board its own."""
        return self.kind == "qemu" or "twin" in self.features or "lava" in self.features

    @property
    def emulated(self) -> bool:
        """A QEMU/TCG machine (latency is emulation noise, CPUs 10-50x slower):
        the QEMU boards, and rack twins, which are remote places but QEMU
        machines all the same (their budget class says so)."""
        return self.kind == "qemu" or "qemu" in self.features or self.budget_class == "qemu-tcg"

    @property
    def on_this_host(self) -> bool:
        """It runs on the machine that runs rtlab (the local board is this
        machine; a QEMU board's vCPUs are threads here): a stall of this
        host is a stall of the board, which the stall witness watches
        (rtlab.core.stallwitness). A rack or LAVA board runs elsewhere."""
        return self.kind in ("local", "qemu")

    @property
    def root_in_ram(self) -> bool:
        """Its root file system is the initramfs rtlab staged, in the guest's
        RAM (the QEMU boards: no disk): whatever a job leaves on it is gone
        when the board is switched off at the end of the job."""
        return self.kind == "qemu"

    def supports(self, variant: str) -> bool:
        return (variant == HOST_VARIANT) == self.fixed_kernel

    def to_json(self) -> dict:
        d = {"name": self.name, "env_file": str(self.env_file), "arch": self.arch,
             "cpus": self.cpus, "isolate_cpu": self.isolate_cpu,
             "budget_class": self.budget_class, "kind": self.kind,
             "features": list(self.features)}
        if self.built_kernels_unusable:  # only where a board says so
            d["built_kernels_unusable"] = self.built_kernels_unusable
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Board":
        return cls(name=d["name"], env_file=Path(d["env_file"]), arch=d["arch"], cpus=int(d["cpus"]),
                   isolate_cpu=d.get("isolate_cpu"), budget_class=d["budget_class"], kind=d["kind"],
                   features=tuple(d.get("features", ())),
                   built_kernels_unusable=d.get("built_kernels_unusable"))


def _host_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def load_board(env_file: Path, name: Optional[str] = None) -> Board:
    env_file = Path(env_file)
    try:
        with open(env_file) as f:
            data = lg_load(f)
    except FileNotFoundError:
        raise InputError(env_file, "board file not found") from None
    except Exception as e:  # yaml errors from labgrid's loader
        raise InputError(env_file, f"invalid labgrid environment: {e}") from None
    root = Node(env_file, data)
    target = root.req("targets").req("main")
    opts = target.req("options").only(["arch", "cpus", "isolate_cpu", "budget_class", "kind",
                                       "built_kernels_unusable"])
    kind = opts.req("kind").str()
    if kind not in KINDS:
        raise opts.child("kind").error(f"must be one of {KINDS}, got {shown(kind)}")
    arch = opts.req("arch").str()
    if arch == "host":
        arch = platform.machine()
    cpus_node = opts.req("cpus")
    cpus = _host_cpus() if cpus_node.value == "host" else cpus_node.integer(minimum=1)
    iso = opts.child("isolate_cpu")
    isolate_cpu = None if iso.value is None else iso.integer(minimum=0)
    if isolate_cpu is not None and isolate_cpu >= cpus:
        raise iso.error(f"CPU {isolate_cpu} does not exist on a {cpus}-CPU board")
    features = target.child("features").str_list([])
    unusable_node = opts.child("built_kernels_unusable")
    unusable = None
    if unusable_node.value is not None:
        unusable = unusable_node.str().strip()
        if not unusable or len(unusable) > 1000:
            raise unusable_node.error("must be a non-empty reason of at most 1000 characters")
    return Board(
        name=name or env_file.stem, env_file=env_file.resolve(), arch=arch, cpus=cpus,
        isolate_cpu=isolate_cpu, budget_class=opts.req("budget_class").str(), kind=kind,
        features=tuple(features), options=dict(opts.mapping()), built_kernels_unusable=unusable,
    )


def load_boards(env_dir: Path = ENV_DIR) -> Registry[Board]:
    """Every board env file directly in env/ (templates for real boards live
    below): a board is one file, registered by its name (rtlab.registry)."""
    boards: Registry[Board] = Registry("board")
    for f in sorted(Path(env_dir).glob("*.yaml")):
        with open(f) as fh:
            head = fh.read()
        if "targets:" not in head:
            continue  # data files such as env/images.yaml
        boards.add(f.stem, load_board(f), str(f))
    return boards


#: more directories of board env files, set by whoever runs rtlab (never by a
#: campaign): ':'-separated, searched after env/ (tests' edited boards)
ENV_PATH_VAR = "RTLAB_ENV_PATH"


def board_dirs(env_dir: Path = ENV_DIR) -> list[Path]:
    extra = [Path(d) for d in os.environ.get(ENV_PATH_VAR, "").split(":") if d]
    return [Path(env_dir), *extra]


def find_board(name: str, env_dir: Path = ENV_DIR) -> Board:
    """A board by name, from env/ (or the RTLAB_ENV_PATH directories) only:
    env files hold host commands, so a name is never a path."""
    try:
        check_name(name, "board name")
    except ParamError as e:
        raise InputError(Path(env_dir), f"{e}; boards are named by their env/ file, never by path") from None
    for d in board_dirs(env_dir):
        f = d / f"{name}.yaml"
        if f.is_file():
            return load_board(f)
    known = ", ".join(sorted(load_boards(env_dir))) or "none"
    raise InputError(Path(env_dir) / f"{name}.yaml", f"no board named {shown(name)} (known boards: {known})")
