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
