"""Tree state: the commit of a kernel tree and a hash of its uncommitted changes."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..core.fsutil import sha256_file
from .git import _git, check_repository_config


@dataclass(frozen=True)
class TreeState:
    path: Path
    commit: str
    describe: str
    #: sha256 over `git diff HEAD` and untracked files; None when clean
    dirty_hash: Optional[str] = None
    dirty_files: tuple[str, ...] = ()
    #: committer date of HEAD, unix seconds (the build's timestamp)
    commit_time: int = 0


def tree_state(tree: Path) -> TreeState:
    tree = Path(tree).resolve()
    if not (tree / "Makefile").is_file() or not (tree / "Kconfig").is_file():
        raise InputError(tree, "not a kernel source tree (no Makefile/Kconfig)")
    # first: nothing below may run or follow the tree's own git configuration
    check_repository_config(tree)
    top = _git(tree, "rev-parse", "--show-toplevel", check=False)
    if "dubious ownership" in (top.stderr or ""):
        raise InputError(tree, "is owned by another user, and git refuses it (dubious ownership): rtlab "
                               "never marks a tree safe.directory; build a tree this user owns")
    if top.returncode != 0:
        raise InputError(tree, "not a git repository: builds are keyed by commit "
                               "(`rtlab kernel source` makes one from Debian's linux-source)")
    if Path(top.stdout.strip()).resolve() != tree:
        raise InputError(tree, f"is inside the git repository {top.stdout.strip()}, not its top")
    for f in (".config", "include/config"):
        if (tree / f).exists():
            raise InputError(tree, f"has an in-tree build ({f}); out-of-tree builds (O=) refuse "
                                   f"a configured source tree: run `make mrproper` there")
    commit = _git(tree, "rev-parse", "HEAD").stdout.strip()
    describe = _git(tree, "describe", "--tags", "--always", "--dirty").stdout.strip()
    ctime = int(_git(tree, "log", "-1", "--format=%ct").stdout.strip() or 0)
    # tracked changes (staged or not) against HEAD, binary-safe, then untracked files
    diff = _git(tree, "diff", "--binary", "--no-ext-diff", "--no-textconv", "HEAD", text=False).stdout
    changed = [p for p in _git(tree, "diff", "--name-only", "--no-ext-diff", "-z", "HEAD").stdout.split("\0") if p]
    untracked = sorted(p for p in _git(tree, "ls-files", "-z", "--others", "--exclude-standard")
                       .stdout.split("\0") if p)
    if not diff and not untracked:
        return TreeState(tree, commit, describe, None, (), ctime)
    h = hashlib.sha256(diff)
    for p in untracked:
        f = tree / p
        h.update(b"\0untracked\0" + p.encode() + b"\0")
        if f.is_symlink():
            h.update(b"link:" + os.readlink(f).encode())
        elif f.is_file():
            h.update(sha256_file(f).encode())
    return TreeState(tree, commit, describe, h.hexdigest(), tuple(sorted(set(changed) | set(untracked))), ctime)
