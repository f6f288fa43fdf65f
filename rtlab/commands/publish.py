"""`rtlab publish RESULTS_DIR [--replay] [--store-config FILE]`: results into InfluxDB.

RESULTS_DIR is one run (``results/<run_id>/`` holding ``run.json``) or a
results directory holding several (every ``*/run.json``, oldest first by
name). With no store configured, a local influxd is started (or reused)
under rtlab's state directory. Points that cannot be written are spooled
and sent by ``--replay`` or the next publish, so nothing is lost.

Exit status: 0 all written (and the spool empty), 2 points wait in the
spool (the store is down or refused them: infra) or bad input. Never 1,
which CI reads as "a budget broke".
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..store.local import LocalInfluxd
from ..store.publish import PublishReport, Session, load_run, publish_run, summarize
from ..core.rundir import RUN_JSON, RunDir

__all__ = ["register", "run", "publish_run", "PublishReport"]


def register(sub):
    p = sub.add_parser(
        "publish", help="write results to InfluxDB (local influxd when none is configured)",
        description="Write runs to InfluxDB. RESULTS_DIR is one run (results/<run_id>/ with "
        "run.json) or a directory of runs. With no store configured (RTLAB_INFLUX_*, "
        "~/.config/rtlab/store.yaml, --store-config) a local influxd is started or reused. "
        "Points that cannot be written are spooled and sent by --replay or the next publish. "
        "Exit status: 0 all written and nothing spooled, 2 points wait in the spool or bad input.")
    p.add_argument("results", nargs="*", metavar="RESULTS_DIR",
                   help="a run directory (with run.json) or a directory of runs")
    p.add_argument("--replay", action="store_true",
                   help="send the points spooled while the server was unavailable")
    p.add_argument("--store-config", metavar="FILE",
                   help="store settings (YAML); default ~/.config/rtlab/store.yaml and RTLAB_INFLUX_*")
    p.add_argument("--stop-local", action="store_true",
                   help="stop the local influxd rtlab started (after publishing, if any)")
    p.set_defaults(func=run)


def _run_dirs(paths) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if RunDir(p).run_json.is_file() or (p.is_file() and p.name.endswith(".json")):
            out.append(p)
        elif p.is_dir():
            # results/latest is a symlink to a run already in the list
            found = sorted(q.parent for q in p.glob(f"*/{RUN_JSON}") if not q.parent.is_symlink())
            if not found:
                raise InputError(p, "no run.json here nor in its subdirectories")
            out.extend(found)
        else:
            raise InputError(p, "no such run directory")
    return out


def run(args) -> int:
    if not args.results and not args.replay and not args.stop_local:
        raise InputError("rtlab publish", "give RESULTS_DIR, --replay or --stop-local")
    dirs = _run_dirs(args.results)  # every directory exists before anything is written
    status = 0
    if dirs or args.replay:
        sess = Session(config_file=args.store_config)
        if args.replay:
            sent, left = sess.replay()
            print(f"replay: {sent} points sent, {left} points left in {sess.spool.dir}")
            for e in sess.take_errors():
                print(f"  error: {e}")
            if left:
                status = 2
            if not dirs and sent:
                for line in sess.how_to_look():
                    print(line)
        for i, d in enumerate(dirs):
            report = sess.publish(load_run(d), replay=not args.replay)  # one run in memory at a time
            summarize(report, print, sess, how_to_look=i == len(dirs) - 1)
            if not report.ok:
                status = 2
    if args.stop_local:
        stopped = LocalInfluxd().stop()
        print("stopped the local influxd" if stopped else "no local influxd was running")
    return status
