"""`rtlab run --resume RUN_DIR`: finish a run that broke off, measuring only
what is missing.

The campaign and budgets are the ones kept in the run directory. A job that
finished (job.json, no infra error, no soak cut short) is kept as it is; any
other job runs again in its own directory, where a soak (rtlab.soak.checkpoint)
continues after its last checkpoint and the suites without checkpoints run
again. run.json, report.html and vendor.html are then written for the whole
run, as a run that never broke off would have them.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Callable, Optional

from ..plan.budgets import load_budgets
from ..plan.campaign import load_campaign
from ..errors import InputError
from ..core.model import JobResult, RunResult
from .results import ResultsDir
from ..soak.checkpoint import (CHECKPOINT_FILE, PARAMETER_KEYS, incomplete, load_checked_state, new_state,
                               parameter_changes)
from ..core import modelcheck
from ..core.fsutil import read_bounded, resolve_inside, result_max_bytes
from ..core.procutil import process_start
from ..core.rundir import JOB_JSON, JobDir, MeasurementDir, RunDir
from ..suites import SUITES
from ..suites.soak import CyclictestSoak
from .joblife import mark_run_started


def _finished(job_dir: Path) -> Optional[JobResult]:
    """The job's result when it finished; None when it has to run again (its
    job.json missing, cut off or not a job's). A job.json that leads out of
    its directory, is no regular file or is over the size limit is refused."""
    path = JobDir(job_dir).job_json
    if not os.path.lexists(path):
        return None
    data = read_bounded(path, result_max_bytes(), root=job_dir)
    try:
        doc = json.loads(data)
        modelcheck.job(modelcheck.Doc(path, doc))
        jr = JobResult.from_json(doc)
    except (ValueError, KeyError, TypeError, RecursionError, InputError):
        return None
    if jr.infra_error or any(incomplete(m.output) for m in jr.measurements):
        return None
    return jr


def _refuse_live(run_dir: Path) -> None:
    """A run whose runner (or another --resume) still measures is not resumed:
    its files are in use."""
    path = RunDir(run_dir).run_started
    if not os.path.lexists(path):
        return
    try:
        started = json.loads(read_bounded(path, 65536, root=run_dir))
    except (ValueError, RecursionError):
        return
    pid = started.get("pid") if isinstance(started, dict) else None
    if (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and started.get("pid_start") is not None
            and process_start(pid) == started.get("pid_start")):
        raise InputError(path, f"--resume: the run is still measuring (its runner, pid {pid}, runs): refused")


def _check_checkpoints(job_dir: Path, job) -> None:
    """Each soak's checkpoint in *job_dir*: readable, shaped as rtlab writes
    it, and made with this run's parameters; anything else is refused (exit
    2), its segments kept."""
    for run in job.suites:
        suite = SUITES[run.suite]
        if not isinstance(suite, CyclictestSoak):
            continue
        path = MeasurementDir(job_dir / run.id).path / CHECKPOINT_FILE
        if not os.path.lexists(path):
            continue
        state = load_checked_state(path)
        command = suite.checkpoint_command(run, job.board)
        expected = new_state(int(run.params["duration_s"]), int(run.params["checkpoint_s"]),
                             float(run.params["interval_us"]), command)
        changed = parameter_changes(state, {k: expected[k] for k in PARAMETER_KEYS})
        if changed:
            raise InputError(path, "--resume: " + "; ".join(changed) + " (a checkpoint of other parameters is "
                                   "no part of this run): refused, its segments kept")


def resume_run(run_dir: Path, progress: Callable[[str], None] = print) -> tuple[RunResult, Path]:
    from ..images import ensure_images
    from .runner import arm_spikes, build_kernels, run_job, unavailable
    from ..suites.rtbench import image_overlays

    run_dir = Path(run_dir).absolute()
    if not RunDir(run_dir).campaign_copy.is_file() or not RunDir(run_dir).budgets_copy.is_file():
        raise InputError(run_dir, "--resume: not a run directory (no campaign.yaml and budgets.yaml kept in it)")
    _refuse_live(run_dir)
    # the budgets the run was made with, kept beside it (the campaign's own
    # relative budgets path pointed from where the campaign file was); links
    # out of the run directory are refused, as the gate refuses them
    campaign = load_campaign(resolve_inside(RunDir(run_dir).campaign_copy, run_dir),
                             budgets=resolve_inside(RunDir(run_dir).budgets_copy, run_dir))
    budgets = load_budgets(campaign.budgets)
    rd = ResultsDir(run_dir.parent, run_dir.name)
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    commit: dict = {}
    if os.path.lexists(RunDir(run_dir).run_json):
        data = read_bounded(RunDir(run_dir).run_json, result_max_bytes(), root=run_dir)
        try:
            old = json.loads(data)
            if isinstance(old.get("started"), str) and isinstance(old.get("commit", {}), dict):
                started, commit = old["started"], old.get("commit", {})
        except (ValueError, AttributeError, RecursionError):
            pass
    run = RunResult(run_id=rd.run_id, started=started, campaign=campaign.name, commit=commit)
    jobs = [arm_spikes(j, budgets) for j in campaign.jobs()]
    for job in jobs:  # every checkpoint to continue checked before anything boots
        jd = rd.job_dir(job.board.name, job.variant.name, job.repeat)
        if _finished(jd) is None:
            _check_checkpoints(jd, job)
    mark_run_started(run_dir, rd.run_id, campaign.name)  # a second --resume meanwhile is refused
    arches = sorted({j.board.arch for j in jobs if not j.board.fixed_kernel})
    images = {a: ensure_images(a, overlays=image_overlays(a), progress=progress) for a in arches}
    built = build_kernels(jobs, images, None, progress) if images else {}
    for i, job in enumerate(jobs, 1):
        label = f"[{i}/{len(jobs)}] {job.id}"
        why = unavailable(job, images, built)
        if why:
            run.not_available.append({"board": job.board.name, "variant": job.variant.name, "reason": why})
            continue
        jd = rd.job_dir(job.board.name, job.variant.name, job.repeat)
        kept = _finished(jd)
        if kept is not None:
            progress(f"{label} finished before: kept ({kept.verdict.value.upper()})")
            run.jobs.append(kept)
            continue
        if jd.is_dir():  # the broken-off attempt's record, kept beside the new one
            for name in ("events.jsonl", "pytest.log", JOB_JSON):
                if (jd / name).exists():
                    (jd / name).rename(jd / f"{name}.before-resume")
        progress(f"{label} resuming" + (" from its checkpoints" if jd.is_dir() else ""))
        jr = run_job(job, rd, images, progress, label, built=built, keep_dir=jd.is_dir())
        rd.finish_job(jr, budgets)
        run.jobs.append(jr)
    rd.finish(run)
    return run, run_dir
