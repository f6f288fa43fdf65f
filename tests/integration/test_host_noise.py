"""Host noise on the local board (rtlab/core/hostnoise.py): the real /proc/stat
read while cyclictest runs, into host-noise.json, run.json, snapshot.json and
report.html; and the runner's retries of a breach the host stole.

A hypervisor cannot be made to steal on demand, so the retry tests give the
monitor a file in /proc/stat's format (RTLAB_HOST_STAT) whose steal column a
thread here advances: everything else (the board, cyclictest, the runner,
the gate) is real. The budget (max 1 us) breaks in every run, so what the
steal does to the verdict is all that varies."""
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import rtlab

from rtlab.core import hostnoise

#: latency measured on this machine: make test runs it last, alone (tests/conftest.py)
pytestmark = pytest.mark.serial

LOOSE = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 10000000}}}}
"""
TIGHT = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 1}}}}
"""


def proc_steal() -> dict[str, int]:
    return hostnoise.parse_steal(Path("/proc/stat").read_text())


def run_dir_of(res) -> Path:
    return Path(res.stdout.split("results: ")[-1].split()[0])


def test_the_local_board_records_the_hosts_real_steal(tmp_path, campaign):
    before = proc_steal()
    res = rtlab("run", "--campaign", campaign(["local"], budgets=LOOSE), "--results", tmp_path / "r",
                "--no-publish")
    after = proc_steal()
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = run_dir_of(res)
    job = run_dir / "local" / "host"
    noise = json.loads((job / "cyclictest@idle" / hostnoise.HOST_NOISE_FILE).read_text())
    # every CPU of this machine, read every 50 ms over the 2 s cyclictest
    assert set(noise["steal_ms"]) == set(before), noise
    assert noise["window_s"] >= 1.8 and noise["samples"] >= 10, noise
    assert noise["source"].startswith("host /proc/stat")
    tick = hostnoise.tick_ms()
    for cpu, ms in noise["steal_ms"].items():
        # inside what /proc/stat itself says was stolen over the whole run
        assert 0 <= ms <= (after[cpu] - before[cpu]) * tick, (cpu, ms, before, after)
    assert 0 <= noise["burst_ms"] <= max(noise["steal_ms"].values()) and noise["max_gap_ms"] >= 0
    run = json.loads((run_dir / "run.json").read_text())
    (m,) = run["jobs"][0]["measurements"]
    assert m["host_noise"] == noise and run["jobs"][0]["retries"] == []
    snap = json.loads((job / "snapshot.json").read_text())
    assert snap["host_noise"]["cyclictest@idle"] == noise
    html = (run_dir / "report.html").read_text()
    assert "Host noise during the measurements" in html and "local/host cyclictest@idle: steal" in html


class Stealer:
    """A /proc/stat copy whose cpu0 loses *ticks* every 50 ms while on.

    The default claims more of cpu0 than the wall clock has (10 ticks a
    50 ms): the budget (max 1 us) breaks in every sample, and a steal only
    explains as many late samples as the time it took (rtlab.core.hostnoise
    .stolen_breach), so the made-up host must have taken all of it."""

    def __init__(self, path: Path, ticks: int = 10):
        self.path, self.ticks, self.steal = path, ticks, 0
        self.on = threading.Event()
        self.on.set()
        self.done = threading.Event()
        self.write()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def write(self):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"cpu  1 0 1 1 0 0 0 {self.steal} 0 0\ncpu0 1 0 1 1 0 0 0 {self.steal} 0 0\n"
                       f"cpu1 1 0 1 1 0 0 0 0 0 0\n")
        tmp.replace(self.path)

    def loop(self):
        while not self.done.wait(0.05):
            if self.on.is_set():
                self.steal += self.ticks
                self.write()

    def stop(self):
        self.done.set()
        self.thread.join()


def test_a_breach_the_host_keeps_stealing_is_retried_then_infra_never_fail(tmp_path, campaign):
    stealer = Stealer(tmp_path / "stat")
    try:
        res = rtlab("run", "--campaign", campaign(["local"], budgets=TIGHT), "--results", tmp_path / "r",
                    "--no-publish", env={hostnoise.STAT_ENV: str(tmp_path / "stat")})
    finally:
        stealer.stop()
    out = res.stdout + res.stderr
    assert res.returncode == 2, out  # INFRA: not the kernel's FAIL, never a PASS
    assert "measuring cyclictest@idle again (1/2)" in out and "measuring cyclictest@idle again (2/2)" in out, out
    run_dir = run_dir_of(res)
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    (m,) = job["measurements"]
    assert m["verdict"] == "infra" and m["reasons"][0].startswith("host stole "), m["reasons"]
    assert "max " in m["reasons"][1] and ">= budget 1 us" in m["reasons"][1]
    # both stolen attempts kept, raw files and all, and named
    assert [r["dir"] for r in job["retries"]] == ["measured-again/local-host/1", "measured-again/local-host/2"]
    for r in job["retries"]:
        assert r["reasons"][0].startswith("host stole ")
        assert (run_dir / r["dir"] / "cyclictest@idle" / "cyclictest.json").exists()
        assert (run_dir / r["dir"] / "cyclictest@idle" / hostnoise.HOST_NOISE_FILE).exists()
    assert "INFRA" in out.split("Verdict:")[-1]


# make test-long: the steal retry's other outcomes; a stolen breach is never FAIL:
#   test_a_breach_the_host_keeps_stealing_is_retried_then_infra_never_fail
@pytest.mark.long
def test_a_real_breach_after_a_stolen_attempt_is_fail(tmp_path, campaign):
    """Stolen once, then no more steal: the measured-again breach is the
    kernel's (FAIL, exit 1), the stolen attempt kept beside it."""
    stealer = Stealer(tmp_path / "stat")
    results = tmp_path / "r"

    def stop_after_first_attempt():
        while not stealer.done.is_set():
            if list(results.glob(f"*/local/host/cyclictest@idle/{hostnoise.HOST_NOISE_FILE}")):
                stealer.on.clear()
                return
            time.sleep(0.05)
    watcher = threading.Thread(target=stop_after_first_attempt, daemon=True)
    watcher.start()
    try:
        res = rtlab("run", "--campaign", campaign(["local"], budgets=TIGHT), "--results", results,
                    "--no-publish", env={hostnoise.STAT_ENV: str(tmp_path / "stat")})
    finally:
        stealer.stop()
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    run = json.loads((run_dir_of(res) / "run.json").read_text())
    (job,) = run["jobs"]
    assert len(job["retries"]) == 1 and "measuring cyclictest@idle again (1/2)" in out
    (m,) = job["measurements"]
    assert m["verdict"] == "fail" and not m["reasons"][0].startswith("host stole"), m["reasons"]
    assert m["host_noise"]["burst_ms"] == 0


TIGHT_CYCLICTEST_ONLY = """
    budgets:
      local:
        "*":
          cyclictest: {"*": {max_us: 1}}
          "*": {"*": {max_us: 10000000}}
"""


# make test-long: the steal retry's other outcomes; a stolen breach is never FAIL:
#   test_a_breach_the_host_keeps_stealing_is_retried_then_infra_never_fail
@pytest.mark.long
def test_only_the_stolen_measurement_is_measured_again(tmp_path, campaign):
    """Two suites in one job, the host stealing throughout: only the one whose
    breach the steal explains runs again (twice), the other is measured once,
    judged PASS and its raw files stay in the job directory."""
    stealer = Stealer(tmp_path / "stat")
    try:
        res = rtlab("run", "--campaign", campaign(["local"], budgets=TIGHT_CYCLICTEST_ONLY, suites="""
            - name: cyclictest
              params: {interval_us: 1000, duration_s: 2, histogram_us: 2000}
            - name: signaltest
              params: {duration_s: 2}
        """), "--results", tmp_path / "r", "--no-publish", env={hostnoise.STAT_ENV: str(tmp_path / "stat")})
    finally:
        stealer.stop()
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert out.count("signaltest@idle: running") == 1 and out.count("cyclictest@idle: running") == 3, out
    run_dir = run_dir_of(res)
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    verdicts = {m["key"]["suite"]: m["verdict"] for m in job["measurements"]}
    assert verdicts == {"cyclictest": "infra", "signaltest": "pass"}, verdicts
    assert [r["measured_again"] for r in job["retries"]] == [["cyclictest@idle"]] * 2
    jd = run_dir / "local" / "host"
    sig = next(m for m in job["measurements"] if m["key"]["suite"] == "signaltest")
    assert (jd / sig["output"]["path"]).is_file(), sig["output"]
    assert (jd / "cyclictest@idle" / "cyclictest.json").is_file()
    for r in job["retries"]:  # each stolen attempt: the stolen suite's files, not the kept one's
        assert (run_dir / r["dir"] / "cyclictest@idle" / "cyclictest.json").is_file()
        assert not (run_dir / r["dir"] / "signaltest@idle").exists()
