"""Userland: a merged view over unpacked packages, and the DT_NEEDED walk."""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..targets import arch as _arch
from .elf import ElfInfo, is_elf, read_elf
from .errors import ImageError, MissingLibraryError


#: where programs are taken from in the requested packages
PROGRAM_DIRS = ("bin/", "sbin/", "usr/bin/", "usr/sbin/")


@dataclass(frozen=True)
class Entry:
    path: Path       # on the host
    package: str
    is_link: bool


class RootView:
    """Several unpacked package trees seen as one root filesystem.

    Paths are relative ("usr/bin/cyclictest"). Symlinks are followed inside
    the view (an absolute target means the view's root, as in a chroot).
    The first package to ship a path wins.
    """

    def __init__(self, roots: Iterable[tuple[str, Path]]):
        self.entries: dict[str, Entry] = {}
        for package, root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                rel_dir = os.path.relpath(dirpath, root)
                for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                    host = Path(dirpath) / name
                    rel = posixpath.normpath(posixpath.join(rel_dir, name))
                    self.entries.setdefault(rel, Entry(host, package, host.is_symlink()))

    def follow(self, rel: str) -> Optional[list[str]]:
        """The chain of paths from *rel* to a regular file, or None."""
        chain: list[str] = []
        for _ in range(40):
            entry = self.entries.get(rel)
            if entry is None:
                return None
            chain.append(rel)
            if not entry.is_link:
                return chain
            target = os.readlink(entry.path)
            joined = target if target.startswith("/") else posixpath.join(posixpath.dirname(rel), target)
            rel = posixpath.normpath("/" + joined).lstrip("/")
        raise ImageError(f"/{chain[0]}: too many levels of symbolic links")


def default_lib_dirs(arch: str) -> tuple[str, ...]:
    t = _arch.get(arch).triplet
    return (f"lib/{t}", f"usr/lib/{t}", "lib", "usr/lib")


def resolve_needed(view: RootView, start: Iterable[str], arch: str,
                   extra: Sequence[str] = ()) -> dict[str, Entry]:
    """Everything the ELF files *start* need at run time, recursively.

    Returns path -> entry for the files themselves, their interpreter and
    every NEEDED library, with the symlinks on the way. Libraries are
    looked up like ld.so does: RUNPATH/RPATH ($ORIGIN expanded), then the
    multiarch and plain lib dirs; a library of another machine or class is
    skipped. *extra* names libraries loaded with dlopen() (so in no
    DT_NEEDED), looked up in the default dirs. Raises
    :class:`MissingLibraryError` naming the ELF file and the library when a
    name cannot be found.
    """
    machine = _arch.get(arch).elf_machine
    out: dict[str, Entry] = {}
    queue: list[str] = []
    done: set[str] = set()
    infos: dict[str, ElfInfo] = {}

    def info_of(rel: str) -> ElfInfo:
        if rel not in infos:
            infos[rel] = read_elf(view.entries[rel].path)
        return infos[rel]

    def add(chain: list[str]) -> None:
        for r in chain:
            out[r] = view.entries[r]
        queue.append(chain[-1])

    def lookup(lib: str, dirs: Sequence[str], bits: int) -> Optional[list[str]]:
        candidates = [lib.lstrip("/")] if "/" in lib else [posixpath.join(d, lib) for d in dirs]
        for cand in candidates:
            chain = view.follow(cand)
            if chain is None or not is_elf(view.entries[chain[-1]].path):
                continue
            li = info_of(chain[-1])
            if li.machine == machine and (bits == 0 or li.bits == bits):
                return chain
        return None

    for rel in start:
        chain = view.follow(rel)
        if chain is None:
            raise ImageError(f"/{rel}: not in the unpacked packages")
        add(chain)
    for lib in extra:
        chain = lookup(lib, default_lib_dirs(arch), 0)
        if chain is None:
            raise MissingLibraryError("initramfs.dlopen in images.yaml", lib, "", default_lib_dirs(arch))
        add(chain)

    while queue:
        rel = queue.pop(0)
        if rel in done:
            continue
        done.add(rel)
        info = info_of(rel)
        if info.machine != machine:
            raise ImageError(f"/{rel} ({view.entries[rel].package}) is built for ELF machine "
                             f"{info.machine}, not {arch}")
        if info.interp:
            chain = view.follow(info.interp.lstrip("/"))
            if chain is None:
                raise MissingLibraryError("/" + rel, info.interp, view.entries[rel].package)
            add(chain)
        origin = "/" + posixpath.dirname(rel)
        dirs = [posixpath.normpath(d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)).lstrip("/")
                for d in info.runpath] + list(default_lib_dirs(arch))
        for lib in info.needed:
            chain = lookup(lib, dirs, info.bits)
            if chain is None:
                raise MissingLibraryError("/" + rel, lib, view.entries[rel].package, dirs)
            add(chain)
    return out


def find_programs(view: RootView, packages: Sequence[str]) -> list[str]:
    """ELF programs (and symlinks to them) that *packages* ship in bin dirs."""
    progs = []
    for rel, entry in sorted(view.entries.items()):
        if entry.package in packages and rel.startswith(PROGRAM_DIRS):
            chain = view.follow(rel)
            if chain and is_elf(view.entries[chain[-1]].path):
                progs.append(rel)
    return progs
