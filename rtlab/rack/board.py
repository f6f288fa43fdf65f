"""A virtual board: a QEMU machine wired like a real board on a lab host. Its
boot ROM is U-Boot (`boot: uboot`), the machine's PXE firmware (`pxe`), or,
where QEMU runs no bootloader for the machine, QEMU loading the staged boot
set itself (`direct`; rtlab/rack/config.py).

* **Power** is the process: outlet on starts QEMU (a cold boot into U-Boot),
  outlet off kills it. Nothing survives a power cycle but the TFTP directory
  (the "flash" the test side stages into).
* **UART**: a pty owned by the rack (what ``/dev/ttyUSBn`` is on a lab host).
  QEMU's serial port connects to the relay over loopback TCP at power on;
  the relay copies bytes between QEMU and the pty. The exporter exports the
  pty as a ``RawSerialPort`` (ser2net, RFC 2217) while the place is locked.
  Like a real UART, output nobody listens to is lost: the relay forwards only
  while the pty is open on the other side, and flushes what is left on every
  power transition, so a job never reads the previous job's console.
* **Network**: QEMU user networking, ``restrict=on`` (no route out), with its
  built-in DHCP and TFTP server serving the board's TFTP directory.
* **Faults** (for tests): ``hang-boot`` makes the next power-on freeze the CPU
  (QEMU ``-S``: powered, silent console, like a board stuck in its ROM);
  ``hang-now`` freezes a running board (SIGSTOP). A power cycle recovers both.

Every byte the board prints is appended to ``console.log``; boot milestones
(U-Boot banner, TFTP transfers, kernel start, first shell prompt) are timed
from power-on and appended to ``boots.jsonl``.
"""
from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import termios
import threading
import time
import tty
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.procutil import die_with_parent
from .config import BoardSpec

#: where TFTPStagingDriver puts a board's boot set (its ``subdir``) and the
#: iPXE script it writes for PXE boards (rtlab/lab/uboot.py)
STAGED_DIR = "rtlab"
IPXE_SCRIPT = "boot.ipxe"


def parse_uenv(path: Path) -> dict[str, str]:
    """``name=value`` lines of a U-Boot environment text file (``env import -t``)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


#: board output buffered for a slow reader before the relay stops reading
#: QEMU (flow control: QEMU then stalls the UART, as a real one with RTS would)
PENDING_LIMIT = 256 * 1024



class BootWatcher:
    """Times boot milestones in the board's console output since power-on."""

    MILESTONES = [
        ("uboot", re.compile(rb"U-Boot \d{4}\.\d+")),
        ("autoboot", re.compile(rb"Hit any key to stop autoboot")),
        ("kernel_start", re.compile(rb"Starting kernel")),
        ("linux", re.compile(rb"Linux version \d")),
        ("shell", re.compile(rb"rtlab# ")),
    ]
    TFTP_FILE = re.compile(rb"Filename '([^']*)'")
    TFTP_DONE = re.compile(rb"Bytes transferred = (\d+) \(")

    def __init__(self, path: Path):
        self.path = path
        self.record: Optional[dict] = None
        self.t0 = 0.0
        self.tail = b""

    def power_on(self, frozen: bool) -> None:
        self.close()
        self.t0 = time.monotonic()
        self.record = {"power_on": time.time(), "frozen": frozen, "t": {}, "tftp": []}
        self.tail = b""

    def feed(self, data: bytes) -> None:
        rec = self.record
        if rec is None:
            return
        buf = self.tail + data
        now = round(time.monotonic() - self.t0, 3)
        start = len(self.tail)
        for name, rx in self.MILESTONES:
            if name not in rec["t"]:
                m = rx.search(buf)
                if m and m.end() > start:
                    rec["t"][name] = now
        # in stream order: one chunk may end a transfer and start the next
        found = sorted([(m.end(), "file", m) for m in self.TFTP_FILE.finditer(buf) if m.end() > start]
                       + [(m.end(), "done", m) for m in self.TFTP_DONE.finditer(buf) if m.end() > start],
                       key=lambda x: x[0])
        for _, kind, m in found:
            if kind == "file":
                rec["tftp"].append({"file": m.group(1).decode(errors="replace"), "start": now})
            elif rec["tftp"] and "bytes" not in rec["tftp"][-1]:
                rec["tftp"][-1].update(bytes=int(m.group(1)), end=now)
        self.tail = buf[-96:]
        if "shell" in rec["t"]:
            self.close()

    def close(self) -> None:
        if self.record is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(self.record) + "\n")
            self.record = None


class ConsoleRelay(threading.Thread):
    """QEMU's serial port (TCP client) <-> the board's pty."""

    def __init__(self, name: str, board_dir: Path):
        super().__init__(name=f"uart-{name}", daemon=True)
        self.log_path = board_dir / "console.log"
        self.watcher = BootWatcher(board_dir / "boots.jsonl")
        master, slave = pty.openpty()
        tty.setraw(slave)  # no echo, no line discipline: bytes as on a wire
        self.tty_path = os.ttyname(slave)
        os.close(slave)     # the pty is "unplugged" until ser2net opens it
        os.set_blocking(master, False)
        self.master = master
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.conn: Optional[socket.socket] = None
        self.pending = bytearray()
        self.listening = False  # is somebody holding the pty open?
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._halt = False
        self._log = open(self.log_path, "ab", buffering=0)

    # -- called from the power controller -------------------------------------
    def power_on(self, frozen: bool) -> None:
        with self._lock:
            self._drop_board()
            self.pending.clear()
            self._flush_pty()
            self._log.write(f"\n--- power on {time.strftime('%H:%M:%S')}{' (frozen)' if frozen else ''} ---\n".encode())
            self.watcher.power_on(frozen)
        self._wake()

    def power_off(self) -> None:
        with self._lock:
            self._drop_board()
            self.pending.clear()
            self._flush_pty()
            self.watcher.close()
            self._log.write(f"\n--- power off {time.strftime('%H:%M:%S')} ---\n".encode())
        self._wake()

    def stop(self) -> None:
        self._halt = True
        self._wake()

    # -- internals --------------------------------------------------------------
    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _drop_board(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None

    def _flush_pty(self) -> None:
        """Discard board output still queued in the pty (nobody read it)."""
        try:
            fd = os.open(self.tty_path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            termios.tcflush(fd, termios.TCIFLUSH)
        finally:
            os.close(fd)

    def _someone_listening(self) -> bool:
        p = select.poll()
        p.register(self.master, select.POLLIN)
        return not any(ev & select.POLLHUP for _, ev in p.poll(0))

    def run(self) -> None:
        while not self._halt:
            with self._lock:
                listening = self._someone_listening()
                if self.listening and not listening:
                    self.pending.clear()
                    self._flush_pty()
                self.listening = listening
                conn = self.conn
                rl: list[Any] = [self.listener, self._wake_r]
                if conn is not None and len(self.pending) < PENDING_LIMIT:
                    rl.append(conn)
                if listening:
                    rl.append(self.master)
                wl = [self.master] if listening and self.pending else []
            try:
                r, w, _ = select.select(rl, wl, [], 0.2)
            except (OSError, ValueError):
                continue
            with self._lock:
                if self._wake_r in r:
                    os.read(self._wake_r, 4096)
                if self.listener in r:
                    try:
                        c, _ = self.listener.accept()
                        c.setblocking(False)
                        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self._drop_board()
                        self.conn = c
                    except OSError:
                        pass
                if self.conn is not None and self.conn is conn and conn in r:
                    try:
                        data = conn.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        data = None
                    except OSError:
                        data = b""
                    if data == b"":
                        self._drop_board()
                    elif data:
                        self._log.write(data)
                        self.watcher.feed(data)
                        if self.listening:
                            self.pending += data
                if self.master in w or (self.listening and self.pending):
                    self._write_pending()
                if self.master in r:
                    try:
                        typed = os.read(self.master, 4096)
                    except OSError:  # EIO: no process on the tty side yet
                        typed = b""
                    if typed and self.conn is not None:
                        try:
                            self.conn.sendall(typed)
                        except OSError:
                            pass  # a frozen board: what is typed is lost
        self._drop_board()
        self.watcher.close()

    def _write_pending(self) -> None:
        while self.pending:
            try:
                n = os.write(self.master, self.pending[:4096])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.pending.clear()
                return
            del self.pending[:n]


def irq_probe_socket(board_dir: Path) -> Path:
    """Where a board's twin probe listens for QEMU's UART: in the board's
    directory, or under /tmp where that path is too long for a unix socket."""
    path = board_dir / "irqprobe.sock"
    if len(str(path)) < 100:
        return path
    import hashlib
    return Path("/tmp") / f"rtlab-irqprobe-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}.sock"


class VirtualBoard:
    """One board of the rack; power calls come from the PDU's controller thread."""

    def __init__(self, spec: BoardSpec, rack_dir: Path, say: Callable[[str], None] = print):
        self.spec = spec
        self.name = spec.name
        self.dir = rack_dir / "boards" / spec.name
        self.tftp_dir = self.dir / "tftp"
        self.tftp_dir.mkdir(parents=True, exist_ok=True)
        self.say = say
        self.relay = ConsoleRelay(spec.name, self.dir)
        self.relay.start()
        self.proc: Optional[subprocess.Popen] = None
        self.powered = False
        self.fault: Optional[str] = None   # pending one-shot fault for the next power-on
        self.frozen = False
        self.power_ons = 0
        #: the twin probe's end of the board's probe UART (the rack service
        #: runs the probe, rtlab.lab.irqtwin); None: no probe wired
        self.irq_probe_sock: Optional[Path] = irq_probe_socket(self.dir) if spec.type.irq_probe else None

    @property
    def tty(self) -> str:
        return self.relay.tty_path

    def qemu_command(self, frozen: bool = False) -> list[str]:
        t = self.spec.type
        # `onboard`: the machine's own NIC (sabrelite's FEC), no model to add
        model = "" if t.nic == "onboard" else f",model={t.nic}"
        nic = f"user{model},restrict=on,tftp={self.tftp_dir}"
        cmd = [t.qemu, "-name", self.name, "-machine", t.machine, "-cpu", t.cpu,
               "-smp", str(t.smp), "-m", str(t.memory), "-accel", "tcg",
               "-nodefaults", "-display", "none", "-monitor", "none"]
        if t.boot == "uboot":
            cmd += ["-bios", t.firmware]
        elif t.boot == "pxe":
            # SeaBIOS runs the NIC's iPXE ROM; QEMU's DHCP names the staged script
            nic += f",bootfile={STAGED_DIR}/{IPXE_SCRIPT}"
            cmd += ["-boot", "order=n"]
        else:
            cmd += self.direct_boot_args()
        # UARTs before the console one are left unconnected, as on the board
        serial = ["-serial", "null"] * t.console_uart + ["-serial", "chardev:uart0"]
        cmd += ["-nic", nic,
                "-chardev", f"socket,id=uart0,host=127.0.0.1,port={self.relay.port},server=off",
                *serial]
        if self.irq_probe_sock is not None:
            # the probe's UART: QEMU's PCI 16550 (8250_pci, built into Debian's
            # kernels), its receive interrupt the stimulus; QEMU connects to the
            # probe's socket and reconnects after the probe restarts
            cmd += ["-chardev", f"socket,id=irqprobe,path={self.irq_probe_sock},reconnect=1",
                    "-device", "pci-serial,chardev=irqprobe"]
        if frozen:
            cmd.append("-S")  # CPUs never start: a board that hangs before its ROM prints
        return cmd

    def direct_boot_args(self) -> list[str]:
        """The boot set staged in the TFTP directory, as QEMU arguments: what the
        board's U-Boot would fetch (uEnv.txt's bootargs, kernel, initrd, dtb).
        Nothing staged: no kernel, a board that stays silent at power-on."""
        staged = self.tftp_dir / STAGED_DIR
        env = parse_uenv(staged / "uEnv.txt")
        kernel, initrd = staged / "kernel", staged / "initrd"
        if "bootargs" not in env or not kernel.is_file() or not initrd.is_file():
            return []
        args = ["-kernel", str(kernel), "-initrd", str(initrd), "-append", env["bootargs"]]
        if (staged / "board.dtb").is_file():
            args += ["-dtb", str(staged / "board.dtb")]
        return args

    def power_on(self) -> None:
        if self.powered:
            return
        frozen = self.fault == "hang-boot"
        self.fault = None
        self.relay.power_on(frozen)
        cmd = self.qemu_command(frozen)
        log = open(self.dir / "qemu.log", "ab")
        log.write(f"--- power on {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=die_with_parent)
        log.close()
        self.powered = True
        self.frozen = frozen
        self.power_ons += 1
        self.say(f"{self.name}: power on (qemu pid {self.proc.pid}{', frozen' if frozen else ''})")

    def power_off(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
            self.proc = None
        if self.powered:
            self.say(f"{self.name}: power off")
        self.powered = False
        self.frozen = False
        self.relay.power_off()

    def hang_now(self) -> bool:
        """Freeze the running machine (SIGSTOP): powered, but the console is dead."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.frozen = True
        self.say(f"{self.name}: frozen (fault hang-now)")
        return True

    def poll(self) -> None:
        """Notice a machine that stopped by itself (guest poweroff, QEMU crash):
        the outlet stays on, as a real PDU's would."""
        if self.proc is not None and self.proc.poll() is not None:
            self.say(f"{self.name}: qemu exited with {self.proc.returncode} (outlet still on)")
            self.proc = None

    def status(self) -> dict:
        return {"name": self.name, "outlet": self.spec.outlet, "arch": self.spec.type.arch,
                "type": self.spec.type.name, "boot": self.spec.type.boot, "twin_of": self.spec.type.twin_of,
                "power": "on" if self.powered else "off",
                "running": self.proc is not None and self.proc.poll() is None,
                "frozen": self.frozen, "pending_fault": self.fault, "power_ons": self.power_ons,
                "tty": self.tty, "uart_listener": self.relay.listening,
                "tftp_dir": str(self.tftp_dir), "qemu_pid": self.proc.pid if self.proc else None}

    def close(self) -> None:
        self.power_off()
        self.relay.stop()
