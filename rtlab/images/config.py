"""What images hold per arch: env/images.yaml (pinned kernels, initramfs packages)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from .. import ROOT
from ..errors import InputError


FLAVOURS = ("generic", "rt")

DEFAULT_CONFIG = ROOT / "env" / "images.yaml"


@dataclass(frozen=True)
class KernelPin:
    flavour: str
    package: str
    version: str
    release: str
    preempt: str


@dataclass(frozen=True)
class ArchConfig:
    arch: str
    path: Path
    kernels: dict[str, KernelPin]
    packages: tuple[str, ...]
    dlopen: tuple[str, ...]
    modules: tuple[str, ...]

    def key_data(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "kernels": {f: vars(k) for f, k in sorted(self.kernels.items())},
            "packages": list(self.packages),
            "dlopen": list(self.dlopen),
            "modules": list(self.modules),
        }


def load_config(arch: str, path: Optional[Path] = None) -> ArchConfig:
    path = Path(path or DEFAULT_CONFIG)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, f"invalid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(path, "expected a mapping at the top level")

    def need(obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict) or obj.get(key) in (None, ""):
            raise InputError(path, f"{where}.{key}: missing")
        return obj[key]

    kernels_doc = need(need(doc, "kernels", ""), arch, "kernels")
    kernels: dict[str, KernelPin] = {}
    for flavour in FLAVOURS:
        k = need(kernels_doc, flavour, f"kernels.{arch}")
        where = f"kernels.{arch}.{flavour}"
        pin = KernelPin(flavour, str(need(k, "package", where)), str(need(k, "version", where)),
                        str(need(k, "release", where)), str(need(k, "preempt", where)))
        if pin.package != f"linux-image-{pin.release}":
            raise InputError(path, f"{where}: package {pin.package} does not match release {pin.release}")
        kernels[flavour] = pin
    init = need(doc, "initramfs", "")
    packages = tuple(str(p) for p in need(init, "packages", "initramfs"))
    return ArchConfig(arch, path, kernels, packages,
                      tuple(str(x) for x in init.get("dlopen") or ()),
                      tuple(str(x) for x in init.get("modules") or ()))
