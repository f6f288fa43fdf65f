"""The `rtlab` command line.

Each sub-command lives in the module that owns the work and registers itself
through a ``register(subparsers)`` function; this file only wires them up, so
adding a command never means editing another one.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .errors import Cancelled, RtlabError

#: modules that provide sub-commands, in the order `rtlab --help` lists them
COMMAND_MODULES = [
    "rtlab.commands.run",
    "rtlab.commands.parse",
    "rtlab.commands.images",
    "rtlab.commands.kernel",
    "rtlab.commands.report",
    "rtlab.commands.publish",
    "rtlab.commands.lava",
    "rtlab.commands.rack",
    "rtlab.commands.ci",
    "rtlab.commands.regressions",
    "rtlab.commands.bisect",
    "rtlab.commands.compare",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtlab",
        description="Real-time latency regression CI: kernel variants -> boards -> "
        "suites under load -> results -> store and report -> gate.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # command not built yet on this checkout
                continue
            raise
        mod.register(sub)
    return parser


def crash_log_path() -> Path:
    """Where an unexpected exception's traceback goes (RTLAB_LOG_DIR, else /tmp)."""
    d = Path(os.environ.get("RTLAB_LOG_DIR") or tempfile.gettempdir())
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return d / f"rtlab-error-{stamp}-{os.getpid()}.log"


def main(argv=None) -> int:
    """Exit codes: what the command returns (0 pass, 1 a budget broke), 2 for
    everything else: bad input, infra, cancellation, and any unexpected
    error (one line; the traceback in a log file). Never 1 for those: CI
    reads 1 as "a budget broke" and would not retry."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGTERM (CI cancelling a job) unwinds like Ctrl-C: finally blocks run
    # (process groups killed, raw files fetched, run.json written)
    signal.signal(signal.SIGTERM, _raise_cancel)
    try:
        return int(args.func(args) or 0)
    except RtlabError as e:
        print(f"rtlab: error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Cancelled) as e:
        kept = getattr(e, "run_dir", None)
        print(f"rtlab: cancelled ({'SIGTERM' if isinstance(e, Cancelled) else 'SIGINT'})"
              + (f": INFRA, what was measured is kept in {kept}" if kept else ""), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 2
    except Exception as e:  # noqa: BLE001 - one line for the user, the traceback to a file
        path = crash_log_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(traceback.format_exc())
            where = f" (traceback in {path})"
        except OSError:
            where = ""
        print(f"rtlab: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
              f"{where}", file=sys.stderr)
        return 2


def _raise_cancel(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one unwinding, not one per signal
    raise Cancelled(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
