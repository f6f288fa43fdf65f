"""The store against a real influxd (Debian's 1.6.7) started by the tests.

Results come from the real rt-tests run on this machine (cyclictest, pmqtest,
ptsematest), parsed, put in a RunResult, published, read back field by field.
Then: republishing does not duplicate; a server stopped mid-publish loses
nothing (spool, restart, replay); credentials never leak; and every panel,
variable and annotation query of every dashboard runs on the published data
and returns rows.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest

from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult, ToolOutput
from rtlab.parsers import parse_file
from rtlab.store import (InfluxV1, LocalInfluxd, Session, Spool, StoreConfig,
                         load_run, points_for_run, publish_run, rows)
from rtlab.store.lineproto import timestamp
from rtlab.store.schema import MEASUREMENTS, rfc3339

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards" / "json"

# installed by make test (env/apt-packages.txt): missing is a failure, not a skip
assert shutil.which("influxd") and shutil.which("cyclictest"), \
    "needs Debian's influxdb and rt-tests (env/apt-packages.txt)"

SECRET = "pw-Zq8#x!s3cr3t-never-print"
TOKEN = "tok-9f1e-never-print-either"


# ------------------------------------------------------------------ helpers
def parse(path: Path) -> ToolOutput:
    return parse_file(str(path))


TOOLS = {
    # the command of the brief (on a noisy VM a 100 µs histogram overflows:
    # high percentiles unknowable), and one thread per CPU, 4,000 samples
    # each in a 50 ms histogram (per-CPU data; p99.9 known unless more than
    # 4 samples exceed 50 ms)
    "cyclictest": ["cyclictest", "-q", "-D", "1", "-h", "100"],
    "cyclictest-smp": ["cyclictest", "-q", "-D", "1", "-i", "250", "-h", "50000", "-S"],
    "pmqtest": ["pmqtest", "-q", "-S", "-D", "1"],
    "ptsematest": ["ptsematest", "-q", "-S", "-D", "1"],
}


@pytest.fixture(scope="session")
def rt_outputs(tmp_path_factory):
    """Real rt-tests outputs of this machine, run once for the session."""
    d = tmp_path_factory.mktemp("rt-tests")
    procs = {}
    for name, cmd in TOOLS.items():
        assert shutil.which(cmd[0]), f"{cmd[0]} not installed (env/apt-packages.txt)"
        out = d / f"{name}.json"
        procs[name] = (out, subprocess.Popen([*cmd, f"--json={out}"], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True))
    outputs = {}
    for name, (out, p) in procs.items():
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.exists(), f"{name}: rc {p.returncode}: {err}"
        outputs[name] = (out, parse(out))
    return outputs


RTLA = ROOT / "tests" / "fixtures" / "rtla-6.1"


def rtla_outputs() -> dict[str, ToolOutput]:
    """The real rtla 6.1 captures (qemu-aarch64, rt kernel) as the suites parse them."""
    from rtlab.parsers.rtla import parse_osnoise_hist, parse_timerlat_hist

    t = RTLA / "timerlat-hist-aarch64.txt"
    irq, thread = parse_timerlat_hist(t.read_text(), t, bucket=100, entries=200)
    o = RTLA / "osnoise-hist-aarch64.txt"
    return {"timerlat-irq": irq, "timerlat-thread": thread,
            "osnoise": parse_osnoise_hist(o.read_text(), o, bucket=10, entries=500)}


def make_run(outputs, run_id: str, started: datetime, sha: str, subject: str,
             source: str = "merge_request_event", with_infra: bool = True,
             with_rtla: bool = False) -> RunResult:
    """A campaign run built from the real outputs: two variants on the local
    board (one over budget), one QEMU board that did not boot, one tool that
    crashed (infra measurement)."""
    from rtlab.plan.budgets import Budget
    from rtlab.judge.gate import judge

    sysinfo = outputs["cyclictest"][1].sysinfo or {}
    release = sysinfo.get("release", "6.6.0")

    def job(variant, budgets, board="local", arch="x86_64", kernel_suffix=""):
        j = JobResult(board=board, variant=variant, arch=arch, budget_class="local",
                      kernel={"release": release + kernel_suffix, "version": sysinfo.get("version", ""),
                              "cmdline": "console=ttyS0", "preempt": "dynamic", "realtime": False},
                      duration_s=12.5, place_wait_s=3.5)
        for name, suite, load in (("cyclictest", "cyclictest", "idle"),
                                  ("cyclictest-smp", "cyclictest", "hackbench"),
                                  ("pmqtest", "pmqtest", "idle"),
                                  ("ptsematest", "ptsematest", "idle")):
            path, out = outputs[name]
            m = Measurement(MeasurementKey(board, variant, suite, load),
                            ToolOutput.from_json(out.to_json(with_histogram=True)),
                            raw=[path.name])
            judge(m, budgets.get(suite))
            j.measurements.append(m)
        return j

    tight = {"cyclictest": Budget(max_us=20.0, percentiles_us={"99.9": 50.0}),
             "pmqtest": Budget(max_us=100000.0), "ptsematest": Budget(max_us=100000.0)}
    loose = {s: Budget(max_us=1e7) for s in ("cyclictest", "pmqtest", "ptsematest")}
    jobs = [job("rt", tight, kernel_suffix="-rt7-g1a2b3c4d5e6"), job("generic", loose)]
    if with_infra:
        jobs.append(JobResult(board="qemu-aarch64", variant="rt", arch="aarch64", budget_class="qemu-tcg",
                              infra_error="board qemu-aarch64: boot failed: no login prompt in 120 s",
                              duration_s=130.0))
        crashed = JobResult(board="qemu-x86_64", variant="rt", arch="x86_64", budget_class="qemu-tcg",
                            kernel={"release": "6.6.30-rt30"}, duration_s=40.0)
        m = Measurement(MeasurementKey("qemu-x86_64", "rt", "cyclictest", "stress-ng"),
                        ToolOutput("cyclictest.json", "cyclictest", [], return_code=139))
        judge(m, None)  # no threads, crashed: infra
        crashed.measurements.append(m)
        jobs.append(crashed)
    if with_rtla:  # rtla runs where the kernel has the tracers: a QEMU board's rt kernel
        from rtlab.plan.budgets import Budget as B
        rj = JobResult(board="qemu-aarch64", variant="rt-iso", arch="aarch64", budget_class="qemu-tcg",
                       kernel={"release": "6.1.0-50-rt-arm64"}, duration_s=30.0)
        for suite, out in rtla_outputs().items():
            m = Measurement(MeasurementKey("qemu-aarch64", "rt-iso", suite, "idle"), out, raw=["stdout.txt"])
            judge(m, B(max_us=2000000.0))
            rj.measurements.append(m)
        jobs.append(rj)
    return RunResult(run_id=run_id, started=started.strftime("%Y-%m-%dT%H:%M:%SZ"), campaign="nightly",
                     commit={"sha": sha, "subject": subject, "branch": "rt/next",
                             "pipeline_id": "4242", "pipeline_source": source,
                             "kernel_version": "v6.6.30-rt30"},
                     jobs=jobs)


def write_run(results: Path, run: RunResult) -> Path:
    d = results / run.run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps(run.to_json(), indent=1))
    return d


@pytest.fixture(scope="session")
def influxd(tmp_path_factory):
    """The test influxd: LocalInfluxd on a temporary state dir, access log on
    (so the credential test can read it)."""
    state = tmp_path_factory.mktemp("rtlab-state")
    srv = LocalInfluxd(state, http_log=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def db(influxd, request):
    """A fresh database per test: counts are exact."""
    name = "t_" + re.sub(r"\W", "_", request.node.name)[:50]
    c = InfluxV1(influxd.url, name)
    c.query(f'DROP DATABASE "{name}"')
    c.create_database()
    return c


def cfg_for(url: str, database: str, tmp_path: Path, **kw) -> StoreConfig:
    return StoreConfig(url=url, database=database, spool_dir=str(tmp_path / "spool"), **kw).normalized()


def read_all(client: InfluxV1) -> dict:
    """Every point of every measurement: (measurement, tags, time) -> fields."""
    out = {}
    for m in MEASUREMENTS:
        res = client.query(f'SELECT * FROM "{m}" GROUP BY *', epoch="s")
        for s in res["results"][0].get("series", []):
            tags = tuple(sorted((k, v) for k, v in (s.get("tags") or {}).items() if v != ""))
            for vals in s["values"]:
                row = dict(zip(s["columns"], vals))
                t = row.pop("time")
                key = (m, tags, t)
                assert key not in out, f"two points for {key}"
                out[key] = {k: v for k, v in row.items() if v is not None}
    return out


def expected(run: RunResult) -> dict:
    out = {}
    for p in points_for_run(run, "s"):
        key = (p.measurement, tuple(sorted(p.tags.items())), p.time)
        assert key not in out, f"schema made two points with the same series and time: {key}"
        out[key] = {k: v for k, v in p.fields.items() if v is not None}
    return out


# ------------------------------------------------------------------ tests
def test_real_cyclictest_published_and_read_back_exactly(influxd, db, rt_outputs, tmp_path):
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    run = make_run(rt_outputs, "20990101T000000Z", started, "1a2b3c4d5e6f7a8b9c0d", "sched: fix")
    run_dir = write_run(tmp_path / "results", run)
    msgs = []
    report = publish_run(run_dir, progress=msgs.append, config=cfg_for(influxd.url, db.database, tmp_path))
    assert report.ok, (report, msgs)
    want = expected(load_run(run_dir))
    assert report.points == report.written == len(want)
    got = read_all(db)
    assert set(got) == set(want)
    for key, fields in want.items():
        assert got[key] == fields, key

    # and against the tool's own JSON, not only against our own model
    raw = json.loads(rt_outputs["cyclictest"][0].read_text())["thread"]["0"]
    r = rows(db.query('SELECT "max_us", "min_us", "cycles" FROM "latency" WHERE "variant" = \'rt\' '
                      'AND "suite" = \'cyclictest\' AND "load" = \'idle\' AND "thread" = \'0\''))
    assert len(r) == 1 and r[0]["max_us"] == raw["max"] and r[0]["min_us"] == raw["min"]
    assert r[0]["cycles"] == raw["cycles"]
    hist = rows(db.query('SELECT "count" FROM "latency_hist" WHERE "variant" = \'rt\' AND '
                         '"suite" = \'cyclictest\' AND "load" = \'idle\' AND "thread" = \'0\' GROUP BY "bucket"'))
    assert {int(h["bucket"]): h["count"] for h in hist} == {int(k): v for k, v in raw["histogram"].items()}
    # buckets sort numerically as tags (zero-padded)
    assert [h["bucket"] for h in hist] == sorted(h["bucket"] for h in hist)
    assert sorted(int(h["bucket"]) for h in hist) == [int(h["bucket"]) for h in hist]
    # the kernel tag has no per-commit part, the commit is a field, never a tag
    tags = rows(db.query('SHOW TAG VALUES FROM "latency" WITH KEY = "kernel_release"'))
    assert all("-g1a2b3c4d5e6" not in t["value"] for t in tags)
    keys = {r["tagKey"] for r in rows(db.query("SHOW TAG KEYS"))}
    assert not keys & {"commit", "sha", "run_id", "pipeline_id"}
    # one timestamp for the whole run
    times = {k[2] for k in got}
    assert times == {timestamp(run.started, "s")}
    # the server typed every field as the schema says (float stays float)
    from rtlab.store.schema import field_type
    names = {float: "float", int: "integer", str: "string"}
    res = db.query("SHOW FIELD KEYS")
    for s in res["results"][0]["series"]:
        for key, ftype in s["values"]:
            assert names[field_type(s["name"], key)] == ftype, (s["name"], key, ftype)
    # one pipeline kind from CI_PIPELINE_SOURCE
    assert {r["value"] for r in rows(db.query('SHOW TAG VALUES WITH KEY = "pipeline"'))} == {"mr"}


def _count(client: InfluxV1) -> dict:
    n = {}
    for m in MEASUREMENTS:
        res = client.query(f'SELECT * FROM "{m}" GROUP BY *')
        n[m] = sum(len(s["values"]) for s in res["results"][0].get("series", []))
    return n


def test_publishing_twice_does_not_duplicate(influxd, db, rt_outputs, tmp_path):
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=2)
    run = make_run(rt_outputs, "r-twice", started, "abcdef0123456789", "twice")
    run_dir = write_run(tmp_path / "results", run)
    cfg = cfg_for(influxd.url, db.database, tmp_path, batch_size=97)
    r1 = publish_run(run_dir, progress=lambda s: None, config=cfg)
    first = _count(db)
    r2 = publish_run(run_dir, progress=lambda s: None, config=cfg)
    second = _count(db)
    assert r1.ok and r2.ok and r1.batches > 3
    assert first == second
    assert sum(first.values()) == r1.points == r2.points
    series1 = rows(db.query("SHOW SERIES"))
    publish_run(run_dir, progress=lambda s: None, config=cfg)
    assert rows(db.query("SHOW SERIES")) == series1


class StopServerAfter:
    """A store that stops the real influxd after ``n`` batches: a server
    dying in the middle of a publish."""

    def __init__(self, store, server: LocalInfluxd, n: int):
        self.store, self.server, self.n = store, server, n
        self.precision = store.precision

    def write(self, lines):
        if self.n == 0:
            self.server.stop()
        self.n -= 1
        return self.store.write(lines)

    def query(self, q):
        return self.store.query(q)

    def ping(self):
        return self.store.ping()


def test_server_dies_mid_publish_spool_then_replay_loses_nothing(rt_outputs, tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("RTLAB_STATE_DIR", str(state))
    for v in ("RTLAB_INFLUX_URL", "RTLAB_INFLUX_USER", "RTLAB_INFLUX_PASSWORD", "RTLAB_INFLUX_TOKEN",
              "RTLAB_INFLUX_ORG", "RTLAB_INFLUX_BUCKET", "RTLAB_INFLUX_DB", "RTLAB_INFLUX_RP"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=3)
    run = make_run(rt_outputs, "r-spool", started, "0123abcd0123abcd", "spool me")
    run_dir = write_run(tmp_path / "results", run)
    want = expected(load_run(run_dir))
    cfg = StoreConfig(batch_size=50)  # nothing configured: the local influxd of RTLAB_STATE_DIR

    # 1. the server dies after two batches
    sess = Session(cfg, progress=lambda s: None)
    assert sess.local is not None and not sess.local.reused
    sess.store = StopServerAfter(sess.store, sess.local, 2)
    report = sess.publish(load_run(run_dir))
    assert report.written == 100 and report.spooled == len(want) - 100
    assert report.spool_left == report.spooled and not report.ok
    files = Spool(state / "spool").files()
    assert len(files) == report.batches - 2
    assert all(f.read_text().startswith("# rtlab-spool precision=s") for f in files)
    assert not LocalInfluxd(state).running()

    # 2. nothing running: a publish of another run is spooled too
    run2 = make_run(rt_outputs, "r-spool-2", started + timedelta(minutes=30), "4567", "second", with_infra=False)
    run2_dir = write_run(tmp_path / "results", run2)
    down = cfg_for("http://127.0.0.1:9", "rtlab", tmp_path)  # discard port: refused
    down.spool_dir = str(state / "spool")
    r2 = publish_run(run2_dir, progress=lambda s: None, config=down)
    assert r2.written == 0 and r2.spooled == r2.points > 0 and r2.errors

    # 3. restart (new port), `rtlab publish --replay`: everything arrives once
    srv = LocalInfluxd(state).start()
    try:
        res = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", "--replay"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120, env=dict(os.environ))
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"{len(want) - 100 + r2.points} points sent, 0 points left" in res.stdout
        assert not Spool(state / "spool").files()
        client = srv.client()
        got = read_all(client)
        want2 = expected(load_run(run2_dir))
        assert set(got) == set(want) | set(want2)
        for key, fields in {**want, **want2}.items():
            assert got[key] == fields, key
        counts = _count(client)
        assert sum(counts.values()) == len(want) + len(want2)
        # 4. and the next publish of the same run changes nothing
        publish_run(run_dir, progress=lambda s: None, config=StoreConfig())
        assert _count(client) == counts
    finally:
        srv.stop()


@pytest.fixture
def auth_influxd(tmp_path):
    """An influxd with authentication on; user alice (all privileges) has SECRET."""
    srv = LocalInfluxd(tmp_path / "auth-state", http_log=True, auth_enabled=True).start()
    admin = InfluxV1(srv.url, "t_secret")
    admin.query(f"CREATE USER alice WITH PASSWORD '{SECRET}' WITH ALL PRIVILEGES")
    InfluxV1(srv.url, "t_secret", user="alice", password=SECRET).create_database()
    yield srv
    srv.stop()


def test_credentials_work_and_are_never_printed_logged_or_spooled(auth_influxd, rt_outputs, tmp_path, caplog):
    import base64
    import logging
    caplog.set_level(logging.DEBUG)
    srv = auth_influxd
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=4)
    run = make_run(rt_outputs, "r-secret", started, "feedfacefeedface", "secret")
    run_dir = write_run(tmp_path / "results", run)
    state = tmp_path / "state"
    cfgfile = tmp_path / "store.yaml"
    cfgfile.write_text("database: t_secret\nuser: alice\npassword: ${MY_SECRET}\n")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("RTLAB_INFLUX_")}
    base_env.update(RTLAB_STATE_DIR=str(state), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    wrong = "wrong-" + SECRET[::-1]
    cases = [
        # 0: right password from a ${VAR} in the config file
        (["--store-config", str(cfgfile)], dict(MY_SECRET=SECRET, RTLAB_INFLUX_URL=srv.url), 0),
        # 1: right credentials inside the URL
        ([], dict(RTLAB_INFLUX_URL=f"http://alice:{quote(SECRET, safe='')}@127.0.0.1:{srv.port}",
                  RTLAB_INFLUX_DB="t_secret"), 0),
        # 2: the same, not percent-encoded ('#' starts a fragment): a clear error, nothing leaked
        ([], dict(RTLAB_INFLUX_URL=f"http://alice:{SECRET}@127.0.0.1:{srv.port}", RTLAB_INFLUX_DB="t_secret"), 2),
        # 3: wrong password: 401, spooled, error printed
        ([], dict(RTLAB_INFLUX_URL=srv.url, RTLAB_INFLUX_DB="t_secret", RTLAB_INFLUX_USER="alice",
                  RTLAB_INFLUX_PASSWORD=wrong), 2),
        # 4: server down: spooled, error printed
        ([], dict(RTLAB_INFLUX_URL="http://127.0.0.1:9", RTLAB_INFLUX_USER="alice",
                  RTLAB_INFLUX_PASSWORD=SECRET, RTLAB_INFLUX_TOKEN=TOKEN), 2),
        # 5: the v2 API against a 1.6 server: 404, spooled, error printed
        ([], dict(RTLAB_INFLUX_URL=srv.url, RTLAB_INFLUX_TOKEN=TOKEN, RTLAB_INFLUX_BUCKET="t_secret/autogen",
                  RTLAB_INFLUX_ORG="lab"), 2),
    ]
    outputs = []
    for i, (args, extra, code) in enumerate(cases):
        res = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", str(run_dir), *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=120, env=dict(base_env, **extra))
        outputs += [res.stdout, res.stderr]
        assert res.returncode == code, (i, res.stdout + res.stderr)
    text = "".join(outputs)
    assert "401" in text and "authorization failed" in text and "404" in text and "spooled" in text
    # the credentials did work: the run is there, once
    alice = InfluxV1(srv.url, "t_secret", user="alice", password=SECRET)
    assert _count(alice)["events"] == 1
    # in-process too, with logging at DEBUG
    cfg = StoreConfig.load(cfgfile, env=dict(base_env, MY_SECRET=SECRET, RTLAB_INFLUX_URL="http://127.0.0.1:9",
                                             RTLAB_INFLUX_TOKEN=TOKEN))
    assert cfg.password == SECRET and SECRET not in repr(cfg) and SECRET not in cfg.describe()
    msgs = []
    rep = publish_run(run_dir, progress=msgs.append, config=cfg, spool=Spool(state / "spool"))
    outputs += msgs + rep.errors + [json.dumps(rep.to_json()), caplog.text, repr(cfg), str(cfg)]
    spooled = [p.read_text() for p in Spool(state / "spool").files()]
    # three failed publishes of the same run (401, server down, 404) and this
    # one: the batch is kept once, never once per attempt
    assert len(spooled) == 1 and "run=r-secret" in spooled[0]
    logs = [p.read_text(errors="replace") for p in (srv.logfile, srv.access_log)]
    assert " alice " in srv.access_log.read_text()  # the access log names the user, and only that
    results = [p.read_text(errors="replace") for p in (tmp_path / "results").rglob("*") if p.is_file()]
    state_files = [p.read_text(errors="replace") for p in state.rglob("*") if p.is_file()]
    b64 = [base64.b64encode(f"alice:{pw}".encode()).decode() for pw in (SECRET, wrong)]
    # nor any recognisable piece of one (a URL parser once quoted "pw-Zq8")
    pieces = [SECRET[i:i + 6] for i in range(0, len(SECRET) - 5, 3)]
    for text in outputs + spooled + logs + results + state_files:
        for secret in (SECRET, wrong, TOKEN, quote(SECRET, safe=""), *b64, *pieces):
            assert secret not in text


def test_cli_with_nothing_configured_uses_local_influxd_and_says_how_to_look(influxd, rt_outputs, tmp_path):
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=5)
    run = make_run(rt_outputs, "r-cli", started, "c0ffee", "cli")
    results = tmp_path / "results"
    write_run(results, run)
    write_run(results, make_run(rt_outputs, "r-cli-2", started + timedelta(minutes=1), "c0ffee2", "cli 2"))
    (results / "latest").symlink_to("r-cli-2")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RTLAB_INFLUX_")}
    # the session's server lives in its state dir: the CLI must reuse it
    env.update(RTLAB_STATE_DIR=str(influxd.root.parent), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               RTLAB_INFLUX_DB="t_cli")
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", str(results)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"using the running local influxd at {influxd.url}" in res.stdout
    assert f"influx -host 127.0.0.1 -port {influxd.port} -database t_cli" in res.stdout
    assert f"{influxd.url}/query?db=t_cli" in res.stdout
    assert res.stdout.count("published run") == 2  # latest/ is not a third run
    n = rows(InfluxV1(influxd.url, "t_cli").query('SELECT count("title") FROM "events"'))
    assert n[0]["count"] == 2
    # bad input is a clear error, exit 2
    bad = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", str(tmp_path / "nope")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "no such run directory" in bad.stderr


# ------------------------------------------------------------------ dashboards
BUILTINS = {"timeFilter", "__interval", "__interval_ms"}


def _grafana_escape(v: str) -> str:
    return re.sub(r"([\\^$.|?*+()\[\]{}/-])", r"\\\1", v)


def _expand(q: str, values: dict) -> str:
    q = q.replace("$timeFilter", "time > now() - 30d")
    q = q.replace("$__interval_ms", "3600000").replace("$__interval", "1h")

    def sub(m):
        name = m.group(1) or m.group(2)
        assert name in values, f"undefined variable ${name} in {q}"
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, q)


def _metric_find(client, q) -> list[str]:
    """Grafana's InfluxDB metricFindQuery: value[1] of each row, or value[0]."""
    res = client.query(q)
    out = []
    for s in res["results"][0].get("series", []) or []:
        for v in s["values"]:
            val = v[1] if len(v) > 1 and v[1] is not None else v[0]
            if str(val) not in out:
                out.append(str(val))
    return out


def _panels(panels):
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))


@pytest.fixture(scope="module")
def dashboard_db(influxd, rt_outputs, tmp_path_factory):
    """Three commits' runs (MR, push, schedule) published by the production code."""
    name = "t_dashboards"
    c = InfluxV1(influxd.url, name)
    c.query(f'DROP DATABASE "{name}"')
    tmp = tmp_path_factory.mktemp("dash")
    now = datetime.now(timezone.utc).replace(microsecond=0)
    for i, (src, sha) in enumerate([("push", "aaaa1111"), ("merge_request_event", "bbbb2222"),
                                    ("schedule", "cccc3333")]):
        run = make_run(rt_outputs, f"dash-{i}", now - timedelta(days=3 - i), sha * 5, f"commit {i}", src,
                       with_rtla=True)
        rep = publish_run(write_run(tmp / "results", run), progress=lambda s: None,
                          config=cfg_for(influxd.url, name, tmp))
        assert rep.ok
    # a history with a regression and lab drift, analysed by `rtlab regressions`:
    # the change-point annotations and table of the regressions dashboard
    from regression_history import publish_history, real_outputs
    from rtlab.verdict.regressions import analyse, read_history, write_annotations
    # (2 days, newer than the first run above: the histogram dashboard's `run`
    # variable is not narrowed by board, and its first value must have data)
    publish_history(real_outputs(tmp), influxd.url, name, tmp, scale=0.2)
    assert write_annotations(c, analyse(read_history(c)), "30d") > 0
    publish_soak_checkpoints(rt_outputs, influxd.url, name, tmp)
    return c


def soak_events(rt_outputs, n=4) -> list[dict]:
    """A soak's checkpoint events as the board test emits them: this machine's
    real cyclictest output as each segment, merged by rtlab.soak.checkpoint."""
    from rtlab.soak import checkpoint as soak

    class Run:
        id, name, load = "cyclictest-soak@idle", "cyclictest-soak", "idle"
    seg = rt_outputs["cyclictest"][1]
    st = soak.new_state(60 * n, 60, 1000, "cyclictest ...")
    out = []
    for i in range(n):
        soak.add_segment(st, i, seg, duration_s=60, elapsed_s=60, gap_before_s=0.2 if i else None)
        out.append({**soak.checkpoint_event(Run, st), "run_id": "soak-live", "board": "local",
                    "arch": "x86_64", "variant": "host", "repeat": 0})
    return out


def publish_soak_checkpoints(rt_outputs, url, name, tmp, start=None) -> list[dict]:
    """Checkpoints published live by the production publisher (rtlab.store.live),
    one a minute up to now: what the soak dashboard reads."""
    from rtlab.store.live import LivePublisher

    evs = soak_events(rt_outputs)
    t0 = start or datetime.now(timezone.utc).timestamp() - 60 * len(evs)
    for i, ev in enumerate(evs):
        pub = LivePublisher(progress=lambda s: None, commit={"pipeline_source": "schedule"},
                            session_factory=lambda: Session(cfg_for(url, name, tmp)),
                            clock=lambda: t0 + 60 * (i + 1))
        pub(ev)
        assert pub.points == 1 + len(ev["threads"]), pub.spooled
    return evs


@pytest.mark.parametrize("path", sorted(DASHBOARDS.glob("*.json")), ids=lambda p: p.stem)
def test_every_dashboard_query_returns_data(dashboard_db, path):
    dash = json.loads(path.read_text())

    def resolve(first: bool) -> dict:
        """Variable values as Grafana would substitute them: "All" (or the
        first value of a single-value variable), or the first value of each."""
        values = {}
        for v in dash["templating"]["list"]:
            opts = _metric_find(dashboard_db, _expand(v["query"], values))
            assert opts, f"{path.name}: variable {v['name']} has no values: {v['query']}"
            if v.get("includeAll") and not first:
                values[v["name"]] = v.get("allValue") or "(" + "|".join(map(_grafana_escape, opts)) + ")"
            elif v.get("multi") or v.get("includeAll"):
                values[v["name"]] = _grafana_escape(opts[0])
            else:
                values[v["name"]] = opts[0]
        return values

    values, firsts = resolve(False), resolve(True)
    queries = []
    for p in _panels(dash["panels"]):
        for t in p.get("targets", []):
            queries.append((f"panel {p['id']} {p['title']!r} {t['refId']}", t["query"]))
    for a in dash["annotations"]["list"]:
        if a.get("datasource", {}).get("type") == "influxdb":
            assert a["target"]["query"] == a["query"]
            queries.append((f"annotation {a['name']}", a["query"]))
    assert queries
    for where, q in queries:
        res = dashboard_db.query(_expand(q, values))  # raises on an InfluxQL error
        series = res["results"][0].get("series")
        assert series and any(s["values"] for s in series), f"{path.name} {where}: no data: {q}"
        # one value per variable (a repeated panel): valid InfluxQL; may be
        # empty (a board without infra errors has none to show)
        dashboard_db.query(_expand(q, firsts))


def test_soak_dashboard_shows_the_last_checkpoint(dashboard_db, rt_outputs):
    """The soak panel's table query gives each running soak's last checkpoint:
    elapsed, planned, ETA, samples, current max as published live."""
    dash = json.loads((DASHBOARDS / "soak.json").read_text())
    (table,) = [p for p in dash["panels"] if p["type"] == "table"]
    q = _expand(table["targets"][0]["query"], {"board": ".*", "variant": ".*"})
    (row,) = rows(dashboard_db.query(q))
    last = soak_events(rt_outputs)[-1]
    assert (row["board"], row["variant"], row["suite"], row["load"]) == ("local", "host", "cyclictest-soak", "idle")
    assert row["elapsed_s"] == last["done_s"] == 240 and row["planned_s"] == 240
    assert row["samples"] == last["samples"] and row["max_us"] == last["max_us"]
    assert row["eta_s"] == last["eta_s"] and row["run_id"] == "soak-live"
    (maxp,) = [p for p in dash["panels"] if p["id"] == 4]  # per thread: one series per thread of the tool
    q = _expand(maxp["targets"][0]["query"], {"board": ".*", "variant": ".*"})
    threads = {s["tags"]["thread"] for s in dashboard_db.query(q)["results"][0]["series"]}
    assert threads == {str(t["thread"]) for t in last["threads"]}


def test_histogram_run_variable_matches_point_time(dashboard_db):
    """The histogram dashboard selects a run by `time = '$run'`: the events'
    `started` string must be exactly the points' timestamp."""
    for r in rows(dashboard_db.query('SELECT "started" FROM "events"', epoch="s")):
        assert rfc3339(r["time"], "s") == r["started"]
        n = rows(dashboard_db.query(f'SELECT count("count") FROM "latency_hist" WHERE time = \'{r["started"]}\''))
        assert n and n[0]["count"] > 0


def test_local_influxd_lifecycle_and_stale_pidfile(tmp_path):
    srv = LocalInfluxd(tmp_path)
    srv.root.mkdir(parents=True)
    # a pidfile naming a live process that is not our influxd (this test)
    srv.pidfile.write_text(f"{os.getpid()}\n")
    srv.portfile.write_text("9\n")
    assert not srv.running()
    srv.start()
    try:
        assert not srv.reused and srv.client().ping().startswith("1.")
        assert int(srv.pidfile.read_text()) == srv.pid != os.getpid()
        conf = srv.config_file.read_text()
        assert f"127.0.0.1:{srv.port}" in conf and "reporting-disabled = true" in conf
        assert {p.name for p in srv.root.iterdir()} >= {"meta", "data", "influxd.conf"}  # wal: on first write
        again = LocalInfluxd(tmp_path).start()  # a second start adopts it
        assert again.reused and again.port == srv.port and again.pid == srv.pid
    finally:
        assert srv.stop()
    assert not srv.pidfile.exists() and not LocalInfluxd(tmp_path).running()
    assert not LocalInfluxd(tmp_path).stop()
