"""The `rtlab` command line.

Each sub-command lives in the module that owns the work and registers itself
through a ``register(subparsers)`` function; this file only wires them up, so
adding a command never means editing another one.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .errors import RtlabError

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


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RtlabError as e:
        print(f"rtlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rtlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
