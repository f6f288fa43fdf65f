"""`rtlab lava lab down` leaves no job behind: lava-worker starts each job's
lava-run in a session of its own, so one still running when the worker is
stopped outlived it (found spinning at 72 % of a CPU for 53 min after a test
run's lab went down). Every process working in the lab's directory goes."""
import os
import subprocess
import time

from rtlab.core.procutil import processes_in_dir
from rtlab.lava.lab import LocalLavaLab


def test_down_ends_a_job_process_that_outlived_the_worker(tmp_path):
    lab_dir = tmp_path / "lab"
    (lab_dir / "worker").mkdir(parents=True)
    elsewhere = subprocess.Popen(["sleep", "300"], cwd=tmp_path, start_new_session=True)
    # a lava-run: its own session, working in the lab (here one level down), with a child
    job = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], cwd=lab_dir / "worker", start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        lab = LocalLavaLab(lab_dir)
        while time.monotonic() < deadline and len(processes_in_dir(lab_dir)) < 2:
            time.sleep(0.05)
        assert len(processes_in_dir(lab_dir)) == 2  # the shell and its sleep
        stopped = lab.down()
        job.wait(timeout=10)  # ended (by its signal, or when its child was killed first)
        assert stopped == ["2 job process(es)"] and processes_in_dir(lab_dir) == []
        assert elsewhere.poll() is None  # what works elsewhere is not the lab's
    finally:
        for p in (job, elsewhere):
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
