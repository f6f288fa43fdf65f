"""The LAVA lab's database from a lab directory in a mode-700 directory (a
clone in root's home): PostgreSQL runs as ``postgres``, which cannot enter
that directory, so its cluster must live where it can (rtlab/lava/lab.py:
service_state_dir). The rest of the lab runs as root (test_lava_server.py)."""
import os
import shutil
import subprocess

from rtlab.lava.lab import PG_BIN, LocalLavaLab
import pytest

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light


def test_the_lab_database_comes_up_from_a_private_directory(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o700)
    lab = LocalLavaLab(home / "rtlab" / ".cache" / "lava-lab")
    try:
        st = lab.database_up()
        assert lab.service_dir not in lab.dir.parents and home not in lab.service_dir.parents
        assert (lab.service_dir / "pg" / "PG_VERSION").exists()
        ready = subprocess.run([str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(st.pg_port)],
                               capture_output=True, text=True)
        assert ready.returncode == 0, ready.stdout + ready.stderr
        # the lab's own database, made by the postgres account
        have = subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-h", "127.0.0.1", "-p", str(st.pg_port),
                               "-U", "postgres", "-tAc", "SELECT 1 FROM pg_database WHERE datname='lavaserver'"],
                              capture_output=True, text=True, cwd="/")
        assert have.stdout.strip() == "1", have.stderr
        # a second `up` finds it running: same cluster, same port
        assert lab.database_up().pg_port == st.pg_port
    finally:
        stopped = lab.down()
        shutil.rmtree(lab.service_dir, ignore_errors=True)
        (lab.service_dir.parent / f"{lab.service_dir.name}.lab").unlink(missing_ok=True)
    assert stopped == ["postgres"]
    pid = st.pids["postgres"][0]  # this process's child: a zombie until reaped
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
