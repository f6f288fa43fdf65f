"""Small labgrid driver refinements the boards need.

``RtlabSerialDriver``: labgrid's SerialDriver whose reads return what has
arrived. labgrid's ``SerialDriver._read(size)`` waits until *size* bytes came
or the timeout passed; pexpect asks for ``maxread`` bytes per step, so with
the default ``maxread=1`` every byte is one step (the prompt regex re-runs
over the whole buffer: quadratic on tens of kB of tool output), and with a
larger ``maxread`` every expect waits out its full timeout. This driver reads
the first byte with the timeout and then whatever else is already buffered,
so :func:`rtlab.lab.strategy.speed_up_console` can raise ``maxread`` safely.

``RtlabUBootDriver``: labgrid's UBootDriver, ranked below the Linux shell for
``CommandProtocol``. Both implement it; on a booted board the suites ask the
target for ``CommandProtocol`` and mean the shell (U-Boot is reached through
its driver name, ``target.get_driver("UBootDriver")``).

``RtlabShellDriver``: labgrid's ShellDriver with one console round trip per
command instead of two. labgrid's ``run`` first types ``echo MARKER`` and
waits for it and the prompt (``_check_prompt``), then types the command.
After a command that ended with its own marker, exit code and the prompt,
the shell is known to be at its prompt: the check would learn nothing, and
costs 30-40 ms on a TCG console (half of a short command's time; a job runs
ten or more). Every command still has its own random marker, so output left
over from before cannot be taken for its answer. After anything else (the
first command, a command that timed out or was interrupted, a Ctrl-C, a
fresh console) the check runs as in labgrid. ``run_watched`` runs a long
command (a measurement) telling a board that is gone from one that is still
busy: past the command's expected end plus the console silence limit it
types a probe the board's tty echoes (and erases) even while the command
runs, and a board that echoes nothing within that limit again is lost
(``ConsoleSilent``), long before the command's own timeout.

``RtlabPtyConsoleDriver``: labgrid's ExternalConsoleDriver for a shell on a
pty (this machine as a board), closed by ending its shell. ``script(1)``
ignores the SIGTERM labgrid's close() sends, which then waited its full
second before SIGKILL at the end of every job; an ``exit`` typed to the
shell ends shell and script at once. A shell busy with a command that does
not read its input gets labgrid's close() after a second, as before.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import time

import attr
from labgrid.driver.externalconsoledriver import ExternalConsoleDriver
from labgrid.driver.serialdriver import SerialDriver
from labgrid.driver.shelldriver import ShellDriver
from labgrid.driver.ubootdriver import UBootDriver
from labgrid.factory import target_factory
from labgrid.protocol import CommandProtocol
from labgrid.util import gen_marker
from pexpect import TIMEOUT


class ConsoleSilent(Exception):
    """The console stayed silent past a command's expected end and did not
    echo a probe: the board is gone (off, crashed, frozen) or its console line is."""


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabSerialDriver(SerialDriver):
    #: marks consoles whose _read does not wait for `size` bytes
    reads_available = True

    def _read(self, size: int = 1, timeout: float = 0.0, max_size: int = None):
        limit = max_size or size
        self.serial.timeout = timeout
        res = self.serial.read(1)
        if not res:
            raise TIMEOUT(f"Timeout of {timeout:.2f} seconds exceeded or connection closed by peer")
        more = min(self.serial.in_waiting, max(limit - 1, 0))
        if more:
            res += self.serial.read(more)
        return res


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabUBootDriver(UBootDriver):
    priorities = {CommandProtocol: -10}


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabPtyConsoleDriver(ExternalConsoleDriver):
    def close(self):
        child = getattr(self, "_child", None)
        if self.status and child is not None and child.poll() is None:
            try:
                self.write(b"\nexit\n")
                child.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                pass  # labgrid's close() below: SIGTERM, then SIGKILL
        if child is not None and child.poll() is not None:  # gone: labgrid's close() would say "vanished"
            child.communicate()
            self._child = None
            self.status = 0
            return
        super().close()


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabShellDriver(ShellDriver):
    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        #: the last command ended at the prompt (its marker, exit code and prompt matched)
        self._at_prompt = False

    def _check_prompt(self):
        at_prompt, self._at_prompt = self._at_prompt, False  # good for one command only
        if not at_prompt:
            super()._check_prompt()

    def _run(self, cmd, **kwargs):
        # labgrid's _run checks the prompt (above), types the command and
        # expects marker, output, marker, exit code, prompt; it raises
        # (pexpect TIMEOUT, a closed console, a signal) otherwise
        result = super()._run(cmd, **kwargs)
        self._at_prompt = True
        return result

    def run_watched(self, cmd: str, *, timeout: float, expected_s: float, silence_s: float) -> int:
        """Run *cmd* (its output is for files: only its exit code is read)
        when it should end after *expected_s*: from then on, every
        *silence_s* without its end, a probe that the tty echoes whatever runs
        in the foreground (letters, then as many DELs: nothing is left in the
        shell's input). ConsoleSilent when no echo comes within *silence_s*;
        TIMEOUT after *timeout*, as ``run``."""
        self._check_prompt()
        marker = gen_marker()
        # the marker hidden from expect, as in labgrid's ShellDriver._run;
        # only the closing marker is waited for: a probe's echo may come
        # between the opening one and it
        self.console.sendline(f"MARKER='{marker[:4]}''{marker[4:]}' run {shlex.quote(cmd)}")
        done = rf"{marker}\s+(\d+)\s+{self.prompt}"
        t0 = time.monotonic()
        deadline = t0 + timeout
        probe_at = t0 + expected_s + silence_s
        while True:
            try:
                _, _, match, _ = self.console.expect(done, timeout=max(0.0, min(deadline, probe_at) - time.monotonic()))
                break
            except TIMEOUT:
                if time.monotonic() >= deadline:
                    raise
            probe = gen_marker()
            self.console.write(probe.encode() + b"\x7f" * len(probe))
            try:
                index, _, match, _ = self.console.expect([done, re.escape(probe)], timeout=silence_s)
            except TIMEOUT:
                raise ConsoleSilent(f"console silent {time.monotonic() - t0 - expected_s:.0f} s past the "
                                    f"expected end ({expected_s:g} s); no echo within {silence_s:g} s") from None
            if index == 0:
                break
            probe_at = time.monotonic() + silence_s  # alive: the command runs long
        self._at_prompt = True
        return int(match.group(1))

    def on_deactivate(self):
        self._at_prompt = False
        super().on_deactivate()
