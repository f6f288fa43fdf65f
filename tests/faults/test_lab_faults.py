"""Lab faults on the local board: a load that dies mid-measurement, a store
that is down. Each asserts the verdict, the exit code, the raw files kept
and that nothing of the run is left running."""
import json
import time
from pathlib import Path

from rtlab.run.joblife import board_workdir

from .conftest import kill_leftovers, leftovers, rtlab


def _run_dir(tmp_path: Path) -> Path:
    (d,) = [p for p in (tmp_path / "r").iterdir() if p.name != "latest" and p.is_dir()]
    return d


def test_load_killed_mid_run_is_infra_raw_files_kept_nothing_left(tmp_path, write_campaign):
    path = write_campaign("boards: [local]\nsuites:\n  - suite: cyclictest\n    loads: [cpu]\n"
                          "    params: {duration_s: 4, load_opts: {cpu: {die_after_s: 1}}}\n")
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks"), "RTLAB_FAULT_TEST": str(tmp_path)}
    try:
        res = rtlab("run", "--campaign", path, "--results", tmp_path / "r", "--no-publish", env=env, timeout=300)
    finally:
        time.sleep(0.5)
        left = leftovers(str(tmp_path))
        kill_leftovers(str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    run_dir = _run_dir(tmp_path)
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    (m,) = job["measurements"]
    assert job["verdict"] == "infra" and m["verdict"] == "infra"
    assert any("LoadDied" in r and "cpu" in r for r in m["reasons"]), m["reasons"]
    raw = run_dir / "local" / "host" / "cyclictest@cpu"
    assert (raw / "cyclictest.json").is_file() and (raw / "load-cpu.json").is_file()
    assert not left, left
    wd = board_workdir(run_dir.name, "local", "host")
    assert not leftovers(wd) and not Path(wd).exists()


def test_store_down_keeps_the_verdict_and_spools_every_point(tmp_path, write_campaign):
    path = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {duration_s: 1}}\n")
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks"), "RTLAB_INFLUX_URL": "http://127.0.0.1:9",
           "RTLAB_STATE_DIR": str(tmp_path / "state")}
    res = rtlab("run", "--campaign", path, "--results", tmp_path / "r", env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr  # the store is not the verdict
    assert "Verdict: PASS" in res.stdout and "spooled" in res.stdout
    spool = list((tmp_path / "state" / "spool").glob("*.lp"))
    assert spool and (_run_dir(tmp_path) / "run.json").is_file()
    rep = rtlab("publish", "--replay", env=env, timeout=120)
    from rtlab.store import Spool
    left = Spool(tmp_path / "state" / "spool").pending_points()
    assert left > 0 and rep.returncode == 2
    assert f"0 points sent, {left} points left" in rep.stdout and "connection refused (nothing listens there)" in rep.stdout
    assert not leftovers(str(tmp_path))
