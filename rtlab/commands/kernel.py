"""`rtlab kernel build|source`: kernels from source, from config fragments.

    rtlab kernel source [--version V]
        Debian's linux-source-6.12 (pinned) unpacked into the cache as a git
        tree with one commit; prints {path, commit, ...} as JSON.
    rtlab kernel build --tree PATH --arch ARCH --variant NAME [--out DIR]
        base-<board> + the variant's kernel.build fragments, checked, built
        with ccache, cached by (commit + uncommitted changes, arch, fragments);
        prints build.json. Without --tree the pinned source tree is used.
    rtlab kernel prune [--max-size 2G] [--older-than-days 30]
        free the build cache, least recently used first (lab runners: the
        nightly schedule runs it); prints what went as JSON.

Progress goes to stderr, one line per step; stdout is one JSON document.
"""
from __future__ import annotations

import json
import sys

from ..errors import InputError
from ..kernel import (
    ARCHES, SOURCE_PACKAGE, SOURCE_VERSION, build_kernel, ensure_source, prune_builds, with_base,
)
from ..targets.variants import load_variants


def register(sub):
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
    b.add_argument("--arch", required=True, choices=sorted(ARCHES), help="the architecture to build for")
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
    b.add_argument("--trusted-tree", action="store_true",
                   help="the tree is the lab's own: its build may fill the shared compiler cache (default: "
                        "only the pinned source does; any other tree's build only reads it). The build runs "
                        "confined either way (docs/design/security.md)")
    b.set_defaults(func=run_build)

    pr = ksub.add_parser("prune", help="free the kernel build cache, least recently used first")
    pr.add_argument("--max-size", default="2G", metavar="SIZE",
                    help="keep builds up to this size, e.g. 500M, 2G (default 2G)")
    pr.add_argument("--older-than-days", type=float, default=30.0, metavar="DAYS",
                    help="remove builds unused for longer (default 30)")
    pr.add_argument("--cache-dir", metavar="DIR",
                    help="kernel cache (default $RTLAB_CACHE/kernel or ~/.cache/rtlab/kernel)")
    pr.set_defaults(func=run_prune)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_source(args) -> int:
    from pathlib import Path


    src = ensure_source(args.version, cache_dir=Path(args.cache_dir) if args.cache_dir else None,
                        progress=_progress)
    json.dump(src.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def run_build(args) -> int:
    from pathlib import Path


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
        frags = list(v.fragments_for(args.arch))
    else:
        frags = list(args.fragment)
    tree = Path(args.tree) if args.tree else ensure_source(cache_dir=cache, progress=_progress).path
    built = build_kernel(tree, args.arch, with_base(args.arch, frags, args.board),
                         out=Path(args.out) if args.out else None, cache_dir=cache,
                         progress=_progress, jobs=args.jobs, config_only=args.config_only,
                         trusted=args.trusted_tree or not args.tree)
    if args.config_only:
        json.dump({"config": str(built.config)}, sys.stdout, indent=2)
    else:
        json.dump({**built.build_json, "path": str(built.path), "config": str(built.config),
                   "dir": str(built.dir), "cached": built.cached}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def parse_size(text: str) -> int:
    """"500M", "2G", "1.5G", "1048576" -> bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    num = t[:-1] if t[-1:] in "KMGT" and t[-1:] else t
    try:
        value = float(num)
    except ValueError:
        raise InputError("--max-size", f"{text!r} is not a size (e.g. 500M, 2G)") from None
    if value < 0:
        raise InputError("--max-size", f"{text!r} is negative")
    return int(value * mult)


def run_prune(args) -> int:
    from pathlib import Path


    res = prune_builds(Path(args.cache_dir) if args.cache_dir else None, max_bytes=parse_size(args.max_size),
                       older_than_s=args.older_than_days * 86400)
    for r in res["removed"]:
        _progress(f"kernel prune: removed {r['dir']} ({r['bytes'] / (1 << 20):.1f} MiB, {r['why']})")
    _progress(f"kernel prune: freed {res['freed_bytes'] / (1 << 20):.1f} MiB; kept {res['kept']} builds, "
              f"{res['kept_bytes'] / (1 << 20):.1f} MiB")
    json.dump(res, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
