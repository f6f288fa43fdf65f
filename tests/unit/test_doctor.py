"""`rtlab doctor`: each check finds its problem and names the fix; what is
fine is said to be fine. The whole command on a new board, followed from
docs/adding-a-board.md, is tests/integration/test_doctor_new_board.py."""
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtlab.cli import main
from rtlab.commands import doctor
from rtlab.lab.coordinator import PlaceInfo
from rtlab.plan.campaign import load_campaign
from rtlab.targets.boards import find_board

ROOT = Path(__file__).resolve().parents[2]


def problems(found):
    return [f for f in found if not f.ok]


@pytest.fixture
def env_dir(tmp_path, monkeypatch):
    """A directory of board env files rtlab finds by name (RTLAB_ENV_PATH)."""
    d = tmp_path / "env"
    d.mkdir()
    monkeypatch.setenv("RTLAB_ENV_PATH", str(d))

    def board(name, base="qemu-aarch64", replace=None):
        text = (ROOT / "env" / f"{base}.yaml").read_text()
        for old, new in (replace or {}).items():
            assert old in text, old
            text = text.replace(old, new)
        (d / f"{name}.yaml").write_text(text)
        return name
    return board


def test_setup_stamps_missing_say_make_setup(tmp_path):
    (tmp_path / "Makefile").write_text("")
    found = doctor.check_setup(tmp_path)
    assert len(problems(found)) == 2
    assert all(f.fix == f"cd {tmp_path} && make setup" for f in found)
    assert ".cache/stamps/host missing" in found[0].what and ".venv/.installed missing" in found[1].what
    (tmp_path / ".cache" / "stamps").mkdir(parents=True)
    (tmp_path / ".cache" / "stamps" / "host").write_text("")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / ".installed").write_text("")
    assert problems(doctor.check_setup(tmp_path)) == []


def test_an_install_outside_a_checkout_has_no_stamps_to_check(tmp_path):
    (f,) = doctor.check_setup(tmp_path)
    assert f.ok and "outside a checkout" in f.what


def test_images_not_built_say_make_images():
    images, found = doctor.check_images(["aarch64"], lookup=lambda arch: None)
    assert images == {}
    (f,) = found
    assert not f.ok and "aarch64: no board images built" in f.what
    assert f.fix == "make images (or rtlab images --arch aarch64)"


def test_an_unknown_board_names_the_known_ones_and_the_recipe():
    board, (f,) = doctor.check_board("no-such-board")
    assert board is None and not f.ok
    assert "no board named 'no-such-board'" in f.what and "qemu-aarch64" in f.what
    assert "docs/adding-a-board.md" in f.fix


def test_a_bad_env_file_names_the_key(env_dir):
    env_dir("half-board", replace={"      budget_class: qemu-tcg\n": ""})
    board, (f,) = doctor.check_board("half-board")
    assert board is None and not f.ok
    assert "half-board.yaml" in f.what and "budget_class" in f.what


def test_labgrid_must_load_the_env_file(env_dir):
    env_dir("typo-board", replace={"RtlabShellDriver:": "RtlabShelDriver:"})
    board, _ = doctor.check_board("typo-board")  # rtlab's options are fine ...
    (f,) = doctor.check_labgrid_env(board)       # ... labgrid is not
    assert not f.ok and "labgrid cannot load it" in f.what and "RtlabShelDriver" in f.what
    assert "env/qemu-aarch64.yaml" in f.fix
    (ok,) = doctor.check_labgrid_env(find_board("qemu-aarch64"))
    assert ok.ok and "QEMUDriver" in ok.what and "RtlabStrategy" in ok.what


def test_a_qemu_binary_that_is_not_there(env_dir):
    env_dir("odd-qemu", replace={"qemu_aarch64: qemu-system-aarch64": "qemu_aarch64: qemu-system-nonexistent"})
    found = doctor.check_resources(find_board("odd-qemu"), ["cyclictest"], images={})
    (f,) = problems(found)
    assert "qemu-system-nonexistent not found" in f.what and "make setup" in f.fix


def test_image_files_gone_from_the_cache(tmp_path):
    iset = SimpleNamespace(initramfs=tmp_path / "initramfs.cpio.gz",
                           kernels={"rt": SimpleNamespace(path=tmp_path / "Image")})
    found = doctor.check_resources(find_board("qemu-aarch64"), ["cyclictest"], images={"aarch64": iset})
    (f,) = problems(found)
    assert "image files missing" in f.what and "rtlab images --arch aarch64 --refresh" == f.fix


def test_the_local_board_needs_its_tools_on_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    found = doctor.check_resources(find_board("local"), ["cyclictest", "oslat", "cyclictest"], images={})
    assert [f.what.split(":")[1].split()[0] for f in problems(found)] == ["script", "cyclictest", "oslat"]
    assert all("make setup" in f.fix for f in found)


def test_a_labgrid_board_needs_a_coordinator(monkeypatch, tmp_path):
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    monkeypatch.setenv("RTLAB_RACK_DIR", str(tmp_path / "no-rack"))
    (f,) = doctor.check_resources(find_board("rack-aarch64"), [], images={})
    assert not f.ok and "no coordinator known" in f.what
    assert "LG_COORDINATOR" in f.fix and "rtlab rack up" in f.fix


def test_a_coordinator_that_does_not_answer_within_the_timeout(monkeypatch):
    monkeypatch.setattr(doctor, "NETWORK_TIMEOUT_S", 1.0)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (f,) = doctor.check_resources(find_board("rack-aarch64"), [], images={}, coordinator=f"127.0.0.1:{port}")
    assert not f.ok and f"coordinator 127.0.0.1:{port} not reachable" in f.what
    assert "labgrid-coordinator" in f.fix


def test_a_coordinator_without_a_place_for_the_board():
    places = {"rack-vb0": PlaceInfo(name="rack-vb0", tags={"board": "other"})}
    (f,) = doctor.check_resources(find_board("rack-aarch64"), [], images={}, coordinator="lab:20408",
                                  places=lambda address: places)
    assert not f.ok and "no place tagged board=rack-aarch64" in f.what
    assert "labgrid/lab/places.yaml" in f.fix
    places["rack-vb0"].tags["board"] = "rack-aarch64"
    (ok,) = doctor.check_resources(find_board("rack-aarch64"), [], images={}, coordinator="lab:20408",
                                   places=lambda address: places)
    assert ok.ok and "places rack-vb0" in ok.what


def test_every_missing_budget_is_listed_with_the_file_to_edit(env_dir, tmp_path):
    env_dir("qemu-big", replace={"budget_class: qemu-tcg": "budget_class: qemu-big"})
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text('budgets:\n  qemu-big:\n    rt:\n      cyclictest:\n        idle: {max_us: 200000}\n')
    camp = tmp_path / "big.yaml"
    camp.write_text("name: big\nbudgets: budgets.yaml\nboards: [qemu-big]\nvariants: [rt, voluntary]\n"
                    "suites:\n  - name: cyclictest\n    loads: [idle, cpu]\n")
    c = load_campaign(camp)
    found = doctor.check_budgets(c, c.jobs())
    assert sorted(f.what.split(": ")[1] for f in found) == [
        "budgets.qemu-big.rt.cyclictest.cpu", "budgets.qemu-big.voluntary.cyclictest.cpu",
        "budgets.qemu-big.voluntary.cyclictest.idle"]
    assert all(f.fix.startswith(f"add the entry to {budgets}") for f in found)
    budgets.write_text('budgets:\n  qemu-big:\n    "*":\n      cyclictest:\n        "*": {max_us: 200000}\n')
    (ok,) = doctor.check_budgets(c, c.jobs())
    assert ok.ok and "covers every suite" in ok.what


def test_variants_the_board_cannot_boot_are_said_with_the_reason(env_dir):
    env_dir("one-cpu", replace={"cpus: 2": "cpus: 1", "isolate_cpu: 1": "isolate_cpu: null"})
    board = find_board("one-cpu")
    c = load_campaign("default", boards=["one-cpu"], variants=["rt-iso", "voluntary-iso"])
    found = doctor.check_variants(board, c.jobs(), images={"aarch64": SimpleNamespace(kernels={})})
    assert [f.ok for f in found] == [True, False]
    assert "not available" in found[0].what and "no isolate_cpu" in found[0].what
    assert "can boot none of the campaign's variants" in found[1].what and "isolate_cpu" in found[1].fix


def test_a_configured_store_that_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_STATE_DIR", str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    found = doctor.check_store(env={"RTLAB_INFLUX_URL": f"http://127.0.0.1:{port}",
                                    "RTLAB_INFLUX_PASSWORD": "s3cret-pw"})
    (f,) = problems(found)
    assert f"127.0.0.1:{port}" in f.what and "does not answer" in f.what and "s3cret-pw" not in f.what
    assert "RTLAB_INFLUX_URL" in f.fix and str(tmp_path / "spool") in f.fix


def test_no_store_and_no_influxd_to_start(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    real_access = doctor.os.access
    monkeypatch.setattr(doctor.os, "access", lambda p, m: False if str(p) == "/usr/bin/influxd" else real_access(p, m))
    monkeypatch.setenv("RTLAB_STATE_DIR", str(tmp_path))
    found = doctor.check_store(env={})
    (f,) = problems(found)
    assert "no influxd to start locally" in f.what and "RTLAB_INFLUX_URL" in f.fix


def test_the_command_exits_1_and_prints_each_fix(capsys):
    assert main(["doctor", "--board", "no-such-board", "--no-store"]) == 1
    out, err = capsys.readouterr()
    assert "FAIL  board:" in out and "      fix: add env/<board>.yaml" in out
    assert "doctor: 1 problem" in err
