"""Every suite of the job, each under its load, on the booted board.

The load starts first and must be going before the tool starts; it is
checked over the tool's whole run and stopped after it (rtlab.loads). A
load that died or stalled fails the test with LoadDied naming it (INFRA);
a tool that crashed fails it with SuiteFailure (INFRA); a tool whose
non-zero exit is a kernel result (pi_stress deadlock) passes here and is
judged FAIL by the gate from its raw files.
"""
from rtlab.loads import LOADS
from rtlab.results import tool_exit_problem
from rtlab.suites import SUITES
from rtlab.suites.board import SuiteFailure, run_tool
from rtlab.suites.events import emit


def pytest_generate_tests(metafunc):
    if "suite_run" in metafunc.fixturenames:
        runs = metafunc.config.rtlab_job.suites
        metafunc.parametrize("suite_run", runs, ids=[r.id for r in runs])


def test_suite(request, suite_run, job, job_dir, board_shell):
    suite = SUITES[suite_run.suite]
    load = LOADS[suite_run.load]
    host_dir = job_dir / suite_run.id
    duration = suite.duration_s(suite_run)
    argv = suite.command(suite_run, board=job.board.to_json())
    emit(request.config, event="suite", id=suite_run.id, duration_s=duration)
    with load.running(board_shell, host_dir, suite_run, board=job.board):
        rc = run_tool(board_shell, suite_run.id, argv, host_dir, suite.outputs(suite_run),
                      timeout=duration * 2 + 60)
    problem = tool_exit_problem(suite, rc, host_dir)  # the host judges it the same way
    if problem:
        raise SuiteFailure(problem)
