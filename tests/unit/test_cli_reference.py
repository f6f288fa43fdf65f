"""docs/reference/cli.md is the argument parser's: regenerated here and
compared, so a new option or sub-command without its page fails."""
import sys
from pathlib import Path

from rtlab.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import cli_reference as clidoc  # noqa: E402 - tools/ is not a package


def test_the_cli_reference_is_what_the_parser_says():
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert page == clidoc.render(), "docs/reference/cli.md is stale: .venv/bin/python tools/cli_reference.py --write"


def test_every_command_and_sub_command_has_a_section_with_its_help():
    page = clidoc.render()
    tree = clidoc.command_tree()
    # the commands a user comes for, sub-commands included
    for path in [("run",), ("kernel", "source"), ("lava", "validate"), ("lava", "lab"), ("lava", "lab", "up"),
                 ("rack", "power"), ("rack", "fault"), ("rack", "reap"), ("rack", "places"), ("rack", "env"),
                 ("rack", "exec"), ("baseline", "method"), ("doctor",)]:
        assert path in tree, path
        assert f"rtlab {' '.join(path)}\n" in page, path
    run_help = tree[("run",)].format_help()
    for option in ("--resume", "--full", "--evidence"):
        assert option in run_help and option in page


def test_a_new_option_makes_the_page_differ():
    parser = build_parser()
    clidoc.command_tree(parser)[("doctor",)].add_argument("--made-up-option")
    assert "--made-up-option" in clidoc.render(parser)
    assert clidoc.render(parser) != clidoc.render()


def test_check_mode_says_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "cli.md"
    stale.write_text("# old\n")
    monkeypatch.setattr(clidoc, "REFERENCE", stale)
    assert clidoc.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    stale.write_text(clidoc.render())
    assert clidoc.main(["--check"]) == 0


def test_the_page_owes_nothing_to_argparse_formatting(monkeypatch):
    """argparse's --help layout differs between the Pythons rtlab supports
    ("optional arguments:" to 3.9, "options:" after; a short and a long
    option sharing one metavar from 3.13): the page is written from the
    parser's actions alone."""
    import argparse

    def refuse(*a, **k):
        raise AssertionError("the reference used argparse's formatted help")
    expected = clidoc.render()
    parser = build_parser()  # building one formats its sub-commands' prog: argparse's own business
    for name in ("format_help", "format_usage"):
        monkeypatch.setattr(argparse.ArgumentParser, name, refuse)
    monkeypatch.setattr(argparse.HelpFormatter, "format_help", refuse)
    assert clidoc.render(parser) == expected
    assert "optional arguments:" not in expected and "usage:" not in expected


def test_the_reference_is_the_same_on_every_supported_python():
    """tools/cli_reference.py --check under each Python version rtlab
    supports that this machine has (tools/pythons.py: pyenv's, python3.N on
    PATH), each with a venv of rtlab's dependencies (make pythons)."""
    import subprocess

    import pythons

    found = pythons.pythons()
    assert found, "no supported Python found"
    missing = [f"{p.name} ({p.interpreter})" for p in found if not p.ready()]
    assert not missing, f"no venv of rtlab's dependencies for {', '.join(missing)}: make pythons"
    failed = {}
    for p in found:
        res = subprocess.run([str(p.python), str(ROOT / "tools" / "cli_reference.py"), "--check"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            failed[p.name] = (res.stdout + res.stderr)[-2000:]
    assert failed == {}
    assert sys.version_info[:2] in {p.version for p in found}
