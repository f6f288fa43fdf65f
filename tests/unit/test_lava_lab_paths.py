"""Where the LAVA lab keeps what the ``postgres`` account opens: outside the
lab directory, so a clone in a mode-700 directory (root's home) still has a
lab (rtlab/lava/lab.py: service_state_dir)."""
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from rtlab.errors import RtlabError
from rtlab.lava.lab import (SERVICE_STATE_ROOT, LocalLavaLab, make_service_state_dir, service_state_dir,
                            unreachable_ancestor)

NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def open_dir():
    """A directory every user may pass through (pytest's tmp_path sits in
    /tmp/pytest-of-root, mode 700: the very case under test)."""
    d = Path(tempfile.mkdtemp(prefix="rtlab-paths-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_the_service_state_of_a_lab_in_a_private_clone_is_outside_it(tmp_path, monkeypatch):
    monkeypatch.delenv("RTLAB_SERVICE_STATE_ROOT", raising=False)
    clone = tmp_path / "home"
    clone.mkdir(mode=0o700)
    lab = clone / "rtlab" / ".cache" / "lava-lab"
    state = service_state_dir(lab)
    assert state.parent == SERVICE_STATE_ROOT
    assert clone not in state.parents
    # the one a service account cannot enter is the clone's, never the state's
    assert unreachable_ancestor(lab, NOBODY.pw_uid, NOBODY.pw_gid) in (clone, *clone.parents)
    assert LocalLavaLab(lab).service_dir == state


def test_each_lab_directory_has_one_stable_state_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_SERVICE_STATE_ROOT", str(tmp_path / "srv"))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (tmp_path / "link").symlink_to(a)
    assert service_state_dir(a) == service_state_dir(a) == service_state_dir(tmp_path / "link")
    assert service_state_dir(a) != service_state_dir(b)
    assert service_state_dir(a).parent == tmp_path / "srv"


def test_unreachable_ancestor_names_the_directory_that_bars_the_user(open_dir):
    closed = open_dir / "closed"
    closed.mkdir(mode=0o700)
    os.chmod(closed, 0o700)
    (closed / "x").mkdir()
    (open_dir / "open" / "x").mkdir(parents=True)
    os.chmod(open_dir / "open", 0o755)
    assert unreachable_ancestor(closed / "x" / "pg", NOBODY.pw_uid, NOBODY.pw_gid) == closed
    assert unreachable_ancestor(open_dir / "open" / "x" / "pg", NOBODY.pw_uid, NOBODY.pw_gid) is None
    # group search permission lets a member of the group pass
    os.chown(closed, 0, NOBODY.pw_gid)
    os.chmod(closed, 0o710)
    assert unreachable_ancestor(closed / "x" / "pg", NOBODY.pw_uid, NOBODY.pw_gid) is None


def test_the_state_directory_is_made_for_its_owner_idempotently(open_dir, monkeypatch, tmp_path):
    root = open_dir / "var" / "lib" / "rtlab"
    monkeypatch.setenv("RTLAB_SERVICE_STATE_ROOT", str(root))
    old = os.umask(0o077)  # a strict umask must not bar the owner from its ancestors
    try:
        lab = tmp_path / "lab"  # the lab itself in a private directory
        state = make_service_state_dir(lab, NOBODY)
        assert state == make_service_state_dir(lab, NOBODY) == service_state_dir(lab)
    finally:
        os.umask(old)
    st = state.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (NOBODY.pw_uid, 0o700)
    assert all(d.stat().st_mode & 0o001 for d in (root, root.parent))
    assert unreachable_ancestor(state / "pg", NOBODY.pw_uid, NOBODY.pw_gid) is None
    assert (root / f"{state.name}.lab").read_text() == f"{lab.resolve()}\n"


def test_a_state_root_the_owner_cannot_reach_is_an_error_naming_it(tmp_path, monkeypatch):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("RTLAB_SERVICE_STATE_ROOT", str(private / "state"))
    with pytest.raises(RtlabError, match="cannot enter"):
        make_service_state_dir(tmp_path / "lab", NOBODY)


def test_the_default_lab_directory_is_outside_the_checkout(monkeypatch, tmp_path):
    # lava-server runs as lavaserver: the lab's devices, media and logs must be
    # reachable whatever the checkout's directory allows (root's mode-700 home)
    from rtlab.lava import lab as lab_mod
    monkeypatch.delenv("RTLAB_LAVA_LAB_DIR", raising=False)
    monkeypatch.setenv("RTLAB_SERVICE_STATE_ROOT", str(tmp_path / "state"))
    d = lab_mod.lab_dir()
    assert d.parent == tmp_path / "state" and d.name.endswith("-lab")
    assert lab_mod.ROOT not in d.parents and d == lab_mod.lab_dir()  # one, stable, per checkout
    monkeypatch.setenv("RTLAB_LAVA_LAB_DIR", str(tmp_path / "mine"))
    assert lab_mod.lab_dir() == tmp_path / "mine"
