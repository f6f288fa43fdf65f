"""A paired session (pairs.json and its runs) is checked where it is loaded
(#40): sides whose runs measured other commits than pairs.json says, a
commit paired with itself, copies of one run under new run ids (zero spread:
one noisy pair would decide) and a run named twice are refused, exit 2,
naming pairs.json; `rtlab paired` refuses a commit paired with itself before
anything is built or booted."""
import json
import subprocess
from pathlib import Path

from rtlab.images import DEFAULT_CACHE
from rtlab.core.model import Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput

from .conftest import rtlab

A, B = "a" * 40, "b" * 40
BUDGETS = "budgets:\n  qemu-tcg: {'*': {'*': {'*': {max_us: 10000000}}}}\n"


def write_run(d: Path, sha: str, p99: int) -> None:
    counts = {10: 985, p99: 10, p99 * 2: 5}
    t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=10, avg_us=12, max_us=p99 * 2, overflows=0,
                     histogram=Histogram(counts, 1.0, 100_000, 0))
    m = Measurement(MeasurementKey("qemu-x86_64", "rt", "cyclictest", "idle"),
                    ToolOutput("c.json", "cyclictest", [t]))
    run = RunResult(d.name, "2026-11-28T00:00:00Z", "ci", {"sha": sha},
                    [JobResult("qemu-x86_64", "rt", "x86_64", "qemu-tcg", {}, [m], duration_s=3)])
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(run.to_json()))
    (d / "budgets.yaml").write_text(BUDGETS)


def session(root: Path, base: list[int], cand: list[int], *, base_sha=A, cand_sha=B, commits=None,
            names=None) -> Path:
    pairs = []
    for i, (b, c) in enumerate(zip(base, cand), 1):
        nb, nc = names[i - 1] if names else (f"a{i}", f"b{i}")
        if not (root / "baseline" / nb).exists():
            write_run(root / "baseline" / nb, base_sha, b)
        if not (root / "candidate" / nc).exists():
            write_run(root / "candidate" / nc, cand_sha, c)
        pairs.append({"pair": i, "baseline": f"/builds/x/baseline/{nb}", "candidate": f"/builds/x/candidate/{nc}"})
    (root / "pairs.json").write_text(json.dumps({"tree": "/k", "commits": {"baseline": A, "candidate": B} if commits is None else commits,
                                                 "pairs": pairs}))
    return root


def gate_refuses(d: Path, *words: str) -> None:
    res = rtlab("gate", "--paired", d, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2, res.stdout + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(d / "pairs.json") in err and all(w in err for w in words), err


def test_sides_whose_runs_contradict_pairs_json_are_refused(tmp_path):
    """The sides' directories swapped: a x1.6 regression would read x0.63."""
    d = session(tmp_path / "s", [50, 61, 47], [30, 38, 29], base_sha=B, cand_sha=A)
    gate_refuses(d, "pairs: item 1: baseline", "the sides contradict")


def test_a_commit_paired_with_itself_in_pairs_json_is_refused(tmp_path):
    d = session(tmp_path / "s", [24, 30, 22], [25, 29, 23], cand_sha=A, commits={"baseline": A, "candidate": A})
    gate_refuses(d, "commits:", "paired with itself")


def test_the_same_commit_on_both_sides_is_refused_when_pairs_json_names_none(tmp_path):
    d = session(tmp_path / "s", [24, 30, 22], [25, 29, 23], cand_sha=A, commits={})
    gate_refuses(d, "on both sides")


def test_copies_of_one_run_under_new_run_ids_are_refused(tmp_path):
    """Zero spread collapses the t interval (x1.87 [1.87, 1.87]): copies are
    no pairs of their own."""
    d = session(tmp_path / "s", [24, 24, 24], [45, 45, 45])
    gate_refuses(d, "pairs: item 2: baseline", "measured exactly what run 'a1' did")


def test_a_run_named_twice_is_refused(tmp_path):
    d = session(tmp_path / "s", [24, 30], [25, 29], names=[("a1", "b1"), ("a1", "b2")])
    gate_refuses(d, "pairs: item 2: baseline", "named twice")


def test_rtlab_paired_refuses_a_commit_paired_with_itself_up_front(tmp_path):
    tree = tmp_path / "linux"
    tree.mkdir()
    (tree / "Makefile").write_text("all:\n")
    (tree / "Kconfig").write_text("")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    res = rtlab("paired", "--board", "qemu-x86_64", "--variant", "rt", "--kernel-tree", tree,
                "--baseline", "HEAD", "--candidate", "HEAD", "--results", tmp_path / "r", timeout=300)
    err = res.stderr.strip()
    assert res.returncode == 2 and "--candidate" in err and "paired with itself" in err, res.stdout + err
    assert not (tmp_path / "r" / "baseline").exists()


def test_both_sides_failing_fast_get_run_ids_of_their_own_and_the_failure_is_named(tmp_path):
    """Both commits fail to build within the same second: each side and pair
    still gets a run of its own (`<stamp>-baseline1`, `<stamp>-candidate1`,
    ...), and what is said is the build failure, never "on both sides"."""
    tree = tmp_path / "linux"
    tree.mkdir()
    (tree / "Makefile").write_text("all:\n")  # no tinyconfig target: the build fails at once, nothing boots
    (tree / "Kconfig").write_text("")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (tree / "Kconfig").write_text("# candidate\n")
    subprocess.run([*git, "commit", "-qam", "candidate"], check=True)
    results = tmp_path / "r"
    # the failed builds' logs stay in the test's tree; the board images are
    # the machine's (content-keyed, read only here): never built again for a test
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "images").symlink_to(DEFAULT_CACHE.resolve(), target_is_directory=True)
    env = {"RTLAB_CACHE": str(tmp_path / "cache")}
    res = rtlab("paired", "--board", "qemu-x86_64", "--variant", "rt", "--kernel-tree", tree,
                "--baseline", "HEAD~1", "--candidate", "HEAD", "--pairs", "2", "--results", results,
                timeout=300, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out  # the candidate did not build: FAIL, as `rtlab gate` says of a build error
    assert "kernel build failed" in out and "both sides" not in out, out

    pairs = json.loads((results / "pairs.json").read_text())["pairs"]
    ids = [Path(p[side]).name for p in pairs for side in ("baseline", "candidate")]
    assert len(ids) == 4 and len(set(ids)) == 4, ids
    assert [i.rsplit("-", 1)[1] for i in ids] == ["baseline1", "candidate1", "baseline2", "candidate2"], ids
    for p in pairs:
        for side in ("baseline", "candidate"):
            run = json.loads((results / side / Path(p[side]).name / "run.json").read_text())
            assert run["run_id"] == Path(p[side]).name

    gate = rtlab("gate", "--paired", results, timeout=120, env=env)
    said = gate.stdout + gate.stderr
    assert gate.returncode == 1, said
    assert "build_error: kernel build failed" in said and "both sides" not in said, said
