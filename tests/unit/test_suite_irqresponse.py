"""The irq-response suite: parameters, the responder's command, the host
side (probe armed around the run, probe.json), not-available reasons, and
the probe's result in the model, the gate's share and the vendor table,
missed responses counted rather than dropped."""
import json
import socket
import threading
from pathlib import Path

import pytest
from labgrid import Target

from rtlab.plan.budgets import load_budgets
from rtlab.errors import InputError, SuiteFailure
from rtlab.lab.irqprobe import IrqProbeDriver, NetworkIrqProbe
from rtlab.lab.irqprotocol import Accumulator, ArmRequest
from rtlab.lab.irqtwin import Twin
from rtlab.core.model import Budget
from rtlab.core.params import ParamError
from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import shell_line
from rtlab.suites.irqresponse import PROBE_FILE, probe_output

SUITE = SUITES["irq-response"]
ROOT = Path(__file__).resolve().parents[2]


def run_of(**params):
    return SuiteRun(id="irq-response@idle", name="irq-response", suite="irq-response", load="idle",
                    params=SUITE.params(params), cpus=(2,))


def test_params_are_typed_and_ranged():
    assert SUITE.params({})["period_us"] == 1000 and SUITE.params({})["path"] == "user"
    for bad in ({"path": "both"}, {"tty": "/dev/ttyS0; reboot"}, {"period_us": 5}, {"samples": 0},
                {"priority": 100}, {"pause_ms": 70000}):
        with pytest.raises(ParamError):
            SUITE.params(bad)


def test_command_runs_the_responder_pinned_at_fifo_priority():
    argv = SUITE.command(run_of(samples=500, path="kernel", tty="/dev/ttyS4"))
    assert argv[:2] == ["sh", "-c"] and argv[3:5] == ["irq-respond", "/dev/ttyS4"]
    resp = argv[5:]
    assert resp[:2] == ["rtbench", "respond"]
    assert resp[resp.index("-p") + 1] == "99" and resp[resp.index("-a") + 1] == "2"
    assert resp[resp.index("-n") + 1] == "500" and "--kernel-echo" in resp
    assert "--json=irq-response.json" in resp
    assert "--pause-after" not in resp
    shell_line(argv)  # quotable as every suite's command
    assert SUITE.expected_samples(run_of(samples=500)) == 500
    assert "not under LAVA" in SUITE.board_check()


def test_gpio_wiring_runs_the_gpio_responder_user_path_only():
    argv = SUITE.command(run_of(gpio="/dev/gpiochip3:12:13"))
    assert argv[:4] == ["rtbench", "respond", "--gpio", "/dev/gpiochip3:12:13"] and "--tty" not in argv
    for bad in ({"gpio": "/dev/gpiochip3:12"}, {"gpio": "/dev/gpiochip3:1:2;x"},
                {"gpio": "/dev/gpiochip3:12:13", "path": "kernel"}):
        with pytest.raises(ParamError):
            SUITE.params(bad)


def test_arm_request_follows_the_params():
    arm = SUITE.arm(run_of(period_us=2000, pulse_us=5000, samples=10, histogram_us=500, bucket_ns=100))
    assert (arm.period_us, arm.pulse_us, arm.samples, arm.bucket_ns, arm.buckets) == (2000, 1999, 10, 100, 5000)
    assert arm.timeout_s >= 10 * 2000 / 1e6 + 30


def result_doc(missed=2, period_us=1000):
    arm = ArmRequest(period_us=period_us, pulse_us=100, samples=10, timeout_s=60, bucket_ns=1000, buckets=100)
    acc = Accumulator(arm)
    for ns in (4200, 5100, 5900, 6100, 6900, 7200, 7300, 7400, 12_500, 250_000)[missed:]:
        acc.answer(ns)
    for _ in range(missed):
        acc.miss()
    return {"where": "tcp://x:1", "arm": arm.__dict__,
            "probe": {"name": "pico", "resolution_ns": 8, "max_samples": 1, "max_buckets": 1, "emulated": False},
            "result": acc.result(ready=True, timed_out=False).to_json()}


RESPONDER = {"responder": {"path": "user", "device": "/dev/ttyS0", "answered": 8}}


def test_missed_responses_are_samples_beyond_the_histogram_not_dropped():
    out = probe_output(result_doc(missed=2), RESPONDER["responder"], "probe.json", cpu=2)
    (t,) = out.threads
    assert t.cycles == 10 and t.extra["missed"] == 2 and t.extra["answered"] == 8
    assert t.histogram.total == 10 and t.overflows == 3  # 250 us beyond 100 us + 2 missed
    assert t.max_us == 1000.0  # a missed answer is at least one period late
    assert t.share_at_or_above(10) == pytest.approx(4 / 10)  # 12.5 us, 250 us, and both missed
    assert out.metrics["missed"] == 2 and out.metrics["resolution_ns"] == 8
    assert SUITE.result_cell(out) == "2 missed, user path"
    none_missed = probe_output(result_doc(missed=0), RESPONDER["responder"], "probe.json").threads[0]
    assert none_missed.max_us == 250.0 and none_missed.share_at_or_above(10) == pytest.approx(2 / 10)


def test_a_missed_response_breaks_the_rk3568_budget():
    from rtlab.judge.gate import judge
    from rtlab.core.model import Measurement, MeasurementKey
    budgets = load_budgets(ROOT / "budgets" / "default.yaml")
    b = budgets.lookup("rk3568", "rt", "irq-response", "idle")
    assert isinstance(b, Budget) and b.max_us == 20
    out = probe_output(result_doc(missed=0, period_us=1000), RESPONDER["responder"], "probe.json")
    out.threads[0].max_us = out.threads[0].min_us = out.threads[0].avg_us = 8.0  # a clean run
    out.threads[0].histogram = None
    ok = judge(Measurement(MeasurementKey("rk3568", "rt", "irq-response"), out), b)
    assert ok.verdict.value == "pass", ok.reasons
    missed = probe_output(result_doc(missed=1), RESPONDER["responder"], "probe.json")
    bad = judge(Measurement(MeasurementKey("rk3568", "rt", "irq-response"), missed), b)
    assert bad.verdict.value == "fail"


def test_parse_output_reads_both_sides_and_names_what_is_missing(tmp_path):
    run = run_of()
    with pytest.raises(InputError, match="cannot read the probe's record"):
        SUITE.parse_output(tmp_path, run)
    (tmp_path / PROBE_FILE).write_text(json.dumps({"error": "probe at tcp://x:1 stopped answering"}))
    with pytest.raises(InputError, match="no probe result: probe at tcp://x:1 stopped answering"):
        SUITE.parse_output(tmp_path, run)
    (tmp_path / PROBE_FILE).write_text(json.dumps(result_doc()))
    with pytest.raises(InputError, match="responder's record"):
        SUITE.parse_output(tmp_path, run)
    (tmp_path / "irq-response.json").write_text(json.dumps(RESPONDER))
    out = SUITE.parse_output(tmp_path, run)
    assert out.threads[0].cpu == 2 and out.tool == "irq-response"


# --- host side: not available, armed around the run -----------------------

def test_not_available_without_a_driver_or_without_a_probe():
    t = Target("plain")
    assert "no IrqProbeDriver in this board's environment" in SUITE.host_unavailable(t, run_of())
    t2 = Target("driver-only")
    IrqProbeDriver(t2, name=None)
    assert "no interrupt-response probe wired" in SUITE.host_unavailable(t2, run_of())


@pytest.fixture
def twin_target(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    sock = tmp_path / "irq.sock"
    tw = Twin(sock, srv)
    threading.Thread(target=tw.serve, daemon=True).start()
    t = Target("twin")
    NetworkIrqProbe(t, name=None, host="127.0.0.1", port=srv.getsockname()[1])
    IrqProbeDriver(t, name=None, silence_s=3)
    assert SUITE.host_unavailable(t, run_of()) is None
    return t, sock


def responder(sock, answer=True):
    """What rtbench respond does on the board's end of the UART."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))

    def run():
        s.sendall(b"R")
        while answer:
            data = s.recv(64)
            if not data:
                return
            s.sendall(data)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def test_host_side_arms_the_probe_around_the_run_and_records_it(twin_target, tmp_path):
    target, sock = twin_target
    run = run_of(period_us=2000, samples=25)
    host_dir = tmp_path / run.id
    with SUITE.host_side(target, run, host_dir):
        th = responder(sock)
        th.join(1.0)  # the board's run: the stimuli come and go meanwhile
        import time
        time.sleep(25 * 0.002 + 0.5)
        (host_dir / "exit.json").write_text(json.dumps({"exit_code": 0}))
    doc = json.loads((host_dir / PROBE_FILE).read_text())
    assert doc["probe"]["emulated"] is True and doc["arm"]["samples"] == 25
    assert doc["result"]["sent"] == 25 and doc["result"]["answered"] + doc["result"]["missed"] == 25
    (host_dir / "irq-response.json").write_text(json.dumps(RESPONDER))
    out = SUITE.parse_output(host_dir, run)
    assert out.threads[0].cycles == 25 and out.threads[0].extra["emulated"] is True


def test_host_side_probe_that_never_sees_ready_is_infra(twin_target, tmp_path):
    target, sock = twin_target
    run = run_of(period_us=1000, samples=5)
    host_dir = tmp_path / run.id
    # a responder whose ready byte never comes, within a short probe timeout
    SUITE_arm = SUITE.arm

    def short_arm(r):
        a = SUITE_arm(r)
        return ArmRequest(a.period_us, a.pulse_us, a.samples, 2, a.bucket_ns, a.buckets)
    SUITE.arm = short_arm
    try:
        with pytest.raises(SuiteFailure, match="irq probe: .*never signalled ready"):
            with SUITE.host_side(target, run, host_dir):
                (host_dir / "exit.json").write_text(json.dumps({"exit_code": 0}))
    finally:
        del SUITE.arm
    assert "never signalled ready" in json.loads((host_dir / PROBE_FILE).read_text())["error"]


def test_host_side_responder_that_failed_aborts_the_probe_at_once(twin_target, tmp_path):
    import time
    target, _ = twin_target
    run = run_of(samples=100000)  # a probe timeout of minutes: not waited for
    host_dir = tmp_path / run.id
    t0 = time.monotonic()
    with SUITE.host_side(target, run, host_dir):
        (host_dir / "exit.json").write_text(json.dumps({"exit_code": 3}))
    assert time.monotonic() - t0 < 15
    assert "responder exited with 3" in json.loads((host_dir / PROBE_FILE).read_text())["error"]


def test_host_side_probe_unreachable_is_infra_before_the_run(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = Target("gone")
    NetworkIrqProbe(t, name=None, host="127.0.0.1", port=port)
    IrqProbeDriver(t, name=None)
    ran = []
    with pytest.raises(SuiteFailure, match="unreachable"):
        with SUITE.host_side(t, run_of(), tmp_path / "r"):
            ran.append(1)
    assert not ran  # the responder never started: nothing measured without a probe


def test_store_points_carry_the_missed_count():
    from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult
    from rtlab.store.schema import points_for_run
    out = probe_output(result_doc(missed=2), RESPONDER["responder"], "probe.json", cpu=2)
    m = Measurement(MeasurementKey("rk3568", "rt", "irq-response"), out)
    run = RunResult(run_id="r", started="2026-11-26T12:00:00Z", campaign="c",
                    jobs=[JobResult(board="rk3568", variant="rt", measurements=[m])])
    pts = points_for_run(run)
    lat = [p for p in pts if p.measurement == "latency" and p.fields.get("extra_missed") is not None]
    assert lat and lat[0].fields["extra_missed"] == 2 and lat[0].fields["cycles"] == 10
    met = [p for p in pts if p.measurement == "metrics"]
    assert met and met[0].fields["missed"] == 2 and met[0].fields["resolution_ns"] == 8


def test_the_rk356x_twin_wires_a_pci_uart_to_its_probe(tmp_path):
    """Rack board type `irq_probe: true`: QEMU's PCI 16550 on a chardev the
    rack's twin probe listens on (a socket path short enough for AF_UNIX);
    boards without it get no such UART."""
    from rtlab.rack.board import VirtualBoard, irq_probe_socket
    from rtlab.rack.config import load_rack_config

    cfg = load_rack_config()
    twin = VirtualBoard(cfg.boards["rk356x0"], tmp_path, say=lambda _: None)
    plain = VirtualBoard(cfg.boards["vb0"], tmp_path, say=lambda _: None)
    try:
        cmd = twin.qemu_command()
        i = cmd.index("pci-serial,chardev=irqprobe")
        assert cmd[i - 1] == "-device" and cmd[i - 2] == f"socket,id=irqprobe,path={twin.irq_probe_sock},reconnect=1"
        assert plain.irq_probe_sock is None and "pci-serial,chardev=irqprobe" not in plain.qemu_command()
    finally:
        twin.close()
        plain.close()
    long_dir = tmp_path / ("x" * 120)
    assert len(str(irq_probe_socket(long_dir))) < 100
