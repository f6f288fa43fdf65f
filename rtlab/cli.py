"""The `rtlab` command line.

Each sub-command is a module of rtlab/commands with a ``register(subparsers)``
function, found there by rtlab.registry.COMMANDS; this file only wires them
up, so adding a command is one new file and never an edit of another one.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .core.printable import PrintableStream
from .errors import Cancelled, RtlabError, said
from .registry import COMMANDS

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtlab",
        description="Real-time latency regression CI: kernel variants -> boards -> "
        "suites under load -> results -> store and report -> gate.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # every module of rtlab/commands (rtlab.registry.COMMANDS); one that fails
    # to import is an error naming it, never a command missing in silence
    for register in COMMANDS.values():
        register(sub)
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
    out, err = sys.stdout, sys.stderr
    # one filter for everything any command prints (rtlab.core.printable):
    # names and messages from outside never drive the terminal or CI log
    sys.stdout, sys.stderr = (None if s is None else PrintableStream(s) for s in (out, err))  # None: print is a no-op
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGTERM (CI cancelling a job) unwinds like Ctrl-C: finally blocks run
    # (process groups killed, raw files fetched, run.json written)
    signal.signal(signal.SIGTERM, _raise_cancel)
    try:
        return int(args.func(args) or 0)
    except RtlabError as e:
        print(f"rtlab: error: {said(str(e))}", file=sys.stderr)
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
        print(f"rtlab: internal error: {type(e).__name__}: {said(str(e).splitlines()[0]) if str(e) else ''}"
              f"{where}", file=sys.stderr)
        return 2


def _raise_cancel(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one unwinding, not one per signal
    raise Cancelled(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
