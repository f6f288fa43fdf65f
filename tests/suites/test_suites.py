"""Every suite of the job, each under its load, on the booted board."""
import pytest

from rtlab.loads import LOADS
from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import SuiteFailure, run_tool
from rtlab.suites.events import emit


def pytest_generate_tests(metafunc):
    if "suite_run" in metafunc.fixturenames:
        runs = [SuiteRun.from_json(s) for s in metafunc.config.rtlab_job["suites"]]
        metafunc.parametrize("suite_run", runs, ids=[r.id for r in runs])


def test_suite(request, suite_run, job, job_dir, board_shell):
    suite = SUITES[suite_run.suite]
    load = LOADS[suite_run.load]
    host_dir = job_dir / suite_run.id
    duration = suite.duration_s(suite_run)
    emit(request.config, event="suite", id=suite_run.id, duration_s=duration)
    with load.running(board_shell, host_dir, suite_run):
        rc = run_tool(board_shell, suite_run.id, suite.command(suite_run), host_dir,
                      [suite.json_file] if suite.json_file else [],
                      timeout=duration * 2 + 60)
    if rc != 0:
        err = (host_dir / "stderr.txt")
        tail = err.read_text(errors="replace").strip().splitlines()[-3:] if err.exists() else []
        raise SuiteFailure(f"{suite.tool} exited with {rc}: {' | '.join(tail)}")
