"""A store that refuses the credentials (HTTP 401/403): the run's batches
are kept in the spool once, however often it is published or replayed, and
`rtlab publish --replay` says why they stay. Against a tiny local HTTP
server that answers like InfluxDB 1.x without valid credentials."""
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                         ToolOutput, Verdict)
from rtlab.store import Session, Spool
from rtlab.store.config import StoreConfig

from .conftest import ROOT


def _run() -> RunResult:
    t = ThreadResult(thread=0, cpu=0, cycles=10, min_us=2, avg_us=3.5, max_us=40, overflows=0,
                     histogram=Histogram({2: 5, 3: 4, 40: 1}, 1.0, 100, 0))
    m = Measurement(MeasurementKey("local", "host", "cyclictest", "idle"),
                    ToolOutput("c.json", "cyclictest", [t]), verdict=Verdict.PASS)
    return RunResult("20261123T000000Z", "2026-11-23T00:00:00Z", "faults", {},
                     [JobResult("local", "host", "x86_64", "local", {}, [m], duration_s=3)])


@pytest.fixture
def refusing_store():
    """ping answers, every write and query is 401 (or 403 for /query)."""
    hits = {"write": 0}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _answer(self, code, body=b""):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.startswith("/ping"):
                return self._answer(204)
            self._answer(403, b'{"error":"forbidden"}')

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/write"):
                hits["write"] += 1
                return self._answer(401, b'{"error":"authorization failed"}')
            self._answer(403, b'{"error":"forbidden"}')

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", hits
    srv.shutdown()


def test_refused_batches_are_spooled_once_and_replay_reports_them(tmp_path, refusing_store):
    url, hits = refusing_store
    spool = tmp_path / "state" / "spool"
    cfg = StoreConfig(url=url, spool_dir=str(spool), batch_size=5).normalized()
    reports = []
    for _ in range(3):  # the same run published three times, each replaying the spool first
        reports.append(Session(cfg, progress=lambda s: None).publish(_run()))
    first = reports[0]
    assert first.batches >= 2 and first.written == 0 and first.spooled == first.points
    assert any("refused the credentials (HTTP 401" in e for e in first.errors)
    # kept once: as many files as one publish has batches, as many points as the run
    assert len(Spool(spool).files()) == first.batches
    assert Spool(spool).pending_points() == first.points == reports[-1].spool_left
    # one refused write per attempt stops it (no hammering with every batch)
    assert hits["write"] == 3

    env = {**os.environ, "RTLAB_INFLUX_URL": url, "RTLAB_STATE_DIR": str(tmp_path / "state")}
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", "--replay"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out
    assert f"0 points sent, {first.points} points left" in out
    assert "refused the credentials (HTTP 401: authorization failed)" in out
    assert len(Spool(spool).files()) == first.batches  # still once
