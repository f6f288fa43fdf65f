"""Where kernel sources and builds are cached, and pruning the build cache (least recently used first)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Optional

from ..targets.arch import ARCHES
from ..core.fsutil import cache_root, try_locked as _try_locked


def kernel_cache() -> Path:
    return cache_root() / "kernel"


#: a build's last use (built or answered from the cache): what prune_builds sorts by
LAST_USED = "last-used"


def _touch(bdir: Path) -> None:
    try:
        (bdir / LAST_USED).touch()
    except OSError:
        pass  # a read-only cache still answers


def _last_used(bdir: Path) -> float:
    for f in (LAST_USED, "build.json", "build.log"):
        try:
            return (bdir / f).stat().st_mtime
        except OSError:
            continue
    return bdir.stat().st_mtime


def _dir_bytes(d: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def prune_builds(cache_dir: Optional[Path] = None, *, max_bytes: int = 2 << 30, older_than_s: float = 30 * 86400,
                 in_use_s: float = 3600, now: Optional[float] = None) -> dict[str, Any]:
    """Free the kernel build cache (``builds/`` and ``configs/``), least
    recently used first, as a lab runner needs over months of commits (a
    build keeps ~6 MB: image, .config, log).

    Removed: failed or unfinished builds (no valid build.json); builds not
    used for *older_than_s*; then the least recently used until the rest
    fits in *max_bytes*. Never removed: anything used within *in_use_s* (a
    pipeline's test jobs still boot what its build jobs built), and a build
    whose lock another process holds (it is being built). The compiler
    cache has its own bound (CCACHE_MAXSIZE, 5G by default).
    """
    cache = Path(cache_dir) if cache_dir is not None else kernel_cache()
    now = time.time() if now is None else now
    entries: list[dict[str, Any]] = []
    for kind in ("builds", "configs"):
        for arch_dir in sorted((cache / kind).glob("*")):
            for bdir in sorted(p for p in arch_dir.iterdir() if p.is_dir()):
                complete = kind == "builds" and (bdir / "build.json").is_file() and any(
                    (bdir / k.kernel_image_name).is_file() for k in ARCHES.values())
                entries.append({"dir": bdir, "last_used": _last_used(bdir), "bytes": _dir_bytes(bdir),
                                "complete": complete or (kind == "configs" and (bdir / ".config").is_file())})
    removed, kept = [], []

    def remove(e: dict, why: str) -> None:
        with _try_locked(e["dir"].with_name(e["dir"].name + ".lock")) as mine:
            if not mine:
                kept.append(e)  # being built right now
                return
            shutil.rmtree(e["dir"], ignore_errors=True)
        removed.append({"dir": str(e["dir"]), "bytes": e["bytes"], "why": why,
                        "unused_days": round((now - e["last_used"]) / 86400, 1)})

    candidates = []
    for e in entries:
        age = now - e["last_used"]
        if age < in_use_s:
            kept.append(e)
        elif not e["complete"]:
            remove(e, "unfinished or failed build")
        elif age > older_than_s:
            remove(e, f"unused for more than {older_than_s / 86400:g} days")
        else:
            candidates.append(e)
    total = sum(e["bytes"] for e in kept) + sum(e["bytes"] for e in candidates)
    for e in sorted(candidates, key=lambda e: e["last_used"]):
        if total <= max_bytes:
            kept.append(e)
            continue
        n = len(removed)
        remove(e, f"least recently used, cache over {max_bytes / (1 << 20):.0f} MiB")
        if len(removed) > n:
            total -= e["bytes"]
    return {"cache": str(cache), "removed": removed, "freed_bytes": sum(r["bytes"] for r in removed),
            "kept": len(kept), "kept_bytes": sum(e["bytes"] for e in kept)}
