"""Building a kernel tree for an arch from fragments, answered from the cache when built before."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ..targets import arch as _arch
from ..errors import InputError, RtlabError
from ..core.fsutil import atomic_write as _atomic_write
from ..core.fsutil import locked as _locked
from ..core.fsutil import sha256_file
from ..images.kernel_facts import kernel_banner, preempt_model  # shared readers of kernel images
from .cache import _touch, kernel_cache
from .configure import _configure
from .errors import KernelError
from .fragments import load_fragment
from .key import FORMAT, cache_key, fragments_digest
from .make import _children_cpu, _ccache_counts, _Make
from .output import check_release, take_config, take_image
from .progress import Progress, _fmt_s, _quiet
from .tree import tree_state

#: the arches known (rtlab/targets/arch.py)
ARCHES = _arch.ARCHES


@dataclass(frozen=True)
class BuiltKernel:
    #: the boot image (bzImage / Image)
    path: Path
    #: its .config
    config: Path
    #: `make -s kernelrelease` (= `uname -r` on the board)
    release: str
    #: build.json as a dict
    build_json: dict
    #: the build directory in the cache
    dir: Path = Path()
    #: True when the cache answered and make did not run
    cached: bool = False

    @property
    def preempt(self) -> str:
        return self.build_json.get("preempt", "")

    @property
    def uname_v(self) -> str:
        return self.build_json.get("uname_v", "")


def _toolchain(cc: str) -> str:
    try:
        res = subprocess.run([cc, "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        raise KernelError(f"{cc} not found: install the compiler (env/apt-packages.txt)") from None
    return res.stdout.splitlines()[0].strip() if res.returncode == 0 and res.stdout else cc


def _load_build(bdir: Path, image_name: str) -> Optional[BuiltKernel]:
    try:
        info = json.loads((bdir / "build.json").read_text())
    except (OSError, ValueError):
        return None
    image, config = bdir / image_name, bdir / ".config"
    if not image.is_file() or not config.is_file():
        return None
    if info.get("image", {}).get("sha256") != sha256_file(image):
        return None
    _touch(bdir)
    return BuiltKernel(image, config, info.get("release", ""), info, bdir, cached=True)


def _object_dir(tree: Path, key: str, bdir: Path) -> Path:
    """Where make's O= objects go.

    A direct subdirectory of the source tree when the tree is writable:
    Kbuild then sets ``srctree := ..`` instead of the tree's absolute path,
    so no compiler command line names where the tree is checked out, and
    ccache hits across checkouts (a CI runner's kernel work tree, a
    developer's clone, the pinned source). With O= elsewhere, every path in
    the tree changes every hash: measured, a one-file commit in a second
    clone recompiled all ~850 files. The name starts with a dot (the
    kernel's .gitignore has ``.*``; Kbuild also writes a ``*`` .gitignore
    into it), so the tree stays clean for `git status` and the cache key.
    """
    if os.access(tree, os.W_OK):
        return tree / f".rtlab-build-{key[:16]}"
    return bdir / "obj"


def _make_object_dir(obj: Path) -> None:
    obj.mkdir(parents=True)
    # before make runs (Kbuild writes the same file, later): git ignores the
    # objects even in a tree whose .gitignore does not cover dot-directories
    (obj / ".gitignore").write_text("# rtlab kernel build objects\n*\n")


def _keep_statslog(statslog: Path, bdir: Path) -> None:
    """The ccache stats log beside the build (counts only: written by ccache
    in the sandbox, so read bounded and kept only as a regular file)."""
    from .output import read_output
    try:
        (bdir / "ccache-stats.log").write_bytes(read_output(statslog, 16 << 20, "ccache stats log"))
    except (KernelError, OSError):
        pass


def build_kernel(tree: Union[Path, str], arch: str, fragments: Sequence[Union[str, Path]], *,
                 out: Optional[Path] = None, cache_dir: Optional[Path] = None,
                 progress: Optional[Progress] = print, jobs: int = 2, nice: int = 10,
                 ccache_dir: Optional[Path] = None, fragments_dir: Optional[Path] = None,
                 config_only: bool = False, trusted: bool = False) -> BuiltKernel:
    """Build *tree* for *arch* from *fragments* (merged in order), cached.

    Returns at once when the same (commit + uncommitted changes, arch,
    fragments, compiler) were built before. *out* gets a copy of the image,
    .config and build.json. *config_only* stops after the option check
    (nothing is cached; the result has only ``config``).

    Every step that runs the tree's code runs in its sandbox
    (rtlab.kernel.sandbox); the image and .config enter the cache only
    after it has exited, checked (rtlab.kernel.output). *trusted*: the
    tree is the lab's own (the pinned source), so its objects may fill the
    shared compiler cache; any other tree's build only reads it.
    """
    if _arch.get_or_none(arch) is None:
        raise InputError("--arch", f"unknown arch {arch!r}; known: {', '.join(ARCHES)}")
    arch = _arch.canonical(arch)
    if not fragments:
        raise InputError("--variant", "no config fragments to build from")
    say = progress or _quiet
    karch = _arch.get(arch)
    label = f"kernel {arch}"
    frags = [load_fragment(f, fragments_dir) for f in fragments]
    state = tree_state(Path(tree))
    cc = f"{karch.cross_prefix()}gcc"
    toolchain = _toolchain(cc)
    fdigest = fragments_digest(frags)
    key = cache_key(state.commit, state.dirty_hash, arch, fdigest, toolchain)
    cache = Path(cache_dir) if cache_dir is not None else kernel_cache()
    # a configuration check never touches (or answers from) the build cache
    bdir = cache / ("configs" if config_only else "builds") / arch / key[:16]

    def finish(bk: BuiltKernel) -> BuiltKernel:
        if out is not None:
            out_dir = Path(out)
            out_dir.mkdir(parents=True, exist_ok=True)
            for f in (bk.path, bk.config, bk.dir / "build.json"):
                shutil.copy2(f, out_dir / f.name)
            bk = BuiltKernel(out_dir / bk.path.name, out_dir / ".config", bk.release, bk.build_json,
                             bk.dir, bk.cached)
        return bk

    hit = None if config_only else _load_build(bdir, karch.kernel_image_name)
    if hit is not None:
        say(f"{label}: cached {hit.path} ({hit.release}, {hit.preempt})")
        return finish(hit)
    with _locked(bdir.with_name(bdir.name + ".lock")):
        # built by another process meanwhile?
        hit = None if config_only else _load_build(bdir, karch.kernel_image_name)
        if hit is not None:
            say(f"{label}: cached {hit.path} ({hit.release}, {hit.preempt})")
            return finish(hit)
        t0 = time.monotonic()
        dirty = (f"dirty: {len(state.dirty_files)} changed file{'s' * (len(state.dirty_files) != 1)}"
                 if state.dirty_hash else "clean")
        say(f"{label}: {state.path} at {state.commit[:12]} ({state.describe}, {dirty}); "
            f"fragments {', '.join(f.name for f in frags)}; build {key[:16]}")
        obj = _object_dir(state.path, key, bdir)
        for old in (bdir, obj):  # a failed or incomplete earlier attempt
            if old.exists():
                shutil.rmtree(old)
        bdir.mkdir(parents=True)
        _make_object_dir(obj)
        log = bdir / "build.log"
        # ccache's per-build log, in the sandbox's one writable place; kept beside the build after it
        statslog = obj / ".rtlab-ccache-stats.log"
        # one compiler cache for every build cache (content-addressed; only
        # the lab's own source writes it: rtlab.kernel.sandbox)
        ccd = Path(ccache_dir) if ccache_dir else Path(os.environ.get("CCACHE_DIR") or kernel_cache() / "ccache")
        if trusted:
            ccd.mkdir(parents=True, exist_ok=True)
        make = _Make(state.path, obj, karch, log, say, label, nice, ccd, statslog,
                     state.commit_time, ccache_writes=trusted,
                     readable=tuple(dict.fromkeys(f.path.resolve() for f in frags)))

        try:
            n_req = _configure(make, state.path, arch, frags, bdir, label, say)
            say(f"{label}: all {n_req} requested options survived olddefconfig")
            if config_only:
                take_config(obj / ".config", bdir / ".config")
                shutil.rmtree(obj)
                return BuiltKernel(Path(), bdir / ".config", "", {}, bdir, cached=False)

            say(f"{label}: nice -n {nice} make -j{jobs} {karch.kernel_image_name}"
                f"{' (ccache)' if make.ccache else ' (no ccache found)'}")
            t_make = time.monotonic()
            cpu0 = _children_cpu()
            make(karch.kernel_image_name, jobs=jobs, tail=True)
            make_s = time.monotonic() - t_make
            make_cpu = _children_cpu() - cpu0
            release = check_release(make("-s", "kernelrelease", capture=True))

            image = bdir / karch.kernel_image_name
            take_image(obj / karch.kernel_image, image, karch)
            config_text = take_config(obj / ".config", bdir / ".config")
            try:
                _, uname_v = kernel_banner(image)
            except RtlabError:
                uname_v = ""
            _keep_statslog(statslog, bdir)
            counts = _ccache_counts(bdir / "ccache-stats.log")
            info: dict[str, Any] = {
                "format": FORMAT, "key": key,
                "tree": str(state.path), "commit": state.commit, "describe": state.describe,
                "dirty": ({"sha256": state.dirty_hash, "files": list(state.dirty_files)}
                          if state.dirty_hash else None),
                "arch": arch, "make_arch": karch.kernel_arch,
                "fragments": [f.to_json() for f in frags], "fragments_sha256": fdigest,
                "release": release, "uname_v": uname_v, "preempt": preempt_model(config_text),
                "image": {"name": image.name, "sha256": sha256_file(image), "size": image.stat().st_size},
                "config_sha256": sha256_file(bdir / ".config"),
                "toolchain": toolchain, "ccache": counts if make.ccache else None,
                "jobs": jobs, "make_seconds": round(make_s, 1),
                # CPU time of make and compilers (user+sys): comparable across loaded machines
                "make_cpu_seconds": round(make_cpu, 1),
                "build_seconds": round(time.monotonic() - t0, 1),
                "built_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            _atomic_write(bdir / "build.json", (json.dumps(info, indent=2) + "\n").encode())
            shutil.rmtree(obj)
            say(f"{label}: built {image} ({release}, {info['preempt']}) in {_fmt_s(info['build_seconds'])}"
                + (f"; ccache {counts['hits']} hits, {counts['misses']} misses" if make.ccache else ""))
            return finish(BuiltKernel(image, bdir / ".config", release, info, bdir, cached=False))
        except BaseException:
            # the log and the .config stay in bdir (named by the error); the
            # objects go: a runner's kernel tree must not fill up with the
            # objects of every commit that failed to build
            if not (bdir / ".config").exists():
                try:
                    take_config(obj / ".config", bdir / ".config")
                except (KernelError, OSError):
                    pass  # none, or not one rtlab takes: the error says what failed
            shutil.rmtree(obj, ignore_errors=True)
            raise
