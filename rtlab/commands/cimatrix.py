"""`rtlab ci matrix`: .gitlab-ci.yml's job matrices from the lab's campaigns
and env files (rtlab/run/cimatrix.py).

    rtlab ci matrix             print the generated regions and what is not gated
    rtlab ci matrix --check     exit 1 if .gitlab-ci.yml's regions are not what
                                the lab's files give (the diff on stdout)
    rtlab ci matrix --write     rewrite them
    rtlab ci matrix --table     what is gated, per board, with its budget (Markdown)
    rtlab ci matrix --schedules the schedules, their jobs, time and timeout (Markdown)

Exit 0 done (or current), 1 --check found the file stale, 2 bad input.
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path

from ..core.fsutil import atomic_write
from ..run import cimatrix


def register(sub):
    p = sub.add_parser("ci", help="the CI pipeline's job matrices, from the lab's campaigns and env files")
    csub = p.add_subparsers(dest="ci_command", required=True, metavar="ACTION")
    m = csub.add_parser("matrix", help="generate .gitlab-ci.yml's build/test/report matrices from the "
                                       "campaigns it names (edit those, then --write)")
    m.add_argument("--pipeline", type=Path, metavar="FILE",
                   help="the pipeline file whose regions are generated (default: this checkout's .gitlab-ci.yml)")
    m.add_argument("--campaign", metavar="NAME|FILE",
                   help="the gate's campaign (default: the pipeline's RTLAB_CAMPAIGN variable)")
    m.add_argument("--nightly", metavar="NAME|FILE",
                   help="the nightly schedule's campaign (default: the pipeline's schedule rule)")
    m.add_argument("--reports", metavar="DIR", type=Path,
                   help=f"where the report campaigns ({cimatrix.REPORT_GLOB}) are (default: campaigns/)")
    what = m.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 if the pipeline's regions are stale")
    what.add_argument("--write", action="store_true", help="rewrite the pipeline's regions")
    what.add_argument("--table", action="store_true", help="print what is gated, per board (Markdown)")
    what.add_argument("--schedules", action="store_true", help="print the schedules' jobs (Markdown)")
    m.set_defaults(func=run_matrix)


def run_matrix(args) -> int:
    args.pipeline = args.pipeline or cimatrix.PIPELINE
    args.reports = args.reports or cimatrix.CAMPAIGN_DIR
    gate, nightly = cimatrix.pipeline_campaigns(args.pipeline)
    m = cimatrix.ci_matrix(args.campaign or gate, args.nightly or nightly,
                           cimatrix.report_campaigns(args.reports))
    if args.table:
        print(cimatrix.gated_table(m))
        return 0
    if args.schedules:
        print(cimatrix.schedules_table(m))
        return 0
    if not (args.write or args.check):
        for region, lines in cimatrix.regions(m, {}).items():
            print(f"# rtlab ci matrix {region}:")
            print("\n".join(lines))
        return 0
    text = args.pipeline.read_text()
    new = cimatrix.rewrite(text, m, args.pipeline)
    if args.write:
        if new != text:
            atomic_write(args.pipeline, new.encode())
        print(f"ci matrix: {args.pipeline} {'rewritten' if new != text else 'was current'}")
        return 0
    if args.check:
        if new == text:
            print(f"ci matrix: {args.pipeline} is current")
            return 0
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                   str(args.pipeline), "generated"))
        print(f"ci matrix: {args.pipeline} is stale: `rtlab ci matrix --write`")
        return 1
    return 0
