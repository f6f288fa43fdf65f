"""Long runs survive a kill by default (#40): the nightly campaign's
cyclictest runs in checkpointed segments (suite cyclictest-soak, still filed
as `cyclictest`), so a run SIGKILLed part-way keeps every finished segment
and `rtlab gate` and `rtlab report` show them, marked incomplete; a plain
cyclictest longer than one segment is said at load, naming file and key.
On the local board (this machine), the nightly entry with 2 s segments."""
import json
import logging
import signal
import time
import uuid

import yaml

from rtlab.plan.campaign import load_campaign

from .conftest import ROOT, kill_leftovers, leftovers, rtlab, start_rtlab, wait_for_line

NIGHTLY = ROOT / "campaigns" / "nightly-soak.yaml"


def test_every_nightly_cyclictest_longer_than_a_segment_is_checkpointed():
    c = load_campaign(NIGHTLY)
    long_ones = [e for e in c.suites if e.params.get("duration_s", 0) > 60]
    assert long_ones, "the nightly campaign has no long cyclictest"
    for e in long_ones:
        assert e.suite == "cyclictest-soak", e
        assert e.name == "cyclictest"  # stored, budgeted and compared as before
        assert e.params["duration_s"] > e.params["checkpoint_s"]


def test_a_plain_cyclictest_longer_than_a_segment_is_said_at_load(write_campaign, caplog):
    path = write_campaign("boards: [local]\nsuites:\n  - suite: cyclictest\n    params: {duration_s: 600}\n"
                          "  - suite: cyclictest\n    name: short\n    params: {duration_s: 60}\n")
    with caplog.at_level(logging.WARNING, logger="rtlab.plan.campaign"):
        load_campaign(path)
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"{path}: suites[0].params.duration_s: 600 s of cyclictest in one piece"), said
    assert "cyclictest-soak" in said


def test_a_nightly_cyclictest_killed_part_way_keeps_its_checkpoints_for_gate_and_report(tmp_path, write_campaign):
    (entry,) = yaml.safe_load(NIGHTLY.read_text())["suites"]
    marker = f"rtlab-fault-{uuid.uuid4().hex[:12]}"  # unique across xdist workers (tmp_path names are not)
    entry.update(loads=["idle"], overrides={})
    entry["params"].update(duration_s=8, checkpoint_s=2, extra_args=[marker])
    path = write_campaign("boards: [local]\n" + yaml.safe_dump({"suites": [entry]}))
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks")}
    proc = start_rtlab(["run", "--campaign", path, "--results", tmp_path / "r", "--no-publish"], env)
    try:
        lines = wait_for_line(proc, "checkpoint 2/4", 120)
        proc.send_signal(signal.SIGKILL)  # the runner itself, as a CI runner gone would leave it
        proc.wait(timeout=30)
        for _ in range(60):  # its job ends with it (rtlab.run.joblife)
            if not leftovers(marker) + leftovers(str(tmp_path)):
                break
            time.sleep(0.5)
        still = leftovers(marker) + leftovers(str(tmp_path))
    finally:
        proc.kill()
        kill_leftovers(marker)
        kill_leftovers(str(tmp_path))
    assert not still, still
    run_id = next(ln for ln in lines if "] run " in ln).split("] run ")[1].split(":")[0]
    run_dir = tmp_path / "r" / run_id
    assert not (run_dir / "run.json").exists()
    state = json.loads((run_dir / "local" / "host" / "cyclictest@idle" / "checkpoint.json").read_text())
    kept = len(state["segments"])
    assert 2 <= kept < 4 and all(s["cycles"] > 0 for s in state["segments"]), state["segments"]
    done = f"00:00:{kept * 2:02d}"

    gate = rtlab("gate", "--budgets", run_dir / "budgets.yaml", run_dir, timeout=120)
    assert gate.returncode == 2, gate.stdout + gate.stderr  # INFRA, never PASS
    assert f"stopped at {done} of 00:00:08" in gate.stdout, gate.stdout
    assert "PASS" not in gate.stdout.split("Verdict:")[-1]

    rep = rtlab("report", run_dir, timeout=120)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "incomplete, rtlab stopped before writing run.json" in rep.stdout, rep.stdout
    assert f"{done}/00:00:08" in rep.stdout and "Verdict: INFRA" in rep.stdout, rep.stdout
