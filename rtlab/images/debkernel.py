"""Kernels from Debian packages: vmlinuz, config, the wanted modules and device trees."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.fsutil import sha256_file
from .cache import FORMAT, Progress
from .config import KernelPin
from .elf import read_modinfo
from .errors import ImageError
from .hostcmd import _run
from .imageset import KernelImage
from .kernel_facts import kernel_banner, preempt_model


def _module_closure(moddir: Path, wanted: Sequence[str], package: str) -> list[str]:
    """Module files (relative to moddir) for *wanted*, dependencies first.
    Built-in modules (modules.builtin) are skipped: nothing to load."""
    files: dict[str, str] = {}
    for p in moddir.rglob("*.ko*"):
        base = p.name.split(".ko", 1)[0].replace("-", "_")
        files.setdefault(base, str(p.relative_to(moddir)))
    builtin: set[str] = set()
    bfile = moddir / "modules.builtin"
    if bfile.exists():
        builtin = {Path(x).name.split(".ko", 1)[0].replace("-", "_") for x in bfile.read_text().split()}
    order: list[str] = []
    visiting: set[str] = set()

    def visit(mod: str) -> None:
        mod = mod.replace("-", "_")
        if mod in order or mod in visiting:
            return
        if mod not in files:
            if mod in builtin:
                return
            raise ImageError(f"{package}: kernel module {mod} is neither built in nor shipped")
        visiting.add(mod)
        for dep in read_modinfo(moddir / files[mod]).get("depends", []):
            for d in filter(None, dep.split(",")):
                visit(d)
        visiting.discard(mod)
        order.append(mod)

    for w in wanted:
        visit(w)
    return [files[m] for m in order]


def _prepare_kernel(pin: KernelPin, deb: Path, deb_sha: str, kdir: Path, modules: Sequence[str],
                    progress: Progress, label: str, dtbs: Sequence[str] = ()) -> KernelImage:
    """vmlinuz, config, the wanted modules and device trees (*dtbs*, copied
    beside vmlinuz: boards stage ``<kernel dir>/<name>.dtb``) of one kernel
    package in *kdir*."""
    info_path = kdir / "kernel.json"
    want = {"package": pin.package, "version": pin.version, "deb_sha256": deb_sha,
            "modules": list(modules), "format": FORMAT}
    if dtbs:  # only then: x86/arm64 kernels extracted before stay valid
        want["dtbs"] = list(dtbs)
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if all(info.get(k) == v for k, v in want.items()) and (kdir / info["vmlinuz"]).is_file():
            return _kernel_from_info(kdir, info)

    progress(f"{label}: extracting kernel {pin.package} {pin.version} (dpkg-deb -x)")
    kdir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=kdir.parent, prefix=f".{kdir.name}-"))
    try:
        tree = work / "deb"
        _run(["dpkg-deb", "-x", str(deb), str(tree)], f"{deb.name}: dpkg-deb -x")
        out = work / "out"
        out.mkdir()
        vmlinuz = tree / "boot" / f"vmlinuz-{pin.release}"
        config = tree / "boot" / f"config-{pin.release}"
        if not vmlinuz.is_file() or not config.is_file():
            raise ImageError(f"{deb.name}: no boot/vmlinuz-{pin.release} or boot/config-{pin.release}; "
                             f"check kernels.*.release in env/images.yaml")
        release, uname_v = kernel_banner(vmlinuz)
        if release != pin.release:
            raise ImageError(f"{deb.name}: kernel reports release {release}, images.yaml says {pin.release}")
        preempt = preempt_model(config.read_text())
        if preempt != pin.preempt:
            raise ImageError(f"{deb.name}: config-{pin.release} is preempt={preempt}, "
                             f"images.yaml says {pin.preempt}")
        shutil.copy2(vmlinuz, out / vmlinuz.name)
        shutil.copy2(config, out / config.name)
        for name in dtbs:
            # armmp: usr/lib/linux-image-<release>/<name>.dtb
            found = sorted((tree / "usr" / "lib" / f"linux-image-{pin.release}").rglob(name))
            if not found:
                raise ImageError(f"{deb.name}: no device tree {name} under usr/lib/linux-image-{pin.release}")
            shutil.copy2(found[0], out / name)
        moddir = tree / "lib" / "modules" / pin.release
        load = _module_closure(moddir, modules, pin.package) if modules else []
        for rel in load:
            dst = out / "modules" / pin.release / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(moddir / rel, dst)
        if load:
            (out / "modules" / pin.release / "rtlab.load").write_text("".join(f"{r}\n" for r in load))
        info = {**want, "release": release, "uname_v": uname_v, "preempt": preempt,
                "vmlinuz": vmlinuz.name, "config": config.name,
                "sha256": sha256_file(out / vmlinuz.name), "load": load}
        (out / "kernel.json").write_text(json.dumps(info, indent=2) + "\n")
        if kdir.exists():
            shutil.rmtree(kdir)
        os.replace(out, kdir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _kernel_from_info(kdir, info)


def _kernel_from_info(kdir: Path, info: Mapping[str, Any]) -> KernelImage:
    return KernelImage(kdir / info["vmlinuz"], info["package"], info["version"], info["release"],
                       info["preempt"], info["uname_v"], info["sha256"], kdir / info["config"])
