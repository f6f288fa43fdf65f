"""Board tests started from a warm process: pytest and labgrid imported once
per campaign, not once per job.

Every job runs its board tests in a pytest process of its own (its process
group holds the job, its console log and exit code are the job's). Starting
one costs ~0.5 s of imports (pytest, labgrid's drivers, rtlab), a fixed
cost per job that repeats multiply, CPU-bound, on the host the local board
measures. The fork server is a small process that imports all of that once
and then forks a job process per request; a fork takes milliseconds.

How a forked job stays the runner's own child, as a ``subprocess.Popen``
child would be: the server forks twice and the middle process exits, so
the job is re-parented to the nearest child subreaper, the runner
(rtlab.run.joblife.become_subreaper), which waits for it, signals it and reaps
it like any child (:class:`ForkedJob`). Without a subreaper (the runner was
not made one) there is no fork server and jobs start as before.

The job process starts clean: a session of its own, stdout and stderr to
the job's pytest.log, stdin from /dev/null, no descriptor of the server's
left open, the job's environment and working directory, the job's cgroup (where
there is one: rtlab.run.joblife.job_cgroup), and SIGKILL when the runner dies,
set only once the runner is its parent (what the job started is then ended
by its keeper, rtlab.run.jobkeeper). The server holds no locks, no sockets and no
threads, so a fork copies nothing a job could trip over.

    python -m rtlab.run.forkserver     # started by the runner; one JSON line per job on stdin
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from .joblife import enter_cgroup, is_subreaper
from ..core.procutil import die_with_parent

#: seconds to wait for the server's imports, a fork, or the re-parenting
START_TIMEOUT_S = 60.0
#: how often a ForkedJob looks whether its process ended where it has no pidfd
POLL_S = 0.05


class ForkedJob:
    """A job process the fork server started, re-parented to this process:
    the parts of ``subprocess.Popen`` the runner uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: it is gone, its code unknown
                self.returncode = -1
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        # blocked on a pidfd (readable when the process ends), not polled: the
        # runner waits like this through every measurement the local board takes
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.poll() is None:
            try:
                fd = os.pidfd_open(self.pid)
            except OSError:  # gone already, or a kernel without pidfds: poll below
                fd = None
            if fd is not None:
                try:
                    select.select([fd], [], [], timeout)
                finally:
                    os.close(fd)
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"job process {self.pid}", timeout)
            time.sleep(POLL_S)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


class ForkServer:
    """The runner's side: start the server, ask it for job processes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one request at a time (--places N runs jobs on threads)
        self._ready = False
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtlab.run.forkserver"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            # no terminal signals (the runner cancels jobs itself); gone with the runner
            start_new_session=True, preexec_fn=die_with_parent)

    def wait_ready(self) -> None:
        """Until its imports are done (OSError: it never got there)."""
        if not self._ready:
            if self._answer().get("ready") is not True:
                raise OSError("fork server did not say it was ready")
            self._ready = True

    def _answer(self) -> dict:
        # one JSON line; a server that hangs is given up on, never waited for
        out = self.proc.stdout
        if out is None or not select.select([out], [], [], START_TIMEOUT_S)[0]:
            raise OSError(f"fork server {self.proc.pid} did not answer in {START_TIMEOUT_S:.0f} s")
        line = out.readline()
        if not line:
            raise OSError(f"fork server {self.proc.pid} is gone (exit {self.proc.poll()})")
        return json.loads(line)

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, log: Path,
              pdeathsig: bool = True, cgroup: Optional[str] = None) -> ForkedJob:
        """A process running ``pytest.main(argv)`` (OSError if the server cannot)."""
        request = {"argv": argv, "env": env, "cwd": cwd, "log": str(log), "parent": os.getpid(),
                   "pdeathsig": pdeathsig, "cgroup": cgroup}
        with self._lock:
            if self.proc.poll() is not None or self.proc.stdin is None:
                raise OSError(f"fork server exited with {self.proc.returncode}")
            self.wait_ready()
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            answer = self._answer()
        if "pid" not in answer:
            raise OSError(f"fork server: {answer.get('error', answer)}")
        return ForkedJob(int(answer["pid"]))

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # end of requests: the server exits
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start() -> Optional[ForkServer]:
    """A fork server, importing (the first job waits until it is done), or
    None where jobs must start as plain subprocesses: this process is no
    subreaper, so a forked job could not be its child."""
    if not is_subreaper():
        return None
    try:
        return ForkServer()
    except OSError:
        return None


# -- the server's side ---------------------------------------------------------------------

def _job(request: dict) -> None:
    """In the job process (the server's grandchild): become the job, run pytest, exit."""
    os.setsid()
    try:  # before anything of the job runs: all it starts is in the cgroup too
        enter_cgroup(request.get("cgroup"))
    except OSError:
        os._exit(70)
    deadline = time.monotonic() + START_TIMEOUT_S
    while os.getppid() != request["parent"]:  # re-parented to the runner (its subreaper)
        if time.monotonic() > deadline:
            os._exit(70)
        time.sleep(0.001)
    if request.get("pdeathsig"):
        die_with_parent()  # the parent is the runner now
        if os.getppid() != request["parent"]:  # the runner died before the line above
            os._exit(70)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # cancel = SIGINT, as in a fresh python
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import pytest
    sys.argv = [sys.argv[0], *request["argv"]]
    try:
        code = int(pytest.main(request["argv"]))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the traceback is in the log, the exit code says it failed
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _fork_job(request: dict) -> int:
    """The job's pid, once it is the runner's child."""
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(w)
                    _job(request)
                finally:
                    os._exit(70)  # _job ends in os._exit; anything else is a failed start
            os.write(w, str(pid).encode())
        finally:
            os._exit(0)  # the job is re-parented as this exits
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode()
    os.waitpid(middle, 0)
    return int(text)


def serve() -> None:
    # everything a job imports, once: pytest, labgrid's plugin and drivers, the board tests
    import pytest  # noqa: F401
    import labgrid.pytestplugin  # noqa: F401
    import rtlab.boardtests.conftest  # noqa: F401
    import rtlab.boardtests.test_boot  # noqa: F401
    import rtlab.boardtests.test_suites  # noqa: F401
    import rtlab.lab.drivers  # noqa: F401
    import rtlab.lab.strategy  # noqa: F401
    out = sys.stdout.buffer

    def say(answer: dict) -> None:
        out.write((json.dumps(answer) + "\n").encode())
        out.flush()

    say({"ready": True})
    for line in sys.stdin.buffer:
        try:
            say({"pid": _fork_job(json.loads(line))})
        except Exception as e:  # noqa: BLE001 - told to the runner, which starts the job itself
            say({"error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    serve()
