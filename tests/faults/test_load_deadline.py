"""Nothing a dead job started lives on (#40, #47): every load carries a
deadline of its own (twice its measurement's duration bound plus a margin):
stress-ng's --timeout, and for every load its script kills its own session
when the deadline comes, and its sampler ends by it. When the runner and its
keeper are both SIGKILLed the load still ends, instead of running 30 days
at 100 % under the next run's measurement."""
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from rtlab.loads import LOADS, LoadEnv
from rtlab.loads import base, catalog
from rtlab.loads.base import HELPER, BoardLoad
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
    monkeypatch.setattr(base, "LOAD_DEADLINE_MARGIN_S", 2)
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


@pytest.mark.parametrize("load", sorted(n for n, v in LOADS.items() if isinstance(v, BoardLoad)))
def test_every_board_load_kills_its_own_session_at_its_deadline(tmp_path, load):
    env = env_for(tmp_path, 10, load)
    env.port = 5201  # the network load's server port, known once its host side started
    script = LOADS[load].script(env)
    limit = base.load_deadline_s(env)
    assert 2 * 10 <= limit <= 2 * 10 + base.LOAD_DEADLINE_MARGIN_S
    assert f"(sleep {limit} && echo" in script and "kill -KILL 0" in script, script
    assert f"+ {limit})) > deadline" in script, script


def _with_marker(marker: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "environ").read_bytes() and (p / "stat").read_text().split()[2] != "Z":
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def _kill_marked(marker: str) -> None:
    for pid in _with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@contextmanager
def launched(tmp_path: Path, load: str, env: LoadEnv, sampler: bool = False) -> Iterator[tuple[Path, Path, str]]:
    """*load*'s script and the helper, launched as the board tests launch
    them (each under setsid, the sampler too if asked), every process marked:
    (load dir, helper, marker); whatever is left is SIGKILLed at the end."""
    d = tmp_path / "load"
    d.mkdir()
    (d / "cmd.sh").write_text(LOADS[load].script(env))
    helper = tmp_path / "rtlab-load.sh"
    helper.write_text(HELPER)
    marker = f"RTLAB_LOAD_TEST={tmp_path}"
    launch = f"export {marker}; cd {d} && (setsid sh ./cmd.sh > cmd.log 2>&1 < /dev/null &)"
    if sampler:
        launch += f" && (setsid sh {helper} sample {d} > /dev/null 2>&1 < /dev/null &)"
    subprocess.run(["sh", "-c", launch], check=True)
    try:
        yield d, helper, marker
    finally:
        _kill_marked(marker)


def test_an_orphaned_load_and_its_sampler_end_by_the_loads_deadline(tmp_path, monkeypatch):
    """The hackbench load (an endless loop, no deadline of its own) and the
    load's sampler shell, launched as the board tests launch them (each under
    setsid), then left alone: no stop file, no runner, no keeper. Both end
    by the load's deadline, within seconds of it."""
    monkeypatch.setattr(base, "LOAD_DEADLINE_MARGIN_S", 2)
    env = env_for(tmp_path, 1, "hackbench")
    env.opts = {"groups": 1}
    limit = base.load_deadline_s(env)
    assert limit == 4
    with launched(tmp_path, "hackbench", env, sampler=True) as (d, _, marker):
        t0 = time.monotonic()
        time.sleep(1.0)
        assert len(_with_marker(marker)) >= 3, "the load and its sampler did not start"
        while _with_marker(marker) and time.monotonic() - t0 < limit + 15:
            time.sleep(0.2)
        left = _with_marker(marker)
        took = time.monotonic() - t0
    assert not left and took < limit + 5, f"still running {took:.0f} s after a launch with a {limit} s deadline: {left}"
    assert "load deadline of 4 s reached" in (d / "died").read_text()
    assert (d / "samples.txt").read_text().count("\n") >= 2  # it sampled until then


def test_a_stop_goes_on_to_term_once_the_parts_are_gone(tmp_path):
    """The cpu load (real stress-ng), launched as the board tests launch it,
    stopped with its signals INT TERM KILL: stress-ng ends on INT and writes
    its YAML, and the stop goes on to TERM at once. The rest of the session
    (cmd.sh, the deadline's sleep) ignores SIGINT, being started in the
    background of a non-interactive shell; a stop that waited for the whole
    session cost every measurement with a load INT's 5 s limit."""
    with launched(tmp_path, "cpu", env_for(tmp_path, 10, "cpu")) as (d, helper, marker):
        t0 = time.monotonic()
        while not (d / "parts").exists() and time.monotonic() - t0 < 20:
            time.sleep(0.1)
        time.sleep(1.0)  # stress-ng's worker forked
        assert len(_with_marker(marker)) >= 4, "the load did not start"
        out = subprocess.run(["sh", str(helper), "stop", str(d), LOADS["cpu"].stop_signals],
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        left = _with_marker(marker)
    assert LOADS["cpu"].stop_signals == "INT TERM KILL"
    assert out[:2] == ["signal INT: parts gone", "signal TERM: session gone"], out
    assert out[-1].endswith(" left 0") and not left, (out, left)
    assert (d / "stress-ng.yaml").read_text().startswith("---"), "stress-ng did not end gracefully"


def test_a_signal_sent_after_the_parts_are_gone_is_waited_for(tmp_path):
    """A signal that goes out when the parts are gone already is for the rest
    of the session: the stop waits for the session to end by it (up to its
    limit) rather than going on to the next signal at once. Here the rest
    ignores HUP and takes a second to end on TERM; its only part, a sleep,
    ends on HUP. The stop must end it with TERM, never needing KILL: a stop
    that took "the parts are gone" as leave to go on raced the session's own
    exit on a loaded machine."""
    d = tmp_path / "load"
    d.mkdir()
    # the part starts before HUP is ignored (it would inherit that); the rest,
    # a shell waiting and a sleep in a subshell as the deadline's, after it
    (d / "cmd.sh").write_text("echo $$ > sid\nsleep 100 &\npart=$!\ntrap '' HUP\n"
                              "trap 'sleep 1; exit 0' TERM\n(sleep 100 && :) &\n"
                              "echo \"sleeper $part\" >> parts\nwait\n")
    helper = tmp_path / "rtlab-load.sh"
    helper.write_text(HELPER)
    marker = f"RTLAB_LOAD_TEST={tmp_path}"
    # HUP back to its default first: a signal ignored when a shell starts stays
    # ignored in all it runs, and `make test` may be run under nohup
    subprocess.run(["sh", "-c", f"export {marker}; cd {d} && (setsid sh ./cmd.sh > cmd.log 2>&1 < /dev/null &)"],
                   check=True, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))

    def status(pid: str) -> dict[str, str]:
        try:
            return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        except OSError:
            return {}

    def hup_ignored(st: dict[str, str]) -> bool:
        return bool(int(st.get("SigIgn", "0"), 16) & (1 << (signal.SIGHUP - 1)))

    try:
        # going: the sleeper is sleep (exec'd, HUP not ignored) and the shell ignores HUP
        t0 = time.monotonic()
        sleeper: dict[str, str] = {}
        while time.monotonic() - t0 < 20:
            text = (d / "parts").read_text() if (d / "parts").exists() else ""
            sid = (d / "sid").read_text().strip() if text.endswith("\n") else ""
            sleeper = status(text.split()[1]) if sid else {}
            if sleeper.get("Name") == "sleep" and hup_ignored(status(sid)):
                break
            time.sleep(0.1)
        assert sleeper.get("Name") == "sleep" and not hup_ignored(sleeper), f"the session did not start: {sleeper}"
        out = subprocess.run(["sh", str(helper), "stop", str(d), "HUP TERM KILL"],
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        left = _with_marker(marker)
    finally:
        _kill_marked(marker)
    assert out[:2] == ["signal HUP: parts gone", "signal TERM: session gone"], \
        (out, {k: sleeper.get(k) for k in ("State", "SigBlk", "SigIgn", "SigCgt")})
    assert out[-1].endswith(" left 0") and not left, (out, left)
