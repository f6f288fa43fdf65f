"""Nothing a dead job started lives on (#40): a stress-ng load carries a
deadline of its own (twice its measurement's duration bound plus a margin),
so when the runner and its keeper are both SIGKILLed the load still ends,
instead of running 30 days at 100 % under the next run's measurement."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rtlab.loads import LOADS, LoadEnv
from rtlab.loads import catalog
from rtlab.loads.catalog import StressNg
from rtlab.suites import SUITES, SuiteRun


def env_for(tmp_path: Path, duration_s: int, load: str = "cpu") -> LoadEnv:
    run = SuiteRun(id=f"cyclictest@{load}", name="cyclictest", suite="cyclictest", load=load,
                   params=SUITES["cyclictest"].params({"duration_s": duration_s}), cpus=(0,))
    # the duration bound as the board tests pass it (Load.running(duration_s=Suite.duration_s))
    return LoadEnv(sh=None, host_dir=tmp_path, run=run, board={"name": "local", "kind": "local"}, cpus=[0, 1],
                   mem_avail_kb=1 << 20, tmp_avail_kb=1 << 20,
                   duration_s=SUITES["cyclictest"].duration_s(run))


@pytest.mark.parametrize("load", sorted(n for n, v in LOADS.items() if isinstance(v, StressNg)))
def test_every_stress_ng_load_has_a_deadline_of_its_measurement(tmp_path, load):
    (_, cmd), = LOADS[load].commands(env_for(tmp_path, 10, load))
    timeout = int(cmd.split(" --timeout ")[1].split()[0])
    assert 2 * 10 <= timeout <= 2 * 10 + catalog.LOAD_DEADLINE_MARGIN_S, cmd


def test_an_orphaned_load_ends_by_its_own_deadline(tmp_path, monkeypatch):
    """The load's real command, its shell SIGKILLed (no runner, no keeper
    left to stop it): stress-ng ends by itself at its deadline."""
    monkeypatch.setattr(catalog, "LOAD_DEADLINE_MARGIN_S", 2)
    (_, cmd), = LOADS["cpu"].commands(env_for(tmp_path, 1))
    assert " --timeout 4 " in cmd, cmd
    marker = f"RTLAB_LOAD_DEADLINE_TEST={tmp_path}"
    shell = subprocess.Popen(["sh", "-c", f"export {marker}; {cmd} & wait"], cwd=tmp_path, start_new_session=True)
    try:
        def stress_pids():
            out = []
            for p in Path("/proc").iterdir():
                if p.name.isdigit():
                    try:
                        if marker.encode() in (p / "environ").read_bytes() and b"stress-ng" in \
                                (p / "cmdline").read_bytes():
                            out.append(int(p.name))
                    except OSError:
                        pass
            return out
        t0 = time.monotonic()
        while not stress_pids() and time.monotonic() - t0 < 20:
            time.sleep(0.1)
        assert stress_pids(), "stress-ng did not start"
        shell.kill()  # the job's side is gone at once, as with SIGKILLed runner and keeper
        shell.wait()
        t0 = time.monotonic()
        while stress_pids() and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        left = stress_pids()
        assert not left, f"stress-ng still runs {time.monotonic() - t0:.0f} s after its shell died: {left}"
    finally:
        try:
            os.killpg(shell.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if marker.encode() in (p / "environ").read_bytes():
                        os.kill(int(p.name), signal.SIGKILL)
                except OSError:
                    pass
