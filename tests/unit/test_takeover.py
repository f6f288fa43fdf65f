"""The keeper's work passed to the board's next holder (rtlab.run.joblife.take_over):
a job record left beside the lock names a job whose runner and keeper both
died; its processes are ended, its raw files kept, its record gone. A record
is a file in a directory others may reach: one that rtlab did not write (a
link, another user's, a cgroup or work dir not of rtlab's shape) is never
acted on."""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from rtlab.core.procutil import pid_alive
from rtlab.errors import InfraError
from rtlab.run import joblife
from rtlab.targets.boards import find_board


@pytest.fixture
def locks(tmp_path, monkeypatch):
    d = tmp_path / "locks"
    d.mkdir()
    monkeypatch.setenv(joblife.LOCK_DIR_ENV, str(d))
    return d


def test_a_dead_jobs_processes_are_ended_and_its_raw_files_kept(tmp_path, locks):
    token = uuid.uuid4().hex
    workdir = Path(f"/tmp/rtlab/jobs/takeover-{token[:12]}-local-host")
    (workdir / "cyclictest@cpu").mkdir(parents=True)
    (workdir / "cyclictest@cpu" / "cyclictest.json").write_text("{}")
    run_dir = tmp_path / "RUN1"
    job_dir = run_dir / "local" / "host"
    job_dir.mkdir(parents=True)
    (run_dir / "run-started.json").write_text("{}")
    # one left with the token in its environment, one by its cwd alone (the
    # local board's shell starts loads with a clean environment)
    by_token = subprocess.Popen(["sleep", "300"], env={**os.environ, joblife.JOB_TOKEN_ENV: token},
                                start_new_session=True)
    by_cwd = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"], cwd=workdir, env={"PATH": os.environ["PATH"]},
                              start_new_session=True)
    try:
        time.sleep(0.2)
        (locks / "local.job.json").write_text(json.dumps({
            "run_id": "RUN1", "job": "local/host", "workdir": str(workdir), "job_dir": str(job_dir),
            "token": token, "cgroup": None, "runner": 999999999, "keeper": 999999998}))
        said = []
        ended = joblife.take_over(find_board("local"), progress=said.append)
        gone = [not pid_alive(p.pid) for p in (by_token, by_cwd)]
    finally:
        by_token.kill()
        by_cwd.kill()
    assert gone == [True, True], "a process of the dead job lives on"
    assert len(ended) >= 2 and any("sleep" in e for e in ended), ended
    assert said and "job local/host of run RUN1 died with its keeper and left" in said[0], said
    assert (job_dir / "cyclictest@cpu" / "cyclictest.json").read_text() == "{}"
    assert not workdir.exists() and not (locks / "local.job.json").exists()
    assert joblife.take_over(find_board("local")) == []  # nothing left to do


@pytest.mark.parametrize("edit,why", [
    (lambda r: {**r, "cgroup": "/sys/fs/cgroup/unified"}, "the machine's root cgroup"),
    (lambda r: {**r, "cgroup": "/sys/fs/cgroup/unified/rtlab-job-" + "0" * 32}, "another job's cgroup"),
    (lambda r: {**r, "workdir": "/etc"}, "a work dir that is none of rtlab's"),
    (lambda r: {**r, "workdir": "/tmp/rtlab/jobs/../../etc"}, "a work dir that climbs out"),
    (lambda r: {**r, "token": "x; rm -rf /"}, "a token that is no token"),
    (lambda r: ["not", "a", "record"], "not a record"),
])
def test_a_record_rtlab_did_not_write_is_never_acted_on(tmp_path, locks, edit, why):
    token = uuid.uuid4().hex
    victim = subprocess.Popen(["sleep", "300"], env={**os.environ, joblife.JOB_TOKEN_ENV: token},
                              start_new_session=True)
    try:
        rec = {"run_id": "R", "job": "local/host", "workdir": "/tmp/rtlab/jobs/R-local-host",
               "job_dir": str(tmp_path), "token": token, "cgroup": None}
        (locks / "local.job.json").write_text(json.dumps(edit(rec)))
        assert joblife.take_over(find_board("local"), progress=lambda m: None) == [], why
        time.sleep(0.1)
        assert victim.poll() is None, f"{why}: a process was killed on a planted record"
        assert not (locks / "local.job.json").exists()
    finally:
        victim.kill()


def test_a_record_that_is_a_link_is_not_followed(tmp_path, locks):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"token": uuid.uuid4().hex, "workdir": "/tmp/rtlab/jobs/R-local-host"}))
    (locks / "local.job.json").symlink_to(target)
    assert joblife.take_over(find_board("local"), progress=lambda m: None) == []
    assert target.exists(), "the link's target is never touched"


def test_a_dead_job_that_outlives_sigkill_keeps_the_board_infra(tmp_path, locks, monkeypatch):
    """A process SIGKILL cannot end (here: one that is not ours to end, a
    stand-in for a task stuck in the kernel) keeps the board: INFRA naming it."""
    token = uuid.uuid4().hex
    (locks / "local.job.json").write_text(json.dumps({"run_id": "R", "job": "local/host", "token": token,
                                                      "cgroup": None, "workdir": None}))
    monkeypatch.setattr(joblife, "_record_processes", lambda rec: [os.getppid()])
    monkeypatch.setattr(joblife.os, "kill", lambda pid, sig: None)
    with pytest.raises(InfraError) as e:
        joblife.take_over(find_board("local"), progress=lambda m: None, timeout_s=0.3)
    assert "died with its keeper" in str(e.value) and "outlived SIGKILL for 0.3 s" in str(e.value)
