"""RtlabStrategy: off -> shell for any board rtlab measures.

Like labgrid's ShellStrategy, but power is optional (this machine used as a
board has no power switch) and failures say which step broke, so the runner
can report "no boot" or "no prompt" as an infra error naming the cause.
"""
import enum
import os
from typing import Any

import attr
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy.common import Strategy, StrategyError, never_retry


#: bytes pexpect may read per step. labgrid's PtxExpect reads one byte per
#: step (maxread=1) and re-runs the prompt regex over the whole buffer, which
#: is quadratic: 50 kB of cyclictest histogram took over 30 s on a pty. Data
#: read past a match stays in pexpect's buffer, so nothing is lost; the
#: console is only ever read through expect() by ShellDriver.
CONSOLE_MAXREAD = 4096


def speed_up_console(console) -> None:
    # Only consoles whose _read returns what has arrived: labgrid's own
    # SerialDriver waits for all `size` bytes (every expect would then sit
    # out its timeout); rtlab.lab.drivers.RtlabSerialDriver does not.
    from labgrid.driver.serialdriver import SerialDriver
    if isinstance(console, SerialDriver) and not getattr(console, "reads_available", False):
        return
    expect = getattr(console, "_expect", None)
    if expect is not None and getattr(expect, "maxread", 0) < CONSOLE_MAXREAD:
        expect.maxread = CONSOLE_MAXREAD


def wanted_status(strategy: Strategy, status, statuses: Any, step):
    """labgrid's strategy prologue, shared by rtlab's strategies: the state
    asked for (a name or a member of *statuses*), or None when the strategy
    is there already (the step is marked skipped)."""
    if not isinstance(status, statuses):
        status = statuses[status]
    if status == statuses.unknown:
        raise StrategyError(f"can not transition to {status}")
    if status == strategy.status:
        step.skip("nothing to do")
        return None
    return status


class Status(enum.Enum):
    unknown = 0
    off = 1
    shell = 2


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabStrategy(Strategy):
    bindings = {
        "power": {"PowerProtocol", None},
        "console": "ConsoleProtocol",
        "shell": "ShellDriver",
    }

    status = attr.ib(default=Status.unknown)
    #: silence kernel messages on the console once the shell is up, so they
    #: cannot interleave with command output (ShellDriver only does this after
    #: a login, and board images give a shell without one). False for boards
    #: whose console is not the kernel's (this machine used as a board).
    silence_kernel = attr.ib(default=True, validator=attr.validators.instance_of(bool))

    def _check_images(self):
        # QEMU boards boot files staged by rtlab; a missing one is a clear
        # infra error before QEMU gets to fail obscurely.
        for name, path in self.target.env.config.get_images().items():
            if not os.path.isfile(path):
                raise StrategyError(f"image '{name}' does not exist: {path}")

    @never_retry
    @step(args=["status"])
    def transition(self, status, *, step):  # pylint: disable=redefined-outer-name
        status = wanted_status(self, status, Status, step)
        if status is None:
            return
        if status == Status.off:
            if self.power:
                self.target.deactivate(self.shell)
                self.target.activate(self.power)
                self.power.off()
        elif status == Status.shell:
            self.transition(Status.off)
            self._check_images()
            try:
                self.target.activate(self.console)
                speed_up_console(self.console)
                if self.power:
                    self.power.on()
            except Exception as e:  # noqa: BLE001 - reported as "no boot"
                raise StrategyError(f"power on / console failed: {type(e).__name__}: {e}") from e
            try:
                self.target.activate(self.shell)
            except Exception as e:  # noqa: BLE001 - reported as "no prompt"
                prompt = getattr(self.shell, "prompt", "?")
                timeout = getattr(self.shell, "login_timeout", "?")
                raise StrategyError(
                    f"no shell prompt {prompt!r} on the console within {timeout} s "
                    f"({type(e).__name__}: {e})") from e
            if self.silence_kernel:
                self.shell.run("dmesg -n 1")
        else:
            raise StrategyError(f"no transition found from {self.status} to {status}")
        self.status = status
