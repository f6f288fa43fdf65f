"""Guard rails over rtlab/: ruff (pyflakes, pycodestyle errors, bugbear) and
mypy, configured in pyproject.toml. A new unused import, undefined name or
type error fails make test here, naming the file and line. ruff also reads
tests/ and bench/: a test that shadows a fixture or swallows any exception
hides the failure it is there to show."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(tool, *args):
    exe = BIN / tool
    assert exe.exists(), f"{tool} is not installed in the venv (make setup installs the dev extras)"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_in_rtlab():
    res = run("ruff", "check", "--no-cache", "rtlab")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_finds_nothing_in_tests_and_bench():
    res = run("ruff", "check", "--no-cache", "tests", "bench")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_finds_nothing_in_rtlab():
    # the cache lives under .cache (shared, ignored by git): a warm run takes seconds
    res = run("mypy", "--cache-dir", str(ROOT / ".cache" / "mypy"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no issues found" in res.stdout
