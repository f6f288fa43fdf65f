"""The interrupt-response probe: protocol, labgrid resource and driver
against fake probes speaking the protocol over loopback TCP, and the twin
probe (rtlab.lab.irqtwin) against a fake board on its chardev socket."""
import os
import socket
import threading
import time

import pytest
from labgrid import Target

from rtlab.lab.irqprobe import IrqProbe, IrqProbeDriver, NetworkIrqProbe
from rtlab.lab.irqprotocol import Accumulator, ArmRequest, ProbeError, ProbeResult, parse_info, parse_result
from rtlab.lab.irqtwin import MARKS, Twin

HELLO_OK = "PROBE fake v1 resolution_ns=8 max_samples=1000000 max_buckets=1000"
ARM = ArmRequest(period_us=1000, pulse_us=100, samples=5, timeout_s=10, bucket_ns=1000, buckets=100)


def good_result(arm=ARM, missed=1) -> ProbeResult:
    acc = Accumulator(arm)
    for ns in (3200, 4100, 4900, 250_000)[: arm.samples - missed]:
        acc.answer(ns)
    for _ in range(missed):
        acc.miss()
    return acc.result(ready=True, timed_out=False)


class FakeProbe:
    """A TCP probe that answers HELLO and ARM from a script of lines."""

    def __init__(self, hello=HELLO_OK, after_arm=None, close_after=False, stall=False):
        self.hello, self.after_arm, self.close_after, self.stall = hello, after_arm, close_after, stall
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.port = self.srv.getsockname()[1]
        self.got: list[str] = []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as f:  # both: the fd closes with the last of them
                for raw in f:
                    line = raw.decode().strip()
                    self.got.append(line)
                    if line == "HELLO":
                        conn.sendall(self.hello.encode() + b"\n")
                    elif line.startswith("ARM"):
                        conn.sendall(b"ARMED\n")
                        if self.stall:
                            self.stop.wait(30)  # armed, then silent: a probe that hung
                            return
                        for out in self.after_arm or []:
                            conn.sendall(out.encode() + b"\n")
                        if self.close_after:
                            break

    def close(self):
        self.stop.set()
        self.srv.close()


@pytest.fixture
def target():
    return Target("board")


def driver_for(target, port, silence_s=2.0):
    NetworkIrqProbe(target, name=None, host="127.0.0.1", port=port)
    d = IrqProbeDriver(target, name=None, silence_s=silence_s)
    target.activate(d)
    return d


def test_measure_collects_histogram_and_counts_missed(target):
    r = good_result()
    fake = FakeProbe(after_arm=["PROGRESS sent=2 missed=0", *r.lines()])
    try:
        info, got = driver_for(target, fake.port).measure(ARM)
    finally:
        fake.close()
    assert info.name == "fake" and info.resolution_ns == 8 and not info.emulated
    assert fake.got[:2] == ["HELLO", "ARM 1000 100 5 10 1000 100"]
    assert (got.sent, got.answered, got.missed) == (5, 4, 1)
    assert got.counts == {3: 1, 4: 2} and got.overflows == 1  # 250 us is beyond 100 x 1 us buckets
    assert (got.min_ns, got.max_ns) == (3200, 250_000)


@pytest.mark.parametrize("hello, why", [
    ("HELLO yourself", "malformed reply to HELLO"),
    ("PROBE fake v2 resolution_ns=8 max_samples=1 max_buckets=1", "speaks protocol 'v2'"),
    ("PROBE fake v1 resolution_ns=8", "lacks max_samples, max_buckets"),
    ("PROBE fake v1 resolution_ns=eight max_samples=1 max_buckets=1", "not key=<unsigned integer>"),
    ("PROBE fake v1 resolution_ns=0 max_samples=1 max_buckets=1", "resolution_ns must be > 0"),
    ("X" * 300, "longer than 200 bytes"),
])
def test_malformed_hello_is_infra_with_reason(target, hello, why):
    fake = FakeProbe(hello=hello)
    try:
        with pytest.raises(ProbeError, match=why):
            driver_for(target, fake.port).start(ARM)
    finally:
        fake.close()


def _result_lines(**change):
    r = good_result()
    line = r.result_line()
    for k, v in change.items():
        line = " ".join(f"{k}={v}" if w.startswith(f"{k}=") else w for w in line.split())
    return [line, *r.lines()[1:]]


@pytest.mark.parametrize("after_arm, why", [
    (_result_lines(missed=0), r"sent \(5\) != answered \(4\) \+ missed \(0\)"),
    (_result_lines(overflows=0), r"histogram \(3\) \+ overflows \(0\) != answered \(4\)"),
    (_result_lines(bucket_ns=10), "bucket_ns 10, armed 1000"),
    (_result_lines(min_ns=900_000), "min/avg/max out of order"),
    (["RESULT sent=5", "END"], "lacks answered"),
    ([good_result().result_line(), "HIST 3 one", "END"], "malformed histogram line"),
    ([good_result().result_line(), "HIST 500 1", "END"], "bucket 500 is beyond the 100 buckets"),
    (["ERROR stimulus pin shorted"], "ERROR stimulus pin shorted"),
    (["\xff\xfe"], "non-ASCII reply"),
])
def test_malformed_result_is_infra_with_reason(target, after_arm, why):
    fake = FakeProbe(after_arm=after_arm)
    try:
        with pytest.raises(ProbeError, match=why):
            driver_for(target, fake.port).measure(ARM)
    finally:
        fake.close()


def test_probe_that_stops_answering_is_infra_within_the_silence_limit(target):
    fake = FakeProbe(stall=True)
    t0 = time.monotonic()
    try:
        with pytest.raises(ProbeError, match=r"stopped answering: nothing for 1 s while waiting for the result"):
            driver_for(target, fake.port, silence_s=1.0).measure(ARM, timeout=20)
    finally:
        fake.close()
    assert time.monotonic() - t0 < 10


def test_probe_that_hangs_up_mid_result_is_infra(target):
    fake = FakeProbe(after_arm=[good_result().result_line(), "HIST 3 1"], close_after=True)
    try:
        with pytest.raises(ProbeError, match="closed the connection while waiting for the histogram"):
            driver_for(target, fake.port).measure(ARM)
    finally:
        fake.close()


def test_unreachable_probe_and_refused_arm(target):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ProbeError, match=rf"tcp://127.0.0.1:{port} unreachable"):
        driver_for(target, port).measure(ARM)
    small = FakeProbe(hello="PROBE tiny v1 resolution_ns=8 max_samples=3 max_buckets=1000")
    try:
        with pytest.raises(ProbeError, match="takes at most 3 samples"):
            driver_for(Target("b2"), small.port).measure(ARM)
    finally:
        small.close()


def test_responder_never_ready_and_cut_short_runs_are_infra(target):
    never = Accumulator(ARM).result(ready=False, timed_out=True)
    fake = FakeProbe(after_arm=never.lines())
    try:
        with pytest.raises(ProbeError, match="never signalled ready"):
            driver_for(target, fake.port).measure(ARM)
    finally:
        fake.close()
    acc = Accumulator(ARM)
    acc.answer(5000)
    short = acc.result(ready=True, timed_out=True)
    fake = FakeProbe(after_arm=short.lines())
    try:
        with pytest.raises(ProbeError, match="cut short after 1 of 5 stimuli"):
            driver_for(Target("b3"), fake.port).measure(ARM)
    finally:
        fake.close()


def test_driver_without_a_probe_says_why(target):
    d = IrqProbeDriver(target, name=None)  # the binding is optional: a board without wiring
    target.activate(d)
    assert "no interrupt-response probe wired" in d.missing()
    with pytest.raises(ProbeError, match="no interrupt-response probe wired"):
        d.start(ARM)


def test_resources_register_with_labgrid():
    from labgrid.factory import target_factory
    assert target_factory.resources["NetworkIrqProbe"] is NetworkIrqProbe
    assert target_factory.resources["IrqProbe"] is IrqProbe
    assert target_factory.drivers["IrqProbeDriver"] is IrqProbeDriver
    t = Target("serial")
    assert IrqProbe(t, name=None, port="/dev/ttyACM0").where() == "serial /dev/ttyACM0 @ 115200"


def test_arm_request_is_typed_and_ranged():
    assert ArmRequest.parse(ARM.line()) == ARM
    for bad in ("ARM 1000 100 5", "ARM 1000 100 5 10 1000 -1", "ARM 1000 2000 5 10 1000 100", "ARM 5 1 1 1 1 1"):
        with pytest.raises(ValueError):
            ArmRequest.parse(bad)
    assert parse_info(HELLO_OK + " emulated=1").emulated
    r = good_result()
    assert parse_result(r.result_line(), r.lines()[1:-1], ARM).to_json() == r.to_json()
    assert ProbeResult.from_json(r.to_json()) == r


# --- the twin probe, against a fake board on its chardev socket ----------

class FakeBoard:
    """What the guest's responder does on the other end of the UART: R
    once, then every mark back; *ignore* marks it never answers."""

    def __init__(self, path, ignore=()):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.ignore = set(ignore)
        self.seen = 0

    def start(self):
        """The responder is set up (after the probe was armed, as in a job)."""
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        self.sock.sendall(b"R")
        while True:
            data = self.sock.recv(64)
            if not data:
                return
            for b in data:
                self.seen += 1
                if self.seen not in self.ignore:
                    self.sock.sendall(bytes([b]))


@pytest.fixture
def twin(tmp_path):
    def make(skip_every=0):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        tw = Twin(tmp_path / "irqprobe.sock", srv, skip_every=skip_every)
        threading.Thread(target=tw.serve, daemon=True).start()
        return tw, srv.getsockname()[1]
    return make


def test_twin_times_round_trips_and_counts_missed(twin, tmp_path):
    tw, port = twin(skip_every=7)  # stimuli 7, 14 never reach the board
    board = FakeBoard(tmp_path / "irqprobe.sock", ignore={3})  # the board ignores its 3rd stimulus
    # a 50 ms period: an answer the loaded test machine delays past the
    # period counts as missed too (4 of 20 at 5 ms beside the other tests)
    arm = ArmRequest(period_us=50000, pulse_us=100, samples=20, timeout_s=30, bucket_ns=1000, buckets=1000)
    run = driver_for(Target("twin"), port).start(arm)
    board.start()
    info, r = run.info, run.wait(30)
    assert info.emulated and info.name == "rtlab-twin"
    assert r.sent == 20 and r.missed == 3 and r.answered == 17, r
    assert board.seen == 18  # two swallowed on the wire, one ignored by the board
    assert sum(r.counts.values()) + r.overflows == 17 and 0 < r.min_ns <= r.max_ns


def test_twin_never_ready_without_a_board(twin):
    _, port = twin()
    arm = ArmRequest(period_us=1000, pulse_us=100, samples=5, timeout_s=2, bucket_ns=1000, buckets=100)
    with pytest.raises(ProbeError, match="never signalled ready"):
        driver_for(Target("nob"), port).measure(arm)


def test_twin_marks_are_distinct_printable_and_never_ready():
    assert len(set(MARKS)) == len(MARKS) == 90
    assert b"R"[0] not in MARKS and all(0x21 <= m < 0x7F for m in MARKS)


def test_the_twin_listens_beyond_loopback_only_inside_a_named_network_namespace(tmp_path):
    """In the machine's own namespace a non-loopback address is refused (the
    twin would answer the host's network); inside a lab host's namespace
    (ip netns add) it listens on that host's address."""
    import subprocess
    import sys
    ns = f"rtlabt{os.getpid() % 100000}"
    argv = [sys.executable, "-m", "rtlab.lab.irqtwin", "--chardev", str(tmp_path / "c.sock"),
            "--port-file", str(tmp_path / "port")]
    res = subprocess.run([*argv, "--listen", "10.239.1.2:0"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "loopback only" in res.stderr
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "addr", "add", "10.239.1.2/24", "dev", "lo"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv, "--listen", "10.239.1.2:0"],
                             stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (tmp_path / "port").is_file() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "port").is_file(), p.stderr.read() if p.poll() is not None else "no port file"
        ss = subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltnH"], capture_output=True, text=True).stdout
        assert f"10.239.1.2:{int((tmp_path / 'port').read_text())}" in ss
        p.kill()
        p.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns])
