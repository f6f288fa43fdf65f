"""`rtlab regressions [--board B] [--since 30d] [--json]`: where did it change?

Change points over every series of the store (board × variant × suite ×
load, run-level p99 / p99.9 / share over budget), each with the last good and
the first bad commit, effect, confidence, active or resolved; the boards whose
pinned reference kernel drifted, and the changes that drift explains. Written
to the store as Grafana annotations (``events``, ``kind`` regression/drift)
unless ``--no-annotate``.

Exit status: 0 no active regression blamed on a commit, 1 at least one,
2 bad input or the store is unreachable (never "no regression").
"""
from __future__ import annotations

import json
import sys

from ..errors import RtlabError
from ..store.publish import Session


def register(sub):
    p = sub.add_parser("regressions", help="change points over the store's history, lab drift, annotations")
    p.add_argument("--board", help="only this board")
    p.add_argument("--since", default="30d", help="window: 12h, 30d, 2w (default 30d)")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--reference-campaign", default="reference",
                   help="campaign of the pinned reference kernel runs (default reference)")
    p.add_argument("--no-annotate", action="store_true", help="do not write annotations to the store")
    p.add_argument("--store-config", metavar="FILE",
                   help="store settings (YAML); default ~/.config/rtlab/store.yaml and RTLAB_INFLUX_*")
    p.set_defaults(func=run)


def open_store(config_file=None, progress=None):
    """The configured store (or the local influxd); StoreUnavailable when down."""
    sess = Session(config_file=config_file, progress=progress or (lambda s: print(s, file=sys.stderr)))
    if sess.down or sess.store is None:
        raise RtlabError(f"store {sess.target} unavailable: {'; '.join(sess.errors) or 'not reachable'}")
    sess.store.ping()
    return sess.store


def run(args) -> int:
    # lazy: rtlab.verdict.regressions imports scipy, kept out of the CLI start-up
    from ..verdict.regressions import analyse, check_name, parse_since, read_history, write_annotations

    parse_since(args.since)
    check_name("--board", args.board)
    check_name("--reference-campaign", args.reference_campaign)
    store = open_store(args.store_config)
    history = read_history(store, args.board, args.since, args.reference_campaign)
    analysis = analyse(history)
    if not args.no_annotate:
        n = write_annotations(store, analysis, args.since, args.board)
        print(f"regressions: {n} annotations written to events", file=sys.stderr)
    if args.json:
        json.dump(analysis.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for line in analysis.lines():
            print(line)
    return 1 if analysis.active else 0
