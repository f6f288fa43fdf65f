"""The build cache key: tree commit and changes, arch, fragments' contents, compiler."""
from __future__ import annotations

import hashlib
import json
from typing import Optional, Sequence

from .fragments import Fragment


#: bump when the build changes its output for the same inputs (part of the key)
FORMAT = 1


def fragments_digest(fragments: Sequence[Fragment]) -> str:
    """Hash of the fragments' contents in merge order."""
    return hashlib.sha256("\n".join(f.sha256 for f in fragments).encode()).hexdigest()


def cache_key(commit: str, dirty_hash: Optional[str], arch: str, fragments_sha256: str,
              toolchain: str = "") -> str:
    return hashlib.sha256(json.dumps({
        "format": FORMAT, "commit": commit, "dirty": dirty_hash, "arch": arch,
        "fragments": fragments_sha256, "toolchain": toolchain,
    }, sort_keys=True).encode()).hexdigest()
