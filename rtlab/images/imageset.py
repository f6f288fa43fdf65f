"""An image set (kernels and initramfs of one arch) and its manifest."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from .. import arch as _arch
from .console import HOSTNAME, PROMPT, PROMPT_RE
from .packages import Pkg


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

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "package": self.package, "version": self.version,
                "release": self.release, "preempt": self.preempt, "uname_v": self.uname_v,
                "sha256": self.sha256, "size": self.path.stat().st_size if self.path.exists() else None,
                "config": str(self.config) if self.config else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "KernelImage":
        return cls(Path(d["path"]), d["package"], d["version"], d["release"], d.get("preempt", ""),
                   d.get("uname_v", ""), d.get("sha256", ""),
                   Path(d["config"]) if d.get("config") else None)


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

    def manifest(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "debian_arch": _arch.get(self.arch).debian,
            "key": self.key,
            "qemu": vars(_arch.get(self.arch).qemu),
            "console": {"device": _arch.get(self.arch).qemu.console, "prompt": PROMPT,
                        "prompt_re": PROMPT_RE, "hostname": HOSTNAME},
            "kernels": {f: k.to_json() for f, k in sorted(self.kernels.items())},
            "initramfs": {"path": str(self.initramfs), "sha256": self.initramfs_sha256,
                          "size": self.initramfs.stat().st_size if self.initramfs.exists() else None},
            "packages": [p.to_json() for p in sorted(self.packages)],
            "overlays": list(self.overlays),
        }

    @classmethod
    def from_manifest(cls, m: Mapping[str, Any]) -> "ImageSet":
        return cls(
            arch=m["arch"],
            kernels={f: KernelImage.from_json(k) for f, k in m["kernels"].items()},
            initramfs=Path(m["initramfs"]["path"]),
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
