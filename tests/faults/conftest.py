"""Fault injection: hostile input, signals, locks, lost consoles. Each case
asserts the verdict, the exit code, what is kept and that nothing is left
running (see README.md in this directory)."""
import time
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
    """Processes whose command line, cwd or environment holds *marker*
    (unique to a test: its tmp path), read from /proc (ps truncates)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(p / "cwd")
        except OSError:
            continue
        try:
            environ = (p / "environ").read_bytes().decode(errors="replace")
        except OSError:
            environ = ""
        if marker in cmd or marker in cwd or marker in environ:
            out.append(f"{p.name} {cwd} {cmd[:300]}")
    return out


def kill_leftovers(marker: str) -> None:
    """Test clean-up after a failed assertion: nothing of the test stays running."""
    import signal
    for line in leftovers(marker):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            pass


def start_rtlab(args, env):
    return subprocess.Popen([*RTLAB, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def wait_for_line(proc, text, timeout):
    """Lines of proc's stdout up to the first holding *text*."""
    seen = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not seen in {timeout} s: {''.join(seen)[-2000:]}")
