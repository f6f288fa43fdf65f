"""Every command and subcommand of the CLI prints its help: argparse formats
help text lazily, so a stray '%' in it only fails when somebody asks."""
import argparse
import contextlib
import io

import pytest

from rtlab.cli import build_parser


def _parsers(p: argparse.ArgumentParser, path=()):
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


ALL = list(_parsers(build_parser()))


def test_the_cli_has_its_commands():
    names = {path for path, _ in ALL}
    assert {("run",), ("compare",), ("baseline", "derive"), ("gate",)} <= names


@pytest.mark.parametrize("path,parser", ALL, ids=[" ".join(p) or "rtlab" for p, _ in ALL])
def test_help_prints(path, parser):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        parser.print_help()
    assert parser.prog.split()[-1] in out.getvalue()


def _default_text(value) -> str:
    """How a help text states a default: 0.99, 30 (for 30.0), main, 2G."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def undocumented(parsers) -> list[str]:
    """Every argument without help, or whose default (other than None, False
    or an empty list) the help does not state as "default ... <value>"."""
    bad = []
    for path, parser in parsers:
        seen = set()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = f"rtlab {' '.join(path)} {'/'.join(action.option_strings) or action.dest}".replace("  ", " ")
            help_ = action.help if action.help not in (None, argparse.SUPPRESS) else ""
            if not help_.strip():
                bad.append(f"{name}: no help")
            # the default argparse applies is the first action's of a dest (--evidence/--no-evidence)
            first = action.dest not in seen
            seen.add(action.dest)
            default = parser._defaults.get(action.dest, action.default) if first else None
            if default in (None, False, [], argparse.SUPPRESS):
                continue
            text = help_ % {"default": default} if "%(default)" in help_ else help_
            said = text.lower().partition("default")[2]
            if not said or _default_text(default).lower() not in said:
                bad.append(f"{name}: default {default!r} not stated")
    return bad


def test_every_argument_has_help_stating_its_default():
    assert undocumented(ALL) == []


def test_the_help_check_finds_a_silent_option_and_an_unstated_default():
    p = argparse.ArgumentParser(prog="rtlab x")
    p.add_argument("--silent")
    p.add_argument("--level", type=float, default=0.99, help="probability")
    p.add_argument("--days", type=float, default=30.0, help="the window (default 30)")
    p.add_argument("--branch", default="main", help="the branch (default: %(default)s)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--on", dest="on", action="store_true", default=None, help="on (default: the campaign's)")
    g.add_argument("--off", dest="on", action="store_false", help="off")
    assert undocumented([(("x",), p)]) == ["rtlab x --silent: no help", "rtlab x --level: default 0.99 not stated"]
