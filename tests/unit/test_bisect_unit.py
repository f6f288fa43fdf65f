"""The bisect's checks and oracle without a kernel: input checks on a small
git tree (Makefile + Kconfig: what rtlab takes for a kernel tree), the
stand-in comparison on run sets with known answers, restoring the tree."""
from __future__ import annotations

import subprocess

import pytest

from rtlab.verdict.bisect import BisectInputError, Settings, check_inputs, fallback_compare, original_head, restore
from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput, Histogram


def git(tree, *args):
    return subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "linux"
    t.mkdir()
    git(t, "init", "-q", "-b", "master")
    shas = []
    for i in range(4):
        (t / "Makefile").write_text(f"# {i}\n")
        (t / "Kconfig").write_text("")
        git(t, "add", "Makefile", "Kconfig")
        git(t, "commit", "-qm", f"c{i}")
        shas.append(git(t, "rev-parse", "HEAD"))
    return t, shas


def settings(t, good, bad):
    return Settings(tree=str(t), good=good, bad=bad, board="qemu-aarch64", variant="preempt",
                    suite="cyclictest", load="idle", repeat=2, baseline_repeat=5, campaign="", work="")


def test_inputs_checked(tree):
    t, shas = tree
    assert check_inputs(settings(t, shas[0][:8], "master")) == {"good": shas[0], "bad": shas[3]}
    bad = [((shas[0], "nosuch"), "unknown commit 'nosuch'"),
           ((shas[3], shas[0]), "reversed"),
           ((shas[1], shas[1]), "same commit"),
           (("--help", shas[1]), "not a commit")]
    for (g, b), what in bad:
        with pytest.raises(BisectInputError, match=what):
            check_inputs(settings(t, g, b))
    with pytest.raises(BisectInputError, match="no history for qemu-aarch64/preempt/cyclictest/idle"):
        check_inputs(settings(t, shas[0], shas[3]), has_history=lambda: 0)
    (t / "Makefile").write_text("changed\n")
    with pytest.raises(BisectInputError, match="local changes"):
        check_inputs(settings(t, shas[0], shas[3]))
    git(t, "checkout", "-q", "Makefile")
    git(t, "bisect", "start", shas[3], shas[0])
    with pytest.raises(BisectInputError, match="bisect is under way"):
        check_inputs(settings(t, shas[0], shas[3]))


def test_restore_brings_back_branch_and_clears_bisect(tree):
    t, shas = tree
    orig = original_head(t)
    git(t, "bisect", "start", shas[3], shas[0])
    assert git(t, "rev-parse", "HEAD") not in (shas[3],)
    restore(t, orig)
    assert git(t, "symbolic-ref", "--short", "HEAD") == "master" and git(t, "rev-parse", "HEAD") == shas[3]
    assert not (t / ".git" / "BISECT_START").exists()
    git(t, "checkout", "-q", "--detach", shas[1])
    orig = original_head(t)
    git(t, "checkout", "-q", "master")
    restore(t, orig)
    assert git(t, "rev-parse", "HEAD") == shas[1] and orig["branch"] == ""


def run_with(max_us: float, p99: float, infra: bool = False) -> RunResult:
    """A run whose cyclictest histogram has 1,000 samples: 990 at 10 us,
    9 at p99, 1 at the max."""
    counts = {10: 990, int(p99): 9, int(max_us): 1}
    th = ThreadResult(0, 0, 1000, 5.0, 12.0, max_us, 0, Histogram(counts=counts, bucket_us=1.0))
    out = ToolOutput("cyclictest.json", "cyclictest", [th])
    m = Measurement(MeasurementKey("qemu-aarch64", "preempt", "cyclictest", "idle"), out)
    job = JobResult("qemu-aarch64", "preempt", measurements=[m],
                    infra_error="board qemu-aarch64: boot failed" if infra else None)
    return RunResult(run_id="r", started="2026-11-23T00:00:00Z", campaign="bisect", jobs=[job])


def test_fallback_oracle_known_answers():
    base = [run_with(9000 + 500 * i, 200 + 10 * i) for i in range(5)]
    bug = [run_with(400_000 + 100 * i, 210) for i in range(2)]
    same = [run_with(9300, 215), run_with(10100, 225)]
    v = fallback_compare(base, bug, "cyclictest", "idle")
    assert v.outcome == "regression" and v.numbers["max"]["p"] <= 0.05 and v.numbers["max"]["ratio"] > 30
    assert any(ln.startswith("max +") for ln in v.lines)
    assert fallback_compare(base, same, "cyclictest", "idle").outcome == "no-regression"
    # a big rise in one run of two: not significant, not "no regression" either
    mixed = [run_with(400_000, 210), run_with(9500, 215)]
    assert fallback_compare(base, mixed, "cyclictest", "idle").outcome == "undecided"
    # infra is never a verdict
    assert fallback_compare(base, [run_with(9000, 200, infra=True)] * 2, "cyclictest", "idle").outcome == "undecided"
    # too few baseline runs to ever be significant: undecided, never guessed
    assert fallback_compare(base[:2], bug, "cyclictest", "idle").outcome == "undecided"
