"""Board suites, run by `rtlab run` through labgrid's pytest plugin.

    pytest rtlab/boardtests --lg-env env/<board>.yaml --rtlab-job <job>/job-spec.json

The job spec (written by rtlab.run.runner) says which variant the board was asked
to boot and which suites to run under which loads. Tests here measure and
store raw outputs; they fail only when the lab fails (no boot, wrong kernel,
tool crash). Judging latency against budgets happens afterwards, on the host,
from the raw files, so a latency failure can never look like an infra one.
"""
import shlex
import time

import pytest

from rtlab.run.results import JobSpec
from rtlab.targets.boards import job_workdir
from rtlab.suites.board import BoardShell
from rtlab.suites.events import emit, phase
from rtlab.suites.transfer import channel_for


def pytest_addoption(parser):
    parser.addoption("--rtlab-job", action="store", help="rtlab job spec (JSON)")


def _load_job(config):
    path = config.getoption("--rtlab-job")
    if not path:
        raise pytest.UsageError("rtlab/boardtests run on boards: give --rtlab-job (use `rtlab run`)")
    if not config.getoption("lg_env"):
        raise pytest.UsageError("rtlab/boardtests run on boards: give --lg-env (use `rtlab run`)")
    return JobSpec.read(path)


def pytest_configure(config):
    config.rtlab_job = _load_job(config)
    config.rtlab_events = config.rtlab_job.job_dir / "events.jsonl"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" or rep.outcome != "passed":
        msg = ""
        if rep.failed:
            exc = call.excinfo
            msg = exc.exconly() if exc else str(rep.longrepr)[-2000:]
            msg = msg.removeprefix("Failed: ")  # pytest.fail(): the text is the message
        emit(item.config, event="test", test=item.name, when=rep.when,
             outcome=rep.outcome, message=msg, duration_s=round(rep.duration, 3))
    # Nothing can be measured on a board that did not boot into the variant
    # asked for: stop the job (like -x) instead of piling up errors.
    if item.name == "test_boot" and rep.failed:
        item.session.shouldstop = "boot failed"


@pytest.fixture(scope="session")
def job(request):
    return request.config.rtlab_job


@pytest.fixture(scope="session")
def job_dir(job):
    return job.job_dir


@pytest.fixture(scope="session")
def board_shell(request, job, strategy, target):
    emit(request.config, event="booting")
    t0 = time.monotonic()
    try:
        strategy.transition("shell")
    except Exception as e:  # noqa: BLE001 - reported as the job's infra error
        # labgrid wraps the first failure as "in broken state"; say the cause
        cause = e.__cause__ or e
        pytest.fail(f"{cause}", pytrace=False)
    emit(request.config, event="booted", duration_s=round(time.monotonic() - t0, 3))
    # raw files over the board's faster path where it has one, the console otherwise
    sh = BoardShell(target.get_driver("CommandProtocol"), bulk=channel_for(job.board),
                    name=job.place or job.board.name)
    yield sh
    # the job's work dir goes with the job (raw files are on the host by now);
    # on a board whose root lives in RAM it goes when the board is switched off
    if job.board.root_in_ram:
        return
    with phase(request.config, "cleanup"):
        try:
            sh.run(f"rm -rf {shlex.quote(job_workdir())}", timeout=60)
        except Exception:  # noqa: BLE001 - a board that is gone has nothing left to clean
            pass
