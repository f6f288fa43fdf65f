"""Board images boot: each arch's PREEMPT_RT kernel with the rtlab initramfs
reaches the console prompt under QEMU TCG and reports itself as real-time.

Plain qemu and a subprocess+select loop on the serial console (no labgrid,
no pexpect): this tests the images, not the board drivers.
"""
from __future__ import annotations

import os
import re
import select
import subprocess
import time

import pytest

from rtlab.images import ARCHES, PROMPT, ensure_images, qemu_command

BOOT_TIMEOUT = 60.0  # s; TCG boots take ~5-15 s on an idle machine


class Console:
    """A qemu process whose serial console is its stdin/stdout."""

    def __init__(self, cmd: list[str]):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.log = b""  # everything read, for failure messages
        self.pos = 0    # how far expect() has consumed self.log

    def expect(self, pattern: bytes, timeout: float) -> re.Match:
        rx = re.compile(pattern, re.S)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{pattern!r} not seen within {timeout} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.5))
            if ready:
                chunk = self.proc.stdout.read()
                if not chunk:  # EOF: qemu exited (panic with -no-reboot...)
                    raise EOFError(f"qemu exited with {self.proc.wait()} while waiting for {pattern!r}")
                self.log += chunk
            elif self.proc.poll() is not None:
                raise EOFError(f"qemu exited with {self.proc.returncode} while waiting for {pattern!r}")

    def run(self, cmd: str, timeout: float = 20.0) -> str:
        """Run *cmd* in the board shell, return its output. The markers are
        printed through arithmetic so the echoed command line never matches."""
        self.proc.stdin.write(f"echo '<<<'$((6*7)); {cmd}; echo '>>>'$((6*8))\n".encode())
        self.proc.stdin.flush()
        m = self.expect(rb"<<<42\r?\n(.*?)>>>48\r?\n", timeout)
        return m.group(1).decode(errors="replace").replace("\r\n", "\n")

    def tail(self, n: int = 3000) -> str:
        return self.log[-n:].decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def image_sets():
    # first run builds (downloads ~150 MB of kernels); later runs are cache hits
    return {arch: ensure_images(arch) for arch in ARCHES}


# make test-long: the same rt kernels boot with their variant checked through labgrid in
#   test_run.py::test_each_arch_boots_its_variant_and_measures
@pytest.mark.long
@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_rt_kernel_boots_to_prompt_and_is_realtime(arch, image_sets):
    images = image_sets[arch]
    rt = images.kernels["rt"]
    assert rt.preempt == "rt" and rt.path.is_file() and images.initramfs.is_file()
    con = Console(qemu_command(images, "rt", append="panic=-1"))
    try:
        t0 = time.monotonic()
        con.expect(re.escape(PROMPT).encode(), BOOT_TIMEOUT)
        boot_s = time.monotonic() - t0
        uname_v = con.run("uname -v").strip()
        realtime = con.run("cat /sys/kernel/realtime").strip()
        hostname = con.run("hostname").strip()
        print(f"{arch} rt: prompt after {boot_s:.1f} s; uname -v: {uname_v}")
    except (TimeoutError, EOFError) as exc:
        pytest.fail(f"{arch}: {exc}\n--- console tail ---\n{con.tail()}")
    finally:
        con.close()
    assert "PREEMPT_RT" in uname_v
    assert uname_v == rt.uname_v  # the kernel booted is the one pinned
    assert realtime == "1"
    assert hostname == "rtlab-board"
