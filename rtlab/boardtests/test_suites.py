"""Every suite of the job, each under its load, on the booted board.

The load starts first and must be going before the tool starts; it is
checked over the tool's whole run and stopped after it (rtlab.loads). A
load that died or stalled fails the test with LoadDied naming it (INFRA);
a tool that crashed fails it with SuiteFailure (INFRA); a tool whose
non-zero exit is a kernel result (pi_stress deadlock) passes here and is
judged FAIL by the gate from its raw files. A suite the board cannot run
(rtla on a kernel without the tracer) is recorded as not available.
"""
import json
import time

from rtlab.judge import evidence
from rtlab.core import hostattr, hostnoise
from rtlab.report import snapshot
from rtlab.loads import LOADS
from rtlab.run.results import tool_exit_problem
from rtlab.soak.checkpoint import checkpoint_event
from rtlab.core.rundir import MeasurementDir
from rtlab.suites import SUITES
from rtlab.suites.board import SuiteFailure
from rtlab.suites.events import emit, phase


def pytest_generate_tests(metafunc):
    if "suite_run" in metafunc.fixturenames:
        runs = metafunc.config.rtlab_job.suites
        metafunc.parametrize("suite_run", runs, ids=[r.id for r in runs])


def test_suite(request, suite_run, job, job_dir, board_shell, target):
    suite = SUITES[suite_run.suite]
    load = LOADS[suite_run.load]
    host_dir = job_dir / suite_run.id
    duration = suite.duration_s(suite_run)
    argv = suite.command(suite_run, board=job.board)
    with phase(request.config, "suite_setup"):
        why = suite.host_unavailable(target, suite_run) or suite.unavailable(board_shell)
    if why is not None:  # not run, not judged: the host records it as not available
        host_dir.mkdir(parents=True, exist_ok=True)
        MeasurementDir(host_dir).not_available.write_text(json.dumps({"reason": why}) + "\n")
        emit(request.config, event="suite_not_available", id=suite_run.id, reason=why)
        return
    emit(request.config, event="suite", id=suite_run.id, duration_s=duration)
    traced = False
    t_load = time.monotonic()
    with load.running(board_shell, host_dir, suite_run, board=job.board, duration_s=duration):
        emit(request.config, event="phase", name="load_start", duration_s=round(time.monotonic() - t_load, 4))
        if suite_run.evidence and suite.traces_kernel:  # armed: record what happens up to the breach
            traced = evidence.start_tracing(board_shell) is None
        try:
            # an external probe armed around the run (irq-response); the host's
            # steal and stalls while the tool runs (rtlab.core.hostnoise): host-noise.json
            guest = job.board.on_this_host and job.board.kind != "local"
            with suite.host_side(target, suite_run, host_dir), \
                    hostnoise.watching(host_dir, witness=job.board.on_this_host, guest=guest,
                                       rt_load=any(p.realtime_threads for p in load.parts())) as watch:
                # a guest's clock against the host's, before and after the tool
                # (rtlab.core.hostattr): where its late samples fall among the host's stalls
                anchors = [hostattr.clock_anchor(board_shell)] if guest else []
                # the tool's run; a soak's checkpoints are events (rtlab.soak.checkpoint)
                rc = suite.run_on_board(board_shell, suite_run, host_dir, argv, board=job.board,
                                        on_checkpoint=lambda st: emit(request.config,
                                                                      **checkpoint_event(suite_run, st)))
                if guest:
                    anchors.append(hostattr.clock_anchor(board_shell))
                    watch.board_clock = hostattr.anchored([a for a in anchors if a is not None],
                                                          hostattr.UPTIME_RESOLUTION_S)
        finally:
            if traced:
                evidence.stop_tracing(board_shell)
            t_load = time.monotonic()
    emit(request.config, event="phase", name="load_stop", duration_s=round(time.monotonic() - t_load, 4))
    snapshot.add_host_noise(job_dir / snapshot.SNAPSHOT_FILE, suite_run.id, hostnoise.load(host_dir))
    with phase(request.config, "evidence"):
        found = evidence.collect(board_shell, suite, suite_run, host_dir, traced)
    if found is not None:
        emit(request.config, event="evidence", id=suite_run.id, summary=found.get("summary"))
    problem = tool_exit_problem(suite, rc, host_dir)  # the host judges it the same way
    if problem:
        raise SuiteFailure(problem)


def test_snapshot_after(request, job_dir, board_shell):
    """After the last suite: the interrupt and softirq counters again, and
    their per-CPU delta over the measurements, into snapshot.json."""
    path = job_dir / snapshot.SNAPSHOT_FILE
    before = snapshot.load(path)
    if before is None or "error" in before:
        return
    with phase(request.config, "snapshot_after"):
        try:  # context, never a verdict (a console lost by a suite is that suite's INFRA)
            snapshot.write(path, snapshot.finish(before, snapshot.counters(board_shell)))
        except Exception as e:  # noqa: BLE001
            snapshot.write(path, {**before, "after_error": f"{type(e).__name__}: {e}"})
