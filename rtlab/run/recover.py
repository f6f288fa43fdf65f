"""A run rtlab never finished (killed: no run.json, no job.json) rebuilt
from what it left on disk, for `rtlab gate`: the job
specs and, for soaks, the checkpoints (rtlab.soak.checkpoint)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from ..core.model import RunResult
from ..soak.checkpoint import CHECKPOINT_FILE, load_checked_state
from ..core.fsutil import read_json
from ..core.rundir import JobDir, RunDir


def recover_checkpointed(run_dir: Path) -> RunResult | None:
    """The run rebuilt by :func:`recover_run` when rtlab stopped before
    writing run.json and a soak left checkpoints; None otherwise (a finished
    run, or a killed one with nothing checkpointed: rtlab.judge.gate.killed_run)."""
    p = Path(run_dir)
    if not p.is_dir() or RunDir(p).run_json.is_file():
        return None
    found = sorted(p.rglob(CHECKPOINT_FILE))
    if not found:
        return None
    for f in found:
        # a corrupt or type-confused checkpoint (segments a string) is
        # refused as `rtlab run --resume` refuses it: InputError, file and key
        load_checked_state(f)
    return recover_run(p)


def recover_run(run_dir: Path) -> RunResult | None:
    """A RunResult from a run directory rtlab never finished (killed): every
    job directory with a job spec, its suites from their raw files and
    checkpoints (rtlab.run.results.collect), each job INFRA "rtlab stopped
    before the job finished" (a breach in its kept samples still FAILs).
    None when the directory holds no job spec."""
    from ..core.model import JobResult, MeasurementKey
    from .results import JobSpec, collect
    from ..suites import SUITES

    run_dir = Path(run_dir)
    specs = RunDir(run_dir).job_specs()
    if not specs:
        return None
    run = RunResult(run_id=run_dir.name, started=_started(run_dir), campaign="")
    for sp in specs:
        spec = JobSpec.read(sp)
        job_dir = sp.parent
        done = JobDir(job_dir).job_json
        if done.is_file():
            run.jobs.append(JobResult.from_json(read_json(done)))
            continue
        jr = JobResult(board=spec.board.name, variant=spec.variant.name, arch=spec.board.arch,
                       budget_class=spec.board.budget_class,
                       infra_error=f"rtlab stopped before the job finished (no job.json in {job_dir}): "
                                   "kept up to the last checkpoint")
        try:
            jr.kernel = read_json(JobDir(job_dir).kernel_json)
        except (OSError, ValueError):
            pass
        for r in spec.suites:
            if not (job_dir / r.id).is_dir():
                continue
            key = MeasurementKey(board=spec.board.name, variant=spec.variant.name, suite=r.name, load=r.load)
            jr.measurements.extend(collect(job_dir, key, SUITES[r.suite], r,
                                           before=["rtlab stopped before the suite finished"]))
        run.jobs.append(jr)
    return run


def _started(run_dir: Path) -> str:
    t = dt.datetime.fromtimestamp(run_dir.stat().st_mtime, dt.timezone.utc).replace(microsecond=0)
    return t.isoformat().replace("+00:00", "Z")
