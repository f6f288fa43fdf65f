"""The architectures rtlab builds images and kernels for: one record each.

Everything that differs between CPU architectures lives here, so images
(Debian arch, multiarch triplet, ELF machine), kernel builds (ARCH=, cross
compiler, boot image), QEMU boards (binary, machine, CPU, console) and LAVA
(architecture names) agree by construction. Adding an arch is one entry
here (plus its kernel pins in env/images.yaml and, for kernels built from
source, a base fragment: docs/extending.md "An architecture").

The host side derives from the same entries, through this module run as a
query (``python3 rtlab/targets/arch.py --host-packages``, or ``python -m
rtlab.targets.arch``): env/setup-host.sh (QEMU and cross packages, dpkg
foreign architectures), the Makefile (the rtbench builds) and
rtbench/Makefile (CROSS_COMPILE).

rtlab's arch name is what ``uname -m`` says on the board (``x86_64``,
``aarch64``, ``armv7l``); :func:`get` also takes the Debian name (``armhf``).
"""
from __future__ import annotations

import argparse
import platform
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

if not __package__:
    # run as a file (env/setup-host.sh, rtbench/Makefile): before any venv,
    # with the system python3 and its stdlib only. ``rtlab`` becomes a bare
    # package so its __init__ (which wants the labgrid package) is not run;
    # registry.py and errors.py need nothing but the stdlib.
    _rtlab = types.ModuleType("rtlab")
    _rtlab.__path__ = [str(Path(__file__).resolve().parents[1])]
    sys.modules.setdefault("rtlab", _rtlab)
    from rtlab.registry import Registry
else:
    from ..registry import Registry


@dataclass(frozen=True)
class Qemu:
    """The QEMU machine a board of this arch defaults to (images' smoke boots,
    the generic qemu-* boards). Twins of real boards pick their own machine
    in their env file."""

    binary: str        # qemu-system-*
    machine: str
    cpu: str
    #: the kernel's console on that machine: a built-in UART driver of
    #: Debian's kernels (8250 on x86, PL011 on arm virt), so no module needed
    console: str
    nic: str = "user,model=virtio-net-pci"
    #: the Debian package that has `binary` (env/setup-host.sh installs it)
    package: str = ""


@dataclass(frozen=True)
class Arch:
    name: str            # uname -m on the board
    debian: str          # dpkg architecture (apt-get download PKG:<debian>)
    triplet: str         # multiarch triplet: library directories
    elf_machine: int     # ELF e_machine: a library of another machine is skipped
    elf_bits: int        # ELFCLASS32 / ELFCLASS64
    kernel_arch: str     # ARCH= for the kernel's make
    cross: str           # CROSS_COMPILE= when the host is another machine
    kernel_image: str    # the boot image, relative to the kernel object tree
    #: Debian's kernel flavour suffix: linux-image-<abi>-<flavour>, -rt-<flavour>
    kernel_flavour: str
    lava: str            # LAVA's arch name (job context `arch`, device's architectures)
    qemu: Qemu
    #: lava-server's qemu.jinja2 writes -cpu/-machine itself for this LAVA
    #: arch (from the job context's cpu and machine: arm64); for the others a
    #: job passes them in extra_options (rtlab.lava.render)
    lava_sets_machine: bool = False
    #: U-Boot's command for this arch's kernel image (bootz zImage, booti Image)
    uboot_boot: str = ""
    #: device trees shipped in Debian's kernel packages that boards of this
    #: arch need (usr/lib/linux-image-<release>/<name>), copied beside the kernel
    dtbs: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    #: ARCH= of rtbench/Makefile (its build/<name>/rtbench), when not `name`
    rtbench: str = ""
    #: Debian packages of the `cross` compiler and its static libc (rtbench's
    #: static cross build, kernels built from source), installed by
    #: env/setup-host.sh on a host of another machine
    cross_packages: tuple[str, ...] = ()

    @property
    def rtbench_arch(self) -> str:
        return self.rtbench or self.name

    @property
    def kernel_image_name(self) -> str:
        return Path(self.kernel_image).name

    def cross_prefix(self, host_machine: Optional[str] = None) -> str:
        """CROSS_COMPILE= for building on *host_machine* (default: this host)."""
        host = host_machine or platform.machine()
        return "" if get_or_none(host) is self else self.cross

    @property
    def lava_names(self) -> list[str]:
        """`available_architectures` of a LAVA device: LAVA's name and uname's."""
        return list(dict.fromkeys([self.lava, self.name]))


#: every architecture (rtlab.registry): one ARCHES.add per entry below
ARCHES: Registry[Arch] = Registry("architecture")
for _a in (
    Arch(name="x86_64", debian="amd64", triplet="x86_64-linux-gnu", elf_machine=62, elf_bits=64,
         kernel_arch="x86_64", cross="x86_64-linux-gnu-", kernel_image="arch/x86/boot/bzImage",
         kernel_flavour="amd64", lava="amd64", aliases=("amd64",),
         qemu=Qemu("qemu-system-x86_64", "q35", "max", "ttyS0", package="qemu-system-x86"),
         cross_packages=("gcc-x86-64-linux-gnu", "libc6-dev-amd64-cross")),
    Arch(name="aarch64", debian="arm64", triplet="aarch64-linux-gnu", elf_machine=183, elf_bits=64,
         kernel_arch="arm64", cross="aarch64-linux-gnu-", kernel_image="arch/arm64/boot/Image",
         kernel_flavour="arm64", lava="arm64", uboot_boot="booti", lava_sets_machine=True,
         qemu=Qemu("qemu-system-aarch64", "virt", "cortex-a57", "ttyAMA0", package="qemu-system-arm"),
         aliases=("arm64",), cross_packages=("gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross")),
    # 32-bit ARM (ARMv7-A, hard float): i.MX6 (Cortex-A9), AM335x (Cortex-A8).
    # Debian's armmp kernels are multi-platform; the default QEMU machine is
    # arm virt (Cortex-A15: virt refuses the A8 and A9); the i.MX6 twins
    # run QEMU's sabrelite instead, with the dtb below.
    Arch(name="armv7l", debian="armhf", triplet="arm-linux-gnueabihf", elf_machine=40, elf_bits=32,
         kernel_arch="arm", cross="arm-linux-gnueabihf-", kernel_image="arch/arm/boot/zImage",
         kernel_flavour="armmp", lava="armhf", uboot_boot="bootz",
         dtbs=("imx6q-sabrelite.dtb", "am335x-boneblack.dtb"),
         qemu=Qemu("qemu-system-arm", "virt", "cortex-a15", "ttyAMA0", package="qemu-system-arm"),
         aliases=("armhf", "arm"), rtbench="armhf",
         cross_packages=("gcc-arm-linux-gnueabihf", "libc6-dev-armhf-cross")),
):
    ARCHES.add(_a.name, _a, __name__)
del _a


def get_or_none(name: str) -> Optional[Arch]:
    a = ARCHES.get(name)
    if a is not None:
        return a
    # the Debian name too, so a new entry needs no alias for it
    return next((a for a in ARCHES.values() if name in a.aliases or name == a.debian), None)


def get(name: str) -> Arch:
    """The arch called *name* (uname -m or Debian name); KeyError names the known ones."""
    a = get_or_none(name)
    if a is None:
        raise KeyError(f"unknown arch {name!r}; known: {', '.join(ARCHES)}")
    return a


def canonical(name: str) -> str:
    """rtlab's name for *name* (``armhf`` -> ``armv7l``); unknown names unchanged."""
    a = get_or_none(name)
    return a.name if a else name


def host_packages(host_machine: Optional[str] = None) -> list[str]:
    """The Debian packages a host needs for every arch: the QEMU system
    emulator, and the cross toolchain of each arch that is not the host's."""
    pkgs: list[str] = []
    for a in ARCHES.values():
        pkgs.append(a.qemu.package)
        if a.cross_prefix(host_machine):
            pkgs.extend(a.cross_packages)
    return list(dict.fromkeys(p for p in pkgs if p))


def foreign_debian(host_machine: Optional[str] = None) -> list[str]:
    """dpkg architectures to add on the host (`dpkg --add-architecture`):
    every arch's but the host's, for `apt-get download PKG:<debian>` (images)."""
    return [a.debian for a in ARCHES.values() if a.cross_prefix(host_machine)]


def field(a: Arch, name: str) -> str:
    """*name* of *a* as one line of text (``qemu.binary``; tuples space-separated)."""
    value: object = a
    for part in name.split("."):
        if part.startswith("_") or not hasattr(value, part):
            raise KeyError(f"no field {name!r} of an architecture")
        value = getattr(value, part)
    if callable(value):
        raise KeyError(f"no field {name!r} of an architecture")
    return " ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def main(argv: Optional[list[str]] = None) -> int:
    """The registry as the host set-up reads it, one value per line."""
    ap = argparse.ArgumentParser(prog="rtlab.targets.arch", description=main.__doc__)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="every arch's name")
    what.add_argument("--field", metavar="NAME", help="a field of every arch (or of --arch): debian, cross, "
                                                     "rtbench_arch, qemu.binary, ...")
    what.add_argument("--host-packages", action="store_true",
                      help="Debian packages this host needs for every arch (QEMU, cross toolchains)")
    what.add_argument("--foreign", action="store_true",
                      help="dpkg architectures to add on this host (every arch's but its own)")
    ap.add_argument("--arch", help="only this arch (uname -m or Debian name) for --field")
    ap.add_argument("--host", help="the host's machine instead of this one's (uname -m)")
    args = ap.parse_args(argv)
    try:
        if args.list:
            lines = list(ARCHES)
        elif args.host_packages:
            lines = host_packages(args.host)
        elif args.foreign:
            lines = foreign_debian(args.host)
        else:
            arches = [get(args.arch)] if args.arch else ARCHES.values()
            lines = [field(a, args.field) for a in arches]
    except KeyError as e:
        print(f"rtlab.targets.arch: {e.args[0]}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
