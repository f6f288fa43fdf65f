"""A lab runner host for the GitLab pipeline tests: the CI jobs run as a
user of their own, not as root, with the set-up done once as root
beforehand, as docs/runner.md says a lab does it.

    runner = lab_runner()   # once per session: the set-up, as root
    runner.run([...])       # a command as the runner's user (env/runner-exec.sh)

The set-up is `make runner-setup RUNNER_USER=rtlab-ci` in a copy of this
checkout at /var/lib/rtlab-ci-lab/rtlab (a lab's /opt/rtlab: readable by the
user; the checkout under test may lie in root's mode-700 home), with a venv
of Debian's python3 (root's may lie in its home too) and the caches of this
machine (RTLAB_SEED_CACHE: content-keyed, nothing rebuilt). gitlab-ci-local
is copied beside it. The copy is kept between sessions (rsync: only what
changed; the venv only when pyproject.toml did).

What the jobs then get is exactly what a lab's runner service gets
(env/runner-exec.sh): the user's cgroup subtree, CAP_SYS_NICE and
CAP_IPC_LOCK and nothing else, its groups, a clean environment. Files the
jobs must read or write (the CI project, the kernel project, the store's
spool) are made in :meth:`Runner.workdir`, owned by the user.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
USER = "rtlab-ci"
LAB = Path("/var/lib/rtlab-ci-lab")


@dataclass(frozen=True)
class Runner:
    user: str
    home: Path
    #: the lab's rtlab checkout, set up as root (RTLAB_HOME of the jobs)
    rtlab_home: Path
    gitlab_ci_local: Path
    setup_log: str
    #: this session's files of the user's (removed at the session's end)
    work: Path

    @property
    def cache(self) -> Path:
        return self.home / ".cache" / "rtlab"

    def chown(self, path: Path) -> Path:
        subprocess.run(["chown", "-R", f"{self.user}:{self.user}", str(path)], check=True)
        return path

    def workdir(self, name: str) -> Path:
        """A new directory of the user's, for one test's files."""
        d = self.work / f"{name}-{uuid.uuid4().hex[:8]}"
        d.mkdir(parents=True)
        return self.chown(d)

    def argv(self, cmd: Sequence[str], env: Optional[dict] = None) -> list[str]:
        """*cmd* as the runner's user, as its service runs jobs (env/runner-exec.sh)."""
        return [str(self.rtlab_home / "env" / "runner-exec.sh"), self.user,
                *[f"{k}={v}" for k, v in (env or {}).items()], "--", *map(str, cmd)]


def _gitlab_ci_local() -> Path:
    return ROOT / ".cache" / "gitlab-ci-local"


def _readable_copy(src: Path, dest: Path, *exclude: str) -> None:
    """*src* mirrored at *dest*, readable by the runner's user whatever the
    source's modes (a clone in a mode-700 directory, or made under umask
    077): the lab's code is no secret."""
    subprocess.run(["rsync", "-a", "--chmod=Da+rx,Fa+r", "--delete", *[f"--exclude={e}" for e in exclude],
                    f"{src}/", f"{dest}/"], check=True)


@functools.lru_cache(maxsize=None)
def lab_runner() -> Runner:
    """The runner's user and its lab checkout, set up as root (once per session)."""
    LAB.mkdir(parents=True, exist_ok=True)
    home = LAB / "rtlab"
    _readable_copy(ROOT, home, "/.venv", "/results", "/.cache", ".pytest_cache", "__pycache__")
    stamps = home / ".cache" / "stamps"
    stamps.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / ".cache" / "stamps" / "host", stamps / "host")  # apt: make test's own set-up did it
    from rtlab.core.fsutil import cache_root
    r = subprocess.run(["make", "-C", str(home), "runner-setup", f"RUNNER_USER={USER}", "PYTHON=/usr/bin/python3",
                        f"RTLAB_SEED_CACHE={cache_root()}"], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and "doctor: 0 problems" in r.stdout + r.stderr, \
        f"make runner-setup failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    gcl = LAB / "gitlab-ci-local"
    _readable_copy(_gitlab_ci_local(), gcl)
    user_home = Path(subprocess.run(["getent", "passwd", USER], capture_output=True, text=True,
                                    check=True).stdout.split(":")[5])
    sessions = user_home / "work"
    sessions.mkdir(exist_ok=True)
    for old in sessions.iterdir():  # a session killed before its clean-up (not one running now)
        if time.time() - old.stat().st_mtime > 12 * 3600:
            shutil.rmtree(old, ignore_errors=True)
    work = sessions / uuid.uuid4().hex[:12]
    work.mkdir()
    subprocess.run(["chown", f"{USER}:{USER}", str(sessions), str(work)], check=True)
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return Runner(USER, user_home, home, gcl / "bin" / "gitlab-ci-local", r.stdout + r.stderr, work)


def is_root() -> bool:
    return os.geteuid() == 0
