"""ensure_images: kernels and initramfs of an arch, built on first use, then cached."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from ..targets import arch as _arch
from ..core.fsutil import atomic_write as _atomic_write
from ..core.fsutil import locked as _locked
from ..core.fsutil import sha256_file
from .apt import AptSource
from .cache import DEFAULT_CACHE, DebCache, Progress, _extract_deb
from .config import ArchConfig, load_config
from .cpio import pack_cpio
from .debkernel import _prepare_kernel
from .errors import ImageError
from .imageset import ImageSet
from .initfiles import STANDARD_DIRS, STATIC_FILES, STATIC_LINKS, _generated_digest
from .overlay import _copy_overlay, _place, overlay_digest
from .packages import PackageSource
from .resolve import _resolve
from .userland import RootView, find_programs, resolve_needed

#: the arches known (rtlab/targets/arch.py)
ARCHES = _arch.ARCHES


def _quiet(_: str) -> None:
    pass


def ensure_images(arch: str, *, cache_dir: Optional[Path] = None,
                  overlays: Sequence[Union[Path, str]] = (), progress: Optional[Progress] = print,
                  config: Optional[Path] = None, source: Optional[PackageSource] = None,
                  refresh: bool = False) -> ImageSet:
    """Kernels and initramfs for *arch*, built on first use, then cached.

    A call whose inputs (env/images.yaml for this arch, *overlays*, the
    generated /init etc.) were built before returns the recorded set without
    touching apt and without output. ``refresh=True`` resolves package
    versions with apt again (picking up e.g. security updates of libraries).
    """
    cfg, cache, adir, ovl, key, state = _image_key(arch, cache_dir, overlays, config)
    say: Progress = progress or _quiet

    def cached() -> Optional[ImageSet]:
        return None if refresh else _cached_set(state, cache, key)

    hit = cached()
    if hit is not None:
        return hit
    with _locked(adir / ".lock"):
        hit = cached()  # another process may have built it while we waited
        if hit is not None:
            return hit
        iset = _build(cfg, cache, adir, ovl, key, say, source or AptSource())
        text = json.dumps(iset.manifest(cache), indent=2) + "\n"
        _atomic_write(state, text.encode())
        _atomic_write(adir / "manifest.json", text.encode())
        return iset


def cached_images(arch: str, *, cache_dir: Optional[Path] = None,
                  overlays: Sequence[Union[Path, str]] = (), config: Optional[Path] = None) -> Optional[ImageSet]:
    """The image set :func:`ensure_images` would return for these inputs if
    it is built and its files are all there, else None; never builds, never
    asks apt (`rtlab doctor`)."""
    _, cache, _, _, key, state = _image_key(arch, cache_dir, overlays, config)
    return _cached_set(state, cache, key)


def _image_key(arch: str, cache_dir: Optional[Path], overlays: Sequence[Union[Path, str]],
               config: Optional[Path]) -> tuple:
    """The inputs' content key and where its manifest lives."""
    if _arch.get_or_none(arch) is None:
        raise ImageError(f"unknown arch {arch!r}; known: {', '.join(ARCHES)}")
    arch = _arch.canonical(arch)
    cfg = load_config(arch, config)
    # resolved: the set names real files, whichever symlink the cache is reached through
    cache = (Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE).resolve()
    ovl = tuple({"path": str(Path(o).resolve()), "sha256": overlay_digest(Path(o))} for o in overlays)
    key = hashlib.sha256(json.dumps({
        "config": cfg.key_data(), "generated": _generated_digest(),
        "overlays": [o["sha256"] for o in ovl],
    }, sort_keys=True).encode()).hexdigest()
    adir = cache / arch
    return cfg, cache, adir, ovl, key, adir / f"manifest-{key[:16]}.json"


def _cached_set(state: Path, cache: Path, key: str) -> Optional[ImageSet]:
    if not state.is_file():
        return None
    try:
        iset = ImageSet.from_manifest(json.loads(state.read_text()), cache)
    except (ValueError, KeyError, TypeError):
        return None
    return iset if iset.key == key and iset.files_present() else None


def _build(cfg: ArchConfig, cache: Path, adir: Path, ovl: Sequence[Mapping[str, str]], key: str,
           say: Progress, source: PackageSource) -> ImageSet:
    arch = cfg.arch
    label = f"images {arch}"
    debs = DebCache(cache / "debs", source)
    kpkgs, top, libs = _resolve(cfg, source, debs, label, say)
    paths = debs.fetch([*kpkgs.values(), *top.values(), *libs], say, label)

    kernels = {
        flavour: _prepare_kernel(pin, paths[pin.package], kpkgs[flavour].sha256,
                                 adir / "kernels" / f"{pin.package}_{pin.version}",
                                 cfg.modules, say, label, _arch.get(arch).dtbs)
        for flavour, pin in cfg.kernels.items()
    }

    userland = [*top.values(), *libs]
    say(f"{label}: unpacking {len(userland)} packages (dpkg-deb -x)")
    roots = [(p.name, _extract_deb(paths[p.name], adir / "pkgs" / f"{p.name}_{p.version.replace(':', '%3a')}"))
             for p in userland]
    view = RootView(roots)
    programs = find_programs(view, list(cfg.packages))
    if "bin/busybox" not in programs:
        raise ImageError("busybox-static: no bin/busybox among the programs; /init needs it")
    files = resolve_needed(view, programs, arch, extra=cfg.dlopen)
    n_libs = len({e.package for e in files.values()} - set(cfg.packages))
    say(f"{label}: {len(programs)} programs need {len(files) - len(programs)} library files "
        f"from {n_libs} packages")

    with tempfile.TemporaryDirectory(dir=adir, prefix=".root-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        for d, _ in STANDARD_DIRS:
            (root / d).mkdir(parents=True, exist_ok=True)
        for rel, entry in sorted(files.items()):
            _place(entry.path, root / rel, entry.is_link)
        for k in kernels.values():
            mods = k.path.parent / "modules"
            if mods.is_dir():
                _copy_overlay(mods, root / "lib" / "modules")
        for rel, (text, mode) in STATIC_FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            os.chmod(root / rel, mode)
        for rel, target in STATIC_LINKS.items():
            if not (root / rel).is_symlink() and not (root / rel).exists():
                os.symlink(target, root / rel)
        release = {"arch": arch, "packages": {p.name: p.version for p in sorted(userland)},
                   "kernels": {f: f"{k.package} {k.version}" for f, k in kernels.items()}}
        (root / "etc" / "rtlab-release.json").write_text(json.dumps(release, indent=1, sort_keys=True) + "\n")
        for o in ovl:
            _copy_overlay(Path(o["path"]), root)
        # modes are part of the content: normalise what umask/packages left
        for dirpath, dirnames, _ in os.walk(root):
            for d in dirnames:
                p = Path(dirpath) / d
                if not p.is_symlink():
                    os.chmod(p, 0o755)
        for d, mode in STANDARD_DIRS:
            os.chmod(root / d, mode)
        os.chmod(root, 0o755)
        n_entries = sum(len(f) + len(d) for _, d, f in os.walk(root))
        say(f"{label}: packing initramfs, {n_entries} entries (cpio -H newc, gzip)")
        blob = pack_cpio(root)

    digest = hashlib.sha256(blob).hexdigest()
    initramfs = adir / f"initramfs-{arch}-{digest[:16]}.cpio.gz"
    if not initramfs.is_file() or sha256_file(initramfs) != digest:
        _atomic_write(initramfs, blob)
    say(f"{label}: {initramfs.name} {len(blob) / 1e6:.1f} MB")
    return ImageSet(arch, kernels, initramfs, digest, tuple(sorted([*kpkgs.values(), *userland])),
                    tuple(dict(o) for o in ovl), key, {"initramfs": len(blob),
                                      **{f: k.path.stat().st_size for f, k in kernels.items()}})
