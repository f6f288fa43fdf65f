"""The runner: a campaign in, a judged RunResult out.

For each job (board × variant) it stages the variant's kernel for the board,
runs the board suites (rtlab/boardtests) through labgrid's pytest plugin in a
child process, tails their progress, then hands the raw outputs to
:mod:`rtlab.run.results` (the same path LAVA ingest takes), which parses and
judges them. Judging happens only after every raw file is on disk.

Besides the layout of rtlab.run.results, a labgrid job keeps
    .../<board>/<variant>/console/, pytest.log, junit.xml, events.jsonl
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional, ParamSpec, TypeVar

from .. import ROOT, WORKDIR
from ..plan.budgets import load_budgets
from ..targets.boards import WORKDIR_ENV
from ..plan.campaign import Campaign, Job
from ..errors import Cancelled, InfraError, RtlabError
from . import forkserver, joblife
from ..core import hostnoise, timing
from ..soak import live as soak_live
from .. import kernel as kbuild
from ..kernel.sandbox import SandboxUnavailable
from ..targets.arch import get_or_none
from ..judge.evidence import arm_job, arms
from ..images import ensure_images
from ..kernel import tree_state
from ..core.procutil import die_with_parent
from ..core.model import JobResult, Measurement, MeasurementKey, RunResult, ToolOutput, Verdict
from .results import JobSpec, ResultsDir, collect, new_run_id, read_exit_code, tool_exit_problem
from ..suites import SUITES, SuiteRun, not_available
from ..suites.rtbench import image_overlays  # rtbench in the board image
from ..core.fsutil import read_json
from ..core.rundir import BUDGETS_COPY, CAMPAIGN_COPY, RETRIED_DIR, JobDir

#: the board-side pytest files (shipped in the package, so an installed rtlab runs them)
SUITES_DIR = Path(__file__).resolve().parent.parent / "boardtests"
RESULTS_DIR = WORKDIR / "results"
#: seconds a board may take from power-on to a shell prompt, on top of suites
BOOT_ALLOWANCE_S = 180
#: seconds a suite run takes beyond its tool's own duration: staging the
#: command, starting the load, fetching the raw outputs
SUITE_ALLOWANCE_S = 60


def job_planned_s(job: Job) -> float:
    """How long one run of *job* takes on its board when all goes well: the
    boot allowance, then each suite run's tool time and its allowance (what
    a CI job's timeout must hold, per repeat)."""
    return BOOT_ALLOWANCE_S + sum(SUITES[s.suite].duration_s(s) + SUITE_ALLOWANCE_S for s in job.suites)


def job_deadline_s(job: Job) -> float:
    """When the runner gives up on *job* (INFRA): the boot allowance, then
    twice each tool's duration plus its allowance (a hung tool, a stalled board)."""
    return BOOT_ALLOWANCE_S + sum(SUITES[s.suite].duration_s(s) * 2 + SUITE_ALLOWANCE_S for s in job.suites)


class Progress:
    """One line per step, prefixed with the time since the run started."""

    def __init__(self, stream=None):
        self.t0 = time.monotonic()
        self.stream = stream  # None: sys.stdout at each line (the CLI's printable stream)

    def __call__(self, msg: str) -> None:
        m, s = divmod(int(time.monotonic() - self.t0), 60)
        print(f"[{m:02d}:{s:02d}] {msg}", file=self.stream or sys.stdout, flush=True)


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
    a = get_or_none(board.arch)
    if a is not None and a.dtbs:
        # device trees come from Debian's kernel package of the flavour (a
        # source-built kernel boots with the generic package's: the DT ABI is stable)
        k = imgs.kernels.get(variant.prebuilt or "generic") or imgs.kernels["generic"]
        env["LG_RTLAB_DTB_DIR"] = kernel["dtb_dir"] = str(k.path.parent)
    return env, kernel


def unavailable(job: Job, images: dict, built: Optional[dict] = None,
                kernel_tree: Optional[Path] = None) -> Optional[str]:
    """Why this board cannot run this variant at all (not an error: the
    kernels it has cannot be that variant, or cannot be the commit under
    test), or None."""
    board, variant = job.board, job.variant
    why = board_cannot(job)
    if why:
        return why
    if kernel_tree is not None and not board.boots_built_kernels:
        # measuring it would credit another kernel's latency to the commit
        return (f"{board.kind} board: boots {'its own kernel' if board.fixed_kernel else 'Debian kernels'}, "
                f"not the commit under test (kernels from --kernel-tree boot on QEMU boards)")
    if kernel_tree is not None and board.built_kernels_unusable:
        return f"{board.name} cannot run kernels built from source: {board.built_kernels_unusable}"
    if board.fixed_kernel or not variant.prebuilt or (board.name, variant.name) in (built or {}):
        return None
    imgs = images.get(board.arch)
    k = imgs.kernels.get(variant.prebuilt) if imgs else None
    if k is None:
        return f"no {variant.prebuilt} kernel for {board.arch}"
    why = variant.unavailable_on(k.preempt)
    if why and board.built_kernels_unusable and variant.fragments_for(board.arch):
        # the build that would make this variant cannot run here
        return (f"{why} ({k.package} {k.version}); a kernel built from source cannot run on "
                f"{board.name}: {board.built_kernels_unusable}")
    return f"{why} ({k.package} {k.version})" if why else None


def board_cannot(job: Job) -> Optional[str]:
    """Why the board itself cannot run this variant, whatever kernel it boots."""
    board, variant = job.board, job.variant
    if variant.isolated and board.isolate_cpu is None:
        return (f"{board.name} has {board.cpus} CPU{'s' * (board.cpus != 1)} and no isolate_cpu: "
                f"isolating a CPU would leave "
                f"{'no CPU for the system' if board.cpus == 1 else 'none named to isolate'}")
    return None


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

    todo: dict[tuple, list[Job]] = {}
    for job in jobs:
        board, variant = job.board, job.variant
        fragments = variant.fragments_for(board.arch)
        if (not fragments or not board.boots_built_kernels or board.built_kernels_unusable
                or board_cannot(job)):
            continue
        if kernel_tree is None and not unavailable(job, images):
            continue
        frags = tuple(kbuild.with_base(board.arch, fragments, board.name))
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
        except SandboxUnavailable:
            raise  # the lab cannot confine a build: infra, never the commit's FAIL
        except RtlabError as e:
            bk = KernelBuildFailed(f"kernel build failed ({what}): {e}")  # type: ignore[assignment]
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


def run_job(job: Job, rd: ResultsDir, images: dict, progress: Callable[[str], None],
            label: str = "", lease_env: Optional[dict] = None,
            on_spawn: Optional[Callable] = None, built: Optional[dict] = None,
            lock_timeout: Optional[float] = None, keep_dir: bool = False) -> JobResult:
    """*keep_dir*: measure into the job's existing directory (a resumed
    soak continues from its checkpoints, rtlab.run.resume). *lease_env*: LG_PLACE, LG_TOKEN, LG_USERNAME, LG_COORDINATOR of the place
    the job holds (rack boards; rtlab.lab.scheduler). *on_spawn(proc)* is told
    the pytest process (its process group holds everything the job started)."""
    board, variant = job.board, job.variant
    job_dir = rd.job_dir(board.name, variant.name, job.repeat) if keep_dir else \
        rd.new_job_dir(board.name, variant.name, job.repeat)
    result = JobResult(board=board.name, variant=variant.name, arch=board.arch,
                       budget_class=board.budget_class, repeat=job.repeat)
    t0 = time.monotonic()
    bk = (built or {}).get((board.name, variant.name))
    if isinstance(bk, KernelBuildFailed):
        result.build_error = str(bk)
        return result
    events_path = job_dir / "events.jsonl"
    if lease_env and lease_env.get("RTLAB_PLACE_WAIT_S"):  # the wait for a rack place (rtlab.lab.places)
        result.place_wait_s = float(lease_env["RTLAB_PLACE_WAIT_S"])
        timing.append(events_path, "place_wait", result.place_wait_s)
    try:
        with timing.timed(events_path, "stage"):
            lg_env, kernel = stage_kernel(job, images, built)
            boot_args = lg_env["LG_RTLAB_BOOT_ARGS"]
            spec = JobSpec(job_dir=job_dir, board=board, variant=variant, boot_args=boot_args,
                           suites=list(job.suites), kernel=kernel,
                           place=lease_env.get("LG_PLACE") if lease_env else None)
            spec_path = spec.write()
    except RtlabError as e:
        result.infra_error = str(e)
        return result
    # one job per board at a time (the local board too): a second waits, then INFRA
    try:
        t_lock = time.monotonic()
        with joblife.board_lock(board, rd.run_id, job.id, progress=lambda m: progress(f"{label} {m}"),
                                timeout=lock_timeout) as lock_fd:
            timing.append(events_path, "lock", time.monotonic() - t_lock)
            return _run_board_tests(job, rd, job_dir, spec_path, lg_env, lease_env, on_spawn,
                                    progress, label, result, t0, lock_fd)
    except InfraError as e:
        result.infra_error = str(e)
        return result


def _run_board_tests(job: Job, rd: ResultsDir, job_dir: Path, spec_path: Path, lg_env: dict,
                     lease_env: Optional[dict], on_spawn: Optional[Callable], progress: Callable[[str], None],
                     label: str, result: JobResult, t0: float, lock_fd: Optional[int] = None) -> JobResult:
    board = job.board
    t_board = time.monotonic()  # the job's clock starts when it holds the board, not before the wait
    timeout = job_deadline_s(job)
    # labgrid's plugin named, not found: with autoload pytest scans every
    # installed distribution's entry points at each start (~0.3 s per job)
    # (-W: a forked job finds labgrid's plugin imported already, too late for assert rewriting)
    args = [str(SUITES_DIR), "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
           "-p", "labgrid.pytestplugin", "--rootdir", str(SUITES_DIR), "-c", os.devnull,
           "--lg-env", str(board.env_file), "--rtlab-job", str(spec_path),
           "--lg-log", str(job_dir / "console"), "--junitxml", str(job_dir / "junit.xml"),
           "-q", "-rfE"]
    workdir = joblife.board_workdir(rd.run_id, board.name, job.variant.name)
    env = {**os.environ, **lg_env, **(lease_env or {}), WORKDIR_ENV: workdir,
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    events_path = job_dir / "events.jsonl"
    events: list[dict] = []
    pos = 0
    # the job's keeper holds the board with us and ends the job if we die (joblife)
    # on a locked board, a record of the job beside the lock: a job whose runner
    # and keeper both die is ended by whoever takes the board next (joblife.take_over)
    record = (joblife.record_path(board.name), {"run_id": rd.run_id, "job": job.id, "workdir": workdir,
                                                "job_dir": str(job_dir)}) if lock_fd is not None else None
    with open(job_dir / "pytest.log", "w") as log, joblife.job_keeper(
            lock_fd, salvage=(workdir, job_dir) if board.kind == "local" else None, record=record) as keeper:
        env[joblife.JOB_TOKEN_ENV] = keeper.token
        children_before = joblife.my_children()
        t_spawn = time.monotonic()
        proc = _start_board_tests(args, env, job_dir / "pytest.log", log, pdeathsig=True, cgroup=keeper.cgroup)
        keeper.add(proc.pid)
        joblife.JOB_PIDS.add(proc.pid)
        if on_spawn is not None:
            on_spawn(proc)
        timed_out = False
        cancelled: Optional[BaseException] = None
        try:
            while True:
                try:
                    proc.wait(timeout=0.5)
                    finished = True
                except subprocess.TimeoutExpired:
                    finished = False
                new, pos = _read_events(events_path, pos)
                for ev in new:
                    if ev.get("event") != "checkpoint":  # shown and published, then dropped: a
                        events.append(ev)  # 12 h soak has 720 and its checkpoint.json holds them
                    _show_event(ev, label, progress)
                    # a soak's checkpoint to the live sinks (the store: rtlab.store.live)
                    soak_live.checkpoint(ev, run_id=rd.run_id, board=board.name, arch=board.arch,
                                         variant=job.variant.name, repeat=job.repeat)
                if finished:
                    break
                if time.monotonic() - t_board > timeout:
                    timed_out = True
                    break
        except (KeyboardInterrupt, Cancelled) as e:
            cancelled = e
            progress(f"{label} cancelled: stopping the job, fetching its raw files")
            _stop_job(proc, grace=_cancel_grace())
        finally:
            # the whole job, whatever session its parts made for themselves:
            # pytest, the QEMU or pty shell it started, the tools, the loads
            joblife.kill_job(proc.pid, children_before, token=keeper.token)
            if proc.poll() is None:
                proc.wait()
            joblife.JOB_PIDS.discard(proc.pid)
            timing.append(events_path, "pytest_process", time.monotonic() - t_spawn)
        new, pos = _read_events(events_path, pos)
        events.extend(ev for ev in new if ev.get("event") != "checkpoint")
    if board.kind == "local":  # its work dir is here: whatever no fetch brought home
        kept = joblife.salvage_local(workdir, job_dir, [s.id for s in job.suites])
        if kept:
            progress(f"{label} kept {len(kept)} raw file(s) the board tests did not fetch")
    result.duration_s = round(time.monotonic() - t0, 3)
    if cancelled is not None:
        kernel_json = JobDir(job_dir).kernel_json
        if kernel_json.exists():
            result.kernel = read_json(kernel_json)
        why = "SIGTERM" if isinstance(cancelled, Cancelled) else "SIGINT"
        result.infra_error = f"board {board.name}: cancelled ({why}); raw files kept in {job_dir}"
        cancelled.job_result = collect_suites(job, job_dir, events, result)  # type: ignore[attr-defined]
        raise cancelled
    kernel_json = JobDir(job_dir).kernel_json
    if kernel_json.exists():
        result.kernel = read_json(kernel_json)
    outcomes = _outcomes(events)
    boot = outcomes.get("test_boot")
    if timed_out:
        result.infra_error = f"board {board.name}: job timed out after {timeout:.0f} s (see {job_dir}/pytest.log)"
    elif boot is None or boot["outcome"] != "passed":
        if boot is not None:
            why = boot["message"] or boot["outcome"]
        else:
            why = f"pytest exited with {proc.returncode} before booting: " + _tail(job_dir / "pytest.log")
        result.infra_error = f"board {board.name}: boot failed: {why}"
    return collect_suites(job, job_dir, events, result)


def arm_spikes(job: Job, budgets) -> Job:
    """The job with every suite run that can record its late samples' times
    told from where (SuiteRun.spike_us: under the lowest limit its budget
    sets), on boards that run on this host: the gate holds those samples
    against the host's stalls (rtlab.core.hostattr). Elsewhere (a rack, a
    LAVA lab) this host's stalls are not the board's: nothing to record."""
    if not job.board.on_this_host:
        return job

    def lookup(name, load):
        return budgets.lookup(job.board.budget_class, job.variant.name, name, load)
    runs = tuple(dataclasses.replace(r, spike_us=SUITES[r.suite].spike_threshold(r.name, r.load, lookup))
                 if SUITES[r.suite].records_spikes else r for r in job.suites)
    return dataclasses.replace(job, suites=runs)


def cured_by_measuring_again(m: Measurement) -> bool:
    """INFRA with a cause a fresh attempt can cure (InfraCause: the host's
    steal explains the breach, the tool lost its own start-up race, or it
    recorded no sample at all). Anything else stays as judged."""
    return m.verdict == Verdict.INFRA and m.infra_cause is not None


def _measured_by(m: Measurement, run: SuiteRun) -> bool:
    # a suite with several outputs keys them <name>-<part> (rtla timerlat:
    # -irq, -thread; Suite.measurement_names); one it could not parse, <name>
    return m.key.load == run.load and m.key.suite in {run.name, *SUITES[run.suite].measurement_names(run.name)}


def _merge_retry(job: Job, before: JobResult, retry: JobResult, again: tuple[SuiteRun, ...],
                 kept: Path, job_dir: Path) -> JobResult:
    """The job after measuring *again* anew: the retry's measurements of those
    suites, the earlier attempt's of every other (their raw files move back
    from *kept* into the fresh *job_dir*, beside the retry's), in campaign
    order. The job-level files (console, kernel, snapshot) are the retry's;
    the earlier attempt's stay in *kept*."""
    again_ids = {s.id for s in again}
    for run in job.suites:
        src = kept / run.id
        if run.id not in again_ids and src.exists() and job_dir.is_dir():
            os.replace(src, job_dir / run.id)
    merged: list[Measurement] = []
    for run in job.suites:
        source = retry if run.id in again_ids else before
        merged.extend(m for m in source.measurements if _measured_by(m, run))
    retry.measurements = merged
    retry.not_available = [n for n in before.not_available
                           if not any(n.get("suite") == s.name and n.get("load") == s.load for s in again)] \
        + retry.not_available
    retry.duration_s = round((before.duration_s or 0) + (retry.duration_s or 0), 3)
    return retry


#: the campaign's fork server (rtlab.run.forkserver), None: board tests start as plain subprocesses
_FORK_SERVER: Optional[forkserver.ForkServer] = None
P = ParamSpec("P")
R = TypeVar("R")


def _start_board_tests(args: list[str], env: dict, log_path: Path, log, pdeathsig: bool = True,
                       cgroup: Optional[str] = None):
    """The job's pytest process: forked from the campaign's warm fork
    server where there is one, else a fresh subprocess (as it would be
    anyway if the server fails). *pdeathsig*: it dies with the runner (the
    runner asks for that on every board kind; what the job started is the
    job keeper's to end), in the job's *cgroup* where there is one."""
    server = _FORK_SERVER
    if server is not None:
        try:
            return server.spawn(args, env, str(ROOT), log_path, pdeathsig=pdeathsig, cgroup=cgroup)
        except (OSError, ValueError) as e:
            log.write(f"rtlab: the fork server could not start the job ({e}); a fresh process instead\n")
            log.flush()

    def start() -> None:
        if pdeathsig:
            die_with_parent()
        joblife.enter_cgroup(cgroup)
    return subprocess.Popen([sys.executable, "-m", "pytest", *args], stdout=log, stderr=subprocess.STDOUT,
                            env=env, cwd=str(ROOT), start_new_session=True, preexec_fn=start)


def _cancel_grace() -> float:
    try:
        return float(os.environ.get(joblife.CANCEL_GRACE_ENV) or joblife.DEFAULT_CANCEL_GRACE_S)
    except ValueError:
        return joblife.DEFAULT_CANCEL_GRACE_S


def _stop_job(proc: subprocess.Popen, grace: float) -> None:
    """SIGINT to the board tests: the tool is interrupted over the console
    and what it wrote is fetched (rtlab.suites.board.run_tool), loads are
    stopped and kept; after *grace* s everything is killed. Signals that
    arrive meanwhile do not cut this short."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
    try:
        try:
            os.kill(proc.pid, signal.SIGINT)
            proc.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _outcomes(events: list[dict]) -> dict[str, dict]:
    """The last report of each board test (setup errors and call failures both count)."""
    return {e["test"]: e for e in events if e.get("event") == "test" and e.get("when") in ("setup", "call")}


def collect_suites(job: Job, job_dir: Path, events: list[dict], result: JobResult) -> JobResult:
    """The job's measurements from the board tests' events and the raw files
    (rtlab.run.results.collect, as LAVA ingest does). Every suite that left
    output is parsed, even after a later failure."""
    with timing.timed(job_dir / "events.jsonl", "collect"):
        return _collect_suites(job, job_dir, events, result)


def _collect_suites(job: Job, job_dir: Path, events: list[dict], result: JobResult) -> JobResult:
    board, variant = job.board, job.variant
    outcomes = _outcomes(events)
    for run in job.suites:
        key = MeasurementKey(board=board.name, variant=variant.name, suite=run.name, load=run.load)
        outcome = outcomes.get(f"test_suite[{run.id}]")
        suite = SUITES[run.suite]
        if outcome is None:
            if result.infra_error:
                continue  # never ran: the job-level infra error says why
            m = Measurement(key, ToolOutput(path="", tool=suite.tool), [],
                            verdict=Verdict.INFRA, reasons=["suite did not run (see pytest.log)"])
        elif outcome["outcome"] == "passed" and (why := not_available(job_dir / run.id)) is not None:
            # the board cannot run it (rtla without the kernel's tracer): not judged
            result.not_available.append({"suite": run.name, "load": run.load, "reason": why})
            continue
        else:
            result.measurements.extend(
                collect(job_dir, key, suite, run, before=_board_problems(outcome, suite, job_dir / run.id)))
            continue
        result.measurements.append(m)
    return result


def _board_problems(outcome: dict, suite, host_dir: Path) -> list[str]:
    """What the board-side test failed on, besides what collect() reads from
    the raw files itself (a tool's bad exit code: the same words either way)."""
    if outcome["outcome"] == "passed":
        return []
    msg = outcome["message"] or outcome["outcome"]
    rc = read_exit_code(host_dir)
    exit_problem = tool_exit_problem(suite, rc, host_dir) if rc is not None else None
    if exit_problem and msg.endswith(f"SuiteFailure: {exit_problem}"):
        return []
    return [msg]


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
    elif kind == "evidence":
        progress(f"{label} {ev['id']}: broke its budget, trace kept: {ev.get('summary') or 'no culprit named'}")
    elif kind == "suite_not_available":
        progress(f"{label} {ev['id']}: not available ({ev.get('reason', '')})")
    elif kind == "suite":
        progress(f"{label} {ev['id']}: running ({ev['duration_s']:g} s)")
    elif kind == "checkpoint":  # a soak's progress (rtlab.soak.checkpoint)
        progress(f"{label} {ev['id']}: {ev.get('line', '')}")
    elif kind == "test" and ev.get("outcome") != "passed":
        progress(f"{label} {ev['test']}: {ev['outcome']} ({ev.get('message', '')[:200]})")


def _with_fork_server(run: Callable[P, R]) -> Callable[P, R]:
    """*run* with the campaign's fork server up (rtlab.run.forkserver): the jobs'
    pytest processes fork from one warm process, which imports while the
    images are checked. A nested campaign (bisect) uses the outer one's."""
    @functools.wraps(run)
    def with_server(*args: P.args, **kwargs: P.kwargs) -> R:
        global _FORK_SERVER
        server = forkserver.start() if _FORK_SERVER is None else None
        if server is not None:
            _FORK_SERVER = server
        try:
            return run(*args, **kwargs)
        finally:
            if server is not None:
                _FORK_SERVER = None
                server.close()
    return with_server


@_with_fork_server
def run_campaign(campaign: Campaign, *, results_root: Path = RESULTS_DIR,
                 progress: Callable[[str], None] = Progress(),
                 commit: Optional[dict] = None, run_id: Optional[str] = None,
                 places: int = 1, kernel_tree: Optional[Path] = None,
                 lock_timeout: Optional[float] = None,
                 evidence: Optional[bool] = None) -> tuple[RunResult, Path]:
    """Run every job of the campaign; `kernel_tree` builds every variant's
    kernel from that tree (the commit under test) instead of Debian's.

    Cancelled (SIGINT, or SIGTERM as rtlab.errors.Cancelled): the running
    job is stopped and kept as INFRA "cancelled", run.json is written with
    every job so far, and the exception goes on up (exit 2) carrying
    ``run_dir``."""
    budgets = load_budgets(campaign.budgets)  # a bad budget file fails before any boot
    budgets.check_covers(campaign.jobs())  # so does a budget typo, or budgets: {}
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    # absolute (ResultsDir): the board suites run in pytest processes with
    # their own cwd (a relative --results, as CI jobs pass it, broke every boot)
    rd = ResultsDir.create(results_root, run_id or new_run_id(started))
    run_id, run_dir = rd.run_id, rd.path
    joblife.mark_run_started(run_dir, run_id, campaign.name)  # run.json ends it; without one: killed
    rd.keep(campaign.path, CAMPAIGN_COPY)
    rd.keep(campaign.budgets, BUDGETS_COPY)  # what this run was judged by
    jobs = campaign.jobs()
    # stop and trace at the budget (rtlab.judge.evidence), per board
    armed = sorted({j.board.name for j in jobs if arms(j, evidence, campaign.evidence)})
    jobs = [arm_job(j, budgets) if j.board.name in armed else j for j in jobs]
    jobs = [arm_spikes(j, budgets) for j in jobs]
    progress(f"run {run_id}: {len(jobs)} jobs, campaign {campaign.name} -> {run_dir}"
             + (f", evidence armed on {', '.join(armed)}" if armed else ""))

    images = {}
    arches = sorted({j.board.arch for j in jobs if not j.board.fixed_kernel})
    run_timing = run_dir / timing.RUN_TIMING_FILE
    t_images = time.monotonic()
    if arches:
        for arch in arches:
            images[arch] = ensure_images(arch, overlays=image_overlays(arch), progress=progress)

    run = RunResult(run_id=run_id, started=started.isoformat().replace("+00:00", "Z"),
                    campaign=campaign.name, commit=commit or {})
    finished: list[JobResult] = []  # every job judged so far, for run.json if the run is cancelled

    def finish(job: Job, jr: JobResult, label: str) -> None:
        # judged as each job lands, for the progress line; raw files are on disk
        jd = rd.job_dir(jr.board, jr.variant, jr.repeat)
        with timing.timed(jd / "events.jsonl" if jd.is_dir() else None, "judge"):
            rd.finish_job(jr, budgets)
        finished.append(jr)
        progress(f"{label} {_job_summary(jr)}")

    def run_judged(job: Job, label: str, **kw) -> JobResult:
        # INFRA that measuring again can cure (Measurement.infra_cause): a
        # breach the host's steal explains (rtlab.core.hostnoise), a tool that
        # lost its own start-up race (Suite.start_race_exits) or recorded no
        # sample at all. Those suites are measured again (a
        # fresh boot), up to RETRIES times, the others are kept as judged;
        # the job's retries name each attempt, whose raw files stay in the
        # run (measured-again/)
        jr = run_job(job, rd, images, progress, label, built=built, lock_timeout=lock_timeout, **kw)
        attempts: list[dict] = []
        for attempt in range(1, hostnoise.RETRIES + 1):
            rd.finish_job(jr, budgets)
            hit = [m for m in jr.measurements if cured_by_measuring_again(m)]
            if not hit:
                break
            again = tuple(s for s in job.suites if any(_measured_by(m, s) for m in hit))
            jd = rd.job_dir(jr.board, jr.variant, jr.repeat)
            kept = rd.path / RETRIED_DIR / f"{jd.relative_to(rd.path)}".replace("/", "-") / str(attempt)
            kept.parent.mkdir(parents=True, exist_ok=True)
            os.replace(jd, kept)
            attempts.append({"dir": str(kept.relative_to(rd.path)), "reasons": [m.reasons[0] for m in hit],
                             "measured_again": [s.id for s in again],
                             "causes": sorted({m.infra_cause.value for m in hit if m.infra_cause})})
            progress(f"{label} INFRA, {hit[0].reasons[0]}: measuring {', '.join(s.id for s in again)} "
                     f"again ({attempt}/{hostnoise.RETRIES})")
            try:
                retry = run_job(dataclasses.replace(job, suites=again), rd, images, progress, label,
                                built=built, lock_timeout=lock_timeout, **kw)
            except (KeyboardInterrupt, Cancelled) as e:
                part = getattr(e, "job_result", None)
                if part is not None:
                    e.job_result = _merge_retry(job, jr, part, again, kept, jd)  # type: ignore[union-attr]
                raise
            jr = _merge_retry(job, jr, retry, again, kept, jd)
        jr.retries = attempts
        return jr

    # several jobs at once (--places N) and/or rack boards, which hold a place
    # per job: rtlab.lab.scheduler runs the jobs that are available
    scheduled = places > 1 or any(j.board.kind == "remote" for j in jobs)
    ready = []
    built = build_kernels(jobs, images, kernel_tree, progress) if images else {}
    timing.append(run_timing, "images", time.monotonic() - t_images)
    if kernel_tree is not None and not run.commit.get("sha"):
        run.commit["sha"] = tree_state(Path(kernel_tree)).commit
    try:
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
            try:
                jr = run_judged(job, label)
            except (KeyboardInterrupt, Cancelled) as e:
                jr = getattr(e, "job_result", None)
                if jr is not None:
                    run.jobs.append(jr)
                    finish(job, jr, label)
                raise
            run.jobs.append(jr)
            finish(job, jr, label)
        if scheduled:
            from ..lab.scheduler import run_scheduled
            from ..rack.state import coordinator_address
            run.jobs.extend(run_scheduled(
                ready, lambda job, lease_env, label, on_spawn: run_judged(
                    job, label, lease_env=lease_env, on_spawn=on_spawn),
                finish, places=places, progress=progress, coordinator=coordinator_address()))
    except (KeyboardInterrupt, Cancelled) as e:
        # signals that arrive while the run is written up do not cut it short
        if _main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        why = "SIGTERM" if isinstance(e, Cancelled) else "SIGINT"
        run.jobs = list(finished)
        if not run.jobs:
            run.jobs.append(JobResult(board="-", variant="-", arch="-", budget_class="-",
                                      infra_error=f"run cancelled ({why}) before any job finished"))
        rd.finish(run)
        e.run_dir = run_dir  # type: ignore[union-attr]
        raise
    with timing.timed(run_timing, "finish"):
        rd.finish(run)
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
