"""One registry mechanism (rtlab.registry) for suites, loads, commands,
architectures and boards; a unit that fails to register is an error naming
it, never skipped; every list is read from the registries."""
import sys
import textwrap
from pathlib import Path

import pytest

from rtlab import registry
from rtlab.targets.arch import ARCHES
from rtlab.targets.boards import load_boards
from rtlab.cli import build_parser
from rtlab.loads import LOADS, Load
from rtlab.registry import COMMANDS, SUITES, Registry, RegistrationError

ROOT = Path(__file__).resolve().parents[2]


def _package(tmp_path, monkeypatch, name, modules):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod, text in modules.items():
        (pkg / f"{mod}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_every_family_uses_the_one_mechanism():
    from rtlab.suites import SUITES as suites
    assert suites is SUITES
    for reg in (SUITES, LOADS, COMMANDS, ARCHES, load_boards()):
        assert isinstance(reg, Registry), reg


def test_a_command_module_that_fails_to_import_is_an_error_naming_it(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "rtlab_t_cmds", {
        "good": "def register(sub):\n    sub.add_parser('good')\n",
        "broken": "import no_such_module_anywhere\ndef register(sub): pass\n"})
    cmds = Registry("command", "rtlab_t_cmds", each_module=True, collect=registry._command_of)
    with pytest.raises(RegistrationError, match=r"command module rtlab_t_cmds\.broken failed to register: "
                                                r"ModuleNotFoundError: No module named 'no_such_module_anywhere'"):
        list(cmds)


def test_a_command_module_without_register_is_an_error(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "rtlab_t_cmds2", {"half": "X = 1\n"})
    cmds = Registry("command", "rtlab_t_cmds2", each_module=True, collect=registry._command_of)
    with pytest.raises(RegistrationError, match=r"command module rtlab_t_cmds2\.half registers no command"):
        cmds.load()


def test_a_suite_module_that_fails_to_import_is_an_error_naming_it(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "rtlab_t_suites", {"bad": "raise RuntimeError('half-written suite')\n"})
    with pytest.raises(RegistrationError, match=r"suite module rtlab_t_suites\.bad failed to register: "
                                                r"RuntimeError: half-written suite"):
        Registry("suite", "rtlab_t_suites").load()


def test_two_units_of_one_name_name_both():
    r: Registry[int] = Registry("thing")
    r.add("a", 1, "first.py")
    with pytest.raises(RegistrationError, match="two things named 'a': first.py and second.py"):
        r.add("a", 2, "second.py")


def test_every_command_module_is_a_command():
    mods = sorted(p.stem for p in (ROOT / "rtlab" / "commands").glob("*.py") if p.stem != "__init__")
    assert sorted(COMMANDS) == mods
    choices = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert {"run", "parse", "compare", "gate", "rack", "lava"} <= set(choices)


def test_a_load_defined_anywhere_is_registered_and_in_loads_all(tmp_path):
    """Loads were a one-time snapshot of the catalog: a load defined in
    another module never reached LOADS. Now any subclass with a name does,
    and a campaign's ``loads: all`` runs it."""
    from rtlab.plan.campaign import load_campaign

    class Sleepy(Load):
        name = "t-sleepy"
        description = "test load"
    try:
        assert LOADS["t-sleepy"].description == "test load" and "t-sleepy" in LOADS.programme()
        assert LOADS.origin("t-sleepy").endswith("Sleepy")
        c = tmp_path / "c.yaml"
        c.write_text(f"name: c\nbudgets: {ROOT / 'budgets/default.yaml'}\nboards: [local]\n"
                     "suites:\n  - name: cyclictest\n    loads: [all]\n")
        assert load_campaign(c).suites[0].loads == tuple(LOADS.programme())
        assert "t-sleepy" in load_campaign(c).suites[0].loads and "fifo-hog" not in LOADS.programme()
    finally:
        LOADS.pop("t-sleepy")
    assert "t-sleepy" not in LOADS


def test_parsers_read_the_suites_registry():
    from rtlab.parsers import known_tools
    assert set(known_tools()) == {s.tool for s in SUITES.values() if s.parser is not None}
    assert "cyclictest" in known_tools() and "timerlat" not in known_tools()


def test_architectures_and_boards_are_registered_once():
    assert set(ARCHES) >= {"x86_64", "aarch64", "armv7l"}  # a new one is one entry (test_recipes.py)
    assert "local" in load_boards() and "qemu-x86_64" in load_boards()
