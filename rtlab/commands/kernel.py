"""`rtlab kernel build|source`: kernels from source, from config fragments.

    rtlab kernel source [--version V]
        Debian's linux-source-6.12 (pinned) unpacked into the cache as a git
        tree with one commit; prints {path, commit, ...} as JSON.
    rtlab kernel build --tree PATH --arch ARCH --variant NAME [--out DIR]
        base-<board> + the variant's kernel.build fragments, checked, built
        with ccache, cached by (commit + uncommitted changes, arch, fragments);
        prints build.json. Without --tree the pinned source tree is used.

Progress goes to stderr, one line per step; stdout is one JSON document.
"""
from __future__ import annotations

import json
import sys


def register(sub):
    from ..kernel import ARCHES, SOURCE_PACKAGE, SOURCE_VERSION

    p = sub.add_parser("kernel", help="build kernels from source from config fragments (kernel-configs/fragments)")
    ksub = p.add_subparsers(dest="kernel_command", required=True, metavar="SUBCOMMAND")

    s = ksub.add_parser("source", help=f"unpack Debian's {SOURCE_PACKAGE} into the cache as a git tree")
    s.add_argument("--version", default=SOURCE_VERSION,
                   help=f"{SOURCE_PACKAGE} version (default, pinned: {SOURCE_VERSION})")
    s.add_argument("--cache-dir", metavar="DIR",
                   help="kernel cache (default $RTLAB_CACHE/kernel or ~/.cache/rtlab/kernel)")
    s.set_defaults(func=run_source)

    b = ksub.add_parser("build", help="configure (checked) and build a kernel, cached")
    b.add_argument("--tree", metavar="PATH",
                   help="kernel git tree (default: the pinned source of `rtlab kernel source`)")
    b.add_argument("--arch", required=True, choices=sorted(ARCHES))
    what = b.add_mutually_exclusive_group(required=True)
    what.add_argument("--variant", metavar="NAME", help="variant whose kernel.build fragments to use "
                      "(kernel-configs/variants.yaml)")
    what.add_argument("--fragment", action="append", metavar="NAME|PATH",
                      help="fragment after the base instead of a variant's (repeatable, in order)")
    b.add_argument("--board", metavar="BOARD",
                   help="board whose base fragment comes first (default qemu-ARCH: base-qemu-ARCH)")
    b.add_argument("--out", metavar="DIR", help="also copy the image, .config and build.json here")
    b.add_argument("--cache-dir", metavar="DIR",
                   help="kernel cache (default $RTLAB_CACHE/kernel or ~/.cache/rtlab/kernel)")
    b.add_argument("--config-only", action="store_true",
                   help="stop after `make olddefconfig` and the option check")
    b.add_argument("-j", "--jobs", type=int, default=2, help="make -j (default 2)")
    b.set_defaults(func=run_build)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_source(args) -> int:
    from pathlib import Path

    from ..kernel import ensure_source

    src = ensure_source(args.version, cache_dir=Path(args.cache_dir) if args.cache_dir else None,
                        progress=_progress)
    json.dump(src.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def run_build(args) -> int:
    from pathlib import Path

    from ..errors import InputError
    from ..kernel import build_kernel, ensure_source, with_base
    from ..variants import load_variants

    cache = Path(args.cache_dir) if args.cache_dir else None
    if args.variant:
        variants = load_variants()
        v = variants.get(args.variant)
        if v is None:
            raise InputError("--variant", f"unknown variant {args.variant!r} "
                                          f"(known: {', '.join(sorted(variants))})")
        if not v.fragments:
            raise InputError("--variant", f"variant {v.name} has no kernel.build fragments "
                                          f"({v.source or 'kernel-configs/variants.yaml'})")
        frags = list(v.fragments)
    else:
        frags = list(args.fragment)
    tree = Path(args.tree) if args.tree else ensure_source(cache_dir=cache, progress=_progress).path
    built = build_kernel(tree, args.arch, with_base(args.arch, frags, args.board),
                         out=Path(args.out) if args.out else None, cache_dir=cache,
                         progress=_progress, jobs=args.jobs, config_only=args.config_only)
    if args.config_only:
        json.dump({"config": str(built.config)}, sys.stdout, indent=2)
    else:
        json.dump({**built.build_json, "path": str(built.path), "config": str(built.config),
                   "dir": str(built.dir), "cached": built.cached}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
