"""Baselines read back from a real influxd (Debian's 1.6): the last K runs of
a branch, a pinned baseline that drift cannot move, a store that is down
(exit 2, never a silent pass)."""
import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT, rtlab
from rtlab.store import InfluxV1, LocalInfluxd, Session, StoreConfig

sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_compare import run  # noqa: E402


@pytest.fixture(scope="module")
def influx(tmp_path_factory):
    srv = LocalInfluxd(tmp_path_factory.mktemp("rtlab-state"))
    srv.start()
    c = InfluxV1(srv.url, "baselines")
    c.create_database()
    yield srv, c
    srv.stop()


def publish(influx, tmp_path, run_id, p99, minute, branch="main"):
    srv, c = influx
    r = run(run_id, p99)
    r.started = f"2026-11-23T10:{minute:02d}:00Z"
    r.commit = {"sha": f"{minute:040x}", "branch": branch}
    cfg = StoreConfig(url=srv.url, database="baselines", spool_dir=str(tmp_path / "spool")).normalized()
    rep = Session(cfg, progress=lambda *_: None).publish(r)
    assert rep.ok, rep.errors
    return r


def candidate(tmp_path, name, p99s):
    dirs = []
    for i, v in enumerate(p99s):
        r = run(f"{name}{i}", v)
        d = tmp_path / r.run_id
        d.mkdir()
        (d / "run.json").write_text(json.dumps(r.to_json()))
        dirs.append(d)
    return dirs


def test_last_k_runs_of_a_branch_pins_and_store_down(influx, tmp_path):
    srv, _ = influx
    env = {"RTLAB_INFLUX_URL": srv.url, "RTLAB_INFLUX_DB": "baselines", "RTLAB_STATE_DIR": str(tmp_path)}
    # main's history: five runs at p99 ~24 us; another branch far higher
    for i, v in enumerate([24, 25, 23, 26, 24]):
        publish(influx, tmp_path, f"main{i}", v, i)
    publish(influx, tmp_path, "other0", 90, 6, branch="feature")
    same = candidate(tmp_path, "same", [25, 23, 24])
    worse = candidate(tmp_path, "worse", [50, 55, 48])

    res = rtlab("compare", "--baseline-store", "--branch", "main", "--last", "5", "--candidate", *same, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "baseline: store: last 5 runs of branch main, campaign c (5 runs)" in res.stdout
    assert "3 runs vs 5" in res.stdout
    # every verdict records the baseline it used
    v = json.loads((same[0] / "compare.json").read_text())
    assert sorted(v["baseline"]["runs"]) == [f"main{i}" for i in range(5)]

    res = rtlab("compare", "--baseline-store", "--candidate", *worse, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "qemu-aarch64/rt/cyclictest/idle: p99" in res.stdout and ": REGRESSION" in res.stdout

    # pin main now; then main drifts up (a noisy or slowly regressing history)
    res = rtlab("baseline", "pin", "main-pin", "--like", same[0], "--branch", "main", "--last", "5", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "main0, main1, main2, main3, main4" in res.stdout
    for i, v in enumerate([50, 52, 49, 51, 50]):
        publish(influx, tmp_path, f"drift{i}", v, 10 + i)
    # against the drifted last 5, the worse candidate looks fine ...
    res = rtlab("compare", "--baseline-store", "--last", "5", "--candidate", *worse, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    # ... against the pin it is the regression it is
    res = rtlab("compare", "--pin", "main-pin", "--candidate", *worse, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "baseline pinned as main-pin" in res.stdout
    res = rtlab("compare", "--pin", "nope", "--candidate", *worse, env=env)
    assert res.returncode == 2 and "no baseline pinned as 'nope'" in res.stderr

    # no history for this branch: cannot decide, exit 2 naming the key
    res = rtlab("compare", "--baseline-store", "--branch", "never", "--candidate", *same, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "empty baseline" in res.stdout

    # the store is down: exit 2, never a pass
    down = {**env, "RTLAB_INFLUX_URL": "http://127.0.0.1:9"}
    res = rtlab("compare", "--baseline-store", "--candidate", *same, env=down)
    assert res.returncode == 2 and "Connection refused" in res.stderr, res.stdout + res.stderr
