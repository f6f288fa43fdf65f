"""Soaks that survive (rtlab.soak.checkpoint): cyclictest on the local board in
checkpointed segments; rtlab SIGKILLed part-way, then the board's console
dropped part-way: `rtlab gate` judges what the checkpoints kept as INFRA
"stopped at", never PASS, a breach among the kept samples FAIL; `rtlab run
--resume` measures only the missing segments."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from conftest import RTLAB, ROOT, processes_of, rtlab

SOAK = """
- name: cyclictest-soak
  params: {interval_us: 1000, duration_s: 30, checkpoint_s: 5, histogram_us: 2000}
"""


def _board(board_file, tmp_path, name):
    """The local board under a name of its own (its own board lock: other
    runs on this shared machine hold `local`), whose console shell (started
    with env -i) carries the test's path in its environment, so every
    process of the run can be found and killed."""
    return board_file(name, "local", {"HOME=/root": f"HOME=/root RTLAB_SOAK_MARKER={tmp_path}"})


def _start(tmp_path, campaign_file, marker):
    log = open(tmp_path / "rtlab.log", "w")
    env = {**os.environ, "RTLAB_SOAK_TEST_MARKER": str(marker)}
    return subprocess.Popen([*RTLAB, "run", "--campaign", str(campaign_file), "--results", str(tmp_path / "results"),
                             "--no-publish"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _checkpoint(tmp_path):
    found = list((tmp_path / "results").glob("*/*/host/cyclictest-soak@idle/checkpoint.json"))
    if not found:
        return None, None
    try:
        return found[0], json.loads(found[0].read_text())
    except ValueError:
        raise AssertionError("a half-written checkpoint was readable") from None


def _wait_segments(tmp_path, proc, n, timeout=600):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        path, st = _checkpoint(tmp_path)
        if st is not None and len(st["segments"]) >= n:
            return path, st
        assert proc.poll() is None, (tmp_path / "rtlab.log").read_text()[-2000:]
        time.sleep(0.2)
    raise AssertionError(f"no {n} checkpoints in {timeout} s: " + (tmp_path / "rtlab.log").read_text()[-2000:])


def _kill_all(marker):
    """SIGKILL to every process of this test's run (its environment carries the marker)."""
    for _ in range(3):
        pids = [int(p.split()[0]) for p in processes_of(marker)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)


def _samples(cp_state):
    return sum(s["cycles"] for s in cp_state["segments"])


def test_sigkill_keeps_checkpoints_gate_judges_them_and_resume_completes(tmp_path, campaign, board_file):
    c = campaign([_board(board_file, tmp_path, "local-soak-kill")], suites=SOAK)
    marker = tmp_path
    proc = _start(tmp_path, c, marker)
    try:
        cp_path, st = _wait_segments(tmp_path, proc, 2)
        os.kill(proc.pid, signal.SIGKILL)  # rtlab itself, then everything it started (as a CI runner would)
        proc.wait(timeout=30)
        _kill_all(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_all(marker)
    _, st = _checkpoint(tmp_path)  # what the last checkpoint holds, after every process died
    run_dir = cp_path.parents[3]
    assert not (run_dir / "run.json").exists()
    kept = _samples(st)
    assert kept > 0 and len(st["segments"]) < 6

    res = rtlab("gate", run_dir)
    assert res.returncode == 2, res.stdout + res.stderr
    done = len(st["segments"]) * 5
    assert f"stopped at 00:00:{done:02d} of 00:00:30" in res.stdout, res.stdout
    assert "PASS" not in res.stdout.split("Verdict:")[-1]
    cycles = int(re.search(r"^cycles\s+([\d,]+)", res.stdout, re.M).group(1).replace(",", ""))
    assert cycles >= kept

    # a breach among the kept samples is a FAIL, however the run ended
    tight = tmp_path / "tight.yaml"
    tight.write_text('budgets:\n  local: {"*": {"*": {"*": {max_us: 1}}}}\n')
    res = rtlab("gate", "--budgets", tight, run_dir)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "run incomplete (stopped at" in res.stdout

    # resume: only the missing segments are measured, the kept ones stay as they were
    before = {p.name: (p / "cyclictest.json").read_bytes() for p in (cp_path.parent / "segments").iterdir()
              if p.name < f"{len(st['segments']):04d}"}
    res = rtlab("run", "--resume", run_dir, "--no-publish", timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    final = json.loads(cp_path.read_text())
    assert [s["index"] for s in final["segments"]] == list(range(6))
    for name, data in before.items():
        assert (cp_path.parent / "segments" / name / "cyclictest.json").read_bytes() == data
    run = json.loads((run_dir / "run.json").read_text())
    assert run["verdict"] == "pass"
    (m,) = run["jobs"][0]["measurements"]
    assert m["output"]["metrics"]["soak"]["done_s"] == 30
    assert sum(t["cycles"] for t in m["output"]["threads"]) == _samples(final)


def test_console_lost_mid_soak_is_infra_with_the_checkpointed_samples(tmp_path, campaign, board_file):
    c = campaign([_board(board_file, tmp_path, "local-soak-console")], suites=SOAK)
    marker = tmp_path
    proc = _start(tmp_path, c, marker)
    try:
        _, st = _wait_segments(tmp_path, proc, 2)
        # the console's shell (the parent of the running cyclictest) dies: the console is lost
        shells = set()
        for line in processes_of(marker):
            pid = int(line.split()[0])
            if "cyclictest" in line:
                shells.add(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))
        assert shells, processes_of(marker)
        for pid in shells:
            os.kill(pid, signal.SIGKILL)
        rc = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_all(marker)
    out = (tmp_path / "rtlab.log").read_text()
    assert rc == 2, out[-3000:]
    cp_path, final = _checkpoint(tmp_path)
    assert len(final["segments"]) >= len(st["segments"]) and len(final["segments"]) < 6
    assert final["stopped"]
    run_dir = cp_path.parents[3]
    res = rtlab("gate", run_dir)
    assert res.returncode == 2, res.stdout
    assert "stopped at 00:00:" in res.stdout and "of 00:00:30" in res.stdout
    run = json.loads((run_dir / "run.json").read_text())
    (m,) = run["jobs"][0]["measurements"]
    assert m["verdict"] == "infra"
    assert sum(t["cycles"] for t in m["output"]["threads"]) == _samples(final) >= _samples(st)
