"""irq-response end to end on a QEMU board (qemu-aarch64, booted directly):
the twin probe (rtlab.lab.irqtwin) runs on this host, QEMU wires a PCI
16550 to its chardev socket, `rtlab run` arms the probe through labgrid's
IrqProbeDriver (resource NetworkIrqProbe), `rtbench respond` answers on the
guest's ttyS0 (a real receive interrupt through the GIC), and the round
trips land in the result model, the table and the vendor report.

The numbers are emulation noise (TCG on a shared, loaded 2-core host); the
test asserts counts: every stimulus is in the result, as an answer or a
missed one, and a responder that stops answering for 300 ms shows as
missed responses, not as fewer samples."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, rtlab_retry_infra, rtlab
from test_rack_service import BUDGETS, rack, run_rtlab  # noqa: F401 (rack: fixture)

SAMPLES = 100
# TCG on this shared host (load average ~18 on 2 cores while measured): round
# trips of 2-11 ms were seen, so windows of 100 ms (a stall beyond one is a
# missed response, counted: the counts hold whatever the host does)
PERIOD_US = 100_000


@pytest.fixture
def twin(tmp_path):
    sock, port_file = tmp_path / "irqprobe.sock", tmp_path / "irqprobe.port"
    p = subprocess.Popen([sys.executable, "-m", "rtlab.lab.irqtwin", "--listen", "127.0.0.1:0",
                          "--chardev", str(sock), "--port-file", str(port_file)], cwd=ROOT)
    try:
        for _ in range(100):
            if port_file.is_file():
                break
            time.sleep(0.1)
        yield sock, int(port_file.read_text())
    finally:
        p.terminate()
        p.wait(10)


# make test-long: the twin probe end to end is
#   test_rk356x_twin_measures_through_the_rack_probe_and_others_say_not_available
@pytest.mark.long
def test_irq_response_on_a_qemu_board_counts_every_stimulus(tmp_path, campaign, board_file, twin):
    sock, port = twin
    board = board_file("qemu-aarch64-irq", "qemu-aarch64", {
        "-nic user,model=virtio-net-pci'":
            f"-nic user,model=virtio-net-pci -chardev socket,id=irqprobe,path={sock},reconnect=1 "
            f"-device pci-serial,chardev=irqprobe'",
        "    drivers:\n": f"    resources:\n      NetworkIrqProbe: {{host: 127.0.0.1, port: {port}}}\n"
                         f"    drivers:\n      IrqProbeDriver: {{}}\n",
        "  - rtlab.lab.drivers\n": "  - rtlab.lab.drivers\n  - rtlab.lab.irqprobe\n",
    })
    common = f"period_us: {PERIOD_US}, samples: {SAMPLES}, histogram_us: 100000, cpus: [1]"
    c = campaign([board], variants="[rt]", suites=f"""
        - name: irq-response
          params: {{{common}}}
        - name: irq-response-kernel
          suite: irq-response
          params: {{{common}, path: kernel}}
        - name: irq-response-pause
          suite: irq-response
          params: {{{common}, pause_after: 30, pause_ms: 1000}}
        - name: cyclictest
          params: {{interval_us: 1000, duration_s: 2, histogram_us: 20000}}
    """)
    res = rtlab_retry_infra("run", "--campaign", c, "--results", tmp_path / "results", "--no-publish",
                            timeout=1800)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    ms = {m["key"]["suite"]: m for m in job["measurements"]}
    assert set(ms) == {"irq-response", "irq-response-kernel", "irq-response-pause", "cyclictest"}
    for name, path in (("irq-response", "user"), ("irq-response-kernel", "kernel-tty-echo"),
                       ("irq-response-pause", "user")):
        m = ms[name]
        assert m["verdict"] == "pass", (name, m["reasons"])
        (t,) = m["output"]["threads"]
        x = t["extra"]
        # every stimulus is in the result: answered or missed, none dropped
        assert t["cycles"] == SAMPLES and x["answered"] + x["missed"] == SAMPLES, (name, x)
        h = t["histogram"]
        assert sum(h["counts"].values()) + h["overflows"] == SAMPLES
        assert h["overflows"] >= x["missed"]
        assert x["path"] == path and x["device"].startswith("/dev/ttyS") and x["emulated"] is True
        assert x["probe"] == "rtlab-twin" and x["resolution_ns"] == 1
        assert 0 < t["min_us"] <= t["avg_us"] <= t["max_us"]
        raw = run_dir / board / "rt" / f"{name}@idle"
        probe = json.loads((raw / "probe.json").read_text())
        assert probe["result"]["sent"] == SAMPLES and probe["arm"]["period_us"] == PERIOD_US
        responder = json.loads((raw / "irq-response.json").read_text())["responder"]
        assert responder["policy"] == "SCHED_FIFO" and responder["cpu"] == 1 and responder["mlockall"]
    # the paused responder: ~10 stimuli came while it slept and were flushed
    # unanswered; each is a missed response in the probe's count (the probe
    # can only have seen as many answers as the responder gave)
    pause = ms["irq-response-pause"]["output"]["threads"][0]
    normal = ms["irq-response"]["output"]["threads"][0]
    paused = json.loads((run_dir / board / "rt" / "irq-response-pause@idle" / "irq-response.json").read_text())
    gave = paused["responder"]["answered"]
    assert paused["responder"]["paused_ms"] == 1000 and gave <= SAMPLES - 5, paused
    assert pause["extra"]["missed"] >= SAMPLES - gave, (pause["extra"], gave)
    assert pause["max_us"] >= PERIOD_US
    print(f"\ntwin round trips (TCG, loaded host): user {normal['min_us']:.0f}/{normal['avg_us']:.0f}/"
          f"{normal['max_us']:.0f} us, missed {normal['extra']['missed']}; kernel echo "
          f"{ms['irq-response-kernel']['output']['threads'][0]['avg_us']:.0f} us avg; "
          f"paused: missed {pause['extra']['missed']}")
    # the vendor report: the interrupt-response block beside cyclictest's
    rep = rtlab("report", "--vendor", run_dir, "--thresholds", "10,70")
    assert rep.returncode == 0, rep.stderr
    text = rep.stdout
    assert "irq-response" in text and "cyclictest" in text
    block = text[text.index("irq-response-pause"):]
    assert "missed" in block and "samples" in block


# --- the RK356x twin through the rack: the probe is the rack's -------------


def test_rk356x_twin_measures_through_the_rack_probe_and_others_say_not_available(rack, tmp_path):  # noqa: F811
    """The rack starts the RK356x twin's probe (rtlab.lab.irqtwin), its
    exporter exports it as NetworkIrqProbe in the twin's place, the job
    gets it through RemotePlace; a rack board without a probe says "not
    available" with the reason and still measures cyclictest."""
    (tmp_path / "budgets.yaml").write_text(BUDGETS)
    c = tmp_path / "campaign.yaml"
    c.write_text(f"""
name: twin-irq
budgets: {tmp_path / 'budgets.yaml'}
boards: [twin-rk356x, rack-aarch64]
variants: [rt]
suites:
  - name: irq-response
    params: {{period_us: {PERIOD_US}, samples: 60, histogram_us: 100000, cpus: [1]}}
  - name: cyclictest
    params: {{interval_us: 10000, duration_s: 3, histogram_us: 20000}}
""")
    res = run_rtlab(rack, "run", "--campaign", c, "--places", "2", "--results", tmp_path / "results",
                    "--no-publish", timeout=1800)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    jobs = {j["board"]: j for j in run["jobs"]}
    twin = {m["key"]["suite"]: m for m in jobs["twin-rk356x"]["measurements"]}
    assert set(twin) == {"irq-response", "cyclictest"}
    (t,) = twin["irq-response"]["output"]["threads"]
    assert t["cycles"] == 60 and t["extra"]["answered"] + t["extra"]["missed"] == 60
    assert t["extra"]["emulated"] is True and t["extra"]["device"].startswith("/dev/ttyS")
    probe = json.loads((run_dir / "twin-rk356x" / "rt" / "irq-response@idle" / "probe.json").read_text())
    assert probe["where"].startswith("tcp://127.0.0.1:")  # the rack's probe, through the place
    other = jobs["rack-aarch64"]
    assert [m["key"]["suite"] for m in other["measurements"]] == ["cyclictest"]
    (na,) = other["not_available"]
    assert na["suite"] == "irq-response" and "no IrqProbeDriver" in na["reason"]
    rep = rtlab("report", "--vendor", run_dir, "--thresholds", "10")
    assert rep.returncode == 0 and "twin-rk356x (aarch64) · irq-response" in rep.stdout
