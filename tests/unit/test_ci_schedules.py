"""Every schedule the docs promise runs on the shipped CI as written
(docs/gating-merge-requests.md, "Schedules"): the nightly soak, and each
vendor report (campaigns/vendor-*.yaml) at its full length where it has one.

Which jobs a schedule starts is asked of gitlab-ci-local (its --list-json
evaluates the workflow's and the jobs' rules with the schedule's variables,
as GitLab does), not read from the generator. Each measuring job is then
checked against what it would run: its board is one the campaign names, has
every CPU the campaign pins, and its timeout holds the campaign's time for
that board × variant (per repeat: boot allowance, each tool's duration and
its allowance; plus a kernel build and a wait for the board).
"""
import dataclasses
import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rtlab import ROOT
from rtlab.plan.campaign import load_campaign
from rtlab.run.cimatrix import KERNEL_BUILD_ALLOWANCE_S, LOCK_WAIT_ALLOWANCE_S
from rtlab.run.runner import job_planned_s
from rtlab.soak.checkpoint import full_length
from rtlab.targets.boards import find_board
from rtlab.targets.variants import load_variants

GCL = ROOT / ".cache" / "gitlab-ci-local" / "bin" / "gitlab-ci-local"
# make test installs it (make gitlab-ci-local): missing is a broken set-up, never a skip
assert GCL.exists() or shutil.which("gitlab-ci-local"), "needs gitlab-ci-local (make gitlab-ci-local)"

REPORTS = sorted(p.stem for p in (ROOT / "campaigns").glob("vendor-*.yaml"))
#: what the docs promise: the nightly (no variables: the workflow sets the
#: campaign) and each report, at full length where the campaign has one
SCHEDULES = [("nightly-soak", {})] + [
    (c, {"RTLAB_CAMPAIGN": c, **({"RTLAB_FULL": "1"} if "full_duration_s" in (ROOT / "campaigns" / f"{c}.yaml")
                                 .read_text() else {})})
    for c in REPORTS]


def scheduled_jobs(pipeline: Path, variables: dict, tmp_path: Path) -> list[str]:
    """The jobs a schedule with *variables* starts, as gitlab-ci-local lists them."""
    proj = tmp_path / "proj"
    if not proj.exists():
        proj.mkdir()
        shutil.copy(pipeline, proj / ".gitlab-ci.yml")
        for args in (["init", "-q", "-b", "main"], ["add", "."],
                     ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ci"]):
            subprocess.run(["git", "-C", str(proj), *args], check=True)
    cmd = [str(GCL) if GCL.exists() else "gitlab-ci-local", "--list-json", "--variable",
           "CI_PIPELINE_SOURCE=schedule"]
    for k, v in variables.items():
        cmd += ["--variable", f"{k}={v}"]
    r = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "GCL_IGNORE_PREDEFINED_VARS": "CI_PIPELINE_SOURCE"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return [j["name"] for j in json.loads(r.stdout) if j["when"] != "never"]


def _job(ci: dict, name: str) -> dict:
    """A job with what it extends merged in (GitLab's extends: deep merge)."""
    job = dict(ci[name])
    bases = job.pop("extends", [])
    for base in [bases] if isinstance(bases, str) else bases:
        merged = _job(ci, base)
        merged.update(job)
        job = merged
    return job


def _timeout_s(text: str) -> int:
    parts = dict((u, int(n)) for n, u in re.findall(r"(\d+)\s*([hm])", text))
    assert parts, text
    return 3600 * parts.get("h", 0) + 60 * parts.get("m", 0)


def measuring_jobs(ci: dict, names: list[str]) -> list[tuple[str, str, str, int]]:
    """(job, board, variant, timeout s) of every listed job that runs
    `rtlab run` on a board: a parallel:matrix job with BOARD and VARIANT."""
    out = []
    for name in names:
        base, _, values = name.partition(": [")
        job = _job(ci, base)
        row_keys = [list(r) for r in job.get("parallel", {}).get("matrix", [])]
        if not values or not any("BOARD" in k and "VARIANT" in k for k in row_keys):
            continue
        # gitlab-ci-local names a matrix job by its values in the row's key order
        vals = values.rstrip("]").split(",")
        row = next(dict(zip(k, vals)) for k in row_keys if len(k) == len(vals))
        out.append((base, row["BOARD"], row["VARIANT"], _timeout_s(job.get("timeout", "1h"))))
    return out


def pinned_cpus(campaign, board, variant) -> set[int]:
    """Every CPU the campaign names for this board: measured and load CPUs."""
    from rtlab.core.params import cpus_of

    cpus = set()
    for entry in campaign.suites:
        params = {**entry.params, **entry.overrides.get(board.budget_class, {}), **entry.overrides.get(board.name, {})}
        if params.get("cpus") not in (None, "auto", "all"):
            cpus |= set(cpus_of(params["cpus"]))
        for key in ("load_cpus", "other_cpu"):
            if params.get(key) is not None:
                cpus |= set(cpus_of(params[key]))
    if variant.isolated:
        cpus.add(board.isolate_cpu)
    return cpus


def check_schedule(pipeline: Path, name: str, variables: dict, tmp_path: Path) -> list[str]:
    """What is wrong with the schedule on this pipeline (nothing: []). The
    nightly schedule (no RTLAB_CAMPAIGN) runs its campaign's suites on the
    test job's boards × variants; a report runs its campaign as written."""
    as_written = "RTLAB_CAMPAIGN" in variables
    ci = yaml.safe_load(pipeline.read_text())
    jobs = measuring_jobs(ci, scheduled_jobs(pipeline, variables, tmp_path))
    campaign = load_campaign(name)
    if variables.get("RTLAB_FULL") == "1":
        campaign = full_length(campaign)
    problems = [] if jobs else [f"{name}: the schedule starts no job that measures"]
    named_boards = {b.name for b in campaign.boards}
    variants = {v.name: v for v in load_variants().values()}
    for job, board_name, variant, timeout in jobs:
        if as_written and (board_name not in named_boards or variant not in {v.name for v in campaign.variants}):
            problems.append(f"{name}: job {job} runs {board_name}/{variant}, which {name} does not name "
                            f"(boards {sorted(named_boards)}, variants {[v.name for v in campaign.variants]})")
        # what the job runs: the campaign's suites on the job's board (as `--board` makes it)
        board = find_board(board_name)
        off = sorted(c for c in pinned_cpus(campaign, board, variants[variant]) if c >= board.cpus)
        if off:
            problems.append(f"{name}: job {job} pins CPU {off} on {board_name}, which has {board.cpus}")
        (cjob,) = dataclasses.replace(campaign, boards=[board], variants=[variants[variant]], repeat=1).jobs()
        need = job_planned_s(cjob) * campaign.repeat + KERNEL_BUILD_ALLOWANCE_S + LOCK_WAIT_ALLOWANCE_S
        if timeout < need:
            problems.append(f"{name}: job {job} [{board_name}, {variant}] times out after {timeout / 3600:g} h, "
                            f"the campaign needs {need / 3600:.1f} h")
    variants = {v.name: v for v in campaign.variants}
    if not as_written:
        return problems
    # and every board × variant the campaign names that can run has its job
    ran = {(b, v) for _, b, v, _ in jobs}
    for b, v in itertools.product(named_boards, variants):
        board = find_board(b)
        can = not (variants[v].isolated and board.isolate_cpu is None) and not board.fixed_kernel
        if can and (b, v) not in ran and not _not_available_as_written(campaign, b, v):
            problems.append(f"{name}: {b}/{v} is named but no job runs it")
    return problems


def _not_available_as_written(campaign, board: str, variant: str) -> bool:
    from rtlab.run.cimatrix import runs_as_written

    (job,) = [j for j in campaign.jobs() if (j.board.name, j.variant.name) == (board, variant)][:1]
    return runs_as_written(job) is not None


@pytest.mark.parametrize("name,variables", SCHEDULES, ids=[s for s, _ in SCHEDULES])
def test_each_schedule_runs_its_campaign_as_written(name, variables, tmp_path):
    assert check_schedule(ROOT / ".gitlab-ci.yml", name, variables, tmp_path) == []


def test_the_nightly_soak_is_the_test_jobs_and_the_lab_housekeeping(tmp_path):
    names = scheduled_jobs(ROOT / ".gitlab-ci.yml", {}, tmp_path)
    assert {"gate", "publish", "prune", "regressions"} <= set(names)
    assert any(n.startswith("reference: [") for n in names) and any(n.startswith("test: [") for n in names)
    assert not [n for n in names if n.startswith("report:")]
    # a report's schedule runs its report job, publish and gate: no kernel
    # pipeline, no housekeeping (RTLAB_FULL=1 would lengthen the reference run)
    names = scheduled_jobs(ROOT / ".gitlab-ci.yml", {"RTLAB_CAMPAIGN": "vendor-rk3568-oee", "RTLAB_FULL": "1"},
                           tmp_path)
    assert sorted(n.split(": [")[0] for n in names) == ["gate", "publish", *["report:vendor-rk3568-oee"] * 2]


def test_the_check_finds_what_the_old_pipeline_did_wrong(tmp_path):
    """Before the report jobs, a schedule with RTLAB_CAMPAIGN=vendor-rk3568-oee
    ran the test job's matrix (QEMU boards, 2 CPUs) with a campaign that pins
    CPU 2, under a 3 h timeout for a 12 h cyclictest."""
    old = tmp_path / "old.yml"
    old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", "1ddfe76:.gitlab-ci.yml"], capture_output=True,
                                  text=True, check=True).stdout)
    problems = check_schedule(old, "vendor-rk3568-oee", {"RTLAB_CAMPAIGN": "vendor-rk3568-oee", "RTLAB_FULL": "1"},
                              tmp_path)
    assert any("runs qemu-x86_64/voluntary, which vendor-rk3568-oee does not name" in p for p in problems), problems
    assert any("twin-rk356x/rt is named but no job runs it" in p for p in problems), problems
    assert any("pins CPU [2] on qemu-x86_64, which has 2" in p for p in problems), problems
    assert any("times out after 3 h, the campaign needs 14." in p for p in problems), problems
