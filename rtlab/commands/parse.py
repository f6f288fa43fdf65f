"""`rtlab parse FILE... --json`: rt-tests / rtbench outputs into the result model."""
from __future__ import annotations

import json
import sys

from .. import suites  # noqa: F401  the suites register their tools' parsers (rtlab.parsers.registry)
from ..parsers import parse_file


def register(sub):
    p = sub.add_parser("parse", help="parse rt-tests/rtbench outputs (JSON or text) into the result model")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object (the default form)")
    p.add_argument("--histogram", action="store_true", help="include histogram buckets")
    p.add_argument("--tool", help="force the tool instead of detecting it")
    p.set_defaults(func=run)


def run(args) -> int:
    files = [parse_file(f, tool=args.tool) for f in args.files]
    json.dump({"files": [f.to_json(with_histogram=args.histogram) for f in files]},
              sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
