"""`rtlab paired` builds two commits of a tree from outside, each in the
build sandbox: an attacker's tree (tests/faults/attack_tree.py) whose
Makefile and merge_config.sh try to write the runner's home, the kernel
cache, rtlab's budgets and /tmp, read the environment's credentials and
leave a process, at every build. Its image is a real kernel it carries
(Debian's rt bzImage), so both commits boot on qemu-x86_64 and are measured,
and nothing the tree tried left a trace outside it and its builds."""
import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, rtlab

SECRET = "rtlab-canary-secret-paired-1c9e"


# make test-long: make test proves the sandbox for every build path with
# tests/faults/test_kernel_sandbox.py (`rtlab kernel build`, the one function
# paired, bisect, run --kernel-tree and lava render build through)
@pytest.mark.long
def test_paired_builds_an_attackers_tree_confined_and_boots_it(tmp_path):
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "faults"))
    from attack_tree import make_attack_tree
    from rtlab.images import ensure_images

    kernel = ensure_images("x86_64", progress=None).kernels["rt"]
    marker = uuid.uuid4().hex[:12]
    home = Path(os.path.expanduser("~"))
    targets = [home, ROOT / "budgets", Path("/tmp")]
    secret = tmp_path / "netrc"
    secret.write_text(f"password {SECRET}\n")
    tree = make_attack_tree(tmp_path / "tree", targets=targets, secret=secret, port=9, marker=marker,
                            image="real", real_image=kernel.path, release=kernel.release)
    base = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (tree / "CHANGE").write_text("the candidate\n")
    for args in (["add", "."], ["-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "candidate"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True)
    (tmp_path / "budgets.yaml").write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(textwrap.dedent("""
        name: paired-attack
        budgets: budgets.yaml
        boards: [qemu-x86_64]
        variants: [rt]
        suites:
          - name: cyclictest
            params: {interval_us: 1000, duration_s: 1, histogram_us: 20000}
    """))
    written = [t / f"rtlab-pwned-{marker}-{v}" for t in targets for v in ("makefile", "merge_config")]
    try:
        res = rtlab("paired", "--campaign", campaign, "--board", "qemu-x86_64", "--variant", "rt",
                    "--kernel-tree", tree, "--baseline", base, "--candidate", "HEAD", "--pairs", "1",
                    "--results", tmp_path / "out", "--budgets", tmp_path / "budgets.yaml", timeout=1800,
                    env={"RTLAB_INFLUX_PASSWORD": SECRET})
        landed = [str(p) for p in written if p.exists()]
        left = subprocess.run(["pgrep", "-f", f"rtlab-attack-{marker}"], capture_output=True, text=True).stdout
    finally:
        for p in written:
            p.unlink(missing_ok=True)
        subprocess.run(["pkill", "-f", f"rtlab-attack-{marker}"])
    out = res.stdout + res.stderr
    assert landed == [] and left.strip() == "", (landed, left)
    assert SECRET not in out
    # both commits were built (each attempted its attack) and booted
    record = json.loads((tmp_path / "out" / "pairs.json").read_text())
    (pair,) = record["pairs"]
    for side in ("baseline", "candidate"):
        run = json.loads((tmp_path / "out" / side / Path(pair[side]).name / "run.json").read_text())
        (job,) = run["jobs"]
        assert not job.get("build_error") and not job.get("infra_error"), job
        assert job["kernel"]["release"] == kernel.release, job["kernel"]
    from rtlab.core.fsutil import cache_root
    logs = [t for t in (p.read_text() for p in (cache_root() / "kernel" / "builds" / "x86_64").glob("*/build.log"))
            if marker in t]
    assert len(logs) >= 2 and all(SECRET not in log for log in logs)
