"""Host noise (rtlab/core/hostnoise.py): steal read from /proc/stat texts made up
here (a hypervisor cannot be made to steal on demand), the gate's rule that
turns a breach the steal explains into INFRA, and where the numbers go
(run.json, the store, the report, snapshot.json)."""
import json
import os
import random
import time
import tracemalloc

import pytest

from rtlab.core import hostnoise
from rtlab.plan.budgets import Budget, load_budgets
from rtlab.errors import InputError
from rtlab.judge.gate import judge, judge_run
from rtlab.core.model import JobResult, RunResult, Verdict

from test_gate import _run_with, meas, thread

STAT = """cpu  15241 8 6141 24936 1012 0 240 {total} 0 0
cpu0 5908 6 2317 15417 95 0 43 {s0} 0 0
cpu1 9332 2 3823 9518 916 0 196 {s1} 0 0
intr 1 2 3
ctxt 99
"""


def stat(s0, s1):
    return STAT.format(total=s0 + s1, s0=s0, s1=s1)


def test_parse_steal_per_cpu_without_the_total():
    assert hostnoise.parse_steal(stat(118, 140)) == {"cpu0": 118, "cpu1": 140}
    assert hostnoise.parse_steal("cpu0 1 2 3\n") == {}  # an old kernel without the column


def readings(steal_at, n=200, period=0.05):
    """(t, steal) every *period* s; steal_at: (reading index, cpu, ticks) increments."""
    cur = {"cpu0": 100, "cpu1": 100}
    out = []
    for i in range(n):
        for at, cpu, ticks in steal_at:
            if at == i:
                cur[cpu] += ticks
        out.append((i * period, dict(cur)))
    return out


def test_steady_steal_is_no_burst_but_one_long_theft_is():
    # this VM's steady steal: ~2 ms/s per CPU, one 10 ms tick every ~5 s
    steady = readings([(50, "cpu0", 1), (150, "cpu0", 1), (100, "cpu1", 1)])
    s = hostnoise.summarise(steady, [1.0, 2.5])
    assert s["steal_ms"] == {"cpu0": 20.0, "cpu1": 10.0} and s["window_s"] == pytest.approx(9.95)
    assert s["burst_ms"] == 10.0 < hostnoise.DEFAULT_STEAL_INFRA_MS and s["max_gap_ms"] == 2.5
    # the hypervisor takes cpu1 for ~30 ms: 3 ticks within two readings
    burst = readings([(50, "cpu0", 1), (120, "cpu1", 2), (121, "cpu1", 1)])
    s = hostnoise.summarise(burst, [])
    assert s["burst_ms"] == 30.0 and s["burst_cpu"] == "cpu1"
    # ticks spread wider than the window never add up to a burst
    spread = readings([(i, "cpu0", 1) for i in range(0, 200, 10)])
    assert hostnoise.summarise(spread, [])["burst_ms"] == 10.0


def test_a_stall_of_the_monitor_longer_than_the_window_still_counts():
    # the host stopped the monitor for 1 s too: two readings 1 s apart, 4 ticks between them
    r = [(0.0, {"cpu0": 5}), (0.05, {"cpu0": 5}), (1.05, {"cpu0": 9}), (1.1, {"cpu0": 9})]
    assert hostnoise.summarise(r, [1000.0])["burst_ms"] == 40.0


def stalled(max_us, stall_ms, **extra):
    """A breached max with no sample times (a tool that gives none, an older
    run): only the witness's summary, a stall of every CPU at once."""
    m = meas(thread({10: 999, max_us: 1}, size=100000))
    m.host_noise = {"burst_ms": 0.0, "burst_cpu": None, "tick_ms": 10.0, "steal_ms": {"cpu0": 0.0, "cpu1": 20.0},
                    "window_s": 10.0, "stall": {"stall_ms": stall_ms, "trusted": True,
                                                "witness": "a SCHED_FIFO 1 sampler pinned to each of 2 CPUs"},
                    **extra}
    return m


def test_the_threshold_is_typed_in_the_budget_file(tmp_path):
    f = tmp_path / "budgets.yaml"
    f.write_text('budgets:\n  k: {"*": {"*": {"*": {max_us: 20000}}}}\nhost_noise: {steal_infra_ms: 50}\n')
    b = load_budgets(f)
    assert b.steal_infra_ms == 50
    # a 30 ms stall is under this file's threshold: the breach stays FAIL
    assert judge_run(_run_with(stalled(20498, 30.0)), b).verdict == Verdict.FAIL
    f.write_text('budgets:\n  k: {"*": {"*": {"*": {max_us: 20000}}}}\n')
    assert load_budgets(f).steal_infra_ms == hostnoise.DEFAULT_STEAL_INFRA_MS
    assert judge_run(_run_with(stalled(20498, 30.0)), load_budgets(f)).verdict == Verdict.INFRA
    for bad, words in [("{steal_infra_ms: -1}", "host_noise.steal_infra_ms"),
                       ("{steal_infra_ms: .inf}", "host_noise.steal_infra_ms"),
                       ("{steal_infra_ms: '20; rm -rf /'}", "host_noise.steal_infra_ms: must be a number"),
                       ("{steal_infra_ms: 1000000}", "at most 60000"),
                       ("{steal: 20}", "host_noise.steal: unknown key")]:
        f.write_text('budgets:\n  k: {"*": {"*": {"*": {max_us: 20000}}}}\nhost_noise: ' + bad + "\n")
        with pytest.raises(InputError) as e:
            load_budgets(f)
        assert "budgets.yaml" in str(e.value) and words in str(e.value), (bad, str(e.value))


def test_host_noise_round_trips_and_reaches_the_store_and_report(tmp_path):
    from rtlab.report.plot import write_html_report
    from rtlab.store.schema import FIELDS, VERDICT, field_type

    m = judge(stalled(20498, 30.0, max_gap_ms=31.5), Budget(max_us=20000))
    jr = JobResult(board="b", variant="rt", budget_class="k", measurements=[m],
                   retries=[{"dir": "measured-again/b-rt/1", "reasons": [m.reasons[0]]}])
    run = RunResult(run_id="r1", started="2026-11-23T00:00:00Z", campaign="c", jobs=[jr])
    back = RunResult.from_json(json.loads(json.dumps(run.to_json())))
    assert back.jobs[0].measurements[0].host_noise == m.host_noise
    assert back.jobs[0].retries == jr.retries
    for f in ("host_steal_ms", "host_steal_burst_ms", "host_max_gap_ms"):
        assert field_type(VERDICT, f) is float, f
    from rtlab.store.schema import points_for_run
    pts = [p for p in points_for_run(run) if p.measurement == VERDICT and p.tags.get("scope") == "measurement"]
    assert pts and pts[0].fields["host_steal_ms"] == 20.0 and pts[0].fields["host_steal_burst_ms"] == 0.0
    assert pts[0].fields["host_max_gap_ms"] == 31.5 and "host_steal_ms" in FIELDS[VERDICT]
    html = write_html_report(back, tmp_path / "report.html").read_text()
    assert "Host noise during the measurements" in html and "host stalled 30 ms on every CPU at once" in html
    assert "measured-again/b-rt/1" in html


def test_snapshot_gets_each_suites_host_noise(tmp_path):
    from rtlab.report import snapshot
    p = tmp_path / "snapshot.json"
    snapshot.add_host_noise(p, "cyclictest@idle", {"steal_ms": {"cpu0": 10.0}})
    assert not p.exists()  # no snapshot (the boot's failed): none made up
    snapshot.write(p, {"kernel": {}, "cmdline": "x"})
    noise = {"steal_ms": {"cpu0": 10.0, "cpu1": 0.0}, "burst_ms": 10.0, "max_gap_ms": 3.0}
    snapshot.add_host_noise(p, "cyclictest@idle", noise)
    snap = snapshot.load(p)
    assert snap["host_noise"] == {"cyclictest@idle": noise}
    assert any("host during cyclictest@idle: steal 10 ms" in ln for ln in snapshot.summary_lines(snap))


def test_the_monitor_reads_a_stat_file_and_writes_host_noise_json(tmp_path, monkeypatch):
    f = tmp_path / "stat"
    f.write_text(stat(100, 100))
    # the seam is this process's module attribute, set by the test itself
    monkeypatch.setattr(hostnoise, "PROC_STAT", str(f))
    with hostnoise.watching(tmp_path / "suite") as w:
        time.sleep(0.3)
        f.write_text(stat(100, 104))  # 40 ms taken from cpu1 at once
        time.sleep(0.3)
    d = hostnoise.load(tmp_path / "suite")
    assert w.monitor.stat_path == str(f) and d["samples"] >= 5
    assert d["steal_ms"] == {"cpu0": 0.0, "cpu1": 4 * hostnoise.tick_ms()}
    assert d["burst_ms"] == 4 * hostnoise.tick_ms() and d["burst_cpu"] == "cpu1"
    assert d["window_s"] >= 0.5 and str(f) in d["source"]


def test_no_environment_variable_replaces_the_steal_source(tmp_path, monkeypatch):
    """RTLAB_HOST_STAT (once a test hook) is read by nothing: a run's
    environment, a CI trigger variable included, cannot feed the monitor a
    made-up /proc/stat."""
    fake = tmp_path / "stat"
    fake.write_text(stat(0, 900000))
    monkeypatch.setenv("RTLAB_HOST_STAT", str(fake))
    assert hostnoise.Monitor().stat_path == "/proc/stat"
    with hostnoise.watching(tmp_path / "suite"):
        time.sleep(0.2)
    assert hostnoise.load(tmp_path / "suite")["source"].startswith("host /proc/stat")


def test_a_stat_file_that_is_a_fifo_or_a_device_is_refused_not_read(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        m = hostnoise.Monitor(stat_path=path)
        t = time.monotonic()
        m.start()
        out = m.stop()
        assert time.monotonic() - t < 5 and "not a regular file" in out.get("error", ""), out


def _burst_by_rescan(samples):
    """The burst as the rule defines it, every window rescanned from its start (the reference)."""
    best = 0
    for i, (ti, si) in enumerate(samples):
        j = 0
        while j < i - 1 and samples[j][0] < ti - hostnoise.BURST_WINDOW_S:
            j += 1
        best = max([best] + [si.get(c, 0) - samples[j][1].get(c, 0) for c in samples[0][1]])
    return best


def test_the_running_summary_equals_the_rule_on_irregular_readings():
    rng = random.Random(7)
    for _ in range(50):
        t, cur, samples = 0.0, {"cpu0": 0, "cpu1": 0}, []
        for _ in range(rng.randint(1, 120)):
            t += rng.choice([0.05, 0.05, 0.06, 0.3, 1.2])  # now and then the monitor itself stalls
            cur = {c: v + (rng.random() < 0.15) * rng.randint(1, 3) for c, v in cur.items()}
            samples.append((t, dict(cur)))
        s = hostnoise.summarise(samples, [])
        assert s["burst_ms"] == _burst_by_rescan(samples) * 10.0 and s["samples"] == len(samples)


def test_a_long_watch_keeps_only_the_readings_a_window_needs(tmp_path):
    # a soak watches for hours at 20 readings a second: every reading kept
    # grew the board-test process ~4.5 kB a second (bench/bench_soak.py --flat)
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n")
    m = hostnoise.Monitor(stat_path=str(stat), period_s=0.001).start()
    time.sleep(1.0)
    out = m.stop()
    assert out["samples"] > 100 and out["window_s"] > 0.9
    assert len(m.summary.recent) < out["samples"] / 2  # the last BURST_WINDOW_S of a 1 s watch


def test_the_summary_holds_no_more_memory_after_20000_more_readings():
    # what the Monitor holds, measured: 20,000 more readings (17 min at
    # SAMPLE_S) must not cost memory; the old list grew ~250 B a reading
    acc = hostnoise.NoiseSummary()
    for i in range(1000):
        acc.add(i * hostnoise.SAMPLE_S, {"cpu0": i // 40, "cpu1": i // 90})
        acc.add_gap(i % 7)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000, 21000):
            acc.add(i * hostnoise.SAMPLE_S, {"cpu0": i // 40, "cpu1": i // 90})
            acc.add_gap(i % 7)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, f"{grown} B more after 20,000 readings"
    r = acc.result(10.0)
    assert r["samples"] == 21000 and r["window_s"] == pytest.approx(20999 * hostnoise.SAMPLE_S)
    assert r["steal_ms"] == {"cpu0": 20999 // 40 * 10.0, "cpu1": 20999 // 90 * 10.0} and r["max_gap_ms"] == 6.0
