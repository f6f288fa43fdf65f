"""The test job of .gitlab-ci.yml with RTLAB_UNTIL_DECIDED (issue #23 item
2): its script lines run in bash as the runner runs them, `rtlab` replaced
by a recorder (what the job passes is the point here; the command itself is
tested on the local board, tests/integration/test_until_decided_local.py)."""
import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

RECORDER = """#!/bin/sh
echo "$*" >> "$LOG"
case "$1" in
  run) for d in b1 b2; do mkdir -p "$RESULTS_DIR/$d"; echo '{}' > "$RESULTS_DIR/$d/run.json"; done
       exit "${RUN_EXIT:-0}";;
  gate) exit "${GATE_EXIT:-0}";;
esac
"""


def run_test_job(tmp_path, **env):
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    script = "\n".join(ci["test"]["script"])
    rec = tmp_path / "rtlab"
    rec.write_text(RECORDER)
    rec.chmod(0o755)
    log = tmp_path / "log"
    base = {"PATH": os.environ["PATH"], "RTLAB": str(rec), "LOG": str(log), "BOARD": "qemu-aarch64",
            "VARIANT": "rt", "RTLAB_CAMPAIGN": "default", "KERNEL_TREE": "/k", "RESULTS_DIR":
            "results/qemu-aarch64/rt", **{k: v for k, v in ci["variables"].items() if isinstance(v, str)}}
    res = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={**base, **env},
                         capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls, (tmp_path / "results/qemu-aarch64/rt/exit-code")


def test_plain_repeats_unless_asked(tmp_path):
    res, calls, code = run_test_job(tmp_path, RTLAB_REPEAT="5", RTLAB_BASELINE_BRANCH="main")
    assert res.returncode == 0, res.stderr
    assert calls[0].startswith("run ") and calls[0].endswith("--repeat 5")
    assert not any(c.startswith("gate") for c in calls)


def test_until_decided_against_the_pipelines_baseline(tmp_path):
    res, calls, code = run_test_job(tmp_path, RTLAB_UNTIL_DECIDED="1", RTLAB_BASELINE_BRANCH="rt/main",
                                RUN_EXIT="2", GATE_EXIT="0")
    assert calls[0].endswith("--repeat-until-decided --baseline-store --branch rt/main --last 5"), calls
    # an undecided verdict (rtlab run exit 2) is not the job's: its budgets are (rtlab gate, 0)
    assert calls[1] == "gate results/qemu-aarch64/rt/b1 results/qemu-aarch64/rt/b2", calls
    assert res.returncode == 0 and code.read_text().strip() == "0"
    # every batch in the JUnit report
    assert calls[2].startswith("junit results/qemu-aarch64/rt/b1 results/qemu-aarch64/rt/b2 -o")


def test_until_decided_budget_broken_fails_the_job(tmp_path):
    res, calls, code = run_test_job(tmp_path, RTLAB_UNTIL_DECIDED="1", RTLAB_BASELINE_BRANCH="main",
                                RTLAB_BASELINE_PIN="main-6.12", RUN_EXIT="1", GATE_EXIT="1")
    assert calls[0].endswith("--repeat-until-decided --pin main-6.12"), calls
    assert res.returncode == 1 and code.read_text().strip() == "1"


def test_until_decided_needs_a_baseline(tmp_path):
    # budgets only (an rtlab push): plain repeats, the flag has nothing to decide against
    res, calls, code = run_test_job(tmp_path, RTLAB_UNTIL_DECIDED="1", RTLAB_BASELINE_BRANCH="", RTLAB_REPEAT="3")
    assert calls[0].endswith("--repeat 3") and res.returncode == 0
