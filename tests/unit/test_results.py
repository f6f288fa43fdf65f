"""rtlab.run.results: one results path for every lab backend.

The same raw outputs, brought by the labgrid runner (board tests' events +
raw files) and by LAVA ingest (a LAVA log around a real rendered job), must
give the same run.json verdicts and reasons. Run ids are unique and run
directories created exclusively, even for runs started in the same second.
"""
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from rtlab.plan.budgets import load_budgets
from rtlab.plan.campaign import Job
from rtlab.core.model import JobResult, RunResult, Verdict
from rtlab.run.results import JobSpec, ResultsDir, load_run, tool_exit_problem
from rtlab.run.runner import collect_suites
from rtlab.suites import SUITES

from test_lava_ingest import Board as LavaBoard, ingest, jobs  # noqa: F401 - jobs is a fixture

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = {
    "loose": 'budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}\n',
    "tight": 'budgets:\n  qemu-tcg: {"*": {cyclictest: {"*": {max_us: 100, percentiles_us: {"99": 5}}}}}\n',
}


def labgrid_path(lava: LavaBoard, tmp: Path, budgets: Path) -> Path:
    """What the runner does after the board tests: events + raw files on
    disk (as run_tool writes them) -> rtlab.run.results."""
    spec = JobSpec.from_json({**lava.spec, "job_dir": "/nowhere", "suites": [lava.spec["suite"]]})
    run = spec.suites[0]
    rd = ResultsDir.create(tmp / "labgrid")
    job_dir = rd.new_job_dir(spec.board.name, spec.variant.name)
    host_dir = job_dir / run.id
    host_dir.mkdir()
    rc = 0
    for name, data in lava.raw.items():
        if name == "exit_code":
            rc = int(data)
        elif data is not None:
            (host_dir / name).write_bytes(data)
    (host_dir / "exit.json").write_text(json.dumps({"exit_code": rc, "elapsed_s": 2.0}))
    # the board test fails on a tool exit it does not accept (SuiteFailure)
    problem = tool_exit_problem(SUITES[run.suite], rc, host_dir)
    events = [{"event": "test", "test": "test_boot", "when": "call", "outcome": "passed", "message": ""},
              {"event": "test", "test": f"test_suite[{run.id}]", "when": "call",
               "outcome": "failed" if problem else "passed",
               "message": f"rtlab.suites.board.SuiteFailure: {problem}" if problem else ""}]
    job = Job(board=spec.board, variant=spec.variant, suites=(run,))
    jr = collect_suites(job, job_dir, events, JobResult(board=spec.board.name, variant=spec.variant.name,
                                                        arch=spec.board.arch, budget_class=spec.board.budget_class))
    rd.finish_job(jr, load_budgets(budgets))
    rd.finish(RunResult(run_id=rd.run_id, started="2026-11-21T06:00:00Z", campaign="lava-unit", jobs=[jr]))
    return rd.path


def verdicts(run_dir: Path) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    out = {"run": run["verdict"]}
    for j in run["jobs"]:
        out[(j["board"], j["variant"])] = j["verdict"]
        for m in j["measurements"]:
            k = m["key"]
            reasons = [r.replace(str(run_dir), "<run>") for r in m["reasons"]]
            out[(k["board"], k["variant"], k["suite"], k["load"])] = (m["verdict"], reasons, m["budget"])
    return out


def lava_only(v: dict) -> dict:
    """Without the reasons only LAVA can have (its declared test cases)."""
    return {k: (x[0], [r for r in x[1] if not r.startswith("LAVA job")], x[2]) if isinstance(x, tuple) else x
            for k, x in v.items()}


@pytest.mark.parametrize("scenario", ["pass", "over-budget", "tool-crashed", "unreadable-output"])
def test_same_raw_outputs_same_verdicts_through_labgrid_and_lava(jobs, tmp_path, scenario):  # noqa: F811
    lava = LavaBoard(jobs["rt"], tmp_path)
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text(BUDGETS["tight" if scenario == "over-budget" else "loose"])
    if scenario == "tool-crashed":
        lava.raw.update({"cyclictest.json": None, "exit_code": b"127\n",
                         "stderr.txt": b"sh: 1: cyclictest: not found\n"})
        lava.cases = []  # nothing for the board to report
    elif scenario == "unreadable-output":
        lava.raw["cyclictest.json"] = b'{"thread": {"0": {"cycles": '
        lava.cases = []
    _, lava_dir = ingest(tmp_path, lava.record(), budgets=budgets)
    labgrid_dir = labgrid_path(lava, tmp_path, budgets)
    by_labgrid, by_lava = verdicts(labgrid_dir), verdicts(lava_dir)
    expected = {"pass": "pass", "over-budget": "fail"}.get(scenario, "infra")
    assert by_labgrid["run"] == expected, by_labgrid
    if scenario in ("pass", "over-budget"):
        assert by_lava == by_labgrid
    else:  # LAVA also names the declared cases the board could not report
        assert any(r.startswith("LAVA job") for r in by_lava[("qemu-x86_64", "rt", "cyclictest", "idle")][1])
        assert lava_only(by_lava) == by_labgrid
    key = ("qemu-x86_64", "rt", "cyclictest", "idle")
    reasons = by_labgrid[key][1]
    if scenario == "over-budget":
        assert reasons[0].startswith("max ") and any(r.startswith("p99 ") for r in reasons)
    elif scenario == "tool-crashed":
        assert reasons == ["cyclictest exited with 127: sh: 1: cyclictest: not found"]
    elif scenario == "unreadable-output":
        assert len(reasons) == 1 and reasons[0].startswith("unreadable output: ")
    # both wrote the whole layout
    for d in (labgrid_dir, lava_dir):
        assert (d / "report.html").is_file() and (d / "qemu-x86_64" / "rt" / "job.json").is_file()
        assert load_run(d).verdict == Verdict(expected)


def _create(args):
    root, stem = args
    return ResultsDir.create(Path(root), stem).run_id


def test_runs_started_in_the_same_second_never_share_a_directory(tmp_path):
    # spawned, not forked: a fork copies whatever lock another thread of the
    # test process holds at that moment, and the child waits on it forever
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        ids = pool.map(_create, [(str(tmp_path), "20261123T101010Z")] * 24)
    assert len(set(ids)) == 24 and "20261123T101010Z" in ids and "20261123T101010Z-2" in ids
    assert sorted(os.listdir(tmp_path)) == sorted(ids)
    # an explicit id that exists is not reused either; suffixes stay at the end
    assert ResultsDir.create(tmp_path, "x", suffix="-lava").run_id == "x-lava"
    assert ResultsDir.create(tmp_path, "x", suffix="-lava").run_id == "x-2-lava"


def test_latest_is_the_run_finished_last_and_never_someone_elses_data(tmp_path):
    run = RunResult(run_id="", started="2026-11-21T06:00:00Z", campaign="c")
    a, b = ResultsDir.create(tmp_path, "a"), ResultsDir.create(tmp_path, "b")
    b.finish(run)
    a.finish(run)
    assert os.readlink(tmp_path / "latest") == "a"
    other = tmp_path / "other"
    ResultsDir.create(other, "c")
    (other / "latest").mkdir()
    (other / "latest" / "keep").write_text("mine")
    ResultsDir(other, "c").point_latest()
    assert (other / "latest" / "keep").read_text() == "mine"


def test_job_spec_round_trips_typed(jobs, tmp_path):  # noqa: F811
    lava = LavaBoard(jobs["rt-iso"], tmp_path)
    spec = JobSpec.from_json({**lava.spec, "job_dir": str(tmp_path), "suites": [lava.spec["suite"]]})
    assert spec.board.isolate_cpu == 1 and spec.variant.isolated and spec.suites[0].id == "cyclictest@idle"
    spec.write()
    again = JobSpec.read(tmp_path / "job-spec.json")
    assert again == spec and again.to_json() == spec.to_json()
