"""Concurrent runs never mix, a cancelled run leaves nothing behind: board
locks, per-job work dirs, SIGTERM/SIGINT, killed holders. On the local
board (this machine), with real rt-tests and stress-ng."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rtlab.targets.boards import find_board
from rtlab.errors import InfraError
from rtlab.run.joblife import board_lock, board_workdir

from .conftest import ROOT, kill_leftovers, leftovers
from .conftest import start_rtlab as _start, wait_for_line as _wait_for



def test_lock_timeout_is_infra_naming_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_LOCK_DIR", str(tmp_path))
    board = find_board("local")
    said = []
    with board_lock(board, "RUN-A", "local/host"):
        with pytest.raises(InfraError, match=rf"busy for more than 0.5 s, held by pid {os.getpid()}, run RUN-A"):
            with board_lock(board, "RUN-B", "local/host", progress=said.append, timeout=0.5, poll_s=0.1):
                pass
    assert said and "run RUN-A" in said[0]
    with board_lock(board, "RUN-C", "local/host", timeout=0.5):  # released: free again
        pass
    # QEMU boards are created per job: nothing to lock
    with board_lock(find_board("qemu-aarch64"), "R", "j", timeout=0):
        with board_lock(find_board("qemu-aarch64"), "R2", "j", timeout=0):
            pass
    assert board_workdir("RUN-A", "local", "host") != board_workdir("RUN-A-2", "local", "host")


def test_second_run_waits_for_a_killed_holder_then_runs(tmp_path, write_campaign):
    """A job holding the local board is SIGKILLed: flock frees the board, the
    waiting run says who held it, then takes it and passes."""
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks")}
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time, sys\n"
        "from rtlab.targets.boards import find_board\nfrom rtlab.run.joblife import board_lock\n"
        "with board_lock(find_board('local'), 'HOLDER-RUN', 'local/host'):\n"
        "    print('held', flush=True); time.sleep(600)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    assert holder.stdout.readline().strip() == "held"
    path = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {duration_s: 1}}\n")
    proc = _start(["run", "--campaign", path, "--results", tmp_path / "r", "--no-publish",
                   "--lock-timeout", "120"], env)
    try:
        lines = _wait_for(proc, "is busy", 60)
        assert f"pid {holder.pid}, run HOLDER-RUN, job local/host" in lines[-1]
        holder.kill()
        holder.wait()
        out, err = proc.communicate(timeout=180)
    finally:
        holder.kill()
        proc.kill()
        kill_leftovers(str(tmp_path))
    assert proc.returncode == 0, out + err
    assert "lock taken after" in out and "Verdict: PASS" in out


def test_sigterm_cancels_kills_everything_keeps_raw_files_and_writes_run_json(tmp_path, write_campaign):
    """SIGTERM in the middle of a measurement under a load: exit 2, one line;
    run.json has the job INFRA "cancelled"; what the tool and the load wrote
    is kept (cyclictest writes its JSON when interrupted); no cyclictest,
    stress-ng, shell or pytest of the run is left."""
    marker = f"rtlab-fault-{uuid.uuid4().hex[:12]}"  # unique across xdist workers (tmp_path names are not)
    path = write_campaign("boards: [local]\nsuites:\n  - suite: cyclictest\n    loads: [cpu]\n"
                          # (60 s: no longer than a checkpoint segment, so the campaign loads without a warning)
                          f"    params: {{duration_s: 60, extra_args: [{marker}]}}\n")
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks"), "RTLAB_CANCEL_GRACE_S": "60"}
    proc = _start(["run", "--campaign", path, "--results", tmp_path / "r", "--no-publish"], env)
    try:
        lines = _wait_for(proc, "cyclictest@cpu: running", 120)
        run_id = next(l for l in lines if "] run " in l).split("] run ")[1].split(":")[0]
        for _ in range(120):  # the load starts and settles first
            if leftovers(marker):
                break
            time.sleep(0.5)
        assert leftovers(marker), "cyclictest is not running: nothing to cancel"
        time.sleep(2)  # into the measurement
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        time.sleep(0.5)
        still = leftovers(marker) + leftovers(str(tmp_path))
        kill_leftovers(marker)
        kill_leftovers(str(tmp_path))
    assert not still, still
    assert proc.returncode == 2, out + err
    assert err.strip().count("\n") == 0 and "cancelled (SIGTERM)" in err and "Traceback" not in err
    assert time.monotonic() - t0 < 90
    run_dir = tmp_path / "r" / run_id
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    assert job["verdict"] == "infra" and "cancelled (SIGTERM)" in job["infra_error"]
    raw = run_dir / "local" / "host" / "cyclictest@cpu"
    data = json.loads((raw / "cyclictest.json").read_text())  # what was measured until the cancel
    assert sum(int(t["cycles"]) for t in data["thread"].values()) > 0
    assert (raw / "stdout.txt").exists() and (raw / "load-cpu.json").exists()
    time.sleep(0.5)
    assert not leftovers(marker)
    assert not leftovers(str(tmp_path)) and not leftovers(board_workdir(run_id, "local", "host"))
    assert not Path(board_workdir(run_id, "local", "host")).exists()


def test_two_runs_started_together_never_mix(tmp_path, write_campaign):
    """Two `rtlab run --board local` in the same second, same results root:
    two run directories, one job on the board at a time (the second waits
    for the first), measurements that do not overlap in time, both PASS."""
    path = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {duration_s: 2}}\n")
    env = {"RTLAB_LOCK_DIR": str(tmp_path / "locks")}
    args = ["run", "--campaign", path, "--results", tmp_path / "r", "--no-publish"]
    procs = [_start(args, env), _start(args, env)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
        kill_leftovers(str(tmp_path))
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum("is busy" in out for out, _ in outs) == 1  # the second waited, naming the first
    dirs = sorted(p for p in (tmp_path / "r").iterdir() if p.name != "latest")
    assert len(dirs) == 2
    windows = []
    for d in dirs:
        raw = d / "local" / "host" / "cyclictest@idle"
        doc = json.loads((raw / "cyclictest.json").read_text())
        stat = (raw / "cyclictest.json").stat()
        windows.append((stat.st_mtime - json.loads((raw / "exit.json").read_text())["elapsed_s"],
                        stat.st_mtime, doc))
    windows.sort(key=lambda w: w[0])
    assert windows[0][1] <= windows[1][0] + 0.5, windows  # one after the other
    assert windows[0][2] != windows[1][2]
