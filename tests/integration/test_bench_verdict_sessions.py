"""bench/bench_verdict.py --sessions at a smoke's scale (issue 47 item 6):
the measurement of the verdict across real sessions runs end to end on the
local board (baseline sessions, unchanged candidates and one per spin size,
each its own `rtlab run --repeat-until-decided`) and prints every figure the
measurements page takes from it. The figures themselves are the lead's
hour-long run on a quiet machine (docs/measurements/verdict.md); here the
machine is loaded, so only what holds on any day is asserted: every key of
every candidate decided (or its runs lost to INFRA, named), the summary's
lines there."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

#: latency measured on this machine, minutes of it
pytestmark = [pytest.mark.serial, pytest.mark.long]


# make test-long: make test proves the regression verdict on the local board
# with tests/integration/test_until_decided_local.py::test_separate_sessions_a_seen_regression_is_red_and_nothing_is_green_unseen
def test_the_sessions_measurement_runs_and_reports_every_figure(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_verdict.py"), "--sessions", "--short",
                          "--keep", str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for line in ("across sessions: 3 baseline sessions x 3 repeats of 2 keys", "machine: steal ",
                 "baseline p99: runs ", "unchanged: ", "power at p99 x2 ", "spin 30 us: found (REGRESSION or FAIL) ",
                 "spin 60 us: ", "spin 120 us: ", "board-minutes per decided key: "):
        assert line in out, (line, out)
    doc = json.loads((tmp_path / "b" / "bench-sessions.json").read_text())
    rows = doc["rows"]
    assert len(rows) == 5 and sorted(r["spin_us"] for r in rows) == [0, 0, 30, 60, 120]
    for r in rows:
        # the closed design decides every key; only runs the lab lost leave one open
        assert r["undecided"] == 0 or r["infra_measurements"] > 0, r
        assert r["regression"] + r["ok"] + r["blind"] + r["undecided"] == 2, r
    assert len(doc["base_dirs"]) == 3 and all(doc["baseline_p99_by_session"])
