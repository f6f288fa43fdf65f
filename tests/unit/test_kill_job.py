"""The end of a job kills what the job started, and nothing of the jobs
beside it: under `--places N` other jobs' threads start children of the
same runner process (labgrid-client reserve/lock/power, their keepers)
while a job runs, and the job's end once SIGKILLed them all (a parallel
job's lock failed with "labgrid-client exit -9" in bench_rack)."""
import os
import subprocess
import sys
import time

from rtlab.run import joblife


def _sleeper(env_extra: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, **env_extra}, start_new_session=True)


def _running(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not joblife._alive(pid):
            return False
        time.sleep(0.05)
    return True


def test_a_jobs_end_kills_its_orphans_but_not_the_other_jobs_children():
    token = "0123abcd" * 4
    job = _sleeper({joblife.JOB_TOKEN_ENV: token})            # the job's pytest process
    before = joblife.my_children() - {job.pid}
    other_client = _sleeper({})                                # another job's labgrid-client
    other_job_thing = _sleeper({joblife.JOB_TOKEN_ENV: "f" * 32})  # another job's process
    orphan = _sleeper({joblife.JOB_TOKEN_ENV: token})          # a load of this job, setsid'd
    try:
        hit = joblife.kill_job(job.pid, before, token=token)
        assert job.pid in hit and orphan.pid in hit
        # (kill_job reaps what it killed: Popen sees no status of its own)
        assert not _running(job.pid) and not _running(orphan.pid)
        time.sleep(0.2)
        assert other_client.poll() is None and other_job_thing.poll() is None
        assert other_client.pid not in hit and other_job_thing.pid not in hit
    finally:
        for p in (job, other_client, other_job_thing, orphan):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_without_a_token_every_new_child_is_the_jobs():
    """(the old rule, still used where no token is known)"""
    job = _sleeper({})
    before = joblife.my_children() - {job.pid}
    stray = _sleeper({})
    try:
        assert stray.pid in joblife.kill_job(job.pid, before)
        assert not _running(stray.pid)
    finally:
        for p in (job, stray):
            if p.poll() is None:
                p.kill()
            p.wait()
