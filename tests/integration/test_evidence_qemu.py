"""Evidence at the breach, end to end on qemu-aarch64 with Debian's rt
kernel: a SCHED_FIFO hog (the fifo-hog load, priority 98, 3 s bursts on
CPU 1) above cyclictest (90) and the timerlat threads (95) breaks the 2 s
TCG budget; with evidence armed the gate FAILs naming the hog from the
kernel trace, the trace and analysis are kept next to the raw outputs and
linked from report.html and the JUnit failure; the unchanged (idle) run of
the same boot writes no evidence. The job's system snapshot is checked too."""
import json
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import rtlab
from test_suites_programme import run_dir_of

HOG = {"fifo-hog": {"priority": 98, "burst_ms": 3000, "load_pct": 75}}


@pytest.mark.over_a_minute
def test_breach_fails_with_evidence_naming_the_hog(tmp_path):
    (tmp_path / "budgets.yaml").write_text(yaml.safe_dump(
        {"budgets": {"qemu-tcg": {"*": {"*": {"*": {"max_us": 2000000}}}}}}))
    common = {"load_cpus": [1], "load_opts": HOG}
    # 10 ms: a loaded TCG host misses 1 ms wake-ups, and a run with too few
    # samples is cut short (INFRA) unless it stopped itself at the breach
    c = tmp_path / "campaign.yaml"
    c.write_text(yaml.safe_dump({
        "name": "evidence-test", "budgets": str(tmp_path / "budgets.yaml"),
        "boards": ["qemu-aarch64"], "variants": ["rt"],
        "suites": [
            {"name": "cyclictest", "loads": ["idle", "fifo-hog"],
             "params": {"interval_us": 10000, "duration_s": 6, "priority": 90, "histogram_us": 20000, **common}},
            {"name": "timerlat", "loads": ["fifo-hog"],
             "params": {"duration_s": 6, "bucket_us": 100, "entries": 200, **common}},
        ]}))
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish", "--evidence", timeout=900)
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    run_dir = run_dir_of(res)
    job_dir = run_dir / "qemu-aarch64" / "rt"
    run = json.loads((run_dir / "run.json").read_text())
    ms = {(m["key"]["suite"], m["key"]["load"]): m for j in run["jobs"] for m in j["measurements"]}

    hog = ms[("cyclictest", "fifo-hog")]
    assert hog["verdict"] == "fail"
    ev = [r for r in hog["reasons"] if r.startswith("evidence: ")]
    assert len(ev) == 1 and "preempted by stress-ng-cpu (pid " in ev[0] and ", RT prio 98) for " in ev[0], hog["reasons"]
    assert hog["evidence"]["dir"] == "cyclictest@fifo-hog/evidence"
    analysis = json.loads((job_dir / "cyclictest@fifo-hog" / "evidence" / "analysis.json").read_text())
    assert analysis["culprit"]["name"] == "stress-ng-cpu" and analysis["culprit"]["rt_prio"] == 98
    assert analysis["cpu"] == 1 and analysis["latency_us"] >= 2000000
    # the hog held the CPU for most of the wait
    assert analysis["culprit"]["duration_us"] >= 0.5 * analysis["window_us"]
    trace = (job_dir / "cyclictest@fifo-hog" / "evidence" / "trace.txt").read_text()
    assert "hit latency threshold" in trace and "sched_switch" in trace
    assert "# Break thread:" in (job_dir / "cyclictest@fifo-hog" / "stdout.txt").read_text()
    assert "-b 1999999 --tracemark" in (job_dir / "cyclictest@fifo-hog" / "command.txt").read_text()

    # the unchanged run of the same boot: armed, not broken, no evidence
    idle = ms[("cyclictest", "idle")]
    assert idle["verdict"] == "pass" and idle["evidence"] is None
    assert not (job_dir / "cyclictest@idle" / "evidence").exists()
    assert "-b 1999999 --tracemark" in (job_dir / "cyclictest@idle" / "command.txt").read_text()

    # timerlat stopped at its threshold too, its saved trace analysed
    tl = ms[("timerlat-thread", "fifo-hog")]
    assert tl["verdict"] == "fail" and tl["output"]["metrics"]["stopped"] == 1, tl["reasons"]
    assert (job_dir / "timerlat@fifo-hog" / "evidence" / "trace.txt").is_file()
    assert tl["evidence"]["dir"] == "timerlat@fifo-hog/evidence"
    assert "preempted by stress-ng-cpu (pid " in tl["evidence"]["summary"], tl["evidence"]

    # linked from report.html and the JUnit failure text
    html = (run_dir / "report.html").read_text()
    assert "href='qemu-aarch64/rt/cyclictest@fifo-hog/evidence/trace.txt'" in html
    assert "preempted by stress-ng-cpu" in html
    j = rtlab("junit", run_dir, "-o", tmp_path / "junit.xml")
    assert j.returncode == 0
    cases = {tc.get("name"): tc for tc in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    text = cases["cyclictest@fifo-hog"].find("failure").text
    assert "evidence: qemu-aarch64/rt/cyclictest@fifo-hog/evidence/" in text and "stress-ng-cpu" in text

    # the job's system snapshot, interrupts counted over the measurements
    snap = json.loads((job_dir / "snapshot.json").read_text())
    assert snap["kernel"]["release"] == "6.1.0-50-rt-arm64"
    # Debian's kernel has no /proc/config.gz: the staged config (the boot test proved it runs)
    assert snap["kernel"]["config_source"] == "staged config-6.1.0-50-rt-arm64 (host)"
    assert len(snap["kernel"]["config_sha256"]) == 64
    assert snap["clocksource"]["current"] == "arch_sys_counter"
    assert snap["rt_throttling"] == {"sched_rt_runtime_us": 950000, "sched_rt_period_us": 1000000}
    assert "virtio_net" in snap["modules"] and snap["dmesg_tail"]
    timer = next(k for k, v in snap["interrupts"].items() if "arch_timer" in v["name"])
    assert len(snap["delta"]["interrupts"][timer]) == 2 and min(snap["delta"]["interrupts"][timer]) > 0
    assert sum(snap["delta"]["softirqs"]["TIMER"]) > 0
    assert "System snapshots" in html and "arch_sys_counter" in html
