"""Evidence at the breach: the trace analysis (a real cyclictest breaktrace
of qemu-aarch64's rt kernel under the fifo-hog load, and small hand-written
traces for the IRQ and no-culprit cases), arming from budgets, the
commands armed suites run, and the gate / JUnit / report lines."""
from __future__ import annotations

import gzip
from pathlib import Path

from rtlab.plan.budgets import Budget, load_budgets
from rtlab.plan.campaign import load_campaign
from rtlab.judge.evidence import analyse_sched_trace, analyse_timerlat_trace, arm_job, arms
from rtlab.judge.gate import judge
from rtlab.report.junit import junit_xml
from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, Verdict,
                         ToolOutput)
from rtlab.report.plot import write_html_report
from rtlab.suites import SUITES, SuiteRun

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"


def real_trace() -> str:
    # CPU 1's events (its per_cpu trace, as rtlab.judge.evidence.fetch_trace takes
    # it) of a run where cyclictest broke 2 s at 3300928 us
    return gzip.decompress((FIX / "cyclictest-breaktrace-fifo-hog-aarch64.txt.gz").read_bytes()).decode()


def test_real_breaktrace_names_the_hog():
    r = analyse_sched_trace(real_trace())
    assert (r["latency_us"], r["threshold_us"], r["cpu"], r["victim"]) == (3300928.0, 1999999.0, 1, "cyclictest")
    c = r["culprit"]
    assert (c["kind"], c["name"], c["pid"], c["rt_prio"]) == ("task", "stress-ng-cpu", 219, 98)
    # its stretches in the window add up to most of the 3.3 s wait
    assert c["stretches"] > 1 and 0.9 * r["window_us"] <= c["duration_us"] <= r["window_us"]
    assert r["summary"] == f"preempted by stress-ng-cpu (pid 219, RT prio 98) for {c['duration_us']:.0f} us on CPU 1"
    # the timer interrupt ran too, but for less
    assert any(x["kind"] == "irq" and x["name"] == "arch_timer" for x in r["candidates"][1:])


HEADER = "# tracer: nop\n#\n"


def line(task, pid, cpu, ts, event, body):
    return f"{task:>16}-{pid:<7} [{cpu:03d}] d..2. {ts:12.6f}: {event}: {body}\n"


def test_an_irq_handler_is_named():
    """Hand-written: the thread wakes, eth0's handler runs 180 us, then the thread."""
    t = HEADER + "".join([
        line("<idle>", 0, 1, 100.000000, "sched_waking", "comm=cyclictest pid=300 prio=9 target_cpu=001"),
        line("<idle>", 0, 1, 100.000001, "sched_wakeup", "comm=cyclictest pid=300 prio=9 target_cpu=001"),
        line("<idle>", 0, 1, 100.000010, "irq_handler_entry", "irq=42 name=eth0"),
        line("<idle>", 0, 1, 100.000190, "irq_handler_exit", "irq=42 ret=handled"),
        line("<idle>", 0, 1, 100.000195, "sched_switch",
             "prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cyclictest next_pid=300 next_prio=9"),
        line("cyclictest", 300, 1, 100.000200, "tracing_mark_write", "hit latency threshold (195 > 150)"),
    ])
    r = analyse_sched_trace(t)
    assert r["summary"] == "blocked by eth0 (irq 42) for 180 us on CPU 1"


def test_nothing_in_the_window_names_no_one():
    t = HEADER + "".join([
        line("<idle>", 0, 0, 5.000000, "sched_wakeup", "comm=cyclictest pid=300 prio=9 target_cpu=000"),
        line("<idle>", 0, 0, 5.000400, "sched_switch",
             "prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cyclictest next_pid=300 next_prio=9"),
        line("cyclictest", 300, 0, 5.000410, "tracing_mark_write", "hit latency threshold (400 > 100)"),
    ])
    r = analyse_sched_trace(t)
    assert r["summary"] is None and "outside the trace" in r["why"]
    assert analyse_sched_trace(HEADER)["summary"] is None


def test_timerlat_trace_late_thread():
    """Hand-written in rtla 6.1's timerlat trace layout."""
    t = HEADER + "".join([
        line("hog", 50, 1, 10.000000, "sched_switch",
             "prev_comm=sh prev_pid=49 prev_prio=120 prev_state=S ==> next_comm=hog next_pid=50 next_prio=1"),
        line("hog", 50, 1, 10.001000, "sched_wakeup", "comm=timerlat/1 pid=77 prio=4 target_cpu=001"),
        line("hog", 50, 1, 10.001001, "timerlat", "#12 context    irq timer_latency      1000 ns"),
        line("hog", 50, 1, 10.501000, "sched_switch",
             "prev_comm=hog prev_pid=50 prev_prio=1 prev_state=R ==> next_comm=timerlat/1 next_pid=77 next_prio=4"),
        line("timerlat/1", 77, 1, 10.501010, "timerlat", "#12 context thread timer_latency 500010000 ns"),
    ])
    r = analyse_timerlat_trace(t, {"thread_us": 200000, "irq_us": 200000})
    assert r["context"] == "thread"
    assert r["summary"] == "timerlat thread 500010 us: preempted by hog (pid 50, RT prio 98) for 500000 us on CPU 1"


def run_of(suite, evidence=None, **params):
    return SuiteRun(id=f"{suite}@idle", name=suite, suite=suite, load="idle",
                    params=SUITES[suite].params(params), cpus=(0, 1), evidence=evidence)


def test_armed_commands():
    assert "-b" not in SUITES["cyclictest"].command(run_of("cyclictest"))
    armed = SUITES["cyclictest"].command(run_of("cyclictest", {"max_us": 150.0}))
    assert armed[-3:] == ["-b", "149", "--tracemark"]  # a sample AT the budget breaks it: -b is "> USEC"
    tl = SUITES["timerlat"].command(run_of("timerlat", {"thread_us": 100.0, "irq_us": 65.0}))
    assert tl[tl.index("-T") + 1] == "99" and tl[tl.index("-i") + 1] == "64"
    assert tl[-1] == "-t=timerlat_trace.txt" and "sched:sched_switch" in tl
    assert "-T" not in SUITES["timerlat"].command(run_of("timerlat"))


def test_arm_job_takes_the_budgets(tmp_path):
    b = load_budgets(Path(__file__).resolve().parents[2] / "budgets" / "default.yaml")
    job = next(j for j in load_campaign("rtla", boards=["qemu-aarch64"], variants=["rt"]).jobs())
    armed = arm_job(job, b)
    assert {r.id: r.evidence for r in armed.suites}["timerlat@idle"] == {"thread_us": 2000000.0, "irq_us": 2000000.0}
    assert {r.id: r.evidence for r in armed.suites}["osnoise@idle"] is None  # no stop-at-budget form
    # round trip through the job spec
    assert SuiteRun.from_json(armed.suites[0].to_json()) == armed.suites[0]


def test_ci_arms_booted_boards_not_the_runner_itself(monkeypatch):
    """In CI evidence is armed by default on boards rtlab boots, not on the
    local board (its tracefs is the runner's own host); an explicit choice
    (command line, then campaign) wins everywhere."""
    jobs = {j.board.name: j for j in load_campaign("default", boards=["qemu-aarch64", "local"],
                                                     variants=["rt", "host"]).jobs()}
    qemu, local = jobs["qemu-aarch64"], jobs["local"]
    monkeypatch.setenv("CI", "true")
    assert arms(qemu, None, None) and not arms(local, None, None)
    assert arms(local, True, None) and arms(local, None, True)
    assert not arms(qemu, False, True) and not arms(qemu, None, False)
    monkeypatch.delenv("CI")
    assert not arms(qemu, None, None) and not arms(local, None, None)


def failing_measurement(evidence):
    h = Histogram(counts={1: 10, 3000: 1}, bucket_us=1.0, size=5000)
    out = ToolOutput(path="c.json", tool="cyclictest",
                     threads=[ThreadResult(0, 1, 11, 1.0, 300.0, 3000.0, 0, h)])
    m = Measurement(MeasurementKey("qemu-aarch64", "rt", "cyclictest", "fifo-hog"), out, ["x"], evidence=evidence)
    return judge(m, Budget(max_us=2000.0))


def test_gate_junit_and_report_carry_the_evidence(tmp_path):
    ev = {"dir": "cyclictest@fifo-hog/evidence", "summary": "preempted by hog (pid 5, RT prio 98) for 2900 us on CPU 1"}
    m = failing_measurement(ev)
    assert m.reasons[-1] == ("evidence: preempted by hog (pid 5, RT prio 98) for 2900 us on CPU 1 "
                             "(trace: cyclictest@fifo-hog/evidence)")
    assert failing_measurement(None).reasons[-1].startswith("max 3000 us >= budget")
    run = RunResult("r1", "2026-11-23T00:00:00Z", "t",
                    jobs=[JobResult("qemu-aarch64", "rt", measurements=[m])])
    text = junit_xml([run]).getroot().find(".//failure").text
    assert "evidence: qemu-aarch64/rt/cyclictest@fifo-hog/evidence/ (trace.txt, analysis.json): preempted by hog" in text
    html = write_html_report(run, tmp_path / "report.html").read_text()
    assert "href='qemu-aarch64/rt/cyclictest@fifo-hog/evidence/trace.txt'" in html
    # the model keeps it
    assert Measurement.from_json(m.to_json()).evidence == ev


def test_real_timerlat_stop_names_the_hog(tmp_path):
    """rtla timerlat -T 1999999 under the fifo-hog load (real, qemu-aarch64
    rt): the kernel stopped the trace as timerlat/1 finally ran, so its
    7.6 s sample is only in rtla's summary; the CPU's traced part of the
    wait shows the hog."""
    run = SuiteRun(id="timerlat@fifo-hog", name="timerlat", suite="timerlat", load="fifo-hog",
                   params=SUITES["timerlat"].params({"bucket_us": 100, "entries": 200}), cpus=(0, 1),
                   evidence={"thread_us": 2000000.0, "irq_us": 2000000.0})
    host = tmp_path / run.id
    (host / "evidence").mkdir(parents=True)
    (host / "stdout.txt").write_bytes((FIX / "timerlat-fifo-hog-aarch64-stdout.txt").read_bytes())
    trace = gzip.decompress((FIX / "timerlat-trace-fifo-hog-aarch64-cpu1.txt.gz").read_bytes()).decode()
    from rtlab.judge.evidence import _timerlat_worst
    worst = _timerlat_worst(host, run)
    assert worst == ("thread", 1, 7644147.0)
    r = analyse_timerlat_trace(trace, run.evidence, worst=worst)
    c = r["culprit"]
    assert (c["name"], c["pid"], c["rt_prio"]) == ("stress-ng-cpu", 362, 98)
    assert r["summary"] == (f"timerlat thread 7644147 us: preempted by stress-ng-cpu (pid 362, RT prio 98) "
                            f"for at least {c['duration_us']:.0f} us on CPU 1")
    assert c["duration_us"] > 0.9 * r["window_us"]


def test_a_run_stopped_at_the_breach_is_judged_not_cut_short(tmp_path):
    """cyclictest -b stops the run early: the short run is the breach's
    record (FAIL with evidence), while the same short run without the break
    line is a run cut off by the lab (INFRA)."""
    import json

    from rtlab.run.results import collect

    run = run_of("cyclictest", {"max_us": 2000.0}, duration_s=10, interval_us=1000, histogram_us=5000)
    src = Path(__file__).resolve().parents[1] / "fixtures" / "rt-tests-2.4"
    js = next(p for p in sorted(src.glob("cyclictest*.json")) if "-N" not in p.name)
    for broke in (True, False):
        d = tmp_path / ("broke" if broke else "cut") / run.id
        d.mkdir(parents=True)
        (d / "cyclictest.json").write_bytes(js.read_bytes())
        (d / "exit.json").write_text(json.dumps({"exit_code": 0}))
        (d / "stdout.txt").write_text("# Break thread: 238\n# Break value: 3300928\n" if broke else "")
        key = MeasurementKey("qemu-aarch64", "rt", "cyclictest", "idle")
        (m,) = collect(d.parent, key, SUITES["cyclictest"], run)
        cycles = max(t.cycles for t in m.output.threads)
        assert cycles < 0.9 * 10000  # the fixture is short of this run's 10 s / 1 ms
        if broke:
            assert m.verdict is None, m.reasons  # left to the gate, which judges the samples
        else:
            assert m.verdict == Verdict.INFRA and "cut short" in " ".join(m.reasons)


def test_no_culprit_says_why():
    m = failing_measurement({"dir": "cyclictest@idle/evidence", "summary": None,
                             "why": "no kernel trace on this board (tracefs not writable)"})
    assert m.reasons[-1] == ("evidence: no culprit named: no kernel trace on this board (tracefs not writable) "
                             "(trace: cyclictest@idle/evidence)")


def test_a_wake_up_after_the_json_was_written_still_fails_the_budget(tmp_path):
    """A real capture (fixtures/evidence/COMMANDS.md): the FIFO hog held
    cyclictest's CPU 1 thread past the end of -D, so rt-tests 2.4 wrote its
    JSON (thread 1: max 1382641 us) before that thread woke 3184845 us late
    and broke at -b. Only the closing summary printed after the join holds
    that sample; judged on the JSON alone the 2 s budget passed."""
    import json

    from rtlab.run.results import collect

    run = run_of("cyclictest", {"max_us": 2000000.0}, duration_s=6, interval_us=10000, histogram_us=20000)
    src = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"
    key = MeasurementKey("qemu-aarch64", "rt", "cyclictest", "fifo-hog")
    summary = (src / "cyclictest-late-wakeup-fifo-hog-aarch64-stdout.txt").read_text()
    maxima = {}
    for name, stdout in (("summary", summary), ("none", ""),
                         ("garbled", summary.replace("# Max Latencies: 10704", "# Max Latencies: 1e4"))):
        d = tmp_path / name / run.id
        d.mkdir(parents=True)
        (d / "cyclictest.json").write_bytes((src / "cyclictest-late-wakeup-fifo-hog-aarch64.json").read_bytes())
        (d / "exit.json").write_text(json.dumps({"exit_code": 0}))
        (d / "stdout.txt").write_text(stdout)
        (m,) = collect(d.parent, key, SUITES["cyclictest"], run)
        if name == "garbled":  # hostile: named, never guessed around
            assert any("Max Latencies" in r and "stdout.txt" in r for r in m.reasons), m.reasons
            continue
        maxima[name] = [t.max_us for t in m.output.threads]
        if name == "summary":
            judged = judge(m, Budget(max_us=2000000.0))
            assert judged.verdict == Verdict.FAIL, judged.reasons
    assert maxima == {"summary": [10704.0, 3184845.0], "none": [10704.0, 1382641.0]}


def test_the_closing_summary_is_read_as_the_histogram_layout_reads_it():
    """-H adds a sum column to every summary line: the maxima are the
    threads' only; -N's are nanoseconds (a hand-written two-thread text in
    the layout of a real `cyclictest -q -h/-H` stdout)."""
    from rtlab.parsers.rttext import summary_maxima

    text = ("# /dev/cpu_dma_latency set to 0us\n# Histogram\n000001 000002 000001 000003\n"
            "# Total: 000000002 000000001 000000003\n# Min Latencies: 00001 00001\n"
            "# Avg Latencies: 00001 00001\n# Max Latencies: 02503 00364 02503\n"
            "# Histogram Overflows: 00000 00000 00000\n")
    assert summary_maxima(text, "stdout.txt") == [2503.0, 364.0]
    assert summary_maxima(text, "stdout.txt", nsecs=True) == [2.503, 0.364]
    assert summary_maxima("T: 0 ( 1) P:90 I:1000 C: 10 Min: 1 Act: 1 Avg: 1 Max: 9\n", "stdout.txt") is None


def test_the_closing_summary_of_a_nanosecond_run_is_read_in_the_units_its_json_states(tmp_path):
    """A real `cyclictest -N -h 30000` pair (fixtures/rt-tests-2.4/COMMANDS.md)
    judged with no -N in the run's own arguments: the summary's units come
    from the JSON (resolution_in_ns), so its maxima, in ns, leave the JSON's
    maxima as they are instead of raising them a thousandfold."""
    from rtlab.parsers import parse_file

    src = Path(__file__).resolve().parents[1] / "fixtures" / "rt-tests-2.4"
    run = run_of("cyclictest")
    assert "-N" not in SUITES["cyclictest"].command(run)
    (tmp_path / "cyclictest.json").write_bytes((src / "cyclictest-N-h30000.json").read_bytes())
    (tmp_path / "stdout.txt").write_bytes(gzip.decompress((src / "cyclictest-N-h30000.txt.gz").read_bytes()))
    out = SUITES["cyclictest"].parse_output(tmp_path, run)
    json_only = parse_file(src / "cyclictest-N-h30000.json", tool="cyclictest")
    assert [t.max_us for t in out.threads] == [t.max_us for t in json_only.threads]
    assert all(t.max_us < 1000 for t in out.threads), [t.max_us for t in out.threads]
