"""For the image code: a kernel from the pinned source, built once."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from .build import BuiltKernel, build_kernel
from .fragments import with_base
from .progress import Progress
from .source import SOURCE_VERSION, ensure_source


def ensure_built_kernel(arch: str, fragments: Sequence[str], *, progress: Optional[Progress] = print,
                        board: Optional[str] = None, cache_dir: Optional[Path] = None,
                        version: str = SOURCE_VERSION) -> BuiltKernel:
    """A kernel for *arch* from the pinned ``linux-source-6.12`` tree.

    *fragments* are merged after the board's base fragment (``base-qemu-<arch>``
    unless *board* says otherwise, or the list starts with a ``base-*``).
    The first call unpacks the source and builds (minutes); later calls with
    the same inputs return the cached build at once.
    """
    src = ensure_source(version, cache_dir=cache_dir, progress=progress)
    # the lab's own source (Debian's package, unpacked by rtlab): its objects may fill the compiler cache
    return build_kernel(src.path, arch, with_base(arch, fragments, board), cache_dir=cache_dir,
                        progress=progress, trusted=True)
