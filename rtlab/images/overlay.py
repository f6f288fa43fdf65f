"""Overlays: trees copied over the initramfs root (rtbench), and their digest."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..errors import InputError
from ..core.fsutil import sha256_file


def overlay_digest(path: Path) -> str:
    """sha256 over an overlay tree: relative paths, types, exec bits,
    contents and symlink targets (mtimes and owners do not matter)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(path, "overlay is not a directory")
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_symlink():
            h.update(f"L {rel} {os.readlink(p)}\n".encode())
        elif p.is_dir():
            h.update(f"D {rel}\n".encode())
        elif p.is_file():
            exe = "x" if p.stat().st_mode & 0o111 else "-"
            h.update(f"F {rel} {exe} {sha256_file(p)}\n".encode())
    return h.hexdigest()


def _place(src: Path, dst: Path, is_link: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    if is_link:
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o755 if src.stat().st_mode & 0o111 else 0o644)


def _copy_overlay(src: Path, root: Path) -> None:
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_dir() and not p.is_symlink():
            (root / rel).mkdir(parents=True, exist_ok=True)
        else:
            _place(p, root / rel, p.is_symlink())
