"""The README's recipes, followed for real in a temporary copy of the tree:
add the thing with exactly the files the recipe names, then run what would
break (the registry, campaign x budget and tool-name tests, a campaign
load, the parser) in that copy. The counts the README prints are the number
of files touched here."""
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPY = ("rtlab", "campaigns", "budgets", "env", "kernel-configs", "labgrid", "lava", "tests/unit",
        "tests/fixtures", "pyproject.toml", "README.md")


@pytest.fixture
def tree(tmp_path):
    for name in COPY:
        src, dst = ROOT / name, tmp_path / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return tmp_path


def run_in(tree: Path, *args: str, timeout=900) -> subprocess.CompletedProcess:
    """Python in the copy (its rtlab first on the path, RTLAB_HOME the copy)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "RTLAB_HOME": str(tree), "HOME": str(tree)}
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout)


def readme_count(thing: str) -> int:
    m = re.search(rf"\*\*An? {thing}\*\* \((\d+) files?", (ROOT / "README.md").read_text())
    assert m, f"README has no count for {thing}"
    return int(m.group(1))


SUITE = '''\
"""fakelat: a new latency tool with the rt-tests "plain" JSON layout."""
from typing import Optional

from ..targets.boards import Board
from ..parsers import rt_tests
from . import DURATION_S, Suite, SuiteRun


class Fakelat(Suite):
    name = "fakelat"
    tool = "fakelat"
    json_file = "fakelat.json"
    parser = staticmethod(rt_tests)
    json_layout = "plain"
    defaults = {"duration_s": 10}
    spec = {"duration_s": DURATION_S}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        return ["fakelat", "-D", str(run.params["duration_s"]), f"--json={self.json_file}"]
'''


def test_a_suite_in_the_files_the_readme_names(tree):
    touched = {
        # 1. its class
        tree / "rtlab/suites/fakelat.py": SUITE,
        # 2. a campaign entry
        tree / "campaigns/fakelat.yaml": "name: fakelat\nboards: [local]\nsuites:\n"
                                         "  - name: fakelat\n    loads: [all]\n    params: {duration_s: 2}\n",
    }
    # 3. its budget (class local: the campaign's board)
    budgets = (tree / "budgets/default.yaml").read_text()
    touched[tree / "budgets/default.yaml"] = budgets.replace(
        "      oslat:\n", "      fakelat:\n        \"*\": {max_us: 20000}\n      oslat:\n", 1)
    assert len(touched) == readme_count("suite") == 3
    for path, text in touched.items():
        path.write_text(text)
    doc = {"cmdline:": "fakelat -D 2 --json=fakelat.json", "thread": {"0": {
        "cycles": 100, "min": 3, "avg": 5.5, "max": 40, "cpu": 0}}, "return_code": 0}
    (tree / "out.json").write_text(json.dumps(doc))
    code = textwrap.dedent("""
        import json
        from rtlab.plan.campaign import load_campaign
        from rtlab.parsers import parse_file
        from rtlab.suites import SUITES
        c = load_campaign("campaigns/fakelat.yaml")
        out = parse_file("out.json")
        print(json.dumps({"suites": list(SUITES), "runs": [r.id for j in c.jobs() for r in j.suites],
                          "tool": out.tool, "max": out.threads[0].max_us}))
    """)
    res = run_in(tree, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert "fakelat" in got["suites"] and got["tool"] == "fakelat" and got["max"] == 40
    assert "fakelat@irq" in got["runs"] and "fakelat@stress+network" not in got["runs"]
    # what would break: every campaign x board has its budgets, no tool name
    # compared outside the suites, the registries
    res = run_in(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_campaign_budgets.py",
                 "tests/unit/test_tool_names.py", "tests/unit/test_registry.py")
    assert res.returncode == 0, res.stdout[-3000:]


def test_a_load_in_the_one_file_the_readme_names(tree):
    catalog = tree / "rtlab/loads/catalog.py"
    catalog.write_text(catalog.read_text() + textwrap.dedent('''

        class Sched(StressNg):
            name = "sched"
            description = "context switches (stress-ng --switch)"
            measures = "CPU time of the switch workers over the window, every worker alive"

            def stressors(self, env: LoadEnv) -> str:
                return f"--switch {env.ncpus}"
    '''))
    assert readme_count("load") == 1
    code = ("from rtlab.plan.campaign import load_campaign\n"
            "c = load_campaign('programme', boards=['local'])\n"
            "print(sorted({r.load for j in c.jobs() for r in j.suites}))\n")
    res = run_in(tree, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "'sched'" in res.stdout  # loads: all brings it into the programme
    res = run_in(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_campaign_budgets.py",
                 "tests/unit/test_registry.py")
    assert res.returncode == 0, res.stdout[-3000:]


def test_a_board_in_the_one_file_the_readme_names(tree):
    text = (tree / "env/qemu-x86_64.yaml").read_text()
    (tree / "env/qemu-x86_64-twin.yaml").write_text(text)
    assert readme_count("board") == 1
    code = ("from rtlab.targets.boards import load_boards, find_board\n"
            "b = find_board('qemu-x86_64-twin')\n"
            "print(b.name, b.budget_class, 'qemu-x86_64-twin' in load_boards())\n")
    res = run_in(tree, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["qemu-x86_64-twin", "qemu-tcg", "True"]
