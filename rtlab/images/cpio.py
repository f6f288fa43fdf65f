"""Packing the initramfs: a reproducible gzip'd newc cpio."""
from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

from .errors import ImageError


def pack_cpio(root: Path) -> bytes:
    """gzip'd newc cpio of *root*, byte-for-byte reproducible: sorted names,
    mtime 0, owner root, inode numbers renumbered, no gzip timestamp."""
    names = ["."]
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for n in dirnames + filenames:
            names.append(os.path.normpath(os.path.join(rel, n)))
    names = ["."] + sorted(set(names) - {"."}, key=lambda s: s.encode())
    for n in names:
        os.utime(root / n, (0, 0), follow_symlinks=False)
    res = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--reproducible", "--quiet"],
                         input="\n".join(names).encode() + b"\n", cwd=root, capture_output=True)
    if res.returncode != 0:
        raise ImageError(f"cpio -o -H newc in {root}: {res.stderr.decode(errors='replace').strip()}")
    return gzip.compress(res.stdout, compresslevel=9, mtime=0)
