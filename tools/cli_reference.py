"""docs/reference/cli.md, generated from the `rtlab` argument parser.

    .venv/bin/python tools/cli_reference.py            # print the reference
    .venv/bin/python tools/cli_reference.py --write    # rewrite docs/reference/cli.md
    .venv/bin/python tools/cli_reference.py --check    # exit 1 when the file differs (tests/unit/test_cli_reference.py)

One section per command and sub-command, in the parser's own order, each
with its one-line help and its `--help` text, so the page is what the
parser says and cannot drift from it.
"""
from __future__ import annotations

import argparse
import sys
from typing import Iterator

from pathlib import Path

from rtlab.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference" / "cli.md"
#: help text width: fixed, so the page does not depend on the terminal
WIDTH = 100

HEADER = """# `rtlab` command reference

Generated from the argument parser by `tools/cli_reference.py --write`;
`tests/unit/test_cli_reference.py` fails when this page differs from it.
Exit codes of every command: 0 pass, 1 a latency budget broke or a
regression (where the command judges), 2 bad input, infra, cancellation or
an undecided verdict ([reading results](../reading-results.md)).
"""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the parser's order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            # a sub-command's help is a format string to argparse: "%%" is one "%"
            helps = {a.dest: (a.help or "").replace("%%", "%") for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple]:
    """(command path, one-line help, parser) for every command below *parser*."""
    for name, help_, sub in _subcommands(parser):
        yield (*path, name), help_, sub
        yield from walk(sub, (*path, name))


def command_tree(parser: argparse.ArgumentParser | None = None) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command path the parser has (`("rack", "power")` ...)."""
    return {p: sub for p, _, sub in walk(parser or build_parser())}


def _help_text(parser: argparse.ArgumentParser) -> str:
    saved = parser.formatter_class
    parser.formatter_class = lambda prog: saved(prog, width=WIDTH)  # type: ignore[call-arg]
    try:
        return parser.format_help().rstrip()
    finally:
        parser.formatter_class = saved


def anchor(path: tuple[str, ...]) -> str:
    """The heading's anchor as GitHub and tests/unit/test_docs_links.py make it."""
    return "rtlab-" + "-".join(path)


def render(parser: argparse.ArgumentParser | None = None) -> str:
    parser = parser or build_parser()
    entries = list(walk(parser))
    out = [HEADER, "| command | what it does |", "|---|---|"]
    for path, help_, _ in entries:
        out.append(f"| [`rtlab {' '.join(path)}`](#{anchor(path)}) | {help_.replace('|', '/')} |")
    out.append("")
    for path, help_, sub in entries:
        out.append(f"{'#' * min(len(path) + 1, 4)} rtlab {' '.join(path)}")
        out.append("")
        if help_:
            out.append(help_[0].upper() + help_[1:] + ("" if help_.endswith(".") else "."))
            out.append("")
        out.append("```text")
        out.append(_help_text(sub))
        out.append("```")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/cli_reference.py", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite docs/reference/cli.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when the file differs from the parser")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(text)
        return 0
    if args.check:
        current = REFERENCE.read_text() if REFERENCE.is_file() else ""
        if current != text:
            print(f"{REFERENCE} is stale: .venv/bin/python tools/cli_reference.py --write", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
