"""An image set (kernels and initramfs of one arch) and its manifest.

The manifest the cache keeps names its files relative to the cache root
(``x86_64/kernels/<package>_<version>/vmlinuz-...``), resolved against the
root it is read from: a cache that is moved, or shared by several checkouts
(through a symlink), hands each reader its own root's files, never the paths
of the checkout that happened to build it. Manifests written before stored
absolute paths; those are read as recorded (symlinks resolved).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from ..targets import arch as _arch
from .console import HOSTNAME, PROMPT, PROMPT_RE
from .packages import Pkg


def _stored(path: Path, root: Optional[Path]) -> str:
    """*path* as a manifest stores it: relative to *root* when under it."""
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def _located(stored: str, root: Optional[Path]) -> Path:
    """A stored path as a file of this machine: relative ones under *root*."""
    p = Path(stored)
    if p.is_absolute():
        return p.resolve() if root is not None else p
    if root is None:
        raise ValueError(f"relative path {stored!r} in a manifest read without its cache root")
    return root / p


@dataclass(frozen=True)
class KernelImage:
    path: Path
    package: str
    version: str
    release: str
    #: preemption model from the package's config: dynamic, voluntary, rt ...
    preempt: str = ""
    #: `uname -v` of this kernel, e.g. "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)"
    uname_v: str = ""
    sha256: str = ""
    config: Optional[Path] = None

    def to_json(self, root: Optional[Path] = None) -> dict[str, Any]:
        """As JSON; with *root*, file paths relative to it (the cache's manifest)."""
        return {"path": _stored(self.path, root), "package": self.package, "version": self.version,
                "release": self.release, "preempt": self.preempt, "uname_v": self.uname_v,
                "sha256": self.sha256, "size": self.path.stat().st_size if self.path.exists() else None,
                "config": _stored(self.config, root) if self.config else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], root: Optional[Path] = None) -> "KernelImage":
        return cls(_located(d["path"], root), d["package"], d["version"], d["release"], d.get("preempt", ""),
                   d.get("uname_v", ""), d.get("sha256", ""),
                   _located(d["config"], root) if d.get("config") else None)


@dataclass(frozen=True)
class ImageSet:
    arch: str
    kernels: dict[str, KernelImage]
    initramfs: Path
    initramfs_sha256: str = ""
    #: every Debian package that went into the images, as resolved
    packages: tuple[Pkg, ...] = ()
    overlays: tuple[dict[str, str], ...] = ()
    #: the input key the cache knows this set under
    key: str = ""
    _sizes: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def manifest(self, root: Optional[Path] = None) -> dict[str, Any]:
        """What went in; with *root* (the cache root), file paths relative to it."""
        return {
            "arch": self.arch,
            "debian_arch": _arch.get(self.arch).debian,
            "key": self.key,
            "qemu": vars(_arch.get(self.arch).qemu),
            "console": {"device": _arch.get(self.arch).qemu.console, "prompt": PROMPT,
                        "prompt_re": PROMPT_RE, "hostname": HOSTNAME},
            "kernels": {f: k.to_json(root) for f, k in sorted(self.kernels.items())},
            "initramfs": {"path": _stored(self.initramfs, root), "sha256": self.initramfs_sha256,
                          "size": self.initramfs.stat().st_size if self.initramfs.exists() else None},
            "packages": [p.to_json() for p in sorted(self.packages)],
            "overlays": list(self.overlays),
        }

    @classmethod
    def from_manifest(cls, m: Mapping[str, Any], root: Optional[Path] = None) -> "ImageSet":
        """The set a manifest describes; relative paths are under *root*."""
        return cls(
            arch=m["arch"],
            kernels={f: KernelImage.from_json(k, root) for f, k in m["kernels"].items()},
            initramfs=_located(m["initramfs"]["path"], root),
            initramfs_sha256=m["initramfs"]["sha256"],
            packages=tuple(Pkg(p["name"], p["version"], p["arch"], p["sha256"], p.get("size", 0))
                           for p in m.get("packages", ())),
            overlays=tuple(m.get("overlays", ())),
            key=m.get("key", ""),
            _sizes={"initramfs": m["initramfs"].get("size") or 0,
                    **{f: k.get("size") or 0 for f, k in m["kernels"].items()}},
        )

    def files_present(self) -> bool:
        """The files the manifest names exist with the recorded sizes (they
        are written atomically, so a right-sized file is the whole file)."""
        paths = {"initramfs": self.initramfs, **{f: k.path for f, k in self.kernels.items()}}
        for name, p in paths.items():
            if not p.is_file() or (self._sizes.get(name) and p.stat().st_size != self._sizes[name]):
                return False
        return True
