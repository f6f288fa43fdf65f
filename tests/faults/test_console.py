"""Raw files come home when the console hangs: a tool that ignores Ctrl-C
keeps the console busy past its timeout; run_tool gets a fresh console (a
new pty shell on the local board), fetches what the tool wrote, and fails
with one line (the console's expect dump goes to the log only)."""
import os
import shutil
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
    wd = f"/tmp/rtlab/jobs/fault-{tmp_path.name}"
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
