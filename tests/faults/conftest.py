"""Fault injection: hostile input, signals, locks, lost consoles. Each case
asserts the verdict, the exit code, what is kept and that nothing is left
running (see README.md in this directory)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RTLAB = [sys.executable, "-m", "rtlab.cli"]


def rtlab(*args, timeout=600, env=None, cwd=ROOT):
    return subprocess.run([*RTLAB, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def rtlab_inproc(*args, capsys):
    """The CLI's main() in this process (same exit codes and messages as the
    command, without a Python start per case): (exit code, stderr)."""
    import signal

    from rtlab.cli import main
    old = signal.getsignal(signal.SIGTERM)
    try:
        rc = main([str(a) for a in args])
    finally:
        signal.signal(signal.SIGTERM, old)
    return rc, capsys.readouterr().err


@pytest.fixture
def write_campaign(tmp_path):
    """A campaign file from a dict-free YAML text (dedented); budgets beside it."""
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text("budgets:\n  local: {'*': {'*': {'*': {max_us: 10000000}}}}\n"
                       "  qemu-tcg: {'*': {'*': {'*': {max_us: 10000000}}}}\n")

    def make(text, name="campaign.yaml"):
        path = tmp_path / name
        path.write_text(f"name: faults\nbudgets: {budgets}\n" + textwrap.dedent(text))
        return path
    return make


def leftovers(marker: str) -> list[str]:
    """Processes whose command line holds *marker* (a tmp path unique to a test)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines()[1:] if marker in l and "ps -eo" not in l]
