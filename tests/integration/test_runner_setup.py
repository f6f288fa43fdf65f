"""A lab runner host: `make runner-setup` as root once, then the jobs' user
has exactly its grants (docs/runner.md), and `rtlab doctor` under that user
names what is missing, with its fix, when the runner is started without them.
The GitLab pipeline tests run every job on this runner (test_gitlab_ci.py)."""
from __future__ import annotations

import subprocess

from ci_runner import lab_runner

CAP_SYS_NICE, CAP_IPC_LOCK = 23, 14


def as_runner(runner, *cmd: str, plain: bool = False) -> subprocess.CompletedProcess:
    """*cmd* as the runner's user: as its service runs it (env/runner-exec.sh),
    or *plain*: the user alone, none of its grants (a runner started wrong)."""
    argv = runner.argv(cmd) if not plain else \
        ["setpriv", f"--reuid={runner.user}", f"--regid={runner.user}", "--init-groups", "--reset-env", "--",
         "env", f"HOME={runner.home}", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd="/")


def test_the_jobs_user_has_its_grants_and_nothing_more():
    runner = lab_runner()
    assert "doctor: 0 problems" in runner.setup_log, runner.setup_log[-3000:]
    r = as_runner(runner, "sh", "-c", "id -u; grep -E '^Cap(Eff|Bnd|Amb):' /proc/self/status; "
                                      "cat /proc/self/cgroup | grep '^0::'; "
                                      f"touch '{runner.rtlab_home}/budgets/x' 2>/dev/null && echo wrote-budgets; "
                                      "touch /root/x 2>/dev/null && echo wrote-root; true")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] != "0", r.stdout
    caps = {k.rstrip(":"): int(v, 16) for k, v in zip(lines[1:7:2], lines[2:7:2])}
    granted = 1 << CAP_SYS_NICE | 1 << CAP_IPC_LOCK
    assert caps == {"CapEff": granted, "CapBnd": granted, "CapAmb": granted}, r.stdout
    assert f"rtlab-runner-{runner.user}" in r.stdout  # the delegated cgroup
    assert "wrote-budgets" not in r.stdout and "wrote-root" not in r.stdout


def test_doctor_names_each_missing_grant_with_its_fix():
    runner = lab_runner()
    rtlab = str(runner.rtlab_home / ".venv" / "bin" / "rtlab")
    ok = as_runner(runner, rtlab, "doctor", "--no-store", "--board", "local")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok    privileges: SCHED_FIFO up to priority" in ok.stdout
    bare = as_runner(runner, rtlab, "doctor", "--no-store", "--board", "local", plain=True)
    out = bare.stdout + bare.stderr
    assert bare.returncode == 1, out
    fails = [ln for ln in out.splitlines() if ln.startswith("FAIL  privileges:")]
    for words in ("SCHED_FIFO", "locks its memory", "cannot make a cgroup"):
        assert any(words in ln for ln in fails), (words, fails)
    assert out.count(f"make runner-setup RUNNER_USER={runner.user}") >= 3, out
    # the sandbox is no grant: it works for the user either way
    assert "ok    privileges: kernel trees build confined" in bare.stdout


def test_runner_setup_again_changes_nothing():
    runner = lab_runner()
    r = subprocess.run(["make", "-s", "-C", str(runner.rtlab_home), "runner-setup", f"RUNNER_USER={runner.user}",
                        "PYTHON=/usr/bin/python3"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    changes = [ln for ln in r.stdout.splitlines() if ln.startswith("runner-setup:")
               and not ln.startswith("runner-setup: checking as")]
    assert changes == [], changes
