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

import pytest
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


def _kill_all(marker, spare=()):
    """SIGKILL to every process of this test's run (its environment carries the marker), but *spare*."""
    for _ in range(3):
        pids = [int(p.split()[0]) for p in processes_of(marker) if int(p.split()[0]) not in spare]
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

    res = rtlab("gate", "--budgets", run_dir / "budgets.yaml", run_dir)  # the test campaign's, not the lab's
    assert res.returncode == 2, res.stdout + res.stderr
    done = len(st["segments"]) * 5
    assert f"stopped at 00:00:{done:02d} of 00:00:30" in res.stdout, res.stdout
    assert "PASS" not in res.stdout.split("Verdict:")[-1]
    cycles = int(re.search(r"^cycles\s+([\d,]+)", res.stdout, re.M).group(1).replace(",", ""))
    assert cycles >= kept

    # `rtlab report` shows what was kept, marked incomplete (not "no run.json")
    rep = rtlab("report", run_dir)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "incomplete, rtlab stopped before writing run.json" in rep.stdout
    assert f"00:00:{done:02d}/00:00:30" in rep.stdout and "Verdict: INFRA" in rep.stdout, rep.stdout

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


# make test-long: checkpoint and resume are proven by
#   test_sigkill_keeps_checkpoints_gate_judges_them_and_resume_completes
@pytest.mark.long
def test_console_lost_mid_soak_is_infra_with_the_checkpointed_samples(tmp_path, campaign, board_file):
    c = campaign([_board(board_file, tmp_path, "local-soak-console")], suites=SOAK)
    marker = tmp_path
    proc = _start(tmp_path, c, marker)
    try:
        _, st = _wait_segments(tmp_path, proc, 2)
        # the console's shell (the parent of the running cyclictest) dies: the console is lost
        # (right after a checkpoint the next segment's cyclictest may not have started: look again)
        shells: set[int] = set()
        t0 = time.monotonic()
        while not shells and time.monotonic() - t0 < 30 and proc.poll() is None:
            for line in processes_of(marker):
                pid = int(line.split()[0])
                if "cyclictest" in line:
                    try:
                        shells.add(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))
                    except OSError:  # the segment ended meanwhile
                        pass
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
    res = rtlab("gate", "--budgets", run_dir / "budgets.yaml", run_dir)  # the test campaign's, not the lab's
    assert res.returncode == 2, res.stdout
    assert "stopped at 00:00:" in res.stdout and "of 00:00:30" in res.stdout
    run = json.loads((run_dir / "run.json").read_text())
    (m,) = run["jobs"][0]["measurements"]
    assert m["verdict"] == "infra"
    assert sum(t["cycles"] for t in m["output"]["threads"]) == _samples(final) >= _samples(st)


# make test-long: one more soak; checkpoint and resume are proven by the SIGKILL test, the soak dashboard's
#   query on live-published checkpoints by test_store.py::test_soak_dashboard_shows_the_last_checkpoint
@pytest.mark.long
def test_checkpoints_reach_influxdb_while_the_soak_runs(tmp_path, tmp_path_factory, campaign, board_file):
    """Live: each checkpoint is in a real influxd (measurement soak_progress)
    before the run ends, with the samples and maximum its checkpoint held;
    the terminal shows elapsed, ETA, samples and the current max; the run's
    own points follow with the pWCET's refusal (6 blocks: too few)."""
    from rtlab.store import InfluxV1, LocalInfluxd, rows

    srv = LocalInfluxd(tmp_path_factory.mktemp("soak-influx")).start()
    try:
        db = InfluxV1(srv.url, "t_soak_live")
        c = campaign([_board(board_file, tmp_path, "local-soak-live")], suites=SOAK)
        log = open(tmp_path / "rtlab.log", "w")
        env = {**os.environ, "RTLAB_INFLUX_URL": srv.url, "RTLAB_INFLUX_DB": "t_soak_live",
               "RTLAB_STATE_DIR": str(tmp_path / "state"), "RTLAB_SOAK_TEST_MARKER": str(tmp_path)}
        proc = subprocess.Popen([*RTLAB, "run", "--campaign", str(c), "--results", str(tmp_path / "results")],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        seen_live = None
        try:
            t0 = time.monotonic()
            while proc.poll() is None and time.monotonic() - t0 < 900:
                try:
                    got = rows(db.query('SELECT "segments", "samples" FROM "soak_progress" WHERE "thread" = \'all\''))
                except Exception:  # noqa: BLE001 - the database appears with the first checkpoint
                    got = []
                if len(got) >= 2 and seen_live is None:
                    cp_path, _ = _checkpoint(tmp_path)
                    seen_live = (len(got), (cp_path.parents[3] / "run.json").exists())
                time.sleep(0.5)
            rc = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
            _kill_all(tmp_path, spare={srv.pid})  # the influxd inherited the test's environment
        out = (tmp_path / "rtlab.log").read_text()
        assert rc == 0, out[-3000:]
        assert seen_live is not None and seen_live[1] is False, seen_live  # points came before the run ended
        cp_path, final = _checkpoint(tmp_path)
        cum, total = [], 0
        for s in final["segments"]:
            total += s["cycles"]
            cum.append(total)
        got = rows(db.query('SELECT "segments", "samples", "max_us", "elapsed_s", "planned_s", "eta_s" '
                            'FROM "soak_progress" WHERE "thread" = \'all\' AND "board" = \'local-soak-live\''))
        assert [r["segments"] for r in got] == [1, 2, 3, 4, 5, 6]  # one point per checkpoint, in order
        assert [r["samples"] for r in got] == cum
        assert [r["elapsed_s"] for r in got] == [5.0 * k for k in range(1, 7)] and got[-1]["eta_s"] == 0
        maxima = [max(s["max_us"] for s in final["segments"][:k]) for k in range(1, 7)]
        assert [r["max_us"] for r in got] == maxima
        per_thread = rows(db.query('SELECT "samples" FROM "soak_progress" WHERE "thread" != \'all\' GROUP BY "thread"'))
        assert len(per_thread) == 6 * len(final["threads"])
        # the terminal: a progress line per checkpoint, the last one complete
        last = re.findall(r"checkpoint 6/6: 00:00:30 of 00:00:30, ETA 00:00:00, (\d+) samples, max ([\d.]+) us", out)
        assert last and int(last[-1][0]) == total
        # the run's own points at its end: the verdict with the pWCET's refusal beside max_us
        (v,) = rows(db.query('SELECT "max_us", "pwcet_refused" FROM "verdict" WHERE "scope" = \'measurement\''))
        assert v["pwcet_refused"].startswith("cannot estimate: only 6 block maxima")
    finally:
        srv.stop()
