"""`rtbench respond`: the board side of the interrupt-response test, run on
this machine on a pseudo-terminal (the pty master plays the probe's UART):
the user path answers each byte itself, the kernel path leaves it to the
tty's echo, both say ready with one R, and a responder that stops answering
for a while answers nothing of what came meanwhile (the probe counts those
as missed)."""
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "rtbench" / "build" / os.uname().machine / "rtbench"


@pytest.fixture(scope="module")
def rtbench():
    r = subprocess.run(["make", "-C", str(ROOT / "rtbench")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return BIN


def read_byte(fd, timeout=5.0):
    r, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 1) if r else b""


def start(rtbench, tmp_path, *args):
    master, slave = pty.openpty()
    tty = os.ttyname(slave)
    # priority 0 (SCHED_OTHER): a test must not hog this shared machine's CPU at FIFO 99
    p = subprocess.Popen([str(rtbench), "respond", "--tty", tty, "-p", "0", "-a", "0", "-D", "20",
                          "--idle-s", "1", f"--json={tmp_path / 'r.json'}", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the slave stays open here until the responder has it (a pty master
    # with no slave open reads EIO)
    ready = read_byte(master, 10)
    os.close(slave)
    assert ready == b"R", p.stderr.read() if p.poll() is not None else "no R"
    return p, master


def exchange(master, n, gap_s=0.01):
    answered = 0
    for i in range(n):
        mark = bytes([0x21 + i % 90])
        os.write(master, mark)
        if read_byte(master, 0.5) == mark:
            answered += 1
        time.sleep(gap_s)
    return answered


@pytest.mark.parametrize("path, flag", [("user", []), ("kernel-tty-echo", ["--kernel-echo"])])
def test_responder_answers_every_byte(rtbench, tmp_path, path, flag):
    p, master = start(rtbench, tmp_path, "-n", "20", *flag)
    try:
        assert exchange(master, 20) == 20
        out, err = p.communicate(timeout=30)
    finally:
        os.close(master)
    assert p.returncode == 0, err
    doc = json.loads((tmp_path / "r.json").read_text())["responder"]
    assert doc["path"] == path and doc["answered"] == 20 and doc["received"] == 20
    assert doc["mlockall"] is True and doc["cpu"] == 0 and doc["policy"] == "SCHED_OTHER"
    assert doc["stop"] == "count"
    assert f"{path} path" in out


def test_paused_responder_answers_nothing_sent_meanwhile(rtbench, tmp_path):
    p, master = start(rtbench, tmp_path, "--pause-after", "5", "--pause-ms", "400")
    try:
        first = exchange(master, 5)
        during = exchange(master, 6, gap_s=0.0)  # within the 400 ms pause (0.5 s wait for the first only)
        time.sleep(0.5)
        after = exchange(master, 5)
        out, err = p.communicate(timeout=30)  # idle for 1 s: it ends
    finally:
        os.close(master)
    assert (first, after) == (5, 5)
    assert during < 6, "the pause answered everything: no missed response to count"
    doc = json.loads((tmp_path / "r.json").read_text())["responder"]
    assert doc["paused_ms"] == 400 and doc["stop"] == "idle" and doc["answered"] == 10 + during


def test_bad_usage_and_missing_device_exit_2(rtbench, tmp_path):
    assert subprocess.run([str(rtbench), "respond"], capture_output=True).returncode == 2
    r = subprocess.run([str(rtbench), "respond", "--tty", str(tmp_path / "none")], capture_output=True, text=True)
    assert r.returncode == 2 and "No such file" in r.stderr
    r = subprocess.run([str(rtbench), "respond", "--tty", "/dev/null"], capture_output=True, text=True)
    assert r.returncode == 2 and "not a tty" in r.stderr


def test_gpio_wiring_errors_name_the_cause(rtbench):
    def respond(*args):
        return subprocess.run([str(rtbench), "respond", *args], capture_output=True, text=True)
    r = respond("--gpio", "gpiochip0")
    assert r.returncode == 2 and "want CHIP:IN:OUT" in r.stderr
    r = respond("--gpio", "/dev/gpiochip99:1:2")
    assert r.returncode == 2 and "/dev/gpiochip99: No such file" in r.stderr
    r = respond("--gpio", "/dev/gpiochip99:1:2", "--kernel-echo")
    assert r.returncode == 2 and "no kernel path on GPIO lines" in r.stderr
    assert respond("--gpio", "/dev/gpiochip99:1:2", "--tty", "/dev/null").returncode == 2
