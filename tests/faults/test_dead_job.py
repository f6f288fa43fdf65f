"""A run never measures under a load it did not start (issue 47): a job
whose runner and keeper are both SIGKILLed mid-measurement leaves its CPU
load (stress-ng), the load's sampler and its cgroup. Its record beside the
board's lock names it:

- the next run that takes that board's lock ends it first (the keeper's
  work, rtlab.run.joblife.take_over) and only then measures;
- a run on another lock (another lab sharing this machine) finds the dead
  job's load busy on the CPUs and is INFRA, naming it;
- the witness's scratch files stayed in the dead job's directory, none in
  the temporary directory.

The dead job's load is real and takes every CPU for seconds, so nothing of
make test runs beside this file (`serial`)."""
import json
import os
import signal
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from rtlab.run.joblife import board_workdir

from .conftest import kill_leftovers, rtlab
from .conftest import start_rtlab as _start, wait_for_line as _wait_for

pytestmark = pytest.mark.serial


def _stress_pids(workdir: str) -> list[int]:
    """The dead job's stress-ng processes: working in its work dir (the
    local board's shell starts loads with a clean environment)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "cwd").startswith(workdir) and \
                        (p / "comm").read_text().startswith("stress-ng"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def _end(locks: Path) -> None:
    """Clean-up after a failed assertion: what the dead job left, ended as
    its board's next holder would."""
    from rtlab.run import joblife
    from rtlab.targets.boards import find_board
    os.environ["RTLAB_LOCK_DIR"] = str(locks)
    try:
        joblife.take_over(find_board("local"), progress=lambda m: None)
    finally:
        del os.environ["RTLAB_LOCK_DIR"]


def test_a_job_whose_runner_and_keeper_died_is_ended_by_the_next_holder_and_busy_to_others(tmp_path, write_campaign):
    marker = f"rtlab-dead-{uuid.uuid4().hex[:12]}"
    a = write_campaign("boards: [local]\nsuites:\n  - suite: cyclictest\n    loads: [cpu]\n"
                       f"    params: {{duration_s: 120, extra_args: [{marker}]}}\n", name="a.yaml")
    b = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {duration_s: 2}}\n", name="b.yaml")
    locks = tmp_path / "locks"
    tmp_before = set(Path(tempfile.gettempdir()).glob("rtlab-witness-*"))
    first = _start(["run", "--campaign", a, "--results", tmp_path / "r", "--no-publish"],
                   {"RTLAB_LOCK_DIR": str(locks)})
    try:
        lines = _wait_for(first, "cyclictest@cpu: running", 180)
        run_a = next(ln for ln in lines if "] run " in ln).split("] run ")[1].split(":")[0]
        wd_a = board_workdir(run_a, "local", "host")
        for _ in range(60):
            if _stress_pids(wd_a):
                break
            time.sleep(0.5)
        time.sleep(2)  # into the measurement
        record = json.loads((locks / "local.job.json").read_text())
        assert record["run_id"] == run_a and record["runner"] == first.pid, record
        os.kill(record["keeper"], signal.SIGKILL)  # the keeper first: nothing is left to end the job
        first.kill()
        first.wait()
        time.sleep(2)
        stress = _stress_pids(wd_a)
        assert stress, "the dead job's load ended by itself: nothing left to find"
        cgroup = Path(record["cgroup"]) if record["cgroup"] else None
        assert cgroup is None or cgroup.is_dir()

        # another lab's run (its own lock) on this machine: INFRA, naming the load
        other = rtlab("run", "--campaign", b, "--results", tmp_path / "r2", "--no-publish",
                      env={"RTLAB_LOCK_DIR": str(tmp_path / "other-locks")}, timeout=300)
        if cgroup is not None:  # the dead job is found by its cgroup, which no keeper watches
            assert other.returncode == 2, other.stdout + other.stderr
            busy = other.stdout.split("CPUs busy before the measurement", 1)[-1].splitlines()[0]
            assert "stress-ng" in busy and "(pid " in busy and "% of a CPU" in busy, other.stdout
        assert _stress_pids(wd_a), "only the board's next holder ends a job of that board"

        # the board's next holder: ends the dead job, then measures, and passes
        t0 = time.time()
        nxt = rtlab("run", "--campaign", b, "--results", tmp_path / "r3", "--no-publish",
                    env={"RTLAB_LOCK_DIR": str(locks)}, timeout=300)
        out = nxt.stdout + nxt.stderr
        assert nxt.returncode == 0, out
        assert f"job local/host of run {run_a} died with its keeper and left" in out and "stress-ng" in out, out
        (run_c,) = [p for p in (tmp_path / "r3").iterdir() if p.name != "latest"]
        raw = run_c / "local" / "host" / "cyclictest@idle"
        start_c = (raw / "cyclictest.json").stat().st_mtime - json.loads((raw / "exit.json").read_text())["elapsed_s"]
        assert not _stress_pids(wd_a) and start_c > t0, "measured before the dead job's load was gone"
        assert not (locks / "local.job.json").exists() and not Path(wd_a).exists()
        assert cgroup is None or not cgroup.exists(), "the dead job's cgroup was left"
    finally:
        first.kill()
        kill_leftovers(marker)
        kill_leftovers(str(tmp_path))
        _end(tmp_path / "locks")
    # the witness's scratch files went with the job: in its directory, none in /tmp
    assert set(Path(tempfile.gettempdir()).glob("rtlab-witness-*")) == tmp_before
    assert (tmp_path / "r" / run_a / "local" / "host" / "cyclictest@cpu" / ".stall-witness").is_dir()
