"""The image cache: where it is, its format, and downloaded .debs kept by name, version and arch."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..core.fsutil import cache_root, sha256_file
from .errors import ImageError
from .hostcmd import _run
from .packages import PackageSource, Pkg


#: machine-wide, beside the kernel cache (``$RTLAB_CACHE/images``, default
#: ``~/.cache/rtlab/images``): a second checkout, a CI job's fresh clone,
#: finds the images the first one built (content-keyed: the same inputs are
#: the same images, whichever checkout asks)
DEFAULT_CACHE = cache_root() / "images"

#: bump when the build changes its output for the same inputs (part of the key)
FORMAT = 1

Progress = Callable[[str], Any]


class DebCache:
    """Downloaded .debs kept by name+version+arch, sha256 in a sidecar."""

    def __init__(self, root: Path, source: PackageSource):
        self.root = root
        self.source = source

    def path(self, pkg: Pkg) -> Path:
        return self.root / pkg.deb_name

    def _valid(self, pkg: Pkg) -> bool:
        p = self.path(pkg)
        return p.is_file() and sha256_file(p) == pkg.sha256

    def fetch(self, pkgs: Sequence[Pkg], progress: Progress, label: str) -> dict[str, Path]:
        missing = [p for p in pkgs if not self._valid(p)]
        if missing:
            mb = sum(p.size for p in missing) / 1e6
            progress(f"{label}: downloading {len(missing)} package(s), {mb:.1f} MB (apt-get download)")
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.root, prefix=".dl-") as tmp:
                self.source.download(missing, Path(tmp))
                for p in missing:
                    got = Path(tmp) / p.deb_name
                    if not got.is_file():
                        raise ImageError(f"apt-get download {p.spec}: no {p.deb_name} was written")
                    digest = sha256_file(got)
                    if p.sha256 and digest != p.sha256:
                        raise ImageError(f"{p.deb_name}: sha256 {digest} differs from the index's {p.sha256}")
                    os.replace(got, self.path(p))
                    (self.root / f"{p.deb_name}.sha256").write_text(f"{digest}  {p.deb_name}\n")
        for p in pkgs:
            side = self.root / f"{p.deb_name}.sha256"
            if not side.exists():  # a deb put there by hand and verified above
                side.write_text(f"{p.sha256}  {p.deb_name}\n")
        return {p.name: self.path(p) for p in pkgs}

    def cached_pin(self, name: str, version: str, arch: str) -> Optional[Pkg]:
        """A pinned package apt no longer offers but whose .deb we kept."""
        pkg = Pkg(name, version, arch, "", select_arch=arch)
        side = self.root / f"{pkg.deb_name}.sha256"
        if self.path(pkg).is_file() and side.is_file():
            digest = side.read_text().split()[0]
            return Pkg(name, version, arch, digest, self.path(pkg).stat().st_size, select_arch=arch)
        return None


def _extract_deb(deb: Path, dest: Path) -> Path:
    """``dpkg-deb -x`` into *dest* (atomically; reused when present)."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        _run(["dpkg-deb", "-x", str(deb), str(tmp)], f"{deb.name}: dpkg-deb -x")
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
