"""Resolving what goes in: kernel packages, requested packages and their library closure."""
from __future__ import annotations

from typing import Optional

from ..targets import arch as _arch
from .cache import DebCache, Progress
from .config import ArchConfig
from .errors import ImageError
from .packages import PackageSource, Pkg, _is_library


def _resolve(cfg: ArchConfig, source: PackageSource, debs: DebCache, label: str,
             say: Progress) -> tuple[dict[str, Pkg], dict[str, Pkg], list[Pkg]]:
    """(kernel packages by flavour, requested packages, library packages)."""
    arch = _arch.get(cfg.arch).debian
    say(f"{label}: resolving {len(cfg.packages)} packages and their library dependencies (apt-cache)")
    pins = {pin.package: pin.version for pin in cfg.kernels.values()}
    # one apt-cache call for kernels and programs: each call costs ~2 s here
    shown = source.show([*pins, *cfg.packages], arch, pins)
    kernels: dict[str, Pkg] = {}
    for flavour, pin in cfg.kernels.items():
        got = shown.get(pin.package)
        if got is None:
            got = debs.cached_pin(pin.package, pin.version, arch)
        if got is None:
            raise ImageError(f"{pin.package} {pin.version} ({cfg.path} kernels.{cfg.arch}.{flavour}) "
                             f"is not offered by apt; pick a version `apt-cache policy "
                             f"{pin.package.rsplit('-', 1)[0]}` lists (or snapshot.debian.org)")
        kernels[flavour] = got
    top = {n: shown[n] for n in cfg.packages if n in shown}
    missing = [n for n in cfg.packages if n not in top]
    if missing:
        raise ImageError(f"{cfg.path}: initramfs.packages {', '.join(missing)}: no {arch} package in apt")
    known: dict[str, Optional[Pkg]] = dict(top)  # apt-cache show results
    visited: set[str] = set(top)
    graph: dict[str, list[str]] = {}
    libs: list[Pkg] = []
    frontier = [top[n] for n in cfg.packages]
    while frontier:
        unexpanded = [p for p in frontier if p.name not in graph]
        if unexpanded:
            graph.update(source.depends(unexpanded))
        names = sorted({d for p in frontier for d in graph.get(p.name, []) if d not in visited})
        visited.update(names)
        # a recursive depends already named the whole closure: show it in
        # one go, so later levels need no apt call
        unknown = sorted({*names, *graph} - set(known))
        if unknown:
            shown = source.show(unknown, arch)
            known.update({n: shown.get(n) for n in unknown})
        frontier = []
        for n in names:
            pkg = known[n]
            if pkg is not None and _is_library(pkg):
                libs.append(pkg)
                frontier.append(pkg)
    return kernels, top, libs
