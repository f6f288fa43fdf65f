"""Board tests forked from a warm process (rtlab.run.forkserver): the job process
is the runner's own child, starts clean (its environment, working directory,
log, session; none of the runner's descriptors), its exit code and a
cancel (SIGINT) come through as from a subprocess, and a runner that is no
subreaper gets no fork server (jobs then start as plain subprocesses)."""
import json
import subprocess
import sys
import textwrap

from rtlab import ROOT

#: what a job runs: one test that writes down what its process looks like
BOARD_TEST = textwrap.dedent('''
    import json, os, time
    def test_job(tmp_path_factory):
        fds = {}
        for f in os.listdir("/proc/self/fd"):
            try:
                fds[f] = os.readlink(f"/proc/self/fd/{f}")
            except OSError:
                pass
        info = {"ppid": os.getppid(), "sid": os.getsid(0), "pid": os.getpid(), "cwd": os.getcwd(),
                "env": os.environ.get("JOB_MARK"), "stray": os.environ.get("RUNNER_ONLY"), "fds": fds}
        with open(os.environ["JOB_OUT"], "w") as f:
            json.dump(info, f)
        if os.environ.get("JOB_SLEEP"):
            time.sleep(float(os.environ["JOB_SLEEP"]))
        assert os.environ.get("JOB_FAIL") != "1"
''')

RUNNER = textwrap.dedent('''
    import fcntl, json, os, signal, sys, time
    from pathlib import Path
    from rtlab.run import forkserver
    from rtlab.run.joblife import become_subreaper, is_subreaper
    d = Path(sys.argv[1])
    out = {"subreaper_before": is_subreaper(),
           "server_without_subreaper": forkserver.start() is not None}
    become_subreaper()
    os.environ["RUNNER_ONLY"] = "1"
    lock = open(d / "board.lock", "w")  # the runner holds a board lock: no job may inherit it
    fcntl.flock(lock, fcntl.LOCK_EX)
    server = forkserver.start()
    args = [str(d / "test_board.py"), "-q", "-p", "no:cacheprovider", "--rootdir", str(d), "-c", os.devnull]
    env = {"PATH": os.environ["PATH"], "JOB_MARK": "job-1", "JOB_OUT": str(d / "job1.json")}
    if os.environ.get("RTLAB_HOME"):
        env["RTLAB_HOME"] = os.environ["RTLAB_HOME"]
    t0 = time.monotonic()
    job = server.spawn(args, env, str(d / "cwd"), d / "job1.log")
    out["rc_ok"] = job.wait(timeout=60)
    out["first_s"] = time.monotonic() - t0
    out["job1"] = json.loads((d / "job1.json").read_text())
    out["job1_pid"] = job.pid
    out["runner"] = os.getpid()
    t0 = time.monotonic()
    job = server.spawn(args, {**env, "JOB_FAIL": "1", "JOB_OUT": str(d / "job2.json")}, str(d / "cwd"), d / "job2.log")
    out["rc_fail"] = job.wait(timeout=60)
    out["second_s"] = time.monotonic() - t0
    job = server.spawn(args, {**env, "JOB_SLEEP": "60", "JOB_OUT": str(d / "job3.json")}, str(d / "cwd"), d / "job3.log")
    while not (d / "job3.json").exists():
        time.sleep(0.05)
    out["poll_running"] = job.poll()
    job.send_signal(signal.SIGINT)  # the runner's cancel
    out["rc_cancel"] = job.wait(timeout=30)
    server.close()
    out["server_exit"] = server.proc.returncode
    print(json.dumps(out))
''')


def test_a_forked_job_is_the_runners_child_and_starts_clean(tmp_path):
    (tmp_path / "test_board.py").write_text(BOARD_TEST)
    (tmp_path / "cwd").mkdir()
    res = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path)], capture_output=True, text=True,
                         timeout=240, cwd=str(ROOT))
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    # no subreaper, no fork server: a forked job could not be waited for
    assert out["subreaper_before"] is False and out["server_without_subreaper"] is False
    job = out["job1"]
    assert job["ppid"] == out["runner"]                      # re-parented: the runner waits for it
    assert job["sid"] == job["pid"] == out["job1_pid"]      # a session of its own (kill the job = its group)
    assert job["cwd"] == str(tmp_path / "cwd")
    assert job["env"] == "job-1" and job["stray"] is None   # the job's environment, not the runner's
    # none of the runner's descriptors: not its board lock, not the server's request pipes
    # (what is open is pytest's own: its capture files, the log)
    assert not [t for t in job["fds"].values() if "board.lock" in t or t.startswith("pipe:")], job["fds"]
    assert job["fds"]["0"] == "/dev/null"
    assert "1 passed" in (tmp_path / "job1.log").read_text()  # stdout/stderr: the job's log
    assert out["rc_ok"] == 0 and out["rc_fail"] == 1
    assert out["poll_running"] is None
    assert out["rc_cancel"] == 2                             # SIGINT: pytest's "interrupted", as in a subprocess
    assert "KeyboardInterrupt" in (tmp_path / "job3.log").read_text()
    assert out["server_exit"] == 0                           # ends with the runner's last request


def test_a_runner_without_a_server_starts_board_tests_as_subprocesses(tmp_path):
    """The runner's fallback path: the same job started by a fresh interpreter."""
    from rtlab.run import runner

    (tmp_path / "test_board.py").write_text(BOARD_TEST)
    assert runner._FORK_SERVER is None  # pytest is no subreaper: run_campaign starts none here
    with open(tmp_path / "job.log", "w") as log:
        proc = runner._start_board_tests([str(tmp_path / "test_board.py"), "-q", "-p", "no:cacheprovider",
                                          "--rootdir", str(tmp_path), "-c", "/dev/null"],
                                         {"PATH": "/usr/bin:/bin", "JOB_OUT": str(tmp_path / "j.json")},
                                         tmp_path / "job.log", log, pdeathsig=False)
        assert isinstance(proc, subprocess.Popen) and proc.wait(timeout=120) == 0
    assert json.loads((tmp_path / "j.json").read_text())["ppid"] != 1


def test_waiting_for_a_forked_job_times_out_on_time_and_then_gets_its_code():
    """ForkedJob.wait blocks on the process (no busy polling during a
    measurement) and keeps Popen's contract: TimeoutExpired after *timeout*."""
    import os
    import time

    from rtlab.run.forkserver import ForkedJob

    pid = os.fork()
    if pid == 0:
        time.sleep(3.0)
        os._exit(3)
    job = ForkedJob(pid)
    t0 = time.monotonic()
    try:
        job.wait(timeout=1.0)
        raise AssertionError("a running job's wait returned")
    except subprocess.TimeoutExpired:
        assert 0.95 < time.monotonic() - t0 < 1.8  # not twice the timeout
    assert job.poll() is None and job.wait(timeout=30) == 3 and job.returncode == 3
