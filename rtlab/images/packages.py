"""Debian packages as resolved, and the interface of a package source (apt; tests supply their own)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence


@dataclass(frozen=True, order=True)
class Pkg:
    name: str
    version: str
    arch: str  # the package's Architecture (may be "all")
    sha256: str
    size: int = 0
    section: str = ""
    select_arch: str = ""  # the arch it was selected for (apt's name:arch)

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.select_arch or self.arch}={self.version}"

    @property
    def deb_name(self) -> str:
        # apt-get download's own naming (epoch colon escaped)
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "arch": self.arch,
                "sha256": self.sha256, "size": self.size}


class PackageSource(Protocol):
    def show(self, names: Sequence[str], arch: str,
             pins: Mapping[str, str] = ...) -> dict[str, Pkg]: ...

    def depends(self, pkgs: Sequence[Pkg]) -> dict[str, list[str]]: ...

    def download(self, pkgs: Sequence[Pkg], dest: Path) -> None: ...


def _is_library(pkg: Pkg) -> bool:
    # lib* by name, plus library packages not named so (zlib1g)
    return pkg.name.startswith("lib") or pkg.section.split("/")[-1] == "libs"
