"""Board images: pinned Debian kernels and a per-arch initramfs userland.

For each arch (``x86_64``, ``aarch64``, ``armv7l``) :func:`ensure_images` produces

* the kernels pinned in ``env/images.yaml`` (flavour ``generic`` and ``rt``),
  fetched with ``apt-get download`` (apt checks them against the signed
  index) and unpacked with ``dpkg-deb -x``, nothing installed;
* one initramfs built from Debian packages *of that arch*: busybox-static,
  rt-tests, stress-ng, iperf3, mbw, exactly the shared libraries their ELF
  files need (DT_NEEDED, walked recursively), the dynamic loader, the few
  kernel modules the QEMU NIC needs, and an ``/init`` that ends in a root
  shell on the serial console (prompt :data:`PROMPT`);
* a manifest (JSON, beside the images) recording every package, version and
  sha256 that went in.

Everything lives in a content-keyed cache (``$RTLAB_CACHE/images``, by
default ``~/.cache/rtlab/images``, shared by every checkout of the machine):
the inputs (images.yaml, overlays, the generated files, :data:`FORMAT`) hash
to a key whose manifest, once built, is returned without calling apt or
rebuilding anything, and without printing. Package versions apt resolved on
the first build are therefore frozen until an input changes or
``refresh=True`` asks apt again: a latency baseline must not change because
a library was updated on the mirror overnight.

One concern per module:

    build.py         ensure_images: the cached build of one arch's set
    config.py        env/images.yaml
    resolve.py       which packages go in (kernels, programs, library closure)
    packages.py      a resolved package; the package-source interface
    apt.py           the host's apt as package source
    cache.py         the cache dir, its format, downloaded .debs
    debkernel.py     a kernel package unpacked: vmlinuz, config, modules, dtbs
    kernel_facts.py  release, `uname -v` and preemption model of a kernel
    elf.py           ELF program headers, DT_NEEDED, .modinfo
    userland.py      unpacked packages as one root; the DT_NEEDED walk
    initfiles.py     generated /init, inittab, profile, DHCP script
    overlay.py       overlay trees (rtbench) and their digest
    cpio.py          the reproducible initramfs archive
    imageset.py      the result and its manifest
    console.py       host name and shell prompt of a board
    qemu.py          a plain QEMU command line for an image set
    hostcmd.py       running host tools
    errors.py        ImageError, MissingLibraryError
"""
from __future__ import annotations

from ..targets import arch as _arch
from ..core.fsutil import sha256_file
from .apt import AptSource, parse_apt_depends
from .build import cached_images, ensure_images
from .cache import DEFAULT_CACHE, FORMAT, DebCache, Progress
from .config import DEFAULT_CONFIG, FLAVOURS, ArchConfig, KernelPin, load_config
from .console import HOSTNAME, PROMPT, PROMPT_RE
from .cpio import pack_cpio
from .elf import (
    DT_NEEDED, DT_NULL, DT_RPATH, DT_RUNPATH, DT_SONAME, DT_STRSZ, DT_STRTAB, PT_DYNAMIC, PT_INTERP, PT_LOAD, ElfInfo, is_elf, read_elf, read_modinfo,
)
from .errors import ImageError, MissingLibraryError
from .imageset import ImageSet, KernelImage
from .initfiles import INIT, INITTAB, PROFILE, STANDARD_DIRS, STATIC_FILES, STATIC_LINKS, UDHCPC_SCRIPT
from .kernel_facts import kernel_banner, preempt_model
from .overlay import overlay_digest
from .packages import PackageSource, Pkg
from .qemu import qemu_command
from .userland import PROGRAM_DIRS, Entry, RootView, default_lib_dirs, find_programs, resolve_needed

#: the arches images are built for (rtlab/targets/arch.py: Debian arch, multiarch
#: triplet, ELF machine, QEMU machine, device trees)
ARCHES = _arch.ARCHES

__all__ = [
    "ARCHES", "DEFAULT_CACHE", "DEFAULT_CONFIG", "FLAVOURS", "FORMAT", "HOSTNAME", "PROGRAM_DIRS", "PROMPT",
    "PROMPT_RE", "DT_NEEDED", "DT_NULL", "DT_RPATH", "DT_RUNPATH", "DT_SONAME", "DT_STRSZ", "DT_STRTAB",
    "PT_DYNAMIC", "PT_INTERP", "PT_LOAD", "INIT", "INITTAB", "PROFILE", "STANDARD_DIRS", "STATIC_FILES",
    "STATIC_LINKS", "UDHCPC_SCRIPT",
    "AptSource", "ArchConfig", "DebCache", "ElfInfo", "Entry", "ImageError", "ImageSet", "KernelImage",
    "KernelPin", "MissingLibraryError", "PackageSource", "Pkg", "Progress", "RootView",
    "cached_images", "default_lib_dirs", "ensure_images", "find_programs", "is_elf", "kernel_banner", "load_config",
    "overlay_digest", "pack_cpio", "parse_apt_depends", "preempt_model", "qemu_command", "read_elf",
    "read_modinfo", "resolve_needed", "sha256_file",
]
