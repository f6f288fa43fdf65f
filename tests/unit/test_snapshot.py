"""System snapshots: taken of this machine through the same shell interface
the boards use (a local subprocess shell, as the local board's console),
parsed, and the differences named in lines people read."""
from __future__ import annotations

import copy
import subprocess

from rtlab.report import snapshot
from rtlab.report.snapshot import diff_snapshots, parse_interrupts


class LocalShell:
    """This machine's sh, answering like BoardShell.run (lines, exit code)."""

    def run(self, cmd, timeout=30.0):
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.returncode


def test_snapshot_of_this_machine():
    sh = LocalShell()
    snap = snapshot.finish(snapshot.take(sh), snapshot.counters(sh))
    assert snap["kernel"]["release"] == subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert snap["cmdline"] == open("/proc/cmdline").read().strip()
    assert snap["clocksource"]["current"] in snap["clocksource"]["available"]
    assert set(snap["rt_throttling"]) == {"sched_rt_runtime_us", "sched_rt_period_us"}
    assert all(isinstance(v, int) for v in snap["rt_throttling"].values())
    # /proc/interrupts: one count per CPU for every numbered IRQ
    ncpu = len(open("/proc/interrupts").readline().split())
    nums = {k: v for k, v in snap["interrupts"].items() if k.isdigit()}
    assert nums and all(len(v["counts"]) == ncpu for v in nums.values())
    assert set(snap["irq_affinity"]) >= set(nums) - {"0", "2"}  # IRQs with a /proc/irq/N dir
    # counters only grow: the delta over (almost) no time is never negative
    assert all(x >= 0 for v in snap["delta"]["interrupts"].values() for x in v)
    assert "TIMER" in snap["softirqs"] and len(snap["softirqs"]["TIMER"]) == ncpu
    lines = snapshot.summary_lines(snap)
    assert lines[0].startswith(f"kernel {snap['kernel']['release']}")
    assert diff_snapshots(snap, snap) == []


def base():
    return {
        "kernel": {"release": "6.1.0-50-rt-amd64", "config_sha256": "a" * 64},
        "cmdline": "console=ttyS0 isolcpus=1",
        "clocksource": {"current": "tsc", "available": ["tsc", "hpet"]},
        "irq_affinity": {"42": "0-1", "43": "0"},
        "interrupts": {"42": {"name": "PCI-MSI 512000-edge eth0", "counts": [5, 6]},
                       "LOC": {"name": "Local timer interrupts", "counts": [100, 100]}},
        "cpufreq": {"0": {"governor": "performance"}, "1": {"governor": "performance"}},
        "idle": {"0": [{"name": "POLL", "disable": False}, {"name": "C6", "disable": True}]},
        "rt_throttling": {"sched_rt_runtime_us": 950000, "sched_rt_period_us": 1000000},
        "modules": ["virtio_net"],
        "delta": {"interrupts": {"42": [10, 0], "LOC": [1000, 1000]}},
    }


def test_differences_are_named():
    b = base()
    c = copy.deepcopy(b)
    c["clocksource"]["current"] = "hpet"
    c["irq_affinity"]["42"] = "1"
    c["cpufreq"]["1"]["governor"] = "schedutil"
    c["idle"]["0"][1]["disable"] = False
    c["rt_throttling"]["sched_rt_runtime_us"] = -1
    c["modules"] = ["virtio_net", "e1000e"]
    c["cmdline"] = "console=ttyS0 nohz_full=1"
    c["kernel"]["config_sha256"] = "b" * 64
    c["delta"]["interrupts"]["42"] = [10, 25000]
    assert diff_snapshots(b, c) == [
        f"kernel config {'a' * 12} -> {'b' * 12}",
        "cmdline: +nohz_full=1, -isolcpus=1",
        "clocksource tsc -> hpet",
        "irq 42 (eth0) moved from CPU 0-1 to CPU 1",
        "cpufreq governor of CPU 1 performance -> schedutil",
        "idle state C6 of CPU 0 disabled -> enabled",
        "sched_rt_runtime_us 950000 -> -1",
        "modules loaded: e1000e",
        "irq 42 (eth0) on CPU 1: 0 -> 25000 interrupts during the measurement",
    ]
    # small changes of rates are noise, not differences
    c2 = copy.deepcopy(b)
    c2["delta"]["interrupts"]["LOC"] = [1100, 900]
    assert diff_snapshots(b, c2) == []


def test_parse_interrupts_keeps_named_rows():
    lines = ["           CPU0       CPU1",
             "  1:          9          0   IO-APIC   1-edge      i8042",
             "NMI:          0          1   Non-maskable interrupts",
             "ERR:          0"]
    got = parse_interrupts(lines)
    assert got["1"] == {"name": "IO-APIC 1-edge i8042", "counts": [9, 0]}
    assert got["NMI"]["counts"] == [0, 1] and got["ERR"]["counts"] == [0]


def test_few_short_console_lines():
    """A TCG console answers a command in ~0.3 s and mangles long lines: the
    snapshot is read in a few lines of at most MAX_LINE characters."""
    sent = []

    class Recording(LocalShell):
        def run(self, cmd, timeout=30.0):
            sent.append(cmd)
            return super().run(cmd, timeout)

    snap = snapshot.take(Recording())
    assert snap["interrupts"] and snap["modules"] is not None
    assert len(sent) <= 3 and all(len(c) <= snapshot.MAX_LINE for c in sent)


def test_run_differences_between_two_runs(tmp_path):
    """A real QEMU job's snapshot (tests/fixtures/snapshot, qemu-aarch64 rt)
    as baseline; the candidate's IRQ 13 moved and its clocksource changed."""
    import json
    from pathlib import Path

    real = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "snapshot" / "qemu-aarch64-rt.json").read_text())
    cand = copy.deepcopy(real)
    cand["irq_affinity"]["13"] = "1"
    cand["clocksource"]["current"] = "jiffies"
    for name, snap in (("base", real), ("cand", cand)):
        d = tmp_path / name / "qemu-aarch64" / "rt"
        d.mkdir(parents=True)
        (d / "snapshot.json").write_text(json.dumps(snap))
    irq13 = real["interrupts"]["13"]["name"].split()[-1]
    assert snapshot.run_differences([tmp_path / "base"], [tmp_path / "cand"]) == [
        "qemu-aarch64/rt: clocksource arch_sys_counter -> jiffies",
        f"qemu-aarch64/rt: irq 13 ({irq13}) moved from CPU 0-1 to CPU 1",
    ]
    assert snapshot.run_differences([tmp_path / "base"], [tmp_path / "base"]) == []


def test_compare_report_names_the_system_change(tmp_path, capsys):
    """`rtlab compare` of run dirs: the jobs' snapshots (the real QEMU one,
    and the same with the clocksource and an IRQ's affinity changed) are
    named in its lines, its JSON and its HTML report; the verdict is the
    statistics' alone."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_compare import runs

    from rtlab.cli import main

    real = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "snapshot" / "qemu-aarch64-rt.json").read_text())
    cand = copy.deepcopy(real)
    cand["clocksource"]["current"] = "jiffies"
    cand["irq_affinity"]["13"] = "1"
    dirs = {}
    for side, p99s, snap in (("b", [23, 25, 24, 26, 22], real), ("c", [24, 22, 26, 25, 23], cand)):
        dirs[side] = []
        for r in runs(side, p99s):
            d = tmp_path / r.run_id
            (d / "qemu-aarch64" / "rt").mkdir(parents=True)
            (d / "run.json").write_text(json.dumps(r.to_json()))
            (d / "qemu-aarch64" / "rt" / "snapshot.json").write_text(json.dumps(snap))
            dirs[side].append(str(d))
    html, js = tmp_path / "cmp.html", tmp_path / "cmp.json"
    rc = main(["compare", "--baseline", *dirs["b"], "--candidate", *dirs["c"], "--html", str(html), "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 0 and "compare: NO-REGRESSION" in out  # context, not a verdict
    assert "system changed: qemu-aarch64/rt: clocksource arch_sys_counter -> jiffies" in out
    assert "system changed: qemu-aarch64/rt: irq 13 (" in out and ") moved from CPU 0-1 to CPU 1" in out
    assert json.loads(js.read_text())["system_changes"][0] == "qemu-aarch64/rt: clocksource arch_sys_counter -> jiffies"
    assert "System changes" in html.read_text() and "arch_sys_counter -&gt; jiffies" in html.read_text()
    # the same systems: nothing said
    main(["compare", "--baseline", *dirs["b"], "--candidate", *dirs["b"]])
    assert "system changed" not in capsys.readouterr().out
