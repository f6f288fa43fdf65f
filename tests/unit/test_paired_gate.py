"""Paired boots where CI uses them (issue #23 item 3): the budget file's
``regression: baseline:`` per board class, `rtlab baseline method` that the
test job asks, `rtlab paired` refusing a board that cannot boot built
kernels, and `rtlab gate --paired` judging a paired session from its runs on
disk (the test job's artifact) with the gate's or the lab's policy, never
the one the session ran under."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_junit_ci import job  # noqa: E402

from rtlab.cli import main
from rtlab.core.model import RunResult
from rtlab.plan.policy import Policy, load_policy

BUDGETS = """budgets:
  qemu-tcg: {"*": {"*": {"*": {max_us: 5000}}}}
regression:
  statistics: [p99]
  min_runs: 3
"""
#: what a merge request would like its own gate to be: nothing ever regresses
LOOSE = BUDGETS + "  min_effect: {\"*\": {relative: 100, abs_us: 100000}}\n"


def counts(p99: int) -> dict:
    return {10: 985, p99: 10, int(p99 * 1.5): 4, p99 * 3: 1}


def write_run(d: Path, p99: int, budgets: str = BUDGETS) -> Path:
    d.mkdir(parents=True)
    run = RunResult(d.name, "2026-11-27T00:00:00Z", "ci", jobs=[job("rt", counts(p99))])
    (d / "run.json").write_text(json.dumps(run.to_json()))
    (d / "budgets.yaml").write_text(budgets)
    return d


def session(root: Path, base: list[int], cand: list[int], cand_budgets: str = BUDGETS) -> Path:
    """A paired session as `rtlab paired --results root` leaves it; pairs.json
    names the runs where they were made (another job's checkout)."""
    pairs = []
    for i, (b, c) in enumerate(zip(base, cand), 1):
        write_run(root / "baseline" / f"a{i}", b)
        write_run(root / "candidate" / f"b{i}", c, cand_budgets)
        pairs.append({"pair": i, "baseline": f"/builds/x/{root.name}/baseline/a{i}",
                      "candidate": f"/builds/x/{root.name}/candidate/b{i}"})
    (root / "pairs.json").write_text(json.dumps({"tree": "/k", "commits": {}, "pairs": pairs}))
    return root


def test_a_paired_regression_fails_the_gate_without_any_store(tmp_path, capsys, monkeypatch):
    # the store baseline is asked for (a kernel MR's gate) but there are no
    # store-judged runs: the paired verdict alone, no store contacted
    monkeypatch.setenv("RTLAB_INFLUX_URL", "http://127.0.0.1:9")
    d = session(tmp_path / "s", [24, 30, 22, 27], [50, 61, 47, 55])
    budgets = tmp_path / "b.yaml"
    budgets.write_text(BUDGETS)
    assert main(["gate", "--paired", str(d), "--budgets", str(budgets), "--baseline-store", "--branch", "main"]) == 1
    out = capsys.readouterr().out
    assert f"gate: paired boots: {d} (4 pairs)" in out
    assert "gate: PASS over 4 runs" in out  # the candidate runs' budgets were judged
    assert "gate: exit 1 (budgets PASS, regression verdict REGRESSION)" in out
    assert "cannot decide" not in out and "store" not in out  # asked of no store at all
    v = json.loads((d / "compare.json").read_text())
    assert v["method"] == "paired" and v["outcome"] == "regression" and v["exit_code"] == 1


def test_unchanged_pairs_pass_and_a_broken_budget_still_fails(tmp_path, capsys):
    # unchanged: each pair's runs a little apart, as two boots are
    same = session(tmp_path / "s", [24, 30, 22, 27, 25, 26], [25, 29, 22, 28, 24, 26])
    budgets = tmp_path / "b.yaml"
    budgets.write_text(BUDGETS)
    assert main(["gate", "--paired", str(same), "--budgets", str(budgets)]) == 0
    out = capsys.readouterr().out
    assert "regression verdict NO-REGRESSION" in out
    assert "or more: 6 pairs see that" in out  # what the pairs can see, said
    # copies of one run as pairs bound nothing: undecided, never a pass
    copies = session(tmp_path / "c", [24, 30, 22], [24, 30, 22])
    assert main(["gate", "--paired", str(copies), "--budgets", str(budgets)]) == 2
    assert "no spread at all" in capsys.readouterr().out
    over = session(tmp_path / "o", [2000, 2100, 1900], [2000, 2100, 1900])  # max 3x p99 over 5000 us
    assert main(["gate", "--paired", str(over), "--budgets", str(budgets)]) == 1
    assert "gate: FAIL over 3 runs" in capsys.readouterr().out


def test_the_policy_is_the_gates_or_the_labs_never_the_sessions(tmp_path):
    # both sides ran under the campaign the pipeline named: a trigger can
    # point it at the merge request's own loose budget file
    d = session(tmp_path / "s", [24, 30, 22, 27], [50, 61, 47, 55], cand_budgets=LOOSE)
    for run_dir in (d / "baseline").iterdir():
        (run_dir / "budgets.yaml").write_text(LOOSE)
    gate_budgets = tmp_path / "gate.yaml"
    gate_budgets.write_text(BUDGETS)
    assert main(["gate", "--paired", str(d), "--budgets", str(gate_budgets)]) == 1
    assert json.loads((d / "compare.json").read_text())["policy"]["source"] == "gate.yaml: regression"
    # without --budgets: the lab's own (qemu-tcg gates on the max, which must double and grow by 20 ms)
    assert main(["gate", "--paired", str(d)]) != 1
    v = json.loads((d / "compare.json").read_text())
    assert v["policy"]["source"] == "the lab's default.yaml: regression" and v["keys"][0]["stats"][0]["name"] == "max"


def test_pairs_json_names_only_runs_inside_the_session(tmp_path, capsys):
    d = session(tmp_path / "s", [24, 30, 22], [24, 30, 22])
    doc = json.loads((d / "pairs.json").read_text())
    doc["pairs"][1]["candidate"] = ".."
    (d / "pairs.json").write_text(json.dumps(doc))
    assert main(["gate", "--paired", str(d)]) == 2
    err = capsys.readouterr().err
    assert "pairs.json" in err and "item 2: candidate: not a run" in err
    assert main(["gate", "--paired", str(tmp_path)]) == 2  # no pairs.json at all
    assert main(["gate"]) == 2


def test_baseline_method_per_budget_class(tmp_path):
    # shipped: the store everywhere (TCG sessions measured without clustering)
    policy = load_policy(Path(__file__).resolve().parents[2] / "budgets" / "default.yaml")
    assert policy.baseline_for("qemu-tcg") == "store" and policy.baseline_for("local") == "store"
    assert Policy().baseline_for("qemu-tcg") == "store"  # no baseline: section
    assert load_policy(write_budgets(tmp_path)).baseline_for("qemu-tcg") == "paired"
    bad = tmp_path / "b.yaml"
    bad.write_text("regression:\n  baseline: {qemu-tcg: sideways}\n")
    with pytest.raises(Exception) as e:
        load_policy(bad)
    assert "b.yaml" in str(e.value) and "regression.baseline.qemu-tcg" in str(e.value)
    assert "must be one of store, paired" in str(e.value)


def write_budgets(tmp_path: Path) -> Path:
    """A lab's budget file that pairs qemu-tcg (and, to no effect, local)."""
    f = tmp_path / "paired.yaml"
    f.write_text(BUDGETS + '  baseline: {"*": store, qemu-tcg: paired, local: paired}\n')
    return f


@pytest.mark.parametrize("board,method,why", [
    ("qemu-aarch64", "paired", "paired.yaml: regression: qemu-tcg: paired"),
    # the class says paired, but the local board boots its own kernel, a
    # rack board what the rack stages
    ("local", "store", "local cannot boot kernels built from source"),
    ("rack-aarch64", "store", "rack-aarch64 cannot boot kernels built from source"),
])
def test_baseline_method_asked_by_the_test_job(board, method, why, tmp_path, capsys):
    camp = tmp_path / "c.yaml"
    camp.write_text(f"name: c\nboards: [{board}]\nvariants: [rt]\nsuites: [{{name: cyclictest, loads: [idle]}}]\n")
    assert main(["baseline", "method", "--campaign", str(camp), "--board", board,
                 "--budgets", str(write_budgets(tmp_path))]) == 0
    out = capsys.readouterr()
    assert out.out == f"{method}\n" and why in out.err, out
    # the shipped policy: the store (the campaign's budget file, budgets/default.yaml)
    assert main(["baseline", "method", "--campaign", str(camp), "--board", board]) == 0
    out = capsys.readouterr()
    assert out.out == "store\n" and "default.yaml: regression" in out.err, out


def test_paired_refuses_a_board_that_cannot_boot_built_kernels(tmp_path, capsys):
    camp = tmp_path / "c.yaml"
    camp.write_text("name: c\nboards: [local]\nsuites: [{name: cyclictest, loads: [idle]}]\n")
    assert main(["paired", "--campaign", str(camp), "--board", "local", "--kernel-tree", str(tmp_path),
                 "--baseline", "HEAD~1", "--candidate", "HEAD", "--pairs", "2",
                 "--results", str(tmp_path / "out")]) == 2
    assert "local cannot boot kernels built from source" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any checkout or boot


def test_only_the_candidate_side_is_filed_under_the_pipelines_branch():
    from rtlab.verdict.paired_boots import _commit_record
    ci = {"sha": "c" * 40, "subject": "timers: fix", "branch": "fix/timers", "pipeline_id": "7",
          "pipeline_source": "pipeline"}
    assert _commit_record(ci, "candidate", "c" * 40, 2) == {**ci, "paired": "candidate 2"}
    # the baseline commit's runs: the pipeline, never the branch (they would enter its baseline)
    assert _commit_record(ci, "baseline", "b" * 40, 2) == {"sha": "b" * 40, "pipeline_id": "7",
                                                          "pipeline_source": "pipeline", "paired": "baseline 2"}
    assert _commit_record(None, "baseline", "b" * 40, 1)["pipeline_kind"] == "local"
