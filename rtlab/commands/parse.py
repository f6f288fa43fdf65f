"""`rtlab parse FILE... --json`: any raw output a suite keeps (rt-tests,
rtbench, rtla histograms) into the result model."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import InputError
from ..parsers import parse_file, read_text
from ..suites import Suite  # the suites register their tools on import


def register(sub):
    p = sub.add_parser("parse", help="parse raw outputs (rt-tests/rtbench JSON or text, rtla hist) "
                                     "into the result model")
    p.add_argument("files", nargs="+", metavar="FILE", help="raw output files of a tool")
    p.add_argument("--json", action="store_true", help="print one JSON object (the default form)")
    p.add_argument("--histogram", action="store_true", help="include histogram buckets")
    p.add_argument("--tool", help="force the tool instead of detecting it")
    p.set_defaults(func=run)


def _suite(path: str, tool: str | None) -> Suite | None:
    """The suite that reads *path* itself (no single-format parser: rtla),
    by --tool or by the file's first line; None: the format parsers' file."""
    if tool is not None:
        suite = Suite.for_tool(tool)
        return suite if suite is not None and suite.parser is None else None
    return Suite.for_raw_file(read_text(path)[:200])


def run(args) -> int:
    files = []
    for f in args.files:
        suite = _suite(f, args.tool)
        if suite is None:
            files.append(parse_file(f, tool=args.tool).to_json(with_histogram=args.histogram))
            continue
        outs = suite.parse_raw_file(Path(f))
        if not outs:
            raise InputError(f, f"{suite.tool}: no measurement in it")
        for part, out in outs.items():
            files.append({**out.to_json(with_histogram=args.histogram),
                          "measurement": suite.measurement_names(suite.name)[suite.parts.index(part)]})
    json.dump({"files": files}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
