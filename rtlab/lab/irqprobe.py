"""The interrupt-response probe as lab hardware: labgrid resources (where
the probe is plugged) and the driver that arms it and collects its result
over rtlab's wire protocol (:mod:`rtlab.lab.irqprotocol`).

``NetworkIrqProbe`` (host, port): a probe reachable over TCP: one with its
own Ethernet, a USB probe behind ``ser2net`` in raw mode on the lab host,
or the rack twin's host-side probe (:mod:`rtlab.lab.irqtwin`). Exported by
``labgrid-exporter`` as it is (a network resource: the exporter passes its
parameters through), so a place's probe reaches a job through RemotePlace
like the PDU does.

``IrqProbe`` (port, speed): a probe on a serial port of the machine the
test runs on (a Pico's USB CDC ``/dev/ttyACM0``), for labgrid's local
targets.

``IrqProbeDriver`` binds to either, optionally: a board whose place has no
probe still gets the driver, which then says why it cannot measure
(:meth:`IrqProbeDriver.missing`) and the suite is "not available" there.
Every failure of the probe (unreachable, silent, malformed reply, refused
arm) is a :class:`ProbeError`: infrastructure, never a latency verdict.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Optional

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.resource.common import Resource

from .irqprotocol import (
    DEFAULT_PORT, MAX_LINE, ArmRequest, ProbeError, ProbeInfo, ProbeResult, parse_info, parse_result,
)

log = logging.getLogger("rtlab.irqprobe")


@target_factory.reg_resource
@attr.s(eq=False)
class NetworkIrqProbe(Resource):
    """An interrupt-response probe speaking rtlab's protocol on TCP host:port."""

    host = attr.ib(validator=attr.validators.instance_of(str))
    port = attr.ib(default=DEFAULT_PORT, converter=int)

    def where(self) -> str:
        return f"tcp://{self.host}:{self.port}"


@target_factory.reg_resource
@attr.s(eq=False)
class IrqProbe(Resource):
    """An interrupt-response probe on a local serial port (USB CDC)."""

    port = attr.ib(validator=attr.validators.instance_of(str))
    speed = attr.ib(default=115200, converter=int)

    def where(self) -> str:
        return f"serial {self.port} @ {self.speed}"


class LineChannel:
    """Lines over a byte stream, each read with a silence limit."""

    def __init__(self, where: str, stream, silence_s: float):
        self.where, self.stream, self.silence_s = where, stream, silence_s
        self.buf = b""

    @classmethod
    def open(cls, resource, silence_s: float, connect_s: float = 10.0) -> "LineChannel":
        where = resource.where()
        try:
            if isinstance(resource, IrqProbe):
                import serial  # pyserial (labgrid's dependency)
                return cls(where, _SerialStream(serial.serial_for_url(resource.port, resource.speed, timeout=0.2)),
                           silence_s)
            sock = socket.create_connection((resource.host, resource.port), timeout=connect_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return cls(where, _SocketStream(sock), silence_s)
        except (OSError, ValueError) as e:
            raise ProbeError(f"probe at {where} unreachable: {e}") from None

    def send(self, line: str) -> None:
        try:
            self.stream.write((line + "\n").encode())
        except OSError as e:
            raise ProbeError(f"probe at {self.where}: sending {line.split()[0]} failed: {e}") from None

    def line(self, what: str) -> str:
        """The next line; ProbeError if none comes within silence_s."""
        deadline = time.monotonic() + self.silence_s
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_LINE:
                raise ProbeError(f"probe at {self.where}: a line longer than {MAX_LINE} bytes "
                                 f"while waiting for {what}: {self.buf[:60]!r}...")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbeError(f"probe at {self.where} stopped answering: nothing for "
                                 f"{self.silence_s:g} s while waiting for {what}")
            try:
                data = self.stream.read(min(left, 0.2))
            except OSError as e:
                raise ProbeError(f"probe at {self.where}: connection lost while waiting for {what}: {e}") from None
            if data is None:
                continue
            if data == b"":
                raise ProbeError(f"probe at {self.where} closed the connection while waiting for {what}")
            self.buf += data
        raw, _, self.buf = self.buf.partition(b"\n")
        try:
            text = raw.decode("ascii").rstrip("\r")
        except UnicodeDecodeError:
            raise ProbeError(f"probe at {self.where}: non-ASCII reply {raw[:60]!r} while waiting for {what}") from None
        if len(text) > MAX_LINE:
            raise ProbeError(f"probe at {self.where}: a line longer than {MAX_LINE} bytes")
        return text

    def close(self) -> None:
        try:
            self.stream.close()
        except OSError:
            pass


class _SocketStream:
    def __init__(self, sock: socket.socket):
        self.sock = sock

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self, timeout: float) -> Optional[bytes]:
        self.sock.settimeout(max(timeout, 0.001))
        try:
            return self.sock.recv(4096)
        except socket.timeout:
            return None

    def close(self) -> None:
        self.sock.close()


class _SerialStream:
    def __init__(self, ser):
        self.ser = ser

    def write(self, data: bytes) -> None:
        self.ser.write(data)

    def read(self, timeout: float) -> Optional[bytes]:
        self.ser.timeout = max(timeout, 0.001)
        data = self.ser.read(max(1, self.ser.in_waiting))
        return data or None  # a serial line has no end: silence is the only sign

    def close(self) -> None:
        self.ser.close()


class ProbeRun:
    """An armed probe: its lines are read in a thread while the board
    answers (PROGRESS keeps the silence limit honest); :meth:`wait` gives
    the result or the reason there is none."""

    def __init__(self, chan: LineChannel, info: ProbeInfo, arm: ArmRequest):
        self.chan, self.info, self.arm = chan, info, arm
        self.progress: Optional[str] = None
        self._result: Optional[ProbeResult] = None
        self._error: Optional[ProbeError] = None
        self._thread = threading.Thread(target=self._read, name="irqprobe-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                line = self.chan.line("the result")
                if line.startswith("PROGRESS"):
                    self.progress = line
                    continue
                if line.startswith("ERROR"):
                    raise ProbeError(f"probe at {self.chan.where}: {line}")
                hist = []
                while True:
                    h = self.chan.line("the histogram")
                    if h == "END":
                        break
                    hist.append(h)
                    if len(hist) > self.arm.buckets:
                        raise ProbeError(f"probe at {self.chan.where}: more HIST lines than buckets armed")
                self._result = parse_result(line, hist, self.arm)
                return
        except ProbeError as e:
            self._error = e
        finally:
            self.chan.close()

    def abort(self) -> None:
        try:
            self.chan.send("ABORT")
        except ProbeError:
            pass

    def wait(self, timeout: float) -> ProbeResult:
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.abort()
            self._thread.join(self.chan.silence_s + 1)
            if self._thread.is_alive():
                self.chan.close()
                raise ProbeError(f"probe at {self.chan.where}: no result {timeout:.0f} s after the responder ended")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        r = self._result
        if not r.ready:
            raise ProbeError(f"probe at {self.chan.where}: the responder never signalled ready "
                             f"(no edge on the response line within {self.arm.timeout_s} s)")
        if r.timed_out or r.sent < self.arm.samples:
            raise ProbeError(f"probe at {self.chan.where}: cut short after {r.sent} of {self.arm.samples} "
                             f"stimuli ({'its timeout of %d s' % self.arm.timeout_s if r.timed_out else 'aborted'})")
        return r


@target_factory.reg_driver
@attr.s(eq=False)
class IrqProbeDriver(Driver):
    """Arms an interrupt-response probe and collects its result.

    Args:
        silence_s: seconds without a line from an armed probe after which it
            is taken as gone (it sends PROGRESS about once a second)
    """

    bindings = {"probe": {"NetworkIrqProbe", "IrqProbe", None}}
    silence_s = attr.ib(default=5.0, converter=float)

    def missing(self) -> Optional[str]:
        """Why this board cannot be measured from outside, or None."""
        if self.probe is None:
            return ("no interrupt-response probe wired to this board (no IrqProbe/NetworkIrqProbe "
                    "resource in its place: needs lab wiring, labgrid/README.md)")
        return None

    def where(self) -> str:
        return self.probe.where() if self.probe is not None else "nowhere"

    @Driver.check_active
    def info(self) -> ProbeInfo:
        chan = LineChannel.open(self.probe, self.silence_s)
        try:
            chan.send("HELLO")
            return parse_info(chan.line("PROBE (the reply to HELLO)"))
        finally:
            chan.close()

    @Driver.check_active
    def start(self, arm: ArmRequest) -> ProbeRun:
        """Arm the probe: it waits for the responder's ready edge, then measures."""
        why = self.missing()
        if why:
            raise ProbeError(why)
        chan = LineChannel.open(self.probe, self.silence_s)
        try:
            chan.send("HELLO")
            info = parse_info(chan.line("PROBE (the reply to HELLO)"))
            if arm.samples > info.max_samples or arm.buckets > info.max_buckets:
                raise ProbeError(f"probe {info.name} at {chan.where} takes at most {info.max_samples} samples "
                                 f"and {info.max_buckets} buckets; armed {arm.samples} and {arm.buckets}")
            chan.send(arm.line())
            reply = chan.line("ARMED")
            if reply != "ARMED":
                raise ProbeError(f"probe {info.name} at {chan.where} refused {arm.line()!r}: {reply}")
        except BaseException:
            chan.close()
            raise
        log.info("probe %s at %s armed: %s", info.name, chan.where, arm.line())
        return ProbeRun(chan, info, arm)

    def measure(self, arm: ArmRequest, timeout: Optional[float] = None) -> tuple[ProbeInfo, ProbeResult]:
        run = self.start(arm)
        return run.info, run.wait(timeout if timeout is not None else arm.timeout_s + 10)
