"""A store that answers one byte every 2 s: a per-read timeout never fires,
so a publish needs one overall deadline. `rtlab publish` and the end of
`rtlab run` finish by it, spool every point they could not send, and
`rtlab run` keeps its verdict's exit code. Against a tiny TCP server on a
free loopback port that accepts requests and dribbles its answer."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from rtlab.store import Spool

from .conftest import ROOT
from .test_store_auth import _run

DEADLINE_S = 6
DRIBBLE_S = 2.0


@pytest.fixture
def dribbling_store():
    """Every connection: the request is read, then "HTTP/1.1 204 ..." goes
    out one byte every DRIBBLE_S (the status line never completes within
    any deadline a test uses)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()
    conns = []

    def serve(conn):
        try:
            conn.settimeout(5)
            conn.recv(65536)
            for b in b"HTTP/1.1 204 No Content\r\nX-Slow: " + b"a" * 10000:
                if stop.wait(DRIBBLE_S):
                    return
                conn.sendall(bytes([b]))
        except OSError:
            pass
        finally:
            conn.close()

    def accept():
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conns.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}", conns
    stop.set()
    th.join(5)
    srv.close()


def _env(tmp_path, url):
    return {**os.environ, "RTLAB_INFLUX_URL": url, "RTLAB_STATE_DIR": str(tmp_path / "state"),
            "RTLAB_PUBLISH_DEADLINE_S": str(DEADLINE_S), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_publish_to_a_dribbling_store_ends_by_its_deadline_and_spools(tmp_path, dribbling_store):
    url, conns = dribbling_store
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run = _run()
    (run_dir / "run.json").write_text(json.dumps(run.to_json()))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "publish", str(run_dir)], cwd=ROOT,
                         env=_env(tmp_path, url), capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert conns, "the store was never asked"
    assert "Traceback" not in out
    # one deadline for the whole publish (Python start-up and spooling on top)
    assert took < DEADLINE_S + 30, (took, out)
    assert "publish deadline" in out, out
    spool = Spool(tmp_path / "state" / "spool")
    assert spool.pending_points() > 0, out
    assert f"{spool.pending_points()} spooled" in out or "spooled" in out, out


def test_run_keeps_its_verdict_and_exit_code_when_the_store_dribbles(tmp_path, dribbling_store, write_campaign):
    url, conns = dribbling_store
    camp = write_campaign("boards: [local]\n"
                          "suites:\n  - suite: cyclictest\n    params: {duration_s: 1, interval_us: 1000}\n")
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(camp),
                          "--results", str(tmp_path / "results")], cwd=ROOT, env=_env(tmp_path, url),
                         capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    run_dir = out.split("results: ")[-1].split()[0]
    verdict = json.loads(open(os.path.join(run_dir, "run.json")).read())["verdict"]
    assert verdict == "pass", out[-2000:]  # a 10 s budget on the local board
    assert res.returncode == 0, out[-2000:]
    assert "verdict: PASS" in res.stdout, out[-2000:]
    assert conns and "publish deadline" in out, out[-2000:]
    assert Spool(tmp_path / "state" / "spool").pending_points() > 0
    assert took < 300, took
