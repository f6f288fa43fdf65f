"""The interrupt-response probe of a QEMU board (the twin of a real probe):
a host process speaking rtlab's probe protocol (:mod:`rtlab.lab.irqprotocol`)
on TCP, which stimulates the guest through an emulated UART.

    python -m rtlab.lab.irqtwin --listen 127.0.0.1:0 --chardev DIR/irqprobe.sock [--port-file F]

QEMU wires a second UART to the chardev socket this process listens on:
``-chardev socket,id=irqprobe,path=SOCK,reconnect=1 -device pci-serial,chardev=irqprobe``
(QEMU's PCI 16550, 1b36:0002: a real interrupt in the guest through the
machine's interrupt controller, the 8250 driver built into Debian's kernels).

* stimulus: one byte written to the socket -> the guest UART's receive
  interrupt. The byte is the sample's sequence mark (printable, 90 values),
  so a late answer is never taken for the next sample's.
* response: the responder (``rtbench respond``) or the kernel's tty echo
  writes the byte back -> the guest UART's transmit -> the socket.
* ready: the responder writes ``R`` once it is set up.
* time: CLOCK_MONOTONIC around the write and the read (``time.monotonic_ns``).

Its numbers are emulation noise (TCG, this process's own wake-ups, a loaded
host): it says so in its PROBE line (``emulated=1``), and so do the results.
What it shares with a real lab is everything else: protocol, resource,
driver, responder, suite, tables.
"""
from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from .irqprotocol import MAX_LINE, VERSION, Accumulator, ArmRequest

READY = b"R"
#: the sequence marks: printable, never R, never a character a tty in
#: cooked mode would treat specially
MARKS = bytes(c for c in range(0x21, 0x7F) if c not in (ord("R"), ord("\\"), 0x7F))[:90]
MAX_SAMPLES = 100_000_000
MAX_BUCKETS = 1_000_000


class Twin:
    def __init__(self, chardev: Path, listen: socket.socket, *, skip_every: int = 0):
        self.chardev_path = chardev
        self.listen = listen
        self.board: Optional[socket.socket] = None
        self.board_srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if chardev.exists():
            chardev.unlink()
        self.board_srv.bind(str(chardev))
        self.board_srv.listen(1)
        #: fault injection for tests: every Nth stimulus is swallowed by
        #: the "wire" (never reaches the board), so it must count as missed
        self.skip_every = skip_every

    # --- the board side -------------------------------------------------
    def _accept_board(self, timeout: float) -> bool:
        r, _, _ = select.select([self.board_srv], [], [], timeout)
        if r:
            if self.board is not None:
                self.board.close()
            self.board, _ = self.board_srv.accept()
            self.board.setblocking(False)
            return True
        return False

    def _drain(self) -> bytes:
        """Whatever the board sent that nobody waited for."""
        got = b""
        while self.board is not None:
            try:
                data = self.board.recv(4096)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:  # QEMU gone (power off): wait for it to reconnect
                self.board.close()
                self.board = None
                break
            got += data
        return got

    # --- the host side --------------------------------------------------
    def serve(self) -> None:
        while True:
            r, _, _ = select.select([self.listen, self.board_srv], [], [], 1.0)
            if self.board_srv in r:
                self._accept_board(0)
            if self.listen in r:
                conn, _ = self.listen.accept()
                try:
                    self.session(conn)
                except OSError:
                    pass
                finally:
                    conn.close()

    def session(self, conn: socket.socket) -> None:
        buf = b""

        def send(line: str) -> None:
            conn.sendall((line + "\n").encode())

        while True:
            while b"\n" not in buf:
                data = conn.recv(1024)
                if not data:
                    return
                buf += data
                if len(buf) > MAX_LINE and b"\n" not in buf:
                    send("ERROR line too long")
                    return
            raw, _, buf = buf.partition(b"\n")
            line = raw.decode("ascii", "replace").strip()
            if line == "HELLO":
                send(f"PROBE rtlab-twin {VERSION} resolution_ns=1 max_samples={MAX_SAMPLES} "
                     f"max_buckets={MAX_BUCKETS} emulated=1")
            elif line.startswith("ARM"):
                try:
                    arm = ArmRequest.parse(line)
                except ValueError as e:
                    send(f"ERROR {e}")
                    continue
                send("ARMED")
                for out in self.measure(arm, conn):
                    send(out)
            elif line == "ABORT":
                continue  # nothing running
            else:
                send(f"ERROR unknown command {line[:40]!r}")

    def measure(self, arm: ArmRequest, conn: socket.socket) -> list[str]:
        acc = Accumulator(arm)
        t_end = time.monotonic() + arm.timeout_s
        last_progress = time.monotonic()

        def progress() -> None:
            nonlocal last_progress
            if time.monotonic() - last_progress >= 1.0:
                conn.sendall(f"PROGRESS sent={acc.sent} missed={acc.missed}\n".encode())
                last_progress = time.monotonic()

        def aborted() -> bool:
            r, _, _ = select.select([conn], [], [], 0)
            if r:
                data = conn.recv(1024, socket.MSG_PEEK)
                if not data or b"ABORT" in data:
                    return True
            return False

        # ready: the responder's R (anything before it is a previous run's)
        self._drain()
        ready = False
        while not ready and time.monotonic() < t_end:
            if self.board is None:
                self._accept_board(0.5)
            elif select.select([self.board], [], [], 0.5)[0]:
                ready = READY in self._drain()
            progress()
            if aborted():
                break
        if not ready:
            return acc.result(ready=False, timed_out=time.monotonic() >= t_end).lines()
        period_ns = arm.period_us * 1000
        # a stimulus every period; where this process woke late (a loaded
        # host oversleeps by milliseconds) the schedule slips rather than
        # shortening the next window: each stimulus gets a whole period
        t_slot = time.monotonic_ns() + period_ns
        timed_out = False
        for i in range(arm.samples):
            while (now := time.monotonic_ns()) < t_slot:
                time.sleep(min((t_slot - now) / 1e9, 0.05))
            t_slot = max(t_slot, now) + period_ns  # the next one, and this one's window end
            self._drain()  # a late answer to an earlier sample is no answer to this one
            if self.board is None:
                acc.miss()
                self._accept_board(0)
            elif self.skip_every and (i + 1) % self.skip_every == 0:
                acc.miss()  # the injected fault: the stimulus never reaches the board
            else:
                mark = MARKS[i % len(MARKS)]
                t_send = time.monotonic_ns()
                try:
                    self.board.send(bytes([mark]))
                except OSError:
                    acc.miss()
                    continue
                window_end = t_slot
                got = None
                while got is None and (left := window_end - time.monotonic_ns()) > 0:
                    if not select.select([self.board], [], [], left / 1e9)[0]:
                        break
                    try:
                        data = self.board.recv(1)
                    except OSError:
                        data = b""
                    if not data:
                        break
                    if data[0] == mark:
                        got = time.monotonic_ns()
                if got is None:
                    acc.miss()
                else:
                    acc.answer(got - t_send)
            progress()
            if time.monotonic() >= t_end:
                timed_out = True
                break
            if aborted():
                break
        return acc.result(ready=True, timed_out=timed_out).lines()


def in_own_netns() -> bool:
    """True inside a named network namespace (``ip netns add``: a host of
    rtlab's multi-host lab), whose addresses only the lab's namespaces reach.
    (pid 1's namespace cannot be read in every container, so the test is
    whether this process's namespace is one of /run/netns.)"""
    try:
        own = os.stat("/proc/self/ns/net")
        named = [os.stat(p) for p in Path("/run/netns").iterdir()]
    except OSError:
        return False
    return any((n.st_dev, n.st_ino) == (own.st_dev, own.st_ino) for n in named)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtlab.lab.irqtwin", description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT of the protocol (0: a free port)")
    ap.add_argument("--chardev", required=True, type=Path, help="unix socket QEMU's UART connects to")
    ap.add_argument("--port-file", type=Path, help="write the TCP port here once listening")
    ap.add_argument("--skip-every", type=int, default=0, help="(tests) swallow every Nth stimulus")
    a = ap.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1") and not in_own_netns():
        print("irqtwin: listens on loopback only (or, inside a network namespace of a multi-host lab, "
              "on its host's address)", file=sys.stderr)
        return 2
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen(4)
    twin = Twin(a.chardev, srv, skip_every=a.skip_every)
    if a.port_file:
        tmp = a.port_file.with_suffix(".tmp")
        tmp.write_text(f"{srv.getsockname()[1]}\n")
        os.replace(tmp, a.port_file)
    twin.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
