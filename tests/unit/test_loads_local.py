"""Loads for real on this machine, through a plain subprocess shell instead
of a labgrid console: start, the measurement window, stop, raw files, and
the failures (died mid-run, never started) that make a result INFRA. The
same code runs on QEMU guests in tests/integration/test_suites_programme.py."""
import json
import subprocess
import time
import uuid

import pytest

from rtlab.loads import LOADS, LoadDied
from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import BoardShell

BOARD = {"name": "local", "kind": "local", "arch": "x86_64"}


class LocalCommand:
    """labgrid CommandProtocol.run() over `sh -c`."""

    def run(self, cmd, timeout=30):
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.stderr.splitlines(), p.returncode


def run_under(load, tmp_path, seconds, **opts):
    run = SuiteRun(id=f"t{uuid.uuid4().hex[:8]}@{load}", name="t", suite="cyclictest", load=load,
                   params=SUITES["cyclictest"].params({"load_opts": opts}), cpus=(0,))
    with LOADS[load].running(BoardShell(LocalCommand()), tmp_path, run, board=BOARD):
        time.sleep(seconds)


def summary(tmp_path, name):
    return json.loads((tmp_path / f"load-{name}.json").read_text())


def test_cpu_load_runs_for_the_whole_window(tmp_path):
    run_under("cpu", tmp_path, 1.5, cpu={"settle_s": 0.2})
    s = summary(tmp_path, "cpu")
    w = s["window"]
    assert s["problems"] == [] and w["problems"] == []
    assert w["window_s"] >= 1.5 and w["cpu_s"] > 0 and 0 < w["cpu_share"] <= 1.05
    assert w["samples"] >= 2
    assert s["throughput"]["stressors"]["cpu"]["bogo_ops"] > 0  # stress-ng's own YAML
    for f in ("samples.txt", "cmd.sh", "stress-ng.log", "stress-ng.yaml"):
        assert (tmp_path / f"load-cpu-{f}").stat().st_size > 0


def test_a_long_load_script_is_written_first_and_still_runs(tmp_path, monkeypatch):
    """cmd.sh too long for one console line (memory on a many-CPU board) goes
    over put_file before the launch; the launch must not wipe it."""
    monkeypatch.setattr(type(LOADS["cpu"]), "launch_line_max", 0)
    run_under("cpu", tmp_path, 1, cpu={"settle_s": 0.2})
    s = summary(tmp_path, "cpu")
    assert s["problems"] == [] and s["window"]["cpu_s"] > 0
    assert "stress-ng --cpu" in (tmp_path / "load-cpu-cmd.sh").read_text()


def test_composite_memory_and_network(tmp_path):
    run_under("memory+network", tmp_path, 2, memory={"mib": 8, "settle_s": 0.2},
              network={"settle_s": 0.2})
    mem, net = summary(tmp_path, "memory"), summary(tmp_path, "network")
    assert mem["problems"] == [] and net["problems"] == []
    assert mem["window"]["cpu_s"] > 0 and net["window"]["cpu_s"] > 0
    assert net["throughput"]["tcp_mbit_s"] > 0 and net["throughput"]["ping"]["transmitted"] > 0
    # the host side of the stream: the iperf3 server the load started
    server = json.loads((tmp_path / "load-network-iperf3-server.json").read_text())
    assert server["end"]["sum_received"]["bytes"] > 0


def test_load_killed_mid_run_raises_loaddied_naming_it(tmp_path):
    # which of the two checks sees it first depends on the machine's load:
    # the watcher (no process left) or the end-of-run count (1 of 1 gone)
    with pytest.raises(LoadDied, match=r"^load cpu: die_after_s: killing the load; load cpu: died mid-run: "
                                       r"(no process of the load left|1 of 1 load processes gone \(stress-ng\))"):
        run_under("cpu", tmp_path, 3, cpu={"die_after_s": 1, "settle_s": 0})
    assert "died mid-run" in summary(tmp_path, "cpu")["problems"][1]


def test_load_that_never_starts_is_infra(tmp_path):
    # nothing listens there: iperf3 gives up at once
    with pytest.raises(LoadDied, match="load network did not start: iperf3 exited at once"):
        run_under("network", tmp_path, 1, network={"peer": "127.0.0.2"})
