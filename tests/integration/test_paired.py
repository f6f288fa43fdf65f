"""`rtlab paired` on qemu-aarch64 (issue #23 item 3b): the pinned kernel and
the latency-bug commit of the CI test's kernel project (a kthread holding
its CPU for 400 ms) built from one tree and booted alternately, A B, B A,
..., then the paired verdict names the regression; the tree is put back.
Both kernels come from the kernel cache when test_gitlab_ci.py built them
before (the same fixed commits), else they are built here."""
import json
import subprocess
import textwrap

import pytest

from conftest import rtlab
from kernel_project import make_kernel_project

# the verdict is a t interval over 4 pairs of alternate boots' latency: a
# second guest beside them is emulation noise they would have to outvote
# (tests/conftest.py)
pytestmark = pytest.mark.guest_verdict

PAIRS = 4  # one baseline boot can stall for hundreds of ms under TCG: 4 pairs still decide


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from rtlab.kernel import ensure_source
    src = ensure_source(progress=None)
    dest = tmp_path_factory.mktemp("kernel") / "linux"
    return {**make_kernel_project(src.path, dest), "_path": dest}


def campaign(tmp_path):
    (tmp_path / "budgets.yaml").write_text(textwrap.dedent("""
        budgets:
          qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}
        regression:
          statistics: {"*": [p99, p99.9], qemu-tcg: [max]}
          min_runs: 3
          min_effect:
            "*": {relative: 0.2, abs_us: 2}
            qemu-tcg: {relative: 0.5, abs_us: 200, max: {relative: 1.0, abs_us: 20000}}
    """))
    c = tmp_path / "campaign.yaml"
    c.write_text(textwrap.dedent("""
        name: paired
        budgets: budgets.yaml
        boards: [qemu-aarch64]
        variants: [preempt]
        suites:
          - name: cyclictest
            params: {interval_us: 1000, duration_s: 3, histogram_us: 2000}
            overrides: {qemu-tcg: {histogram_us: 20000}}
    """))
    return c


def head(path) -> str:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.over_a_minute
def test_alternate_boots_name_the_latency_bug_and_put_the_tree_back(tree, tmp_path):
    path = tree["_path"]
    before = head(path)
    c = campaign(tmp_path)
    res = rtlab("paired", "--campaign", c, "--board", "qemu-aarch64", "--kernel-tree", path,
                "--baseline", "good", "--candidate", "latency", "--pairs", PAIRS, "--results", tmp_path / "out",
                timeout=3600)
    assert res.returncode == 1, res.stdout[-4000:] + res.stderr[-3000:]
    assert head(path) == before and not subprocess.run(["git", "-C", str(path), "status", "--porcelain"],
                                                       capture_output=True, text=True).stdout.strip()
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("REGRESSION"))
    assert "qemu-aarch64/preempt/cyclictest/idle" in line and f"({PAIRS} pairs)" in line and "max x" in line
    # every boot is on disk, in the order it ran: A B, then B A, ...
    record = json.loads((tmp_path / "out" / "pairs.json").read_text())
    assert record["commits"] == {"baseline": tree["good"], "candidate": tree["latency"]}
    assert [p["order"] for p in record["pairs"]] == [["baseline", "candidate"], ["candidate", "baseline"]] * (PAIRS // 2)
    for p in record["pairs"]:
        for side in ("baseline", "candidate"):
            run = json.loads((tmp_path / "out" / side / p[side].split("/")[-1] / "run.json").read_text())
            assert run["commit"]["sha"] == tree[{"baseline": "good", "candidate": "latency"}[side]]
    verdict = json.loads((tmp_path / "out" / "paired.json").read_text())
    assert verdict["method"] == "paired" and verdict["outcome"] == "regression" and verdict["exit_code"] == 1
    (key,) = verdict["keys"]
    (mx,) = key["stats"]
    assert mx["name"] == "max" and mx["pairs"] == PAIRS and mx["lower"] > 1 and mx["ratio"] > 2
    assert min(mx["candidate"]) > 300_000  # the 400 ms hog, in every candidate boot


def test_a_dirty_tree_or_an_unknown_commit_is_refused_before_any_boot(tree, tmp_path):
    path = tree["_path"]
    c = campaign(tmp_path)
    res = rtlab("paired", "--campaign", c, "--board", "qemu-aarch64", "--kernel-tree", path,
                "--baseline", "good", "--candidate=-x", "--results", tmp_path / "o1")
    assert res.returncode == 2 and "is not a commit" in res.stderr, res.stderr
    (path / "Makefile").write_text((path / "Makefile").read_text() + "\n# local change\n")
    try:
        res = rtlab("paired", "--campaign", c, "--board", "qemu-aarch64", "--kernel-tree", path,
                    "--baseline", "good", "--candidate", "latency", "--results", tmp_path / "o2")
        assert res.returncode == 2 and "local changes" in res.stderr, res.stderr
    finally:
        subprocess.run(["git", "-C", str(path), "checkout", "-q", "--", "Makefile"], check=True)
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
