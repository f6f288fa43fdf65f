"""Kernel variants (kernel-configs/variants.yaml): which kernel, which boot
arguments, and what the boot test must find on the running kernel."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import ROOT
from .arch import ARCHES
from ..core.config import Node, format_cpulist, open_node, shown
from ..core.params import ParamError, check_name

DEFAULT_FILE = ROOT / "kernel-configs" / "variants.yaml"
#: config fragments named by kernel.build: <name>.config (rtlab.kernel.fragments)
FRAGMENTS_DIR = ROOT / "kernel-configs" / "fragments"

#: the variant of a board that cannot change kernels (this machine): the boot
#: test records what runs and expects nothing
HOST_VARIANT = "host"
#: what a kernel command line from a data file may hold (it reaches boot
#: loaders and board shells)
_BOOT_ARGS = re.compile(r"[A-Za-z0-9 ,._=:/+-]*")


@dataclass(frozen=True)
class Expectation:
    """Facts the boot test checks; None means "not checked"."""

    uname_v: Optional[str] = None     # substring of `uname -v` (PREEMPT_RT, PREEMPT_DYNAMIC)
    preempt: Optional[str] = None     # none | voluntary | full | rt
    realtime: Optional[bool] = None   # /sys/kernel/realtime reads 1
    isolated: bool = False            # the board's isolate_cpu is in /sys/devices/system/cpu/isolated


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    #: how to get the kernel: {"prebuilt": "generic"|"rt"} and/or
    #: {"build": [fragment, ...]} (kernel-configs/fragments/<name>.config)
    kernel: dict
    boot_args: str
    expect: Expectation
    isolated: bool = False
    #: isolation arguments, templated per board by :meth:`boot_args_for`
    isolation_args: str = ""
    source: str = ""

    @property
    def prebuilt(self) -> Optional[str]:
        return self.kernel.get("prebuilt")

    @property
    def fragments(self) -> tuple[str, ...]:
        """Config fragments for a source build, merged in this order after
        the board's base fragment (base-<board>); empty if the variant has none."""
        return tuple(self.kernel.get("build") or ())

    def fragments_for(self, arch: str) -> tuple[str, ...]:
        """The fragments for a board of *arch*: ``kernel.build_by_arch.<arch>``
        where an arch cannot build the common list (ARM32 in 6.12 has no
        PREEMPT_DYNAMIC), else ``kernel.build``."""
        per_arch = self.kernel.get("build_by_arch") or {}
        return tuple(per_arch.get(arch) or self.fragments)

    def unavailable_on(self, kernel_preempt: str) -> Optional[str]:
        """Why a kernel whose config says `kernel_preempt` (dynamic, none,
        voluntary, full, rt) cannot be this variant; None if it can."""
        want = self.expect.preempt
        if want is None or kernel_preempt == want:
            return None
        if kernel_preempt == "dynamic" and want in ("none", "voluntary", "full"):
            return None
        return (f"variant {self.name} needs preemption model {want}, "
                f"the kernel is built {kernel_preempt or 'with an unknown model'}")

    def boot_args_for(self, isolate_cpu: Optional[int], cpus: int) -> str:
        """The kernel command line for a board (isolation filled in for its CPU)."""
        args = [self.boot_args] if self.boot_args else []
        if self.isolated:
            if isolate_cpu is None:
                raise ValueError(f"variant {self.name} isolates a CPU but the board names none")
            housekeeping = format_cpulist(c for c in range(cpus) if c != isolate_cpu)
            args.append(self.isolation_args.format(cpu=isolate_cpu, housekeeping=housekeeping))
        return " ".join(args)

    def to_json(self) -> dict:
        return {
            "name": self.name, "description": self.description, "kernel": self.kernel,
            "boot_args": self.boot_args, "isolated": self.isolated,
            "isolation_args": self.isolation_args,
            "expect": {"uname_v": self.expect.uname_v, "preempt": self.expect.preempt,
                       "realtime": self.expect.realtime, "isolated": self.expect.isolated},
        }

    @classmethod
    def from_json(cls, d: dict) -> "Variant":
        return cls(name=d["name"], description=d.get("description", ""), kernel=d["kernel"],
                   boot_args=d["boot_args"], expect=Expectation(**d["expect"]),
                   isolated=d["isolated"], isolation_args=d.get("isolation_args", ""))


HOST = Variant(name=HOST_VARIANT, description="whatever kernel this machine runs",
               kernel={"running": True}, boot_args="", expect=Expectation())

_PREEMPT_MODELS = {"none", "voluntary", "full", "rt"}


def _expectation(node: Node, isolated: bool) -> Expectation:
    node.only(["uname_v", "preempt", "realtime"])
    preempt = node.child("preempt").value
    if preempt is not None and preempt not in _PREEMPT_MODELS:
        raise node.child("preempt").error(f"must be one of {sorted(_PREEMPT_MODELS)}, got {shown(preempt)}")
    realtime = node.child("realtime")
    return Expectation(
        uname_v=node.child("uname_v").value and node.child("uname_v").str(),
        preempt=preempt,
        realtime=None if realtime.value is None else realtime.boolean(),
        isolated=isolated,
    )


def _fragments(node: Node, fragments_dir: Path) -> tuple[str, ...]:
    """kernel.build: a non-empty list of fragment names, each an existing
    <fragments_dir>/<name>.config; base-* fragments belong to boards, not here."""
    if node.value is None:
        return ()
    if not isinstance(node.value, list) or not node.value:
        raise node.error("must be a non-empty list of config fragment names")
    names = []
    for i, item in enumerate(node.value):
        where = Node(node.path, item, f"{node.key}[{i}]")
        name = where.str()
        if "/" in name or name.endswith(".config"):
            raise where.error(f"a fragment name, without directory or .config: {shown(name)}")
        if name.startswith("base-"):
            raise where.error(f"{name}: base fragments come from the board (base-<board>), "
                              f"not from the variant")
        if not (fragments_dir / f"{name}.config").is_file():
            known = sorted(p.stem for p in fragments_dir.glob("*.config") if not p.stem.startswith("base-"))
            raise where.error(f"no config fragment {fragments_dir / (name + '.config')} "
                              f"(known: {', '.join(known) or 'none'})")
        if name in names:
            raise where.error(f"{name} listed twice")
        names.append(name)
    return tuple(names)


def load_variants(path: Path = DEFAULT_FILE, fragments_dir: Path = FRAGMENTS_DIR) -> dict[str, Variant]:
    """All variants, each with and without isolation, by name (plus `host`)."""
    root = open_node(path).only(["isolation", "variants"])
    iso = root.req("isolation").only(["suffix", "boot_args"])
    suffix = iso.req("suffix").str()
    iso_args = iso.req("boot_args").str()
    out: dict[str, Variant] = {HOST_VARIANT: HOST}
    for name, node in root.req("variants").items():
        node.only(["description", "kernel", "boot_args", "expect"])
        try:
            check_name(name, "variant name")
            check_name(f"{name}{suffix}", "variant name")
        except ParamError as e:
            raise node.error(str(e)) from None
        ba = node.child("boot_args")
        if not _BOOT_ARGS.fullmatch(ba.str("")):
            raise ba.error(f"kernel arguments may hold letters, digits, spaces and ,._=:/+- only, "
                           f"got {shown(ba.value)}")
        kernel = node.req("kernel")
        kernel.only(["prebuilt", "build", "build_by_arch"])
        if not kernel.mapping():
            raise kernel.error("must name 'prebuilt' or 'build'")
        if kernel.child("prebuilt").value is not None and kernel.child("prebuilt").str() not in ("generic", "rt"):
            raise kernel.child("prebuilt").error("must be 'generic' or 'rt'")
        fragments = _fragments(kernel.child("build"), fragments_dir)
        by_arch = {}
        for a, n in kernel.child("build_by_arch").items():
            if a not in ARCHES:
                raise n.error(f"unknown arch {shown(a)} (known: {', '.join(ARCHES)})")
            by_arch[str(a)] = list(_fragments(n, fragments_dir))
        for isolated in (False, True):
            vname = f"{name}{suffix}" if isolated else str(name)
            out[vname] = Variant(
                name=vname,
                description=node.child("description").str("") + (" with CPU isolation" if isolated else ""),
                kernel={**kernel.mapping(), **({"build": list(fragments)} if fragments else {}),
                        **({"build_by_arch": by_arch} if by_arch else {})},
                boot_args=node.child("boot_args").str(""),
                expect=_expectation(node.req("expect"), isolated),
                isolated=isolated,
                isolation_args=iso_args,
                source=str(path),
            )
    return out
