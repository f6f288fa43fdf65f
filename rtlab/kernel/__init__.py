"""Kernels built from source, from config fragments (``rtlab kernel``).

Two things live here:

* :func:`ensure_source` turns Debian's ``linux-source-6.12`` package (pinned,
  ``apt-get download``, nothing installed) into a git repository with one
  commit, so there is a real kernel tree with a commit SHA to build from.
* :func:`build_kernel` builds a tree for an arch from fragments in
  ``kernel-configs/fragments/``: ``make tinyconfig``, the kernel's own
  ``scripts/kconfig/merge_config.sh -m`` over base + preemption model +
  options, ``make olddefconfig``, then a check that **every option the
  fragments ask for survived** olddefconfig (a dropped ``PREEMPT_RT`` is an
  error naming the option, the fragment and what became of it, never a
  silently different kernel). Then ``nice make -j2`` with ccache.

Builds are cached by (tree commit + hash of uncommitted changes, arch,
fragments' contents, compiler): the same inputs return the recorded build at
once, without running make. :func:`ensure_built_kernel` combines both for the
image code: a kernel from the pinned source tree, built once.

One concern per module:

    source.py      the pinned linux-source .deb as a one-commit git tree
    tree.py        a tree's commit and the hash of its uncommitted changes
    git.py         git as the other modules run it
    fragments.py   config fragments, what they ask for, the board's base
    options.py     the "option survived olddefconfig" check and its error
    configure.py   tinyconfig + merge_config.sh + olddefconfig + the check
    make.py        make steps of one build (log, progress, ccache counts)
    key.py         the build cache key
    build.py       build_kernel: cached builds
    cache.py       cache locations and pruning of old builds
    pinned.py      ensure_built_kernel: the pinned source, built once
    progress.py    progress lines and durations
    errors.py      KernelError

Cache layout (``$RTLAB_CACHE/kernel``, default ``~/.cache/rtlab/kernel``)::

    debs/                 downloaded linux-source .debs
    src/linux-source-6.12_<version>/      the git tree (+ .json beside it)
    builds/<arch>/<key16>/  bzImage|Image, .config, build.json, build.log
    builds/<arch>/<key16>/obj/            O= objects when the tree is read-only
    <tree>/.rtlab-build-<key16>/          O= objects otherwise (see build._object_dir);
                          removed after every build, failed or not
    ccache/               compiler cache (unless $CCACHE_DIR is set), shared by
                          builds into any cache_dir
"""
from __future__ import annotations

from ..targets import arch as _arch
from ..core.fsutil import sha256_file
from .build import BuiltKernel, build_kernel
from .cache import LAST_USED, cache_root, kernel_cache, prune_builds
from .errors import KernelError
from .fragments import (
    FRAGMENTS_DIR, Fragment, base_fragment, fragment_path, load_fragment, parse_config, requested_options, with_base,
)
from .key import FORMAT, cache_key, fragments_digest
from .make import TAIL_EVERY_S
from .options import Dropped, KernelConfigError, check_options, kconfig_hint
from .pinned import ensure_built_kernel
from .progress import Progress
from .source import SOURCE_PACKAGE, SOURCE_VERSION, SourceTree, ensure_source
from .tree import TreeState, tree_state

#: the arches a kernel builds for (rtlab/targets/arch.py: ARCH=, cross compiler, image)
ARCHES = _arch.ARCHES

__all__ = [
    "ARCHES", "FORMAT", "FRAGMENTS_DIR", "LAST_USED", "SOURCE_PACKAGE", "SOURCE_VERSION", "TAIL_EVERY_S",
    "BuiltKernel", "Dropped", "Fragment", "KernelConfigError", "KernelError", "Progress", "SourceTree",
    "TreeState", "base_fragment", "build_kernel", "cache_key", "cache_root", "check_options",
    "ensure_built_kernel", "ensure_source", "fragment_path", "fragments_digest", "kconfig_hint",
    "kernel_cache", "load_fragment", "parse_config", "prune_builds", "requested_options", "sha256_file",
    "tree_state", "with_base",
]
