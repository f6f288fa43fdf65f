"""Raw files come home when the console hangs: a tool that ignores Ctrl-C
keeps the console busy past its timeout; run_tool gets a fresh console (a
new pty shell on the local board), fetches what the tool wrote, and fails
with one line (the console's expect dump goes to the log only)."""
import os
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from labgrid import Environment

from rtlab.targets.boards import WORKDIR_ENV
from rtlab.suites.board import BoardShell, SuiteFailure, run_tool

from .conftest import ROOT, kill_leftovers, leftovers


def _running_in(wd: str) -> list[str]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.readlink(p / "cwd").startswith(wd):
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{p.name}: {cmd}")
        except OSError:
            pass
    return out


def test_stuck_console_still_brings_raw_files_home(tmp_path, monkeypatch):
    wd = f"/tmp/rtlab/jobs/fault-{uuid.uuid4().hex[:12]}"  # unique across xdist workers
    monkeypatch.setenv(WORKDIR_ENV, wd)
    env = Environment(str(ROOT / "env" / "local.yaml"))
    target = env.get_target("main")
    host = tmp_path / "host"
    try:
        target.get_driver("Strategy").transition("shell")
        sh = BoardShell(target.get_driver("CommandProtocol"))
        # writes its output, then hangs ignoring SIGINT and SIGHUP (ignored
        # signals survive exec): neither Ctrl-C nor closing its console ends it
        argv = ["sh", "-c", 'echo partial > out.json; echo started; trap "" INT HUP; exec sleep 300']
        with pytest.raises(SuiteFailure) as err:
            run_tool(sh, "stuck@idle", argv, host, ["out.json"], timeout=3)
        msg = str(err.value)
        assert "\n" not in msg and "console lost while the tool ran" in msg and len(msg) < 400
        # readable: what timed out, never pexpect's "<labgrid.util.expect.PtxExpect object at 0x...>"
        assert "object at 0x" not in msg and "TIMEOUT: no shell prompt within 3 s" in msg, msg
        # the tool that ignored Ctrl-C is gone now, not at clean-up: it must
        # not run beside the next suite
        assert not _running_in(wd), _running_in(wd)
        assert (host / "out.json").read_text() == "partial\n"
        assert (host / "stdout.txt").read_text() == "started\n"
        assert (host / "command.txt").is_file() and (host / "exit.json").is_file()
        # the fresh console works: the board is usable for the next suite
        assert sh.run("echo alive")[0] == ["alive"]
    finally:
        target.cleanup()
        left = leftovers(wd)
        kill_leftovers(wd)
        shutil.rmtree(wd, ignore_errors=True)
    assert not left, left  # the stuck shell went with its console (SIGHUP)


def _local_shell(tmp_path, monkeypatch):
    wd = f"/tmp/rtlab/jobs/fault-{uuid.uuid4().hex[:12]}"  # unique across xdist workers
    monkeypatch.setenv(WORKDIR_ENV, wd)
    monkeypatch.setenv("RTLAB_CONSOLE_SILENCE_S", "2")
    target = Environment(str(ROOT / "env" / "local.yaml")).get_target("main")
    target.get_driver("Strategy").transition("shell")
    return wd, target, BoardShell(target.get_driver("CommandProtocol"), name="local-fault")


def test_a_tool_running_past_its_expected_end_on_a_live_board_is_not_lost(tmp_path, monkeypatch):
    """Past its expected end plus the silence limit the console is probed:
    the tty echoes (and erases) the probe, so a slow tool runs to its end,
    and nothing of the probe is left for the shell to read."""
    wd, target, sh = _local_shell(tmp_path, monkeypatch)
    try:
        argv = ["sh", "-c", "sleep 5; echo done > out.json"]
        t0 = time.monotonic()
        rc = run_tool(sh, "slow@idle", argv, tmp_path / "host", ["out.json"], timeout=60, expected_s=0.5)
        assert rc == 0 and 5 <= time.monotonic() - t0 < 30  # two probes answered, the tool's own end
        assert (tmp_path / "host" / "out.json").read_text() == "done\n"
        assert sh.run("echo alive") == (["alive"], 0)
    finally:
        target.cleanup()
        kill_leftovers(wd)
        shutil.rmtree(wd, ignore_errors=True)


def test_a_board_whose_console_goes_silent_is_lost_within_its_duration_and_the_silence_limits(tmp_path, monkeypatch):
    """The console process stopped (SIGSTOP: nothing the board says arrives)
    while the tool runs: lost after the expected end, one silence limit and
    an unanswered probe; a fresh console then reaches the board, ends the
    tool and brings its raw files home; one line names the board."""
    wd, target, sh = _local_shell(tmp_path, monkeypatch)
    console = target.get_driver("ConsoleProtocol")
    try:
        argv = ["sh", "-c", "echo partial > out.json; exec sleep 300"]
        t0 = time.monotonic()
        timer = threading.Timer(1.0, os.kill, (console._child.pid, signal.SIGSTOP))
        timer.start()
        with pytest.raises(SuiteFailure) as err:
            run_tool(sh, "lost@idle", argv, tmp_path / "host", ["out.json"], timeout=120, expected_s=1)
        took = time.monotonic() - t0
        msg = str(err.value)
        assert msg.startswith("board local-fault lost while sh ran: console silent") and "no echo within 2 s" in msg
        assert took < 1 + 3 * 2 + 10, took  # not the 120 s hung-tool timeout
        assert (tmp_path / "host" / "out.json").read_text() == "partial\n"
        assert not _running_in(wd), _running_in(wd)
        assert sh.run("echo alive") == (["alive"], 0)
    finally:
        target.cleanup()
        left = leftovers(wd)
        kill_leftovers(wd)
        shutil.rmtree(wd, ignore_errors=True)
    assert not left, left
