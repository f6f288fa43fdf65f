"""Per-job console round trips, batched: kernel facts read in one batch are
the facts read one command at a time (the commands LAVA jobs run as they
are), in far fewer round trips; and the local board's pty console closes
without waiting out labgrid's SIGTERM timeout."""
import os
import re
import shutil
import subprocess

import pytest

from rtlab.report import snapshot
from rtlab.suites.board import MAX_LINE, BoardShell, boot_batch, kernel_facts, read_kernel_facts, run_batch
from rtlab.suites.transfer import TcpChannel

BUSYBOX = shutil.which("busybox")
assert BUSYBOX, "busybox is not installed (env/apt-packages.txt): the boards' nc is busybox's"


class CountingShell:
    """labgrid CommandProtocol.run() over this machine's `sh -c`, counting
    round trips; nc is busybox's, as the QEMU boards have it."""

    def __init__(self):
        self.seen = []

    def run(self, cmd, timeout=30):
        self.seen.append(cmd)
        cmd = re.sub(r"(^|[ |&;(])nc ", rf"\1{BUSYBOX} nc ", cmd)  # every nc: busybox's
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.stderr.splitlines(), p.returncode


def test_kernel_facts_in_one_batch_equal_the_facts_one_command_at_a_time():
    one, batch = CountingShell(), CountingShell()
    facts_one = read_kernel_facts(BoardShell(one))
    facts_batch = kernel_facts(BoardShell(batch))
    assert facts_batch == facts_one
    assert facts_one["release"] and facts_one["cmdline"]  # this machine's: really read
    assert len(one.seen) >= 10 and len(batch.seen) <= 2


def test_a_batch_keeps_each_commands_lines_and_exit_code():
    sh = CountingShell()
    cmds = ["printf 'a\\nb\\n'", "printf 'no newline'", "false", "cat /nonexistent 2>/dev/null",
            "true"] + [f"echo {i}" for i in range(60)]
    got = run_batch(BoardShell(sh), cmds)
    assert got["printf 'a\\nb\\n'"] == (["a", "b"], 0)
    assert got["printf 'no newline'"] == (["no newline"], 0)
    assert got["false"] == ([], 1)
    assert got["cat /nonexistent 2>/dev/null"][1] != 0
    assert all(got[f"echo {i}"] == ([str(i)], 0) for i in range(60))
    assert 1 < len(sh.seen) < 10 and all(len(c) <= 800 for c in sh.seen)  # short console lines
    assert got["true"] == ([], 0)


def test_a_command_whose_answer_never_came_is_missing_not_someone_elses():
    # `exit` ends the batch line's shell: what followed it there has no
    # answer (kernel_facts then asks the board for it on its own)
    got = run_batch(BoardShell(CountingShell()), ["echo a", "exit 7", "echo b"])
    assert got == {"echo a": (["a"], 0)}


def test_the_local_boards_pty_console_closes_at_once_and_leaves_no_process(tmp_path):
    import os

    from labgrid import Environment

    from rtlab.lab.drivers import RtlabPtyConsoleDriver
    from rtlab import ROOT

    env = Environment(str(ROOT / "env" / "local.yaml"))
    target = env.get_target("main")
    console = target.get_driver("ConsoleProtocol")
    assert isinstance(console, RtlabPtyConsoleDriver)
    child = console._child
    assert target.get_driver("ShellDriver").run("echo hi")[0] == ["hi"]  # a shell in use, as in a job
    target.deactivate(console)
    assert console.status == 0
    # ended by its shell's exit, not killed after labgrid's SIGTERM (which script(1) ignores) timed out
    assert child.returncode == 0
    assert not os.path.exists(f"/proc/{child.pid}")
    target.cleanup()


def test_a_board_that_takes_scripts_answers_a_batch_in_one_short_console_line(tmp_path, monkeypatch):
    """Over the bulk path (busybox nc, as on QEMU boards) the batch goes to
    the board as a script, checked by its digest; facts and snapshot then
    come back in one round trip of a short line, the same as read one by one."""
    monkeypatch.setenv("RTLAB_BOARD_WORKDIR", str(tmp_path / "board"))
    cmd = CountingShell()
    sh = BoardShell(cmd, bulk=TcpChannel(host_addr="127.0.0.1"))
    facts, replay = boot_batch(sh, snapshot.batch_commands(snapshot.COMMANDS))
    assert facts == read_kernel_facts(BoardShell(CountingShell()))
    snap = snapshot.take(replay)
    assert snap["cmdline"] == open("/proc/cmdline").read().strip() and snap["interrupts"]
    # one round trip: mkdir, nc, the script's sha256sum compared, sh SCRIPT
    assert len(cmd.seen) == 1 and all(len(c) <= MAX_LINE for c in cmd.seen)
    assert " sh " in cmd.seen[-1] and not any("/proc/interrupts" in c for c in cmd.seen)
    kernel_facts(sh)  # another batch: its own script
    n = len(cmd.seen)
    kernel_facts(sh)  # the same batch again: the script is on the board already
    assert len(cmd.seen) == n + 1


def test_a_script_that_does_not_arrive_whole_leaves_the_batch_on_the_console(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_BOARD_WORKDIR", str(tmp_path / "board"))

    class Truncating(CountingShell):
        def run(self, cmd, timeout=30):
            return super().run(cmd.replace("< /dev/null > ", "< /dev/null | head -c 100 > ", 1), timeout)

    cmd = Truncating()
    facts = kernel_facts(BoardShell(cmd, bulk=TcpChannel(host_addr="127.0.0.1")))
    assert facts == read_kernel_facts(BoardShell(CountingShell()))
    assert any("/proc/cmdline" in c for c in cmd.seen)  # typed on the console instead
    assert not any(c.startswith("sh ") for c in cmd.seen)  # the truncated script never ran


def test_files_read_by_the_shell_read_as_cat_reads_them():
    """READ_LOOP (the shell's `read`, a byte per system call) gives what `cat`
    gives for every file the boot batch reads that way, on this machine's
    kernel; an integer sysctl, which answers only a read at offset 0, shows
    why the rest stay `cat`s."""
    from rtlab.suites.board import READ_LOOP, fact_commands

    files = set()
    for cmd in [*fact_commands(), *snapshot.COMMANDS.values()]:
        if READ_LOOP in cmd:
            files.update(re.findall(r"/(?:proc|sys)/[\w./-]+", cmd))
    readable = [f for f in files if os.path.isfile(f) and os.access(f, os.R_OK)]
    assert len(readable) >= 5, files  # osrelease, version, cmdline, online, clocksource...
    for f in readable:
        by_read = subprocess.run(["sh", "-c", f"{READ_LOOP} < {f}"], capture_output=True, text=True).stdout
        by_cat = subprocess.run(["cat", f], capture_output=True, text=True).stdout
        assert by_read.strip() == by_cat.strip(), f
    sysctl = "/proc/sys/kernel/sched_rt_period_us"
    by_read = subprocess.run(["sh", "-c", f"{READ_LOOP} < {sysctl}"], capture_output=True, text=True).stdout
    assert by_read.strip() != open(sysctl).read().strip()  # why "rt" is read with cat


@pytest.mark.parametrize("text", ["0", "1", "-5", "nan", "inf", "twenty", "601", "; rm -rf /"])
def test_console_silence_limit_is_typed_and_ranged(monkeypatch, text):
    from rtlab.errors import InputError
    from rtlab.suites.board import console_silence_s

    monkeypatch.setenv("RTLAB_CONSOLE_SILENCE_S", text)
    with pytest.raises(InputError, match="RTLAB_CONSOLE_SILENCE_S: must be a number of seconds in") as err:
        console_silence_s()
    assert "rm -rf" not in str(err.value)
    monkeypatch.setenv("RTLAB_CONSOLE_SILENCE_S", "")
    assert console_silence_s() == 20.0
