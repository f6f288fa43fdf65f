"""`rtlab history --html OUT [--board B] [--variant V] [--days N] [--per commit|day]`:
the long-term latency page, from the store, without Grafana.

Per board, suite × load and variant: max and p99.9 per commit or day, the
budgets, the change points of `rtlab regressions`, and the latest run's
histogram over the earlier runs'; the numbers are the regressions and
histogram dashboards' queries (rtlab.verdict.history, drawn by
rtlab.report.history).

Exit status: 0 page written, 2 bad input or the store cannot answer.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _days(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days") from None
    if not 1 <= n <= 3650:
        raise argparse.ArgumentTypeError(f"{n} days: from 1 to 3650")
    return n


def register(sub):
    p = sub.add_parser("history", help="the long-term latency page (max, p99.9, budgets, change points, "
                                       "histograms) from the store, without Grafana")
    p.add_argument("--html", type=Path, required=True, metavar="OUT", help="the page to write")
    p.add_argument("--board", help="only this board")
    p.add_argument("--variant", help="only this kernel variant")
    p.add_argument("--days", type=_days, default=30, help="the window: the last N days (default 30)")
    p.add_argument("--per", choices=("commit", "day"), default="commit",
                   help="one point per commit (the largest of its runs) or per day (default commit)")
    p.add_argument("--store-config", metavar="FILE",
                   help="store settings (YAML); default ~/.config/rtlab/store.yaml and RTLAB_INFLUX_*")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report.history import write_history_html
    from ..store.dashboard import Window
    from ..verdict.history import History
    from ..verdict.regressions import check_name
    from .regressions import open_store

    check_name("--board", args.board)
    check_name("--variant", args.variant)
    window = Window(days=args.days, interval="1d" if args.per == "day" else "1s")
    store = open_store(args.store_config)
    plots = History(store, window, args.per, args.board, args.variant).read()
    page = write_history_html(plots, args.html, window.days, args.per, repr(store))
    active = sum(1 for p in plots for c in p.changes if c.status == "active")
    print(f"history: {page}: {len(plots)} series, {active} active change point{'s' * (active != 1)}",
          file=sys.stderr)
    return 0
