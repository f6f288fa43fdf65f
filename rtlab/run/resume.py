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
from pathlib import Path
from typing import Callable, Optional

from ..plan.budgets import load_budgets
from ..plan.campaign import load_campaign
from ..errors import InputError
from ..core.model import JobResult, RunResult
from .results import ResultsDir
from ..soak.checkpoint import incomplete
from ..core.rundir import JOB_JSON, JobDir, RunDir


def _finished(job_dir: Path) -> Optional[JobResult]:
    try:
        jr = JobResult.from_json(json.loads(JobDir(job_dir).job_json.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if jr.infra_error or any(incomplete(m.output) for m in jr.measurements):
        return None
    return jr


def resume_run(run_dir: Path, progress: Callable[[str], None] = print) -> tuple[RunResult, Path]:
    from ..images import ensure_images
    from .runner import build_kernels, run_job, unavailable
    from ..suites.rtbench import image_overlays

    run_dir = Path(run_dir).absolute()
    if not RunDir(run_dir).campaign_copy.is_file() or not RunDir(run_dir).budgets_copy.is_file():
        raise InputError(run_dir, "--resume: not a run directory (no campaign.yaml and budgets.yaml kept in it)")
    # the budgets the run was made with, kept beside it (the campaign's own
    # relative budgets path pointed from where the campaign file was)
    campaign = load_campaign(RunDir(run_dir).campaign_copy, budgets=RunDir(run_dir).budgets_copy)
    budgets = load_budgets(campaign.budgets)
    rd = ResultsDir(run_dir.parent, run_dir.name)
    try:
        old = json.loads(RunDir(run_dir).run_json.read_text())
        started, commit = old["started"], old.get("commit", {})
    except (OSError, ValueError, KeyError):
        started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        commit = {}
    run = RunResult(run_id=rd.run_id, started=started, campaign=campaign.name, commit=commit)
    jobs = campaign.jobs()
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
