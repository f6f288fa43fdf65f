"""The programme end to end (`rtlab run`): every suite on the local board and
on a QEMU board, every load started, checked and stopped on a real QEMU
guest (one boot), and a load that dies mid-run made INFRA (exit 2) naming
the load, whether it kills itself or is killed from outside.

The suites and their parameters come from campaigns/programme.yaml (with
durations cut to 2 s): every suite under idle, cyclictest under every load.
"""
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, rtlab

from rtlab.loads import LOADS

PROGRAMME = yaml.safe_load((ROOT / "campaigns" / "programme.yaml").read_text())
EVERY_LOAD = [l.name for l in LOADS.values() if not l.deliberate_breach] + ["stress+network"]
LOOSE = {b: {"*": {"*": {"*": {"max_us": 10000000}}}} for b in ("qemu-tcg", "local")}


def entries(loads_for_cyclictest, duration=2):
    """programme.yaml's entries: every suite under idle; cyclictest under *loads*."""
    out = []
    for e in PROGRAMME["suites"]:
        e = json.loads(json.dumps(e))  # a deep copy
        if e["name"] == "cyclictest-smp" and loads_for_cyclictest != ["idle"]:
            e["loads"] = ["idle"]
        else:
            e["loads"] = loads_for_cyclictest if e["name"] == "cyclictest" else ["idle"]
        if "duration_s" in e.get("params", {}):
            e["params"]["duration_s"] = duration
        if e["name"] == "cyclictest" and loads_for_cyclictest != ["idle"]:
            # a 20 ms histogram prints 20,000 rows: 280 kB over a console busy with a load
            e.setdefault("overrides", {})["qemu-tcg"] = {"histogram_us": 2000}
        out.append(e)
    return out


def write_campaign(tmp_path, boards, variants, suites):
    (tmp_path / "budgets.yaml").write_text(yaml.safe_dump({"budgets": LOOSE}))
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump({"name": "programme-test", "budgets": str(tmp_path / "budgets.yaml"),
                                    "boards": boards, "variants": variants, "suites": suites}))
    return path


def run_dir_of(res) -> Path:
    return Path(res.stdout.split("results: ")[-1].split()[0])


def measurements(run_dir):
    run = json.loads((run_dir / "run.json").read_text())
    return {(j["board"], j["variant"], m["key"]["suite"], m["key"]["load"]): m
            for j in run["jobs"] for m in j["measurements"]}


def has_block(stdout, board, suite, load, variant):
    lines = stdout.splitlines()
    for i, l in enumerate(lines):
        if l.startswith(f"{board} (") and f" · {suite} · {load} · " in l:
            return lines[i + 1].split() == [variant]
    return False


def expected_verdict(m) -> str:
    """Every suite is budgeted here (LOOSE), so all pass but a whole-run
    number that is not a latency and that no check of its tool judged
    (hackbench's seconds): shown, never passed (pi_stress's own check did)."""
    out = m["output"]
    return "shown" if not out["threads"] and out["metrics"].get("failed") != 0 else "pass"


def check_load_ran(raw: Path, name: str, cpus):
    s = json.loads((raw / f"load-{name}.json").read_text())
    assert s["problems"] == [], (raw, s)
    w = s["window"]
    assert w["cpu_s"] > 0 and w["samples"] >= 2 and w["max_stall_s"] <= 5, (raw, w)
    assert s["cpus"] == cpus, (raw, s["cpus"])
    assert (raw / f"load-{name}-samples.txt").exists()
    return s


@pytest.mark.over_a_minute
def test_every_suite_and_every_load_on_a_qemu_guest(tmp_path):
    """One boot of qemu-x86_64 with PREEMPT_RT and CPU 1 isolated: every suite
    of the programme measures; cyclictest runs under every load, which run on
    the housekeeping CPU 0; a load that kills itself mid-run gives exit 2."""
    suites = entries(EVERY_LOAD)
    suites.append({"name": "cyclictest-dies", "suite": "cyclictest", "loads": ["cpu"],
                   "params": {"interval_us": 1000, "duration_s": 6, "histogram_us": 1000,
                              "load_opts": {"cpu": {"die_after_s": 3}}}})
    c = write_campaign(tmp_path, ["qemu-x86_64"], ["rt-iso"], suites)
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish", timeout=1200)
    out = res.stdout
    assert res.returncode == 2, out + res.stderr
    # the dead load is INFRA naming it, and nothing else failed
    assert ("INFRA qemu-x86_64/rt-iso/cyclictest-dies/cpu: rtlab.loads.LoadDied: load cpu: "
            "die_after_s: killing the load; load cpu: died mid-run") in out
    run_dir = run_dir_of(res)
    ms = measurements(run_dir)
    job = run_dir / "qemu-x86_64" / "rt-iso"
    for (_, _, suite, load), m in ms.items():
        if suite == "cyclictest-dies":
            assert m["verdict"] == "infra"
            continue
        assert m["verdict"] == expected_verdict(m), (suite, load, m["reasons"])
        assert m["output"]["threads"] or m["output"]["metrics"], (suite, load)
        assert has_block(out, "qemu-x86_64", suite, load, "rt-iso"), (suite, load)
    assert {(s, l) for (_, _, s, l) in ms} >= {("cyclictest", l) for l in EVERY_LOAD}
    assert {s for (_, _, s, _) in ms} >= {e["name"] for e in PROGRAMME["suites"]}
    # measured on the isolated CPU, loads on the housekeeping CPU
    assert ms[("qemu-x86_64", "rt-iso", "cyclictest", "cpu")]["output"]["threads"][0]["cpu"] == 1
    assert [t["cpu"] for t in ms[("qemu-x86_64", "rt-iso", "cyclictest-smp", "idle")]["output"]["threads"]] == [0, 1]
    for name in EVERY_LOAD:
        raw = job / f"cyclictest@{name}"
        for part in name.split("+"):
            if part == "idle":
                assert "board_busy" in json.loads((raw / "load-idle.json").read_text())
                continue
            s = check_load_ran(raw, part, [0])
            assert s["window"]["window_s"] >= 2  # the whole measurement, and then some
    tp = json.loads((job / "cyclictest@network" / "load-network.json").read_text())["throughput"]
    assert tp["tcp_mbit_s"] > 0 and tp["ping"]["received"] > 0  # QEMU user networking works both ways
    assert json.loads((job / "cyclictest@hackbench" / "load-hackbench.json").read_text())["settings"]["groups"] == 1
    # the load numbers are in the model and in the table
    assert ms[("qemu-x86_64", "rt-iso", "cyclictest", "stress")]["output"]["metrics"]["load.stress.cpu_share"] > 0
    assert "Verdict: INFRA" in out


@pytest.mark.serial  # latency measured on this machine: make test runs it last, alone
def test_every_suite_on_the_local_board(tmp_path):
    c = write_campaign(tmp_path, ["local"], None, entries(["idle", "stress+network"]))
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish")
    assert res.returncode == 0, res.stdout + res.stderr
    ms = measurements(run_dir_of(res))
    assert {s for (_, _, s, _) in ms} == {e["name"] for e in PROGRAMME["suites"]}
    for (_, _, suite, load), m in ms.items():
        assert m["verdict"] == expected_verdict(m), (suite, load, m["reasons"])
        assert has_block(res.stdout, "local", suite, load, "host"), (suite, load)
    assert ms[("local", "host", "pi_stress", "idle")]["output"]["metrics"]["inversions"] > 0
    assert ms[("local", "host", "hackbench", "idle")]["output"]["metrics"]["time_s"] > 0
    # judged by its own check / judged by nothing, and the summary says which
    assert ms[("local", "host", "pi_stress", "idle")]["verdict"] == "pass"
    assert ms[("local", "host", "hackbench", "idle")]["verdict"] == "shown"
    assert "1 shown, not judged" in res.stdout.split("Verdict:")[-1], res.stdout[-600:]
    rtb = ms[("local", "host", "rtbench", "idle")]["output"]["threads"]
    assert {t["extra"]["benchmark"] for t in rtb} >= {"clock_gettime", "wakeup_sem_othercpu"}
    raw = run_dir_of(res) / "local" / "host" / "cyclictest@stress+network"
    check_load_ran(raw, "stress", [0, 1])
    check_load_ran(raw, "network", [0, 1])
    assert "Verdict: PASS" in res.stdout


# make test-long: a killed load is INFRA on the local board in tests/faults/test_lab_faults.py
@pytest.mark.long
def test_a_load_killed_from_outside_is_infra_naming_it(tmp_path):
    """The load's processes are killed (SIGKILL, its whole session) by
    someone else while cyclictest measures: exit 2, the load named."""
    name = f"killed{uuid.uuid4().hex[:6]}"
    c = write_campaign(tmp_path, ["local"], None, [
        {"name": name, "suite": "cyclictest", "loads": ["cpu"],
         "params": {"interval_us": 1000, "duration_s": 6, "histogram_us": 1000}}])
    killed = {}

    def killer():
        # the local board is this machine: its load and tool dirs are here
        # (each job has its own work dir: /tmp/rtlab/jobs/<run>-local-host)
        deadline = time.monotonic() + 120
        started = []
        while not started and time.monotonic() < deadline:
            started = list(Path("/tmp/rtlab/jobs").glob(f"*-local-host/{name}@cpu/stdout.txt"))
            time.sleep(0.1)
        time.sleep(1.5)
        sid = started[0].parents[1] / "loads" / f"{name}@cpu" / "cpu" / "sid" if started else Path("/nonexistent")
        if sid.exists():
            killed["sid"] = int(sid.read_text())
            os.killpg(killed["sid"], signal.SIGKILL)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish")
    t.join(timeout=5)
    assert killed, "the load never started"
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"INFRA local/host/{name}/cpu: rtlab.loads.LoadDied: load cpu: died mid-run" in res.stdout
    m = measurements(run_dir_of(res))[("local", "host", name, "cpu")]
    assert m["verdict"] == "infra" and "cyclictest.json" in " ".join(m["raw"])  # raw files kept
