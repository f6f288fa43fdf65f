"""The runner: a campaign in, a judged RunResult out.

For each job (board × variant) it stages the variant's kernel for the board,
runs the board suites (tests/suites) through labgrid's pytest plugin in a
child process, tails their progress, then parses every raw output into the
result model. Judging happens only after every raw file is on disk.

Results directory:
    results/<run_id>/run.json                       RunResult (judged)
    results/<run_id>/campaign.yaml                  the campaign as run
    results/<run_id>/<board>/<variant>/job-spec.json what the board was asked
    .../<board>/<variant>/kernel.json               facts read off the kernel
    .../<board>/<variant>/<suite>@<load>/           raw tool outputs
    .../<board>/<variant>/console/, pytest.log, junit.xml, events.jsonl, job.json
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from . import ROOT
from .budgets import load_budgets
from .campaign import Campaign, Job
from .errors import InputError, RtlabError
from .gate import judge_run
from .model import JobResult, Measurement, MeasurementKey, RunResult, ToolOutput, Verdict
from .suites import SUITES, not_available

SUITES_DIR = ROOT / "tests" / "suites"
RESULTS_DIR = ROOT / "results"
#: seconds a board may take from power-on to a shell prompt, on top of suites
BOOT_ALLOWANCE_S = 180


class Progress:
    """One line per step, prefixed with the time since the run started."""

    def __init__(self, stream=sys.stdout):
        self.t0 = time.monotonic()
        self.stream = stream

    def __call__(self, msg: str) -> None:
        m, s = divmod(int(time.monotonic() - self.t0), 60)
        print(f"[{m:02d}:{s:02d}] {msg}", file=self.stream, flush=True)


def new_run_id(now: Optional[dt.datetime] = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


def stage_kernel(job: Job, images: dict, built: Optional[dict] = None) -> tuple[dict[str, str], dict]:
    """LG_RTLAB_* for the board's env file (kernel, initramfs, boot args) and
    what was staged (path, release, uname -v, config preemption model), which
    the boot test holds the running kernel to. `built` maps (board, variant)
    to kernels built from source (see :func:`build_kernels`)."""
    board, variant = job.board, job.variant
    env = {"LG_RTLAB_BOOT_ARGS": variant.boot_args_for(board.isolate_cpu, board.cpus)}
    if board.fixed_kernel:
        return env, {}
    imgs = images.get(board.arch)
    if imgs is None:
        raise RtlabError(f"board {board.name}: no images for arch {board.arch}")
    bk = (built or {}).get((board.name, variant.name))
    if bk is not None:
        info = bk.build_json
        kernel = {"path": str(bk.path), "release": bk.release, "uname_v": bk.uname_v,
                  "preempt": bk.preempt, "commit": info.get("commit"),
                  "source": f"built from {info.get('describe') or info.get('commit', '?')} "
                            f"({', '.join(f.get('name', '?') for f in info.get('fragments', []))})"}
    elif variant.prebuilt:
        k = imgs.kernels[variant.prebuilt]
        kernel = {"path": str(k.path), "release": k.release, "uname_v": k.uname_v,
                  "preempt": k.preempt, "source": f"{k.package} {k.version}"}
    elif "image" in variant.kernel:  # a kernel given by path (tests)
        kernel = {"path": str(Path(variant.kernel["image"]))}
    else:
        raise RtlabError(f"variant {variant.name}: no kernel for board {board.name}")
    env["LG_RTLAB_KERNEL"] = kernel["path"]
    env["LG_RTLAB_INITRD"] = kernel["initrd"] = str(imgs.initramfs)
    return env, kernel


def unavailable(job: Job, images: dict, built: Optional[dict] = None,
                kernel_tree: Optional[Path] = None) -> Optional[str]:
    """Why this board cannot run this variant at all (not an error: the
    kernels it has cannot be that variant, or cannot be the commit under
    test), or None."""
    board, variant = job.board, job.variant
    if kernel_tree is not None and not board.boots_built_kernels:
        # measuring it would credit another kernel's latency to the commit
        return (f"{board.kind} board: boots {'its own kernel' if board.fixed_kernel else 'Debian kernels'}, "
                f"not the commit under test (kernels from --kernel-tree boot on QEMU boards)")
    if board.fixed_kernel or not variant.prebuilt or (board.name, variant.name) in (built or {}):
        return None
    imgs = images.get(board.arch)
    k = imgs.kernels.get(variant.prebuilt) if imgs else None
    if k is None:
        return f"no {variant.prebuilt} kernel for {board.arch}"
    why = variant.unavailable_on(k.preempt)
    return f"{why} ({k.package} {k.version})" if why else None


class KernelBuildFailed(Exception):
    """The commit under test cannot be built into this variant (an option the
    variant needs did not survive olddefconfig, or the build broke): the
    commit's fault, so a FAIL of the job, never INFRA."""


def build_kernels(jobs: list[Job], images: dict, kernel_tree: Optional[Path],
                  progress: Callable[[str], None]) -> dict:
    """Kernels from source, built once per (arch, board base, fragments):
    every variant from `kernel_tree` (the commit under test) when given;
    otherwise only the variants Debian's prebuilt kernels cannot be (e.g.
    PREEMPT_DYNAMIC on aarch64), from the pinned linux-source-6.12.
    Returns (board, variant) -> BuiltKernel or KernelBuildFailed."""
    from . import kernel as kbuild

    todo: dict[tuple, list[Job]] = {}
    for job in jobs:
        board, variant = job.board, job.variant
        if not variant.fragments or not board.boots_built_kernels:
            continue
        if kernel_tree is None and not unavailable(job, images):
            continue
        frags = tuple(kbuild.with_base(board.arch, variant.fragments, board.name))
        todo.setdefault((board.arch, frags), []).append(job)
    out: dict = {}
    for (arch, frags), group in todo.items():
        what = f"{arch} kernel [{', '.join(frags)}]"
        progress(f"building {what} for {', '.join(sorted({j.variant.name for j in group}))}"
                 + (f" from {kernel_tree}" if kernel_tree else " from the pinned linux-source"))
        try:
            if kernel_tree is not None:
                bk = kbuild.build_kernel(kernel_tree, arch, list(frags), progress=progress)
            else:
                bk = kbuild.ensure_built_kernel(arch, list(frags), progress=progress)
        except RtlabError as e:
            bk = KernelBuildFailed(f"kernel build failed ({what}): {e}")
            progress(str(bk))
        for job in group:
            out[(job.board.name, job.variant.name)] = bk
    return out


def _read_events(path: Path, pos: int) -> tuple[list[dict], int]:
    if not path.exists():
        return [], pos
    with open(path) as f:
        f.seek(pos)
        chunk = f.read()
    lines = chunk.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        chunk_len = sum(len(x) for x in lines[:-1])
        lines = lines[:-1]
    else:
        chunk_len = len(chunk)
    return [json.loads(x) for x in lines if x.strip()], pos + chunk_len


def run_job(job: Job, run_dir: Path, images: dict, progress: Callable[[str], None],
            label: str = "", lease_env: Optional[dict] = None,
            on_spawn: Optional[Callable] = None, built: Optional[dict] = None) -> JobResult:
    """*lease_env*: LG_PLACE, LG_TOKEN, LG_USERNAME, LG_COORDINATOR of the place
    the job holds (rack boards; rtlab.lab.scheduler). *on_spawn(proc)* is told
    the pytest process (its process group holds everything the job started)."""
    board, variant = job.board, job.variant
    job_dir = run_dir / board.name / variant.name
    if job_dir.exists():
        shutil.rmtree(job_dir)
    job_dir.mkdir(parents=True)
    result = JobResult(board=board.name, variant=variant.name, arch=board.arch,
                       budget_class=board.budget_class)
    t0 = time.monotonic()
    bk = (built or {}).get((board.name, variant.name))
    if isinstance(bk, KernelBuildFailed):
        result.build_error = str(bk)
        return result
    try:
        lg_env, kernel = stage_kernel(job, images, built)
    except RtlabError as e:
        result.infra_error = str(e)
        return result
    boot_args = lg_env["LG_RTLAB_BOOT_ARGS"]
    spec = {
        "job_dir": str(job_dir), "board": board.to_json(), "variant": variant.to_json(),
        "boot_args": boot_args, "suites": [s.to_json() for s in job.suites], "kernel": kernel,
    }
    if lease_env:
        spec["place"] = lease_env.get("LG_PLACE")
    spec_path = job_dir / "job-spec.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    timeout = BOOT_ALLOWANCE_S + sum(SUITES[s.suite].duration_s(s) * 2 + 60 for s in job.suites)
    cmd = [sys.executable, "-m", "pytest", str(SUITES_DIR), "-p", "no:cacheprovider",
           "--rootdir", str(SUITES_DIR), "-c", os.devnull,
           "--lg-env", str(board.env_file), "--rtlab-job", str(spec_path),
           "--lg-log", str(job_dir / "console"), "--junitxml", str(job_dir / "junit.xml"),
           "-q", "-rfE"]
    env = {**os.environ, **lg_env, **(lease_env or {})}
    events_path = job_dir / "events.jsonl"
    events: list[dict] = []
    pos = 0
    with open(job_dir / "pytest.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=str(ROOT), start_new_session=True,
                                preexec_fn=_die_with_parent if lease_env else None)
        if on_spawn is not None:
            on_spawn(proc)
        timed_out = False
        while True:
            try:
                proc.wait(timeout=0.5)
                finished = True
            except subprocess.TimeoutExpired:
                finished = False
            new, pos = _read_events(events_path, pos)
            for ev in new:
                events.append(ev)
                _show_event(ev, label, progress)
            if finished:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                # the whole process group: pytest and the QEMU it started
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
    result.duration_s = round(time.monotonic() - t0, 3)
    kernel_json = job_dir / "kernel.json"
    if kernel_json.exists():
        result.kernel = json.loads(kernel_json.read_text())
    # the last report of each test (setup errors and call failures both count)
    outcomes = {e["test"]: e for e in events
                if e.get("event") == "test" and e.get("when") in ("setup", "call")}
    boot = outcomes.get("test_boot")
    if timed_out:
        result.infra_error = f"board {board.name}: job timed out after {timeout:.0f} s (see {job_dir}/pytest.log)"
    elif boot is None or boot["outcome"] != "passed":
        if boot is not None:
            why = boot["message"] or boot["outcome"]
        else:
            why = f"pytest exited with {proc.returncode} before booting: " + _tail(job_dir / "pytest.log")
        result.infra_error = f"board {board.name}: boot failed: {why}"
    # Every suite that left output is parsed, even after a later failure.
    for run in job.suites:
        key = MeasurementKey(board=board.name, variant=variant.name, suite=run.name, load=run.load)
        outcome = outcomes.get(f"test_suite[{run.id}]")
        raw_dir = job_dir / run.id
        raw = sorted(str(p.relative_to(job_dir)) for p in raw_dir.rglob("*") if p.is_file()) if raw_dir.exists() else []
        if outcome is None:
            if result.infra_error:
                continue  # never ran: the job-level infra error says why
            m = Measurement(key, ToolOutput(path="", tool=SUITES[run.suite].tool), raw,
                            verdict=Verdict.INFRA, reasons=["suite did not run (see pytest.log)"])
        elif outcome["outcome"] != "passed":
            m = Measurement(key, ToolOutput(path="", tool=SUITES[run.suite].tool), raw,
                            verdict=Verdict.INFRA, reasons=[outcome["message"] or outcome["outcome"]])
        elif (why := not_available(raw_dir)) is not None:
            result.not_available.append({"suite": run.name, "load": run.load, "reason": why})
            continue
        else:
            result.measurements.extend(parse_measurements(job_dir, run, key, raw))
            continue
        result.measurements.append(m)
    return result


def parse_measurements(job_dir: Path, run, key: MeasurementKey, raw: list[str]) -> list[Measurement]:
    """The measurements of one suite run's raw files: one per output of the
    suite (rtla timerlat: "<name>-irq" and "<name>-thread"); unreadable
    output is one INFRA measurement under the suite's own name."""
    suite = SUITES[run.suite]
    try:
        outs = suite.parse_outputs(job_dir, run)
    except InputError as e:
        return [Measurement(key, ToolOutput(path="", tool=suite.tool), raw,
                            verdict=Verdict.INFRA, reasons=[f"unreadable output: {e}"])]
    ms = []
    for suffix, out in outs.items():
        out.path = str(Path(out.path).relative_to(job_dir)) if Path(out.path).is_absolute() else out.path
        k = MeasurementKey(key.board, key.variant, f"{key.suite}-{suffix}" if suffix else key.suite, key.load)
        ms.append(Measurement(k, out, raw))
    return ms


def _die_with_parent() -> None:
    """A job holding a place dies with the runner, whose death frees the place."""
    from .lab.places import die_with_parent
    die_with_parent()


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [l for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def _show_event(ev: dict, label: str, progress) -> None:
    kind = ev.get("event")
    if kind == "booting":
        progress(f"{label} booting")
    elif kind == "booted":
        progress(f"{label} shell after {ev['duration_s']:.1f} s")
    elif kind == "suite_not_available":
        progress(f"{label} {ev['id']}: not available ({ev.get('reason', '')})")
    elif kind == "suite":
        progress(f"{label} {ev['id']}: running ({ev['duration_s']:g} s)")
    elif kind == "test" and ev.get("outcome") != "passed":
        progress(f"{label} {ev['test']}: {ev['outcome']} ({ev.get('message', '')[:200]})")


def run_campaign(campaign: Campaign, *, results_root: Path = RESULTS_DIR,
                 progress: Callable[[str], None] = Progress(),
                 commit: Optional[dict] = None, run_id: Optional[str] = None,
                 places: int = 1, kernel_tree: Optional[Path] = None) -> tuple[RunResult, Path]:
    """Run every job of the campaign; `kernel_tree` builds every variant's
    kernel from that tree (the commit under test) instead of Debian's."""
    budgets = load_budgets(campaign.budgets)  # a bad budget file fails before any boot
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    run_id = run_id or new_run_id(started)
    # absolute: the board suites run in pytest processes with their own cwd
    # (a relative --results, as CI jobs pass it, broke every boot)
    run_dir = Path(results_root).absolute() / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(campaign.path, run_dir / "campaign.yaml")
    shutil.copy(campaign.budgets, run_dir / "budgets.yaml")  # what this run was judged by
    jobs = campaign.jobs()
    progress(f"run {run_id}: {len(jobs)} jobs, campaign {campaign.name} -> {run_dir}")

    images = {}
    arches = sorted({j.board.arch for j in jobs if not j.board.fixed_kernel})
    if arches:
        from .images import ensure_images
        from .suites.rtbench import image_overlays  # rtbench in the board image
        for arch in arches:
            images[arch] = ensure_images(arch, overlays=image_overlays(arch), progress=progress)

    run = RunResult(run_id=run_id, started=started.isoformat().replace("+00:00", "Z"),
                    campaign=campaign.name, commit=commit or {})
    def finish(job: Job, jr: JobResult, label: str) -> None:
        # judged as each job lands, for the progress line; raw files are on disk
        judge_run(RunResult(run_id, run.started, run.campaign, jobs=[jr]), budgets)
        (run_dir / job.board.name / job.variant.name).mkdir(parents=True, exist_ok=True)
        (run_dir / job.board.name / job.variant.name / "job.json").write_text(
            json.dumps(jr.to_json(), indent=2) + "\n")
        progress(f"{label} {_job_summary(jr)}")

    # several jobs at once (--places N) and/or rack boards, which hold a place
    # per job: rtlab.lab.scheduler runs the jobs that are available
    scheduled = places > 1 or any(j.board.kind == "remote" for j in jobs)
    ready = []
    built = build_kernels(jobs, images, kernel_tree, progress) if images else {}
    if kernel_tree is not None and not run.commit.get("sha"):
        from .kernel import tree_state
        run.commit["sha"] = tree_state(Path(kernel_tree)).commit
    for i, job in enumerate(jobs, 1):
        label = f"[{i}/{len(jobs)}] {job.id}"
        why = unavailable(job, images, built, kernel_tree)
        if why:
            progress(f"{label} not available: {why}")
            run.not_available.append({"board": job.board.name, "variant": job.variant.name,
                                      "reason": why})
            continue
        if scheduled:
            ready.append(job)
            continue
        jr = run_job(job, run_dir, images, progress, label, built=built)
        run.jobs.append(jr)
        finish(job, jr, label)
    if scheduled:
        from .lab.scheduler import run_scheduled
        run.jobs.extend(run_scheduled(
            ready, lambda job, lease_env, label, on_spawn: run_job(
                job, run_dir, images, progress, label, lease_env=lease_env, on_spawn=on_spawn,
                built=built),
            finish, places=places, progress=progress))
    (run_dir / "run.json").write_text(json.dumps(run.to_json(), indent=2) + "\n")
    from .plot import write_html_report
    write_html_report(run, run_dir / "report.html")
    latest = Path(results_root) / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_id)
    except OSError:
        pass
    return run, run_dir


def _job_summary(jr: JobResult) -> str:
    v = jr.verdict.value.upper()
    na = "; ".join(f"{n['suite']}@{n['load']} not available: {n['reason']}" for n in jr.not_available)
    if jr.only_not_available:
        return f"NOT AVAILABLE: {na}"
    if jr.build_error:
        return f"{v}: {jr.build_error}"
    if jr.infra_error:
        return f"{v}: {jr.infra_error}"
    parts = []
    for m in jr.measurements:
        c = m.output.combined()
        stat = f"max {c.max_us:g} us" if c else "no data"
        why = f" ({'; '.join(m.reasons)})" if m.verdict != Verdict.PASS and m.reasons else ""
        parts.append(f"{m.key.suite}@{m.key.load} {stat} {m.verdict.value if m.verdict else '?'}{why}")
    return f"{v} in {jr.duration_s:.0f} s: " + ", ".join(parts) + (f"; {na}" if na else "")
