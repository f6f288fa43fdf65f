"""The docs' recipes (docs/extending.md, docs/adding-a-board.md), followed
for real in a temporary copy of the tree: add the thing with exactly the
files the recipe names, then run what would break (the registry, campaign x
budget and tool-name tests, a campaign load, the parser) in that copy. The
counts the recipes print are the number of files touched here."""
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
        "tests/fixtures", "pyproject.toml", "README.md", "docs")


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


#: where each recipe is written
RECIPES = {"suite": "docs/extending.md", "load": "docs/extending.md", "architecture": "docs/extending.md",
           "budget": "docs/extending.md", "board": "docs/adding-a-board.md"}


def readme_count(thing: str) -> int:
    m = re.search(rf"\*\*An? {thing}\*\* \((\d+) files?", (ROOT / RECIPES[thing]).read_text())
    assert m, f"{RECIPES[thing]} has no count for {thing}"
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


#: a new architecture, as the README's recipe says: POWER little endian
#: (Debian ppc64el). Package and kernel names in Debian's shape; nothing is
#: downloaded or built here (no such toolchain on this host), the test runs
#: what reads the entry: the host set-up, the Makefiles, images, kernels, LAVA
PPC64LE = '''\
    Arch(name="ppc64le", debian="ppc64el", triplet="powerpc64le-linux-gnu", elf_machine=21, elf_bits=64,
         kernel_arch="powerpc", cross="powerpc64le-linux-gnu-", kernel_image="arch/powerpc/boot/zImage",
         kernel_flavour="powerpc64le", lava="ppc64el",
         qemu=Qemu("qemu-system-ppc64", "pseries", "power9", "hvc0", package="qemu-system-ppc"),
         cross_packages=("gcc-powerpc64le-linux-gnu", "libc6-dev-ppc64el-cross")),
'''
PPC64LE_PINS = "".join(f'''\
    {flavour}:
      package: linux-image-6.1.0-50-{pre}powerpc64le
      version: 6.1.176-1
      release: 6.1.0-50-{pre}powerpc64le
      preempt: {preempt}
''' for flavour, pre, preempt in (("generic", "", "voluntary"), ("rt", "rt-", "rt")))

#: stand-ins for what would install packages (apt-get, dpkg --add-architecture)
#: or stop services: they record their arguments; dpkg-query says nothing is installed
STUBS = {
    "apt-get": 'echo "apt-get $*" >> "$STUB_LOG"',
    "systemctl": "exit 1",
    "dpkg-query": "exit 1",
    "dpkg": 'case "$1" in --print-foreign-architectures) printf "arm64\\narmhf\\n";; '
            '--add-architecture) echo "dpkg $*" >> "$STUB_LOG";; *) exec /usr/bin/dpkg "$@";; esac',
}


def test_an_architecture_in_the_files_the_readme_names(tree, tmp_path_factory):
    for name in ("Makefile", "rtbench"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tree / name, ignore=shutil.ignore_patterns("build"))
        else:
            shutil.copy2(src, tree / name)
    arch_py = tree / "rtlab/targets/arch.py"
    text = arch_py.read_text()
    anchor = "):\n    ARCHES.add(_a.name, _a, __name__)"
    assert anchor in text
    images = (tree / "env/images.yaml").read_text()
    assert "\n\ninitramfs:" in images
    touched = {
        # 1. its entry in the registry
        arch_py: text.replace(anchor, PPC64LE.rstrip("\n") + "\n" + anchor, 1),
        # 2. its kernel pins
        tree / "env/images.yaml": images.replace("\n\ninitramfs:", "\n  ppc64le:\n" + PPC64LE_PINS.rstrip("\n")
                                                 + "\n\ninitramfs:", 1),
        # 3. its base fragment for kernels built from source
        tree / "kernel-configs/fragments/base-qemu-ppc64le.config":
            "CONFIG_PPC64=y\nCONFIG_CPU_LITTLE_ENDIAN=y\nCONFIG_PPC_PSERIES=y\nCONFIG_HVC_CONSOLE=y\n"
            "CONFIG_BLK_DEV_INITRD=y\nCONFIG_DEVTMPFS=y\n",
    }
    assert len(touched) == readme_count("architecture") == 3
    for path, text in touched.items():
        path.write_text(text)

    # the host set-up derives the packages and the dpkg architecture from it
    stubs = tmp_path_factory.mktemp("stubs")
    for name, body in STUBS.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    log = stubs / "calls.log"
    res = subprocess.run(["bash", str(tree / "env/setup-host.sh")], capture_output=True, text=True, timeout=120,
                         env={"PATH": f"{stubs}:/usr/bin:/bin", "STUB_LOG": str(log)})
    assert res.returncode == 0, res.stderr[-2000:]
    calls = log.read_text()
    assert "dpkg --add-architecture ppc64el" in calls and "apt-get update -qq" in calls
    install = next(line for line in calls.splitlines() if line.startswith("apt-get install"))
    for pkg in ("qemu-system-ppc", "gcc-powerpc64le-linux-gnu", "libc6-dev-ppc64el-cross",
                "qemu-system-arm", "gcc-aarch64-linux-gnu", "rt-tests"):
        assert f" {pkg}" in install, pkg
    # the Makefile builds rtbench for it, rtbench/Makefile with its cross compiler
    # (make -n: printed, not run; the venv's python stands in for .venv/bin/python)
    res = subprocess.run(["make", "-n", "-B", "rtbench", f"PY={sys.executable}", f"STAMPS={stubs}/stamps"],
                         cwd=tree, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "RTLAB_HOME": str(tree)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "powerpc64le-linux-gnu-gcc " in res.stdout and "-o build/ppc64le/rtbench" in res.stdout
    assert "aarch64-linux-gnu-gcc " in res.stdout  # the others still
    # rtlab reads it: images, kernels (base fragment), LAVA
    code = textwrap.dedent("""
        import json
        from rtlab import images, kernel
        from rtlab.lava.boards import lava_arch_name
        from rtlab.targets import arch
        cfg = images.load_config("ppc64le")
        print(json.dumps({"rt": cfg.kernels["rt"].package, "base": kernel.with_base("ppc64el", ["preempt-rt"]),
                          "lava": lava_arch_name("ppc64le"), "cross": arch.get("ppc64el").cross_prefix("x86_64")}))
    """)
    res = run_in(tree, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"rt": "linux-image-6.1.0-50-rt-powerpc64le", "base": ["base-qemu-ppc64le", "preempt-rt"],
                   "lava": "ppc64el", "cross": "powerpc64le-linux-gnu-"}
    # what would break: the architecture table's own tests (but the one that
    # wants its toolchain installed on this host) and the registries
    res = run_in(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_arch.py",
                 "tests/unit/test_registry.py", "-k", "not toolchain and not bring_the_tools")
    assert res.returncode == 0, res.stdout[-3000:]


def test_a_budget_in_the_one_file_the_readme_names(tree):
    """A board of a new budget class (the board recipe) makes its campaign
    fail the check `rtlab run` makes before any boot; the budget recipe's one
    file makes it pass."""
    board = (tree / "env/qemu-x86_64.yaml").read_text()
    assert "budget_class: qemu-tcg" in board
    (tree / "env/qemu-x86_64-fast.yaml").write_text(board.replace("budget_class: qemu-tcg",
                                                                  "budget_class: qemu-kvm", 1))
    (tree / "campaigns/fast.yaml").write_text(
        "name: fast\nbudgets: ../budgets/default.yaml\nboards: [qemu-x86_64-fast]\nvariants: [rt]\nsuites:\n"
        "  - name: cyclictest\n    loads: [idle, cpu]\n    params: {duration_s: 5}\n")
    check = ("from rtlab.plan.budgets import load_budgets\n"
             "from rtlab.plan.campaign import load_campaign\n"
             "c = load_campaign('campaigns/fast.yaml')\n"
             "b = load_budgets(c.budgets)\n"
             "b.check_covers(c.jobs())\n"
             "print(b.lookup('qemu-kvm', 'rt', 'cyclictest', 'cpu'))\n")
    res = run_in(tree, "-c", check)
    assert res.returncode != 0 and "budgets.qemu-kvm: no budget for board qemu-x86_64-fast" in res.stderr
    path = tree / "budgets/default.yaml"
    text = path.read_text()
    assert text.startswith("budgets:\n") or "\nbudgets:\n" in text
    entry = ("  qemu-kvm:\n    \"*\":\n      cyclictest:\n        \"*\": {max_us: 2000, percentiles_us: {\"99\": 500}}\n"
             "        cpu: {max_us: 4000}\n")
    touched = {path: text.replace("budgets:\n", "budgets:\n" + entry, 1)}
    assert len(touched) == readme_count("budget") == 1
    for p, t in touched.items():
        p.write_text(t)
    res = run_in(tree, "-c", check)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "4000" in res.stdout  # the most specific entry wins
    res = run_in(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_campaign_budgets.py")
    assert res.returncode == 0, res.stdout[-3000:]
