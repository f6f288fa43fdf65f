"""`rtlab images [--arch ARCH ...]`: ensure the board images, print their manifest."""
from __future__ import annotations

import json
import sys

from ..images import ARCHES, ensure_images
from ..suites.rtbench import image_overlays


def register(sub):
    p = sub.add_parser("images", help="build or reuse board kernels + initramfs and print their manifest")
    p.add_argument("--arch", action="append", choices=sorted(ARCHES), metavar="ARCH",
                   help=f"arch to ensure ({', '.join(ARCHES)}); repeatable, default all")
    p.add_argument("--overlay", action="append", default=[], metavar="DIR",
                   help="directory copied into the initramfs root (repeatable; default: none beyond the suites' own)")
    p.add_argument("--cache-dir", metavar="DIR", help="image cache (default $RTLAB_CACHE/images or ~/.cache/rtlab/images)")
    p.add_argument("--refresh", action="store_true",
                   help="resolve package versions with apt again instead of reusing the cached build")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path


    # progress goes to stderr so stdout stays one JSON document
    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    manifests = {}
    for arch in args.arch or list(ARCHES):
        # the same overlays `rtlab run` stages (rtbench), so `make images` builds
        # exactly the image a run will ask for
        images = ensure_images(arch, cache_dir=Path(args.cache_dir) if args.cache_dir else None,
                               overlays=[*image_overlays(arch), *map(Path, args.overlay)],
                               progress=progress,
                               refresh=args.refresh)
        manifests[arch] = images.manifest()
    json.dump(manifests, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
