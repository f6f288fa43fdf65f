"""A merge request's kernel tree cannot touch the lab: its Makefile and its
merge_config.sh (tests/faults/attack_tree.py), and a Kconfig file's
$(shell,...) of a real kernel tree, try what a tree could, through
`rtlab kernel build` as CI runs it; the build sandbox (rtlab/kernel/sandbox.py)
stops each attempt and rtlab takes only a checked image.

One build per tree serves the rows it shows (a module fixture): each row
asserts its attempt failed and left nothing outside the tree and the
build's output. Each row fails with the sandbox switched off (the build
run as rtlab itself): the attempt then succeeds.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from .attack_tree import make_attack_tree
from .conftest import ROOT, kill_leftovers, leftovers, rtlab

SECRET = "rtlab-canary-secret-7f3c"


def run_attack(base: Path, image: str = "valid"):
    """`rtlab kernel build` of an attack tree; (result, attempt lines, context)."""
    marker = uuid.uuid4().hex[:12]
    home = Path(os.path.expanduser("~"))
    kcache = base / "kcache"
    kcache.mkdir(parents=True)
    creds = base / "creds"
    creds.mkdir()
    secret_file = creds / "lavacli.yaml"
    secret_file.write_text(f"token: {SECRET}\n")
    targets = [home, kcache, ROOT / "budgets", Path("/tmp"), Path("/var/tmp")]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        tree = make_attack_tree(base / "tree", targets=targets, secret=secret_file, port=port, marker=marker,
                                image=image)
        try:
            res = rtlab("kernel", "build", "--tree", tree, "--arch", "x86_64", "--variant", "rt",
                        "--cache-dir", kcache, "--out", base / "out", timeout=300,
                        env={"RTLAB_INFLUX_PASSWORD": SECRET, "RTLAB_TRIGGER_TOKEN": SECRET})
            try:
                listener.accept()[0].close()
                connected = True
            except BlockingIOError:
                connected = False
            left = leftovers(f"rtlab-attack-{marker}")
        finally:
            kill_leftovers(f"rtlab-attack-{marker}")
            written = [t / f"rtlab-pwned-{marker}-{v}" for t in targets for v in ("makefile", "merge_config")]
            landed = [str(p) for p in written if p.exists()]
            for p in written:
                p.unlink(missing_ok=True)
    logs = list(kcache.rglob("build.log"))
    log = logs[0].read_text() if logs else ""
    attempts = [ln for ln in log.splitlines() if ln.startswith("ATTACK ")]
    return res, attempts, {"connected": connected, "left": left, "landed": landed, "log": log, "tree": tree,
                           "kcache": kcache, "targets": targets, "out": base / "out"}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    return run_attack(tmp_path_factory.mktemp("attack"))


def test_the_attack_ran_inside_the_build_and_the_build_passed(attacked):
    res, attempts, ctx = attacked
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    # both vectors ran every attempt (the log is the evidence the tests below read)
    for v in ("makefile", "merge_config"):
        assert [a for a in attempts if a.startswith(f"ATTACK {v} ")], ctx["log"][-3000:]
    built = json.loads(res.stdout)
    assert Path(built["path"]).is_file() and built["release"] == "6.12.0-attack"


@pytest.mark.parametrize("which", ["home", "kernel cache", "budgets", "/tmp", "/var/tmp"])
def test_a_tree_cannot_write_outside_its_build(attacked, which):
    res, attempts, ctx = attacked
    target = ctx["targets"][["home", "kernel cache", "budgets", "/tmp", "/var/tmp"].index(which)]
    assert not ctx["landed"], ctx["landed"]
    for v in ("makefile", "merge_config"):
        line = [a for a in attempts if a.startswith(f"ATTACK {v} ") and a.endswith(f" {target}")]
        assert line, attempts
        # refused outright, or written into the sandbox's own /tmp that is gone
        assert line[0] == f"ATTACK {v} refused {target}" or str(target) in ("/tmp", "/var/tmp"), line
    assert not list(ctx["kcache"].rglob("rtlab-pwned-*"))


def test_a_tree_cannot_read_credentials_from_the_environment(attacked):
    res, attempts, ctx = attacked
    env = [a for a in attempts if " env " in a]
    assert env and all("RTLAB_INFLUX_PASSWORD=none RTLAB_TRIGGER_TOKEN=none" in a for a in env), env
    assert SECRET not in ctx["log"]


def test_a_tree_cannot_read_a_credential_file(attacked):
    res, attempts, ctx = attacked
    files = [a for a in attempts if " file " in a]
    assert files and all(a.endswith(" file none") for a in files), files
    assert SECRET not in ctx["log"] and SECRET not in res.stdout + res.stderr


def test_a_tree_has_no_network(attacked):
    res, attempts, ctx = attacked
    net = [a for a in attempts if a.endswith(("connected", "no-network"))]
    assert net and all(a.endswith("no-network") for a in net), net
    assert not ctx["connected"]


def test_no_process_of_the_build_outlives_it(attacked):
    res, attempts, ctx = attacked
    assert [a for a in attempts if " left sleep " in a], attempts  # it tried
    assert ctx["left"] == [], ctx["left"]


@pytest.mark.parametrize("image, words", [("symlink", "is a symlink"), ("huge", "more than")])
def test_a_tree_cannot_hand_back_a_symlink_or_a_huge_file_as_its_image(tmp_path, image, words):
    res, attempts, ctx = run_attack(tmp_path, image=image)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "the build's image" in res.stderr and words in res.stderr, res.stderr[-2000:]
    # nothing entered the cache or the output: no image, no build.json
    assert not list(ctx["kcache"].rglob("bzImage")) and not list(ctx["kcache"].rglob("build.json"))
    assert not ctx["out"].exists()
    assert SECRET not in res.stderr


def test_a_kconfig_shell_call_of_a_real_kernel_tree_is_confined(tmp_path):
    """A real kernel tree (the pinned linux-source, cloned) whose init/Kconfig
    runs a script through Kconfig's $(shell,...) macro, as `conf` evaluates
    it in `make tinyconfig`: the script runs in the sandbox, so it cannot
    write the runner's home or read the environment's credentials."""
    from rtlab.kernel import ensure_source
    src = ensure_source(progress=None)
    tree = tmp_path / "linux"
    subprocess.run(["git", "clone", "-q", "--shared", str(src.path), str(tree)], check=True)
    marker = uuid.uuid4().hex[:12]
    home_file = Path(os.path.expanduser("~")) / f"rtlab-pwned-{marker}-kconfig"
    budgets_file = ROOT / "budgets" / f"rtlab-pwned-{marker}-kconfig"
    (tree / "scripts" / "rtlab-evil.sh").write_text(
        f"#!/bin/sh\necho pwned > '{home_file}' 2>/dev/null; echo pwned > '{budgets_file}' 2>/dev/null\n"
        f"echo \"seen:${{RTLAB_INFLUX_PASSWORD:-}}\"\n")
    with open(tree / "init" / "Kconfig", "a") as f:
        f.write('\nconfig RTLAB_EVIL\n\tstring\n\tdefault "$(shell,sh $(srctree)/scripts/rtlab-evil.sh)"\n')
    for args in (["add", "."], ["-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "evil kconfig"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True)
    try:
        res = rtlab("kernel", "build", "--tree", tree, "--arch", "x86_64", "--variant", "rt", "--config-only",
                    "--cache-dir", tmp_path / "kcache", timeout=600, env={"RTLAB_INFLUX_PASSWORD": SECRET})
        landed = [str(p) for p in (home_file, budgets_file) if p.exists()]
    finally:
        for p in (home_file, budgets_file):
            p.unlink(missing_ok=True)
        shutil.rmtree(tree, ignore_errors=True)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert landed == []
    config = Path(json.loads(res.stdout)["config"]).read_text()
    # the script ran (its answer is in the .config) and saw no credential
    assert 'CONFIG_RTLAB_EVIL="seen:"' in config, [ln for ln in config.splitlines() if "EVIL" in ln]
    assert SECRET not in config
