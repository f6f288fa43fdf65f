"""Integration tests run the real thing: `rtlab run` booting QEMU boards
through labgrid, real rt-tests on this machine as a board."""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RTLAB = [sys.executable, "-m", "rtlab.cli"]


def rtlab(*args, timeout=900, env=None):
    """Run the CLI like a user does; returns the CompletedProcess (text)."""
    return subprocess.run([*RTLAB, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def processes_of(marker) -> list[str]:
    """Processes whose command line, cwd or environment holds *marker* (a
    test's tmp path: RTLAB_ENV_PATH of its edited boards is inherited by
    every process of the run, QEMU included)."""
    marker = str(marker)
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            text = b" ".join([(p / "cmdline").read_bytes(), (p / "environ").read_bytes(),
                              os.readlink(p / "cwd").encode()]).decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            out.append(f"{p.name} {(p / 'cmdline').read_bytes()[:200]!r}")
    return out


def rtlab_retry_infra(*args, timeout=900, env=None, attempts=2):
    """`rtlab` once more when it ended INFRA (exit 2), as the GitLab pipeline
    retries an INFRA job: a TCG guest sharing two loaded cores can miss a
    login timeout. Only exit 2 is retried; the caller still asserts the
    result (an INFRA twice is a failure, never a pass). Each retried
    attempt is printed, so a flaky lab shows in the test log."""
    for i in range(attempts):
        res = rtlab(*args, timeout=timeout, env=env)
        if res.returncode != 2 or i == attempts - 1:
            return res
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
        print(f"\nINFRA on attempt {i + 1}, retrying once: {tail[-400:]}")
    return res


@pytest.fixture
def campaign(tmp_path):
    """Write a campaign file; budgets default to a file written beside it."""
    def make(boards, variants=None, suites=None, budgets=None):
        budgets_file = tmp_path / "budgets.yaml"
        budgets_file.write_text(textwrap.dedent(budgets or """
            budgets:
              qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}
              local: {"*": {"*": {"*": {max_us: 10000000}}}}
        """))
        lines = ["name: test", f"budgets: {budgets_file}", f"boards: {list(map(str, boards))}"]
        if variants:
            lines.append(f"variants: {variants}")
        lines.append("suites:")
        # with budgets of the test's own, they set the histogram's range (a
        # campaign that asks for less than its budgets need is refused)
        hist = "" if budgets else ", histogram_us: 2000"
        lines.append(textwrap.indent(textwrap.dedent(suites or f"""
            - name: cyclictest
              params: {{interval_us: 1000, duration_s: 2{hist}}}
              overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
        """), "  "))
        path = tmp_path / "campaign.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path
    return make


@pytest.fixture
def board_file(tmp_path, monkeypatch):
    """A variant of a shipped board file, edited for a failure scenario; its
    name (boards are found by name only: RTLAB_ENV_PATH adds this directory)."""
    env_dir = tmp_path / "env"
    env_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("RTLAB_ENV_PATH", str(env_dir))

    def make(name, base, replace):
        text = (ROOT / "env" / f"{base}.yaml").read_text()
        for old, new in replace.items():
            assert old in text, old
            text = text.replace(old, new)
        (env_dir / f"{name}.yaml").write_text(text)
        return name
    return make


@pytest.fixture(scope="session")
def lava_lab():
    """The local LAVA lab (`rtlab lava lab up`: PostgreSQL, lava-server,
    scheduler, lava-worker, devices and their health checks), up once for the
    session: bringing it up and health-checking the boards costs minutes, so
    test_lava_server.py and the LAVA pipeline of test_gitlab_ci.py share it.
    Idempotent (a lab already up is reused; $RTLAB_LAVA_LAB_DIR picks its
    directory); down afterwards, and nothing of it may be left running.
    Yields (LocalLavaLab, LabState)."""
    import shutil

    from rtlab.lava.lab import LocalLavaLab

    # make test runs as root with env/apt-packages.txt installed: a missing
    # part is a broken set-up, so a failure, never a skip
    assert os.geteuid() == 0, "lava-run and the lab's postgres (runuser) need root"
    for tool in ("lava-server", "lava-worker", "lavacli", "lava-run"):
        assert shutil.which(tool), f"{tool} is not installed (env/apt-packages.txt)"
    res = rtlab("lava", "lab", "up", timeout=1200)
    assert res.returncode == 0, res.stdout + res.stderr
    lab = LocalLavaLab()
    st = lab.read_state()
    yield lab, st
    res = rtlab("lava", "lab", "down", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not lab.read_state().pids
    for service, (pid, _) in st.pids.items():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z", \
            f"{service} (pid {pid}) still runs after `rtlab lava lab down`"


def wait_line(proc, prefix, timeout=60.0) -> str:
    """The first line of *proc*'s stdout starting with *prefix* (a job's
    PLACE/POWER report), stripped; AssertionError after *timeout* or at EOF."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line.strip()
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {prefix!r} line from job (rc {proc.poll()})")
