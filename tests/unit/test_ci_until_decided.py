"""The test job of .gitlab-ci.yml with RTLAB_UNTIL_DECIDED (issue #23 item
2) and with paired boots (item 3b): its script lines run in bash as the
runner runs them, `rtlab` replaced by a recorder (what the job passes is the
point here; the commands themselves are tested on the local board,
tests/integration/test_until_decided_local.py, and on QEMU,
tests/integration/test_paired.py; the whole pipeline in test_gitlab_ci.py)."""
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
  baseline) echo "${METHOD:-store}";;
  paired) for d in c1 c2; do mkdir -p "$RESULTS_DIR/candidate/$d"; echo '{}' > "$RESULTS_DIR/candidate/$d/run.json"; done
          exit "${PAIRED_EXIT:-0}";;
esac
"""

#: ci/kernel-tree.sh stand-in for the paired tree: says where it was asked to
#: put the kernel and holds a lock on fd 9 as the real one does
KERNEL_TREE_SH = """echo "tree $RTLAB_CI_KERNEL_DIR" >> "$LOG"
KERNEL_TREE=$RTLAB_CI_KERNEL_DIR
exec 9>"$RTLAB_CI_KERNEL_DIR.lock"; flock -s 9
"""


def run_test_job(tmp_path, **env):
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    script = "\n".join(ci["test"]["script"])
    tmp_path.mkdir(parents=True, exist_ok=True)
    rec = tmp_path / "rtlab"
    rec.write_text(RECORDER)
    rec.chmod(0o755)
    log = tmp_path / "log"
    home = tmp_path / "home"
    (home / "ci").mkdir(parents=True)
    (home / "ci" / "kernel-tree.sh").write_text(KERNEL_TREE_SH)
    base = {"PATH": os.environ["PATH"], "RTLAB": str(rec), "LOG": str(log), "BOARD": "qemu-aarch64",
            "VARIANT": "rt", "RTLAB_CAMPAIGN": "default", "KERNEL_TREE": "/k", "RESULTS_DIR":
            "results/qemu-aarch64/rt", **{k: v for k, v in ci["variables"].items() if isinstance(v, str)},
            "RTLAB_HOME": str(home), "KERNEL_REPO": "/repo", "KERNEL_SHA": "c" * 40}
    res = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={**base, **env},
                         capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls, (tmp_path / "results/qemu-aarch64/rt/exit-code")


def test_until_decided_by_default_plain_repeats_without_a_baseline_or_when_asked(tmp_path):
    # the shipped default: a pipeline with a baseline measures until decided
    res, calls, code = run_test_job(tmp_path / "d", RTLAB_REPEAT="5", RTLAB_BASELINE_BRANCH="main")
    assert res.returncode == 0, res.stderr
    assert calls[0].endswith("--repeat-until-decided --baseline-store --branch main --last 5"), calls
    # no baseline branch (a budgets-only pipeline), or switched off: plain repeats
    for sub, env in (("n", {}), ("o", {"RTLAB_BASELINE_BRANCH": "main", "RTLAB_UNTIL_DECIDED": "0"})):
        res, calls, code = run_test_job(tmp_path / sub, RTLAB_REPEAT="5", **env)
        assert res.returncode == 0, res.stderr
        assert calls[0].startswith("run ") and calls[0].endswith("--repeat 5"), calls
        assert not any(c.startswith("gate") for c in calls)


def test_until_decided_against_the_pipelines_baseline(tmp_path):
    res, calls, code = run_test_job(tmp_path, RTLAB_UNTIL_DECIDED="1", RTLAB_BASELINE_BRANCH="rt/main",
                                RUN_EXIT="2", GATE_EXIT="0")
    assert calls[0].endswith("--repeat-until-decided --baseline-store --branch rt/main --last 5"), calls
    # an undecided verdict (rtlab run exit 2) is not the job's: its budgets are (rtlab gate, 0)
    # judged by the budgets the run measured under (RTLAB_GATE_BUDGETS, else the lab's)
    assert calls[1].startswith("gate results/qemu-aarch64/rt/b1 results/qemu-aarch64/rt/b2 --budgets "), calls
    assert calls[1].endswith("/home/budgets/default.yaml"), calls
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


def test_paired_boots_where_the_board_class_says_so(tmp_path):
    res, calls, code = run_test_job(tmp_path, RTLAB_BASELINE_BRANCH="main", RTLAB_BASE_SHA="b" * 40,
                                    METHOD="paired", PAIRED_EXIT="2", GATE_EXIT="0",
                                    RTLAB_CI_PAIRED_DIR=str(tmp_path / "paired-tree"))
    policy = f"{tmp_path / 'home'}/budgets/default.yaml"  # the lab's, never the campaign's
    assert calls[0] == f"baseline method --campaign default --board qemu-aarch64 --budgets {policy}", calls
    # a kernel tree of its own, then the baseline commit and the commit under test, alternately
    assert calls[1] == f"tree {tmp_path / 'paired-tree'}", calls
    assert calls[2] == (f"paired --campaign default --board qemu-aarch64 --variant rt --kernel-tree "
                        f"{tmp_path / 'paired-tree'} --baseline {'b' * 40} --candidate {'c' * 40} --pairs 5 "
                        f"--results results/qemu-aarch64/rt --budgets {policy}"), calls
    assert not any(c.startswith("run ") for c in calls)
    # an undecided paired verdict is the gate's to say: the job's exit is the candidate runs' budgets
    assert calls[3].startswith("gate results/qemu-aarch64/rt/candidate/c1 results/qemu-aarch64/rt/candidate/c2 "
                               "--budgets "), calls
    assert res.returncode == 0 and code.read_text().strip() == "0"
    assert calls[4].startswith("junit results/qemu-aarch64/rt/candidate/c1 results/qemu-aarch64/rt/candidate/c2 -o")


def test_store_baseline_where_the_class_says_store_or_no_base_commit(tmp_path):
    res, calls, _ = run_test_job(tmp_path, RTLAB_BASELINE_BRANCH="main", RTLAB_BASE_SHA="b" * 40,
                                 METHOD="store", RTLAB_REPEAT="5")
    assert calls[0].startswith("baseline method") and calls[1].startswith("run ") and res.returncode == 0, calls
    # no baseline commit from the trigger: the method is not even asked
    res, calls, _ = run_test_job(tmp_path / "b", RTLAB_BASELINE_BRANCH="main", METHOD="paired", RTLAB_REPEAT="5")
    assert calls[0].startswith("run ") and calls[0].endswith(
        "--repeat-until-decided --baseline-store --branch main --last 5"), calls


def test_a_kernel_push_measures_until_decided_not_its_rtlab_repeat(tmp_path):
    """docs/gating-merge-requests.md's repeats of a kernel push: the
    workflow's RTLAB_REPEAT for it (3) is not what runs. ci/verdict.sh gives
    a kernel push a baseline branch (its own), so by default its test jobs
    measure until decided, the first batch being the policy's first look
    (5: test_repeat_until_decided.py), even on a branch with no runs yet."""
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    push = next(r for r in ci["workflow"]["rules"]
                if "$KERNEL_SHA" in r.get("if", "") and "KERNEL_MR_IID" not in r["if"])
    repeat = push["variables"]["RTLAB_REPEAT"]
    assert repeat == "3"
    (tmp_path / "home" / "ci").mkdir(parents=True)
    (tmp_path / "home" / "ci" / "verdict.sh").write_text((ROOT / "ci" / "verdict.sh").read_text())
    env = {"KERNEL_BRANCH": "rt/next", "RTLAB_REPEAT": repeat, "RTLAB_HOME": str(tmp_path / "home")}
    verdict = subprocess.run(["bash", "-c", '. "$RTLAB_HOME/ci/verdict.sh" && echo "$RTLAB_BASELINE_BRANCH"'],
                             env={**os.environ, "KERNEL_SHA": "c" * 40, "KERNEL_REPO": "/repo", **env},
                             capture_output=True, text=True, timeout=60)
    assert verdict.stdout.strip().splitlines()[-1] == "rt/next", verdict.stderr
    res, calls, _ = run_test_job(tmp_path / "job", RTLAB_BASELINE_BRANCH="rt/next", RTLAB_REPEAT=repeat)
    assert res.returncode == 0, res.stderr
    assert calls[0].endswith("--repeat-until-decided --baseline-store --branch rt/next --last 5"), calls
    assert "--repeat 3" not in calls[0]


def run_gate_job(tmp_path, gate_exit, with_results=True):
    """The gate job's script, `rtlab` a recorder whose gate exits *gate_exit*."""
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    script = "\n".join(ci["gate"]["script"])
    tmp_path.mkdir(parents=True, exist_ok=True)
    venv = tmp_path / "home" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "rtlab").write_text(RECORDER)
    (venv / "rtlab").chmod(0o755)
    (tmp_path / "home" / "ci").mkdir()
    (tmp_path / "home" / "ci" / "verdict.sh").write_text((ROOT / "ci" / "verdict.sh").read_text())
    d = tmp_path / "results" / "qemu-aarch64" / "rt"
    d.mkdir(parents=True)
    (d / "exit-code").write_text("0\n")
    if with_results:
        (d / "b1").mkdir()
        (d / "b1" / "run.json").write_text("{}")
    env = {"PATH": os.environ["PATH"], "LOG": str(tmp_path / "log"), "GATE_EXIT": str(gate_exit),
           "RESULTS_DIR": str(tmp_path / "x"), **{k: v for k, v in ci["variables"].items() if isinstance(v, str)},
           "RTLAB_HOME": str(tmp_path / "home"), "KERNEL_REPO": "/repo", "KERNEL_SHA": "c" * 40,
           "KERNEL_BRANCH": "main"}
    res = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    return res, ci["gate"]


def test_the_gate_job_passes_with_warnings_for_keys_not_gated(tmp_path):
    # rtlab gate exit 3 (budgets held, nothing regressed, a key not gated):
    # the job exits 3, which GitLab shows as passed with warnings
    res, job = run_gate_job(tmp_path / "a", 3)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "gate exit 3 (0 pass, 1 a budget broke or a key regressed, 2 infra or undecided, " \
           "3 passed with keys not gated)" in res.stdout
    assert job["allow_failure"] == {"exit_codes": [3]}
    # 1 and 2 stay failures; a test job without results is infra, whatever passed
    for rc in (0, 1, 2):
        assert run_gate_job(tmp_path / f"r{rc}", rc)[0].returncode == rc
    res, _ = run_gate_job(tmp_path / "m", 3, with_results=False)
    assert res.returncode == 2 and "no results" in res.stdout, res.stdout + res.stderr
    # the test jobs allow it too (and exit 1, never 2: that is retried)
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    assert ci["test"]["allow_failure"] == {"exit_codes": [1, 3]} and ci["test"]["retry"]["exit_codes"] == [2]
