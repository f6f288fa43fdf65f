"""docs/reference/cli.md, generated from the `rtlab` argument parser.

    .venv/bin/python tools/cli_reference.py            # print the reference
    .venv/bin/python tools/cli_reference.py --write    # rewrite docs/reference/cli.md
    .venv/bin/python tools/cli_reference.py --check    # exit 1 when the file differs (tests/unit/test_cli_reference.py)

One section per command and sub-command, in the parser's own order, each
with its one-line help, its synopsis and a table of its arguments: the
page is what the parser says and cannot drift from it. It is written from
the parser's actions (option strings, metavar, nargs, choices, help), never
from argparse's formatted --help, whose layout differs between the Python
versions rtlab supports ("optional arguments:" or "options:", how a short
and a long option share a metavar, where usage lines wrap): the page is the
same on each (tests/unit/test_cli_reference.py runs this under every one).
"""
from __future__ import annotations

import argparse
import sys
from typing import Iterator, Optional

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory, on any interpreter with the dependencies
    sys.path.insert(0, str(ROOT))

from rtlab.cli import build_parser  # noqa: E402 - after the path above

REFERENCE = ROOT / "docs" / "reference" / "cli.md"

HEADER = """# `rtlab` command reference

Generated from the argument parser by `tools/cli_reference.py --write`;
`tests/unit/test_cli_reference.py` fails when this page differs from it.
`rtlab COMMAND --help` prints the same. Exit codes of every command: 0
pass, 1 a latency budget broke or a regression (where the command judges),
2 bad input, infra, cancellation or an undecided verdict
([reading results](../reading-results.md)).
"""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the parser's order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: _text(a.help) for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple]:
    """(command path, one-line help, parser) for every command below *parser*."""
    for name, help_, sub in _subcommands(parser):
        yield (*path, name), help_, sub
        yield from walk(sub, (*path, name))


def command_tree(parser: Optional[argparse.ArgumentParser] = None) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command path the parser has (`("rack", "power")` ...)."""
    return {p: sub for p, _, sub in walk(parser or build_parser())}


def anchor(path: tuple[str, ...]) -> str:
    """The heading's anchor as GitHub and tests/unit/test_docs_links.py make it."""
    return "rtlab-" + "-".join(path)


def _text(help_: Optional[str], action: Optional[argparse.Action] = None) -> str:
    """A help string as --help prints it: argparse's %-format expanded."""
    if not help_ or help_ == argparse.SUPPRESS:
        return ""
    params = {"prog": "rtlab"}
    if action is not None:
        params.update(default=action.default, dest=action.dest, metavar=action.metavar,
                      choices=", ".join(map(str, action.choices or ())))
    try:
        return help_ % params
    except (KeyError, TypeError, ValueError):
        return help_


def _shown_arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS]


def metavar(action: argparse.Action) -> str:
    """What follows an option (or stands for a positional), argparse's way
    with its version differences left out: METAVAR, {a,b}, X [X ...]."""
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        name = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        name = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.option_strings:
        name = action.dest.upper()
    else:
        name = action.dest
    nargs = action.nargs
    if nargs is None:
        return name
    if nargs == argparse.OPTIONAL:
        return f"[{name}]"
    if nargs == argparse.ZERO_OR_MORE:
        return f"[{name} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return f"{name} [{name} ...]"
    if nargs == argparse.REMAINDER:
        return "..."
    if isinstance(nargs, int):
        return " ".join([name] * nargs)
    return name


def _argument(action: argparse.Action) -> str:
    mv = metavar(action)
    if not action.option_strings:
        return mv
    long_first = sorted(action.option_strings, key=lambda s: (not s.startswith("--"), s))
    return ", ".join(long_first) + (f" {mv}" if mv else "")


def synopsis(path: tuple[str, ...], parser: argparse.ArgumentParser) -> str:
    """`rtlab PATH` with its required arguments, then [options] when it has others."""
    words = ["rtlab", *path]
    optional = False
    for a in _shown_arguments(parser):
        if a.option_strings:
            if a.required:
                words.append(f"{sorted(a.option_strings, key=lambda s: not s.startswith('--'))[0]}"
                             + (f" {metavar(a)}" if metavar(a) else ""))
            else:
                optional = True
        else:
            words.append(metavar(a))
    for group in parser._mutually_exclusive_groups:
        if group.required:
            words.append("(" + " | ".join(_argument(a) for a in group._group_actions) + ")")
    if _subcommands(parser):
        words.append(" | ".join(name for name, _, _ in _subcommands(parser)) + " ...")
    if optional:
        words.append("[options]")
    return " ".join(words)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def section(path: tuple[str, ...], help_: str, parser: argparse.ArgumentParser) -> list[str]:
    out = [f"{'#' * min(len(path) + 1, 4)} rtlab {' '.join(path)}", ""]
    if help_:
        out += [help_[0].upper() + help_[1:] + ("" if help_.endswith(".") else "."), ""]
    description = _text(parser.description)
    if description and description.rstrip(".") != help_.rstrip("."):
        out += [" ".join(description.split()), ""]
    out += ["```text", synopsis(path, parser), "```", ""]
    rows = []
    for a in _shown_arguments(parser):
        what = _text(a.help, a)
        if a.required and a.option_strings:
            what = f"required: {what}" if what else "required"
        rows.append(f"| `{_cell(_argument(a))}` | {_cell(what)} |")
    if rows:
        out += ["| argument | what |", "|---|---|", *rows, ""]
    for group in parser._mutually_exclusive_groups:
        names = ", ".join(f"`{sorted(a.option_strings, key=lambda s: not s.startswith('--'))[0]}`"
                          for a in group._group_actions)
        out += [f"{'Exactly' if group.required else 'At most'} one of {names}.", ""]
    if _subcommands(parser):
        out += ["| sub-command | what it does |", "|---|---|"]
        out += [f"| [`{name}`](#{anchor((*path, name))}) | {_cell(h)} |" for name, h, _ in _subcommands(parser)]
        out.append("")
    return out


def render(parser: Optional[argparse.ArgumentParser] = None) -> str:
    parser = parser or build_parser()
    entries = list(walk(parser))
    out = [HEADER, "| command | what it does |", "|---|---|"]
    for path, help_, _ in entries:
        out.append(f"| [`rtlab {' '.join(path)}`](#{anchor(path)}) | {_cell(help_)} |")
    out.append("")
    for path, help_, sub in entries:
        out += section(path, help_, sub)
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
