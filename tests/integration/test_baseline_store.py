"""Baselines read back from a real influxd (Debian's 1.6): the last K runs of
a branch, a pinned baseline that drift cannot move, a store that is down
(exit 2, never a silent pass)."""
import dataclasses
import json
import sys

import pytest

from conftest import ROOT, rtlab
from rtlab.store import InfluxV1, LocalInfluxd, Session, StoreConfig

sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_compare import run  # noqa: E402

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light

BUDGETS = ROOT / "budgets" / "default.yaml"
#: the operator's policy for these comparisons: p99 and p99.9 on every class
#: (the synthetic runs are qemu-aarch64 at microsecond latencies, which the
#: lab's qemu-tcg policy, the max at x2 and +20 ms, would not gate)
POLICY = ROOT / "tests" / "fixtures" / "policy-p99.yaml"


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
    # five candidate runs: the sequential verdict's first look (rtlab.verdict.compare)
    same = candidate(tmp_path, "same", [25, 23, 24, 24, 25])
    worse = candidate(tmp_path, "worse", [50, 55, 48, 52, 51])

    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--branch", "main", "--last", "5", "--candidate", *same, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "baseline: store: last 5 runs of branch main, campaign c (5 runs)" in res.stdout
    assert "5 runs vs 5" in res.stdout and "look 1 at 5 runs" in res.stdout
    # every verdict records the baseline it used
    v = json.loads((same[0] / "compare.json").read_text())
    assert sorted(v["baseline"]["runs"]) == [f"main{i}" for i in range(5)]

    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--candidate", *worse, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "qemu-aarch64/rt/cyclictest/idle: p99" in res.stdout and ": REGRESSION" in res.stdout

    # pin main now; then main drifts up (a noisy or slowly regressing history)
    res = rtlab("baseline", "pin", "main-pin", "--like", same[0], "--branch", "main", "--last", "5", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "main0, main1, main2, main3, main4" in res.stdout
    for i, v in enumerate([50, 52, 49, 51, 50]):
        publish(influx, tmp_path, f"drift{i}", v, 10 + i)
    # against the drifted last 5, the worse candidate looks fine ...
    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--last", "5", "--candidate", *worse, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    # ... against the pin it is the regression it is
    res = rtlab("compare", "--budgets", POLICY, "--pin", "main-pin", "--candidate", *worse, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "baseline pinned as main-pin" in res.stdout
    res = rtlab("compare", "--pin", "nope", "--candidate", *worse, env=env)
    assert res.returncode == 2 and "no baseline pinned as 'nope'" in res.stderr

    # no history for this branch: cannot decide, exit 2 naming the key
    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--branch", "never", "--candidate", *same, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "empty baseline" in res.stdout
    # ... but the gate of a branch with no baseline yet is not red for it:
    # it says so and judges the budgets alone
    res = rtlab("gate", *same, "--budgets", str(BUDGETS), "--baseline-store", "--branch", "never", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "gate: regression verdict: no baseline yet: branch never has no runs of campaign" in res.stdout
    assert "gate: exit 0 (budgets PASS, regression verdict NO BASELINE YET)" in res.stdout

    # the store is down: exit 2, never a pass (the gate's too)
    down = {**env, "RTLAB_INFLUX_URL": "http://127.0.0.1:9"}
    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--candidate", *same, env=down)
    assert res.returncode == 2 and "connection refused (nothing listens there)" in res.stderr, res.stdout + res.stderr
    res = rtlab("gate", *same, "--budgets", str(BUDGETS), "--baseline-store", "--branch", "never", env=down)
    assert res.returncode == 2 and "cannot decide" in res.stdout, res.stdout + res.stderr


def two_threads(r):
    """The run with a second thread (its histogram shifted by 3 us, and one
    sample beyond the range): a read-back must add the threads' buckets."""
    from rtlab.core.model import Histogram, ThreadResult

    (m,) = r.measurements()
    t = m.output.threads[0]
    h = t.histogram
    h2 = Histogram(counts={i + 3: c for i, c in h.counts.items()}, bucket_us=h.bucket_us, size=h.size,
                   overflows=1)
    m.output.threads.append(ThreadResult(thread=1, cpu=1, cycles=t.cycles + 1, min_us=4, avg_us=14,
                                         max_us=h.size * h.bucket_us + 50, overflows=1, histogram=h2))
    return r


def test_baseline_from_the_store_brings_its_histograms_back(influx, tmp_path):
    """The store holds every run's histogram (latency_hist): a baseline read
    back carries it, threads added as the run's own combined histogram, with
    its range and overflows, so the comparison report overlays both sides
    and a percentile beyond the range is known to be at least the range."""
    from rtlab.verdict import baseline as bl

    srv, c = influx
    env = {"RTLAB_INFLUX_URL": srv.url, "RTLAB_INFLUX_DB": "baselines", "RTLAB_STATE_DIR": str(tmp_path)}
    published = []
    for i, v in enumerate([24, 25, 23, 26]):
        r = two_threads(run(f"hist{i}", v))
        r.started = f"2026-11-23T11:{i:02d}:00Z"
        r.commit = {"sha": f"{i:040x}", "branch": "hist"}
        cfg = StoreConfig(url=srv.url, database="baselines", spool_dir=str(tmp_path / "spool")).normalized()
        assert Session(cfg, progress=lambda *_: None).publish(r).ok
        published.append(r)
    (key,) = {m.key for m in published[0].measurements()}
    side = bl.read_baseline(c, [key], "c", "hist", 10)
    reps = sorted(side.keys[key], key=lambda x: x.run_id)
    assert [x.run_id for x in reps] == ["hist0", "hist1", "hist2", "hist3"]
    for r, x in zip(published, reps):
        want = next(r.measurements()).output.combined().histogram
        assert x.histogram is not None, f"{x.run_id}: no histogram read back"
        assert x.histogram.counts == want.counts and x.histogram.overflows == want.overflows == 1
        assert x.histogram.size == want.size and x.histogram.bucket_us == want.bucket_us

    # through the CLI: the comparison report overlays baseline and candidate
    cand = candidate(tmp_path, "hcand", [60, 66, 58, 62, 61])  # the first look: 5 runs
    html = tmp_path / "cmp.html"
    res = rtlab("compare", "--budgets", POLICY, "--baseline-store", "--branch", "hist", "--last", "4", "--candidate", *cand,
                "--html", html, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    text = html.read_text()
    assert text.count("<polyline") == 2, "both sides' histograms drawn"
    assert "baseline (4 runs)" in text

    # a percentile among the overflows comes back censored at the range
    # (known to be >= 100 ms), not unknowable
    r = run("over0", 24)
    r.started, r.commit = "2026-11-23T12:00:00Z", {"sha": "f" * 40, "branch": "over"}
    t = next(r.measurements()).output.threads[0]
    # 5 of 1005 samples beyond the range: p99.9 among them
    t.histogram = dataclasses.replace(t.histogram, overflows=5)
    cfg = StoreConfig(url=srv.url, database="baselines", spool_dir=str(tmp_path / "spool")).normalized()
    assert Session(cfg, progress=lambda *_: None).publish(r).ok
    (x,) = bl.read_baseline(c, [key], "c", "over", 1).keys[key]
    assert x.values["p99.9"] is None and x.censored["p99.9"] == t.histogram.size * t.histogram.bucket_us
    assert x.values["p99"] == t.percentiles_us["99"]
