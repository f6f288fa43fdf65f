"""Integration tests run the real thing: `rtlab run` booting QEMU boards
through labgrid, real rt-tests on this machine as a board."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RTLAB = [sys.executable, "-m", "rtlab.cli"]


def rtlab(*args, timeout=900, env=None):
    """Run the CLI like a user does; returns the CompletedProcess (text)."""
    return subprocess.run([*RTLAB, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def campaign(tmp_path):
    """Write a campaign file; budgets default to a file written beside it."""
    def make(boards, variants=None, suites=None, budgets=None):
        budgets_file = tmp_path / "budgets.yaml"
        budgets_file.write_text(textwrap.dedent(budgets or """
            budgets:
              qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}
              local: {"*": {"*": {"*": {max_us: 10000000}}}}
        """))
        lines = [f"name: test", f"budgets: {budgets_file}", f"boards: {list(map(str, boards))}"]
        if variants:
            lines.append(f"variants: {variants}")
        lines.append("suites:")
        lines.append(textwrap.indent(textwrap.dedent(suites or """
            - name: cyclictest
              params: {interval_us: 1000, duration_s: 2, histogram_us: 2000}
              overrides: {qemu-tcg: {histogram_us: 20000}}
        """), "  "))
        path = tmp_path / "campaign.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path
    return make


@pytest.fixture
def board_file(tmp_path, monkeypatch):
    """A variant of a shipped board file, edited for a failure scenario; its
    name (boards are found by name only: RTLAB_ENV_PATH adds this directory)."""
    env_dir = tmp_path / "env"
    env_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("RTLAB_ENV_PATH", str(env_dir))

    def make(name, base, replace):
        text = (ROOT / "env" / f"{base}.yaml").read_text()
        for old, new in replace.items():
            assert old in text, old
            text = text.replace(old, new)
        (env_dir / f"{name}.yaml").write_text(text)
        return name
    return make
