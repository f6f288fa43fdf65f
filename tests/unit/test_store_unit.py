"""The store without a server: line protocol, schema, config and secrets,
the HTTP clients (against a recording fake server), spool, batching."""
from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from rtlab.errors import InputError
from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                         ToolOutput, Verdict)
from rtlab.store import (InfluxV1, InfluxV2, LocalInfluxd, Point, QueryError, Session, Spool, Store,
                         StoreConfig, StoreUnavailable, WriteRejected, lines_for_run, points_for_run)
from rtlab.store.lineproto import format_field, timestamp
from rtlab.store.schema import (HIST_TAGS, MEASUREMENTS, bucket_label, kernel_release_tag,
                                pipeline_kind, rfc3339)

SECRET = "s3cr3t-Pa55word!"


# ------------------------------------------------------------------ a run
def thread(i, cpu, mx, counts, bucket_us=1.0, size=200):
    n = sum(counts.values())
    return ThreadResult(thread=i, cpu=cpu, cycles=n + 1, min_us=min(counts) * bucket_us, avg_us=10.5,
                        max_us=mx, overflows=1, histogram=Histogram(dict(counts), bucket_us, size, 1),
                        extra={"node": 0})


def small_run(**commit) -> RunResult:
    out = ToolOutput("c.json", "cyclictest", [thread(0, 0, 300.0, {2: 5, 10: 3, 100: 1}),
                                                thread(1, 1, 40, {3: 4, 11: 2}, size=20)])
    ipc = ToolOutput("p.json", "pmqtest", [ThreadResult(0, 1, 1000, 3.0, 5.2, 53.0,
                                                        extra={"sender_cpu": 0, "timeoutcount": 0})])
    hb = ToolOutput("h.txt", "hackbench", [], metrics={"time_s": 1.25, "ok": True, "name": "x"})
    m1 = Measurement(MeasurementKey("rpi4", "rt", "cyclictest", "idle"), out, verdict=Verdict.FAIL,
                     reasons=["max 300 us >= budget 100 us"],
                     budget={"max_us": 100, "percentiles_us": {"99.9": 50}, "source": "x"},
                     share_over_budget=0.05)
    m2 = Measurement(MeasurementKey("rpi4", "rt", "pmqtest", "idle"), ipc, verdict=Verdict.PASS)
    m3 = Measurement(MeasurementKey("rpi4", "rt", "hackbench", "idle"), hb)  # not judged
    job = JobResult("rpi4", "rt", "arm64", "rpi", {"release": "6.6.30-rt30-g0123abcdef+"},
                    [m1, m2, m3], duration_s=61)
    dead = JobResult("bbb", "rt", "armhf", "bbb", infra_error="boot failed:\nno prompt")
    c = {"sha": "0123456789abcdef0123", "subject": 'fix "wakeup", again', "pipeline_id": "77"}
    c.update(commit)
    return RunResult("20261121T000000Z", "2026-11-21T00:00:00Z", "nightly", c, [job, dead])


# ------------------------------------------------------------------ line protocol
def test_line_protocol_escaping_and_types():
    p = Point("lat ency", {"b": "a b,c=d", "a": "x", "empty": ""},
              {"f": 1.5, "i": 3, "s": 'say "hi"\\ now\nnext', "t": True, "none": None,
               "nan": float("nan")}, 1700000000)
    assert p.to_line() == ('lat\\ ency,a=x,b=a\\ b\\,c\\=d f=1.5,i=3i,s="say \\"hi\\"\\\\ now next",t=true '
                           "1700000000")
    assert Point("m", {"a": "1"}, {"x": None}).to_line() is None
    assert format_field(2.0) == "2.0" and format_field(2) == "2i"
    with pytest.raises(TypeError):
        format_field([1])


def test_timestamps_are_exact_integers():
    assert timestamp("2026-11-21T06:15:00Z", "s") == 1795241700
    assert timestamp("2026-11-21T07:15:00+01:00", "s") == 1795241700
    assert timestamp("2026-11-21T06:15:00", "s") == 1795241700  # naive = UTC
    assert timestamp("2026-11-21T06:15:00.123456Z", "ms") == 1795241700123
    assert timestamp("2026-11-21T06:15:00.123456Z", "ns") == 1795241700123456000
    assert rfc3339(1795241700, "s") == "2026-11-21T06:15:00Z"
    assert rfc3339(1795241700120, "ms") == "2026-11-21T06:15:00.12Z"


def test_bucket_labels_sort_as_numbers():
    labels = [bucket_label(i, 1.0) for i in (0, 2, 10, 100, 999999)]
    assert labels == ["000000", "000002", "000010", "000100", "999999"] == sorted(labels)
    ns = [bucket_label(i, 0.001) for i in (5, 40, 1234, 999999)]
    assert ns == ["000000.005", "000000.040", "000001.234", "000999.999"] == sorted(ns)


def test_kernel_release_tag_has_no_commit_part():
    assert kernel_release_tag("6.6.30-rt30-g0123abcdef") == "6.6.30-rt30"
    assert kernel_release_tag("6.6.30-rt30-g0123abcdef-dirty") == "6.6.30-rt30"
    assert kernel_release_tag("6.8.0-rc1-00042-g1a2b3c4d5e6f+") == "6.8.0-rc1-00042"
    assert kernel_release_tag("6.1.0-18-rt-amd64") == "6.1.0-18-rt-amd64"
    assert kernel_release_tag(None) == kernel_release_tag("") == "unknown"


@pytest.mark.parametrize("commit,kind", [
    ({}, "local"), ({"pipeline_id": 5}, "trigger"),
    ({"pipeline_source": "merge_request_event"}, "mr"), ({"pipeline_source": "push"}, "push"),
    ({"pipeline_source": "schedule"}, "schedule"), ({"pipeline_source": "web"}, "trigger"),
    ({"pipeline_source": "parent_pipeline"}, "trigger"), ({"pipeline_kind": "local"}, "local"),
])
def test_pipeline_kind(commit, kind):
    assert pipeline_kind(commit) == kind


# ------------------------------------------------------------------ schema
def test_schema_points_are_unique_bounded_and_share_one_time():
    run = small_run()
    pts = points_for_run(run)
    keys = [(p.measurement, tuple(sorted(p.tags.items()))) for p in pts]
    assert len(keys) == len(set(keys))  # nothing overwrites anything else
    assert {p.time for p in pts} == {timestamp(run.started)}
    assert {p.measurement for p in pts} <= set(MEASUREMENTS)
    for p in pts:
        assert not set(p.tags) & {"commit", "sha", "run_id", "pipeline_id", "subject"}
        assert all(v for v in p.tags.values())
    by = {}
    for p in pts:
        by.setdefault(p.measurement, []).append(p)
    assert len(by["latency"]) == 3 and len(by["latency_hist"]) == 5 and len(by["events"]) == 1
    assert len(by["job"]) == 2 and len(by["metrics"]) == 1
    # verdicts: 2 judged measurements + 2 jobs; the unjudged hackbench has none
    assert sorted(p.tags["scope"] for p in by["verdict"]) == ["job", "job", "measurement", "measurement"]


def test_schema_fields_and_types():
    pts = points_for_run(small_run())
    lat = next(p for p in pts if p.measurement == "latency" and p.tags["thread"] == "1")
    assert lat.tags == {"board": "rpi4", "variant": "rt", "arch": "arm64", "kernel_release": "6.6.30-rt30",
                        "load": "idle", "suite": "cyclictest", "tool": "cyclictest", "thread": "1",
                        "cpu": "1", "pipeline": "trigger"}
    f = lat.fields
    assert f["max_us"] == 40.0 and isinstance(f["max_us"], float)  # an int in, a float out
    assert isinstance(f["cycles"], int) and f["overflows"] == 1
    # 7 samples, one overflowed: p99 is beyond the histogram, unknowable: no field
    line = Point("m", {}, f).to_line()
    assert f["p50_us"] == 3.0 and f["p99_us"] is None and ",p99_us=" not in line and ",p999_us=" not in line
    assert f["budget_max_us"] == 100.0 and f["budget_p999_us"] == 50.0 and f["share_over_budget"] == 0.05
    assert f["commit"] == "0123456789abcdef0123" and f["pipeline_id"] == 77
    assert f["kernel_version"] == "6.6.30-rt30-g0123abcdef+" and f["extra_node"] == 0.0
    ipc = next(p for p in pts if p.measurement == "latency" and p.tags["tool"] == "pmqtest")
    assert ipc.fields["extra_timeoutcount"] == 0.0 and ipc.fields["p99_us"] is None
    hist = [p for p in pts if p.measurement == "latency_hist" and p.tags["thread"] == "0"]
    assert [(p.tags["bucket"], p.fields["count"]) for p in hist] == [("000002", 5), ("000010", 3), ("000100", 1)]
    assert set(hist[0].tags) == set(HIST_TAGS) - {"rep"} | {"bucket"}
    v = next(p for p in pts if p.measurement == "verdict" and p.tags.get("suite") == "cyclictest")
    assert v.fields["verdict"] == "fail" and (v.fields["failed"], v.fields["passed"], v.fields["infra"]) == (1, 0, 0)
    assert v.fields["max_us"] == 300.0 and v.fields["reason"].startswith("max 300 us")
    dead = next(p for p in pts if p.measurement == "job" and p.tags["board"] == "bbb")
    assert dead.fields["infra"] == 1 and dead.fields["error"] == "boot failed:\nno prompt"
    assert dead.tags["kernel_release"] == "unknown"
    ev = next(p for p in pts if p.measurement == "events")
    assert ev.fields["title"] == '0123456789ab fix "wakeup", again'
    assert ev.fields["tags"] == "rtlab,trigger,fail" and ev.fields["started"] == "2026-11-21T00:00:00Z"
    met = next(p for p in pts if p.measurement == "metrics")
    assert met.fields["time_s"] == 1.25 and "ok" not in met.fields and "name" not in met.fields


def test_fast_lines_equal_points():
    run = small_run()
    run.jobs[0].measurements[0].output.threads.append(thread(2, 3, 1.0, {5: 1, 40: 2, 999: 7}, 0.001, 1000))
    assert list(lines_for_run(run)) == [p.to_line() for p in points_for_run(run)]
    assert all("\n" not in ln for ln in lines_for_run(run))  # one point per physical line


def test_repeated_measurements_and_jobs_get_a_rep_tag():
    run = small_run()
    job = run.jobs[0]
    job.measurements.append(Measurement(job.measurements[1].key, job.measurements[1].output,
                                        verdict=Verdict.PASS))
    run.jobs.append(JobResult("bbb", "rt", "armhf", infra_error="again"))
    pts = points_for_run(run)
    keys = [(p.measurement, tuple(sorted(p.tags.items()))) for p in pts]
    assert len(keys) == len(set(keys))
    assert sum(1 for p in pts if p.tags.get("rep") == "2") == 1 + 1 + 2  # latency, verdict; job + job verdict


def test_duplicate_thread_ids_do_not_collide():
    run = small_run()
    t = run.jobs[0].measurements[0].output.threads
    t.append(thread(0, 0, 9.0, {1: 1}))
    lat = [p.tags["thread"] for p in points_for_run(run) if p.measurement == "latency"
           and p.tags["suite"] == "cyclictest"]
    assert lat == ["0", "1", "0.2"]


# ------------------------------------------------------------------ config
def clean_env(tmp_path, **kw):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    env.update(kw)
    return env


def test_config_precedence_default_file_env_explicit_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "rtlab").mkdir(parents=True)
    (tmp_path / "cfg" / "rtlab" / "store.yaml").write_text("url: http://a:8086\ndb: from_default\nrp: week\n")
    env = {"RTLAB_INFLUX_URL": "http://b:8086", "RTLAB_INFLUX_PASSWORD": SECRET}
    cfg = StoreConfig.load(env=env)
    assert (cfg.url, cfg.database, cfg.retention_policy, cfg.password) == ("http://b:8086", "from_default", "week", SECRET)
    explicit = tmp_path / "x.yaml"
    explicit.write_text("store:\n  url: http://c:8086/\n  batch_size: 10000\n")
    cfg = StoreConfig.load(explicit, env=env)
    assert cfg.url == "http://c:8086" and cfg.batch_size == 10000 and cfg.password == SECRET
    assert cfg.sources == [str(tmp_path / "cfg" / "rtlab" / "store.yaml"), "environment", str(explicit)]
    assert cfg.api == "v1" and cfg.configured


def test_config_file_reads_secrets_from_env_and_checks_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    f = tmp_path / "s.yaml"
    f.write_text("url: https://influx.lab:8443\ntoken: ${TOK}\norg: lab\nbucket: rt\n")
    cfg = StoreConfig.load(f, env={"TOK": SECRET})
    assert cfg.token == SECRET and cfg.api == "v2" and cfg.bucket == "rt"
    with pytest.raises(InputError, match="TOK is not set"):
        StoreConfig.load(f, env={})
    f.write_text("passwrd: x\n")
    with pytest.raises(InputError, match="unknown store setting 'passwrd'"):
        StoreConfig.load(f, env={})
    f.write_text(f"password: [{SECRET}\n")
    with pytest.raises(InputError) as e:
        StoreConfig.load(f, env={})
    assert SECRET not in str(e.value)
    with pytest.raises(InputError, match="not found"):
        StoreConfig.load(tmp_path / "missing.yaml", env={})


def test_url_credentials_move_out_of_the_url_and_never_show(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    cfg = StoreConfig.load(env={"RTLAB_INFLUX_URL": "http://ci:s3cr3t-Pa55word%21@influx:8086"})
    assert cfg.url == "http://influx:8086" and cfg.user == "ci" and cfg.password == SECRET
    for text in (repr(cfg), str(cfg), cfg.describe(), json.dumps(cfg.sources)):
        assert SECRET not in text and "s3cr3t" not in text
    b64 = base64.b64encode(f"ci:{SECRET}".encode()).decode()
    assert cfg.redact(f"x {SECRET} y s3cr3t-Pa55word%21 {b64}") == "x *** y *** ***"
    with pytest.raises(InputError) as e:  # unencoded '#' in a password: no piece of it shown
        StoreConfig.load(env={"RTLAB_INFLUX_URL": "http://ci:pw#9secret@influx:8086"})
    assert "pw" not in str(e.value).replace("password", "") and "9secret" not in str(e.value)


def test_v2_defaults_bucket_from_database_and_rp(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    cfg = StoreConfig.load(env={"RTLAB_INFLUX_URL": "http://x:8086", "RTLAB_INFLUX_ORG": "-",
                                "RTLAB_INFLUX_DB": "rtlab", "RTLAB_INFLUX_RP": "autogen"})
    assert cfg.api == "v2" and cfg.bucket == "rtlab/autogen"


def test_state_dir(monkeypatch, tmp_path):
    from rtlab.store import state_dir
    monkeypatch.setenv("RTLAB_STATE_DIR", str(tmp_path / "st"))
    assert state_dir() == tmp_path / "st"
    monkeypatch.delenv("RTLAB_STATE_DIR")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert state_dir() == tmp_path / ".local" / "state" / "rtlab"


def test_local_influxd_config(tmp_path):
    srv = LocalInfluxd(tmp_path)
    text = srv.config_text(18086, 18088)
    assert 'bind-address = "127.0.0.1:18086"' in text and 'bind-address = "127.0.0.1:18088"' in text
    assert "reporting-disabled = true" in text and f'dir = "{tmp_path}/influxdb/meta"' in text
    assert f'wal-dir = "{tmp_path}/influxdb/wal"' in text and f'dir = "{tmp_path}/influxdb/data"' in text
    for section in ("[ifql]", "[[udp]]", "[[graphite]]", "[[collectd]]", "[[opentsdb]]"):
        assert f"{section}\n  enabled = false" in text
    assert 'level = "warn"' in text and "store-enabled = false" in text and "auth-enabled = false" in text
    assert not srv.running()
    with pytest.raises(Exception, match="not started"):
        _ = srv.url


# ------------------------------------------------------------------ HTTP clients
class Recorder(BaseHTTPRequestHandler):
    status = 204
    body = b""
    requests: list = []

    def _handle(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        u = urlsplit(self.path)
        Recorder.requests.append({"method": self.command, "path": u.path, "params": parse_qs(u.query),
                                  "auth": self.headers.get("Authorization"), "body": data.decode()})
        self.send_response(Recorder.status)
        self.send_header("X-Influxdb-Version", "fake-1.0")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(Recorder.body)

    do_GET = do_POST = _handle

    def log_message(self, *a):
        pass


@pytest.fixture
def fake():
    srv = HTTPServer(("127.0.0.1", 0), Recorder)
    Recorder.requests, Recorder.status, Recorder.body = [], 204, b""
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_v1_write_and_query_requests(fake):
    c = InfluxV1(fake, "rtlab", "week", user="ci", password=SECRET, precision="s")
    assert isinstance(c, Store)
    assert c.ping() == "fake-1.0"
    assert c.write(["m,a=1 v=1 1", "m,a=2 v=2 1"]) == 2
    r = Recorder.requests[-1]
    assert r["method"] == "POST" and r["path"] == "/write" and r["body"] == "m,a=1 v=1 1\nm,a=2 v=2 1"
    assert r["params"] == {"db": ["rtlab"], "rp": ["week"], "precision": ["s"]}
    assert r["auth"] == "Basic " + base64.b64encode(f"ci:{SECRET}".encode()).decode()
    assert c.write([Point("m", {}, {"v": 1.0}, 5)]) == 1 and Recorder.requests[-1]["body"] == "m v=1.0 5"
    assert c.write([]) == 0
    Recorder.status, Recorder.body = 200, json.dumps({"results": [{"statement_id": 0}]}).encode()
    c.query("SHOW MEASUREMENTS")
    r = Recorder.requests[-1]
    assert r["method"] == "GET" and r["params"]["q"] == ["SHOW MEASUREMENTS"] and r["params"]["db"] == ["rtlab"]
    c.create_database()
    r = Recorder.requests[-1]
    assert r["method"] == "POST" and r["body"] == "q=CREATE+DATABASE+%22rtlab%22"
    assert all(SECRET not in json.dumps(x["params"]) for x in Recorder.requests)  # never in the URL


def test_v2_write_requests(fake):
    c = InfluxV2(fake, "rtlab/autogen", org="lab", token=SECRET, precision="s")
    assert isinstance(c, Store)
    c.write("m v=1 1\n")
    r = Recorder.requests[-1]
    assert r["path"] == "/api/v2/write" and r["auth"] == f"Token {SECRET}"
    assert r["params"] == {"org": ["lab"], "bucket": ["rtlab/autogen"], "precision": ["s"]}
    Recorder.status, Recorder.body = 200, b'{"results": [{"statement_id": 0}]}'
    c.query("SELECT 1")
    r = Recorder.requests[-1]
    assert r["path"] == "/query" and r["params"]["db"] == ["rtlab"] and r["params"]["rp"] == ["autogen"]


def test_http_errors_are_classified_and_redacted(fake):
    c = InfluxV1(fake, "rtlab", user="ci", password=SECRET)
    Recorder.status, Recorder.body = 401, json.dumps({"error": f"authorization failed for {SECRET}"}).encode()
    with pytest.raises(WriteRejected) as e:
        c.write("m v=1")
    assert e.value.status == 401 and SECRET not in str(e.value) and "***" in str(e.value)
    Recorder.status, Recorder.body = 500, b'{"error":"retention policy not found: x"}'
    with pytest.raises(StoreUnavailable, match="retention policy not found"):
        c.write("m v=1")
    Recorder.status, Recorder.body = 200, b'{"results":[{"statement_id":0,"error":"database not found: x"}]}'
    with pytest.raises(QueryError, match="database not found"):
        c.query("SELECT * FROM m")
    with pytest.raises(StoreUnavailable):
        InfluxV1("http://127.0.0.1:9", "x", password=SECRET, timeout_s=2).write("m v=1")
    with pytest.raises(StoreUnavailable):
        InfluxV1("http://127.0.0.1:9", "x").ping()


# ------------------------------------------------------------------ spool and batching
class FakeStore:
    """Records batches; ``fail`` maps a call number or a batch's first
    measurement name to the exception that call raises."""

    def __init__(self, fail=None, precision="s"):
        self.batches, self.fail, self.precision = [], fail or {}, precision
        self.calls = 0

    def write(self, lines):
        self.calls += 1
        text = lines if isinstance(lines, str) else "\n".join(lines)
        err = self.fail.get(self.calls) or self.fail.get(text.split(" ", 1)[0])
        if err:
            raise err
        self.batches.append((self.precision, [ln for ln in text.splitlines() if ln]))
        return len(self.batches[-1][1])

    def query(self, q):
        return {"results": [{}]}

    def ping(self):
        return "fake"


def test_spool_replay(tmp_path):
    sp = Spool(tmp_path / "spool")
    sp.put(["a v=1 1", "a v=2 2"], "s", "run/1", 0)
    sp.put(["b v=1 1"], "ms", "run/1", 1)
    sp.put(["c v=1 1"], "s", "run 2", 0)
    assert len(sp.files()) == 3 and sp.pending_points() == 4
    assert all("/" not in f.name.replace(str(tmp_path), "") for f in sp.files())
    store = FakeStore(fail={"b": WriteRejected(400, "bad")})
    res = sp.replay(store)
    assert res.points == 3 and res.left_points == 1 and len(res.errors) == 1
    assert store.batches == [("s", ["a v=1 1", "a v=2 2"]), ("s", ["c v=1 1"])]
    assert len(sp.files()) == 1  # the rejected one stays
    down = FakeStore(fail={1: StoreUnavailable("down")})
    assert sp.replay(down).left_points == 1 and len(sp.files()) == 1
    ok = FakeStore()
    assert sp.replay(ok).points == 1 and ok.batches == [("ms", ["b v=1 1"])] and not sp.files()


def test_spool_replays_once_at_a_time(tmp_path):
    import fcntl
    sp = Spool(tmp_path)
    sp.put(["a v=1 1"], "s")
    with open(tmp_path / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        res = sp.replay(FakeStore())
    assert res.skipped and res.points == 0 and sp.files()


def _session(tmp_path, store, batch_size=5000):
    cfg = StoreConfig(url="http://unused:8086", batch_size=batch_size, spool_dir=str(tmp_path / "sp"))
    return Session(cfg.normalized(), store=store, progress=lambda s: None)


def big_run(n_buckets=12000):
    run = small_run()
    run.jobs[0].measurements[0].output.threads[0] = thread(0, 0, 1.0, {i: 1 for i in range(n_buckets)},
                                                           size=n_buckets)
    return run


def test_batches_of_5000_by_default(tmp_path):
    store = FakeStore()
    rep = _session(tmp_path, store).publish(big_run())
    sizes = [len(b) for _, b in store.batches]
    assert sizes[:2] == [5000, 5000] and sum(sizes) == rep.points == rep.written and rep.ok
    assert rep.batches == len(sizes) == 3


def test_unavailable_spools_the_rest_rejected_only_its_batch(tmp_path):
    store = FakeStore(fail={2: WriteRejected(400, "partial write")})
    rep = _session(tmp_path, store, 4000).publish(big_run())
    assert rep.spooled == 4000 and rep.written == rep.points - 4000 and not rep.ok and rep.errors
    store = FakeStore(fail={2: StoreUnavailable("gone")})
    sess = _session(tmp_path / "b", store, 4000)
    rep = sess.publish(big_run())
    assert store.calls == 2 and rep.written == 4000 and rep.spooled == rep.points - 4000
    assert rep.spool_left == rep.spooled and len(Spool(tmp_path / "b" / "sp").files()) == rep.batches - 1


def test_load_run_errors(tmp_path):
    from rtlab.store import load_run
    with pytest.raises(InputError, match="no run.json"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(InputError, match="not a valid run result"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps(small_run().to_json()))
    assert load_run(tmp_path).run_id == "20261121T000000Z"


def test_every_point_matches_the_schema_catalogue():
    from rtlab.store.schema import TAGS, field_type
    run = small_run()
    job = run.jobs[0]
    job.measurements.append(Measurement(job.measurements[1].key, job.measurements[1].output,
                                        verdict=Verdict.INFRA, reasons=["x"]))  # a rep tag
    for p in points_for_run(run):
        assert set(p.tags) <= set(TAGS[p.measurement]), p
        for k, v in p.fields.items():
            t = field_type(p.measurement, k)
            assert t is not None, (p.measurement, k)
            assert v is None or type(v) is t, (p.measurement, k, v)


def test_percentiles_are_the_models():
    run = small_run()
    out = run.jobs[0].measurements[0].output
    lat = [p for p in points_for_run(run) if p.measurement == "latency" and p.tags["tool"] == "cyclictest"]
    for t, p in zip(out.threads, lat):
        assert {k: p.fields[f"p{k.replace('.', '')}_us"] for k in t.percentiles_us} == t.percentiles_us
    v = next(p for p in points_for_run(run) if p.measurement == "verdict" and p.tags.get("tool") == "cyclictest")
    assert v.fields["p50_us"] == out.combined().percentiles_us["50"]


def test_batched_regroups_chunks():
    from rtlab.store.publish import batched
    chunks = [["a"] * 3, ["b"] * 7, [], ["c"] * 1]
    out = list(batched(chunks, 4))
    assert [len(b) for b in out] == [4, 4, 3] and sum(out, []) == sum(chunks, [])
