"""The one results path of every lab backend (labgrid runner, LAVA ingest).

What a backend does differently is how raw files reach the host (pytest over
a labgrid console, blocks in a LAVA log). Everything after that is here, so
the same raw outputs get the same verdicts and reasons whichever way they
came:

* :class:`JobSpec`: what a board was asked (job-spec.json), typed;
* :class:`ResultsDir`: run ids (unique) and run directories (created
  exclusively), job directories, job.json, run.json, report.html, ``latest``;
* :func:`variant_problems`: is the board running the variant it was asked for;
* :func:`collect`: raw files of one suite run -> a Measurement (which tool
  exit codes are kernel results, which are infra; unreadable output is infra);
* :meth:`ResultsDir.finish_job`: judging against the budgets.

Layout::

    <root>/<run_id>/run.json, report.html, campaign.yaml, budgets.yaml
    <root>/<run_id>/<board>/<variant>/job-spec.json, job.json, kernel.json
    <root>/<run_id>/<board>/<variant>/<suite>@<load>/   raw tool outputs
    <root>/<run_id>/<board>/<variant>/r<N>/...          the same, per repeat N
                                                        (campaign repeat: > 1)
    <root>/latest -> <run_id>                            the run finished last
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..core import modelcheck
from ..core.params import ParamError, check_name
from ..core.fsutil import read_bounded, read_text_bounded, result_max_bytes, tail_text
from ..targets.boards import Board
from ..plan.budgets import Budgets
from ..errors import InputError
from ..core import hostattr, hostnoise
from ..judge.evidence import EVIDENCE_DIR, read_analysis
from ..judge.gate import judge_run, sample_problems
from ..core.model import HostDelays, InfraCause, JobResult, Measurement, MeasurementKey, RunResult, ToolOutput
from ..parsers import rttext
from ..report.plot import write_html_report
from ..suites import Suite, SuiteRun
from ..suites.board import check_variant, exited
from ..targets.variants import Variant
from ..report.vendor import write_vendor_html
from ..core.rundir import JobDir, MeasurementDir, RunDir

#: exit.json and the like: a few hundred bytes when honest
SMALL_FILE_MAX_BYTES = 1024 * 1024
LATEST = "latest"


def new_run_id(now: Optional[dt.datetime] = None) -> str:
    """The run id's stem: the UTC start second. Not unique on its own: two
    runs started in the same second get distinct ids from ResultsDir.create."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


@dataclass
class JobSpec:
    """What a board is asked to do in one job (board × variant): written by
    the backend before the board boots, read by the board-side tests."""

    job_dir: Path
    board: Board
    variant: Variant
    boot_args: str
    suites: list[SuiteRun] = field(default_factory=list)
    #: what was staged (path, release, uname_v, preempt…); {} for fixed kernels
    kernel: dict[str, Any] = field(default_factory=dict)
    #: the labgrid place the job held (rack boards)
    place: Optional[str] = None
    #: the LAVA board the job ran on (LAVA ingest)
    lava: Optional[dict[str, Any]] = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "job_dir": str(self.job_dir), "board": self.board.to_json(), "variant": self.variant.to_json(),
            "boot_args": self.boot_args, "suites": [s.to_json() for s in self.suites], "kernel": self.kernel,
        }
        if self.place is not None:
            d["place"] = self.place
        if self.lava is not None:
            d["lava"] = self.lava
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobSpec":
        return cls(job_dir=Path(d["job_dir"]), board=Board.from_json(d["board"]),
                   variant=Variant.from_json(d["variant"]), boot_args=d["boot_args"],
                   suites=[SuiteRun.from_json(s) for s in d.get("suites", [])],
                   kernel=d.get("kernel") or {}, place=d.get("place"), lava=d.get("lava"))

    @property
    def path(self) -> Path:
        return JobDir(self.job_dir).job_spec

    def write(self) -> Path:
        self.path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return self.path

    @classmethod
    def read(cls, path: Path) -> "JobSpec":
        try:
            if not Path(path).exists():
                raise InputError(path, "no job spec")
            # bounded and not through a symlink out of the job's directory
            return cls.from_json(json.loads(read_bounded(path, result_max_bytes())))
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(path, f"not a valid job spec: {e}") from None


def variant_problems(spec: JobSpec, facts: dict) -> list[str]:
    """Why the running kernel (its facts) is not the variant the job asked
    for, as one message, or []: nothing measured on it counts (INFRA)."""
    problems = check_variant(spec.variant, facts, spec.boot_args, spec.board.isolate_cpu,
                             kernel=spec.kernel)
    if not problems:
        return []
    return [f"board {spec.board.name} is not running variant {spec.variant.name}: " + "; ".join(problems)]


def read_exit_code(host_dir: Path) -> Optional[int]:
    """The tool's exit code from exit.json (written with the raw files), None if absent."""
    try:
        rc = json.loads(read_bounded(MeasurementDir(host_dir).exit_json, SMALL_FILE_MAX_BYTES)).get("exit_code")
    except (InputError, ValueError, AttributeError):
        return None
    return rc if isinstance(rc, int) else None


def read_elapsed(host_dir: Path, json_file: Optional[str] = None) -> Optional[float]:
    """How long the tool ran: exit.json's elapsed_s (measured around it on
    the labgrid path), else the tool's own JSON start_time/end_time (rt-tests;
    whole seconds, so +1 s: an upper bound), None if neither says."""
    try:
        v = json.loads(read_bounded(MeasurementDir(host_dir).exit_json, SMALL_FILE_MAX_BYTES)).get("elapsed_s")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    except (InputError, ValueError, AttributeError):
        pass
    if not json_file:
        return None
    from email.utils import parsedate_to_datetime
    try:
        d = json.loads(read_bounded(host_dir / json_file, result_max_bytes()))
        start, end = parsedate_to_datetime(d["start_time"]), parsedate_to_datetime(d["end_time"])
    except (InputError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return (end - start).total_seconds() + 1.0


#: the first words of a tool's exit that lost its own start-up race
#: (Suite.start_race_exits): the runner measures such a suite again
TOOL_RACE = "tool start-up race"


def tool_exit_problem(suite: Suite, rc: int, host_dir: Path) -> Optional[str]:
    """Why a tool's exit code makes its run INFRA (a crash, a tool that could
    not start), or None when it produced a result: exit 0, or an exit the
    suite says is the kernel's (pi_stress deadlock), judged from the raw files."""
    if rc == 0 or suite.accepts_exit(rc, host_dir):
        return None
    race = suite.start_race_exits.get(rc)
    if race is not None:
        return f"{TOOL_RACE}: {exited(suite.tool, rc)}, {race}"
    err = MeasurementDir(host_dir).stderr
    try:  # the last lines say why; a runaway stderr is not read whole
        tail = tail_text(err, SMALL_FILE_MAX_BYTES).strip().splitlines()[-3:] if err.is_file() else []
    except InputError:
        tail = []
    return exited(suite.tool, rc) + (f": {' | '.join(tail)}" if tail else "")


def raw_files(job_dir: Path, run: SuiteRun) -> list[str]:
    d = job_dir / run.id
    return sorted(str(p.relative_to(job_dir)) for p in d.rglob("*") if p.is_file()) if d.is_dir() else []


def collect(job_dir: Path, key: MeasurementKey, suite: Suite, run: SuiteRun, *,
            before: Sequence[str] = (), after: Sequence[str] = (),
            check: Optional[Callable[[ToolOutput], list[str]]] = None,
            no_exit_code: str = "") -> list[Measurement]:
    """The measurements of one suite run from its raw files on disk: one per
    output of the suite (:meth:`Suite.parse_outputs`; rtla timerlat gives
    ``<name>-irq`` and ``<name>-thread``), or one INFRA measurement under
    the suite's own name when nothing could be parsed.

    *before*/*after*: what the backend found wrong around the tool (a load
    that died, a failed transfer, missing LAVA cases): each makes the
    measurements INFRA, their parsed outputs kept beside the reasons. *check*:
    more problems with a parsed output (LAVA's cross-check)."""
    host_dir = job_dir / run.id
    raw = raw_files(job_dir, run)
    reasons = list(before)
    outs: dict[str, ToolOutput] = {}
    cause: Optional[InfraCause] = None  # where measuring again can cure the INFRA
    checked: list[str] = []
    rc = read_exit_code(host_dir)
    if rc is None:
        if not before:  # the backend's own reason explains a tool that never ran
            reasons.append(f"{suite.tool} left no exit code" + (f" ({no_exit_code})" if no_exit_code else ""))
    else:
        problem = tool_exit_problem(suite, rc, host_dir)
        if problem:
            reasons.append(problem)
            if rc in suite.start_race_exits and not (before or after):  # nothing else went wrong
                cause = InfraCause.TOOL_RACE
        else:
            try:
                outs = suite.parse_outputs(job_dir, run)
            except InputError as e:
                reasons.append(f"unreadable output: {e}")
            else:
                for out in outs.values():
                    if Path(out.path).is_absolute():
                        out.path = str(Path(out.path).relative_to(job_dir))
                    if check is not None:
                        found = check(out)
                        checked += found
                        reasons += found
                    # a run cut short is INFRA, not a verdict (sample_problems)
                    # ... unless it stopped itself at the breach (evidence armed): that short
                    # run is the breach's record, judged on what it measured
                    expected = None if suite.breached(host_dir, run) else suite.expected_samples(run)
                    reasons += sample_problems(out, expected, run.params.get("interval_us"),
                                               read_elapsed(host_dir, suite.json_file), suite.duration_s(run))
    reasons += after
    if (cause is None and rc == 0 and reasons and not (before or after or checked)
            and recorded_nothing(outs.values())):
        cause = InfraCause.NO_SAMPLES
    analysis = read_analysis(host_dir)
    ev = ({"dir": f"{run.id}/{EVIDENCE_DIR}", "summary": analysis.get("summary"), "why": analysis.get("why")}
          if analysis is not None else None)
    ms = [Measurement(dataclasses.replace(key, suite=f"{key.suite}-{suffix}") if suffix else key, out, raw)
          for suffix, out in outs.items()] or [Measurement(key, ToolOutput(path="", tool=suite.tool), raw)]
    noise = hostnoise.load(host_dir)  # the host's steal while the tool ran: the gate reads it
    for m in ms:
        m.evidence = ev
        m.params = {**run.params, "cpus": list(run.cpus)}  # what the verdict compares alike
        m.host_noise = noise
        m.host_delays = host_delays(suite, run, host_dir, noise, m.output) if len(ms) == 1 else None
        if reasons:
            m.set_infra(reasons, cause)
    return ms


#: the most of a tool's stdout read for its recorded late samples (cyclictest
#: --spike: hostattr.MAX_SPIKES lines of ~40 bytes, and its summary)
SPIKES_MAX_BYTES = 16 * 1024 * 1024


def host_delays(suite: Suite, run: SuiteRun, host_dir: Path, noise: Optional[dict],
                out: ToolOutput) -> Optional[HostDelays]:
    """The run's recorded late samples held against the host's stalls on
    their CPU (rtlab.core.hostattr), where the tool recorded them and the
    witness watched; None otherwise (the gate then has no sample times)."""
    if not suite.records_spikes or run.spike_us is None or not out.threads:
        return None
    stalls = hostattr.stalls_of(noise, hostattr.load_timeline(host_dir))
    clock = hostattr.BoardClock.from_json((noise or {}).get("board_clock"))
    if stalls is None or clock is None:
        return None
    allt = out.combined()
    h = allt.histogram if allt is not None else None
    top = h.size * h.bucket_us if h is not None and h.size else None
    placer = hostattr.Placer(float(run.spike_us), {t.thread: t.cpu for t in out.threads}, stalls, clock,
                             range_us=top)
    try:  # one run's file at a time (a soak's segments): memory stays that of one
        for path in suite.spike_outputs(host_dir):
            placer.add(*rttext.spikes(read_text_bounded(path, SPIKES_MAX_BYTES)))
    except InputError:
        return None
    return placer.result()


def recorded_nothing(outs) -> bool:
    """Some thread of a latency output that ran recorded no sample at all:
    the tool measured nothing there (sigwaittest's ping-pong that never
    started under the irq load, measured once in 117), not a latency, and a
    fresh attempt can cure it. A thread cut short is not this: its samples
    say what it measured."""
    outs = list(outs)
    return bool(outs) and any(t.cycles <= 0 for o in outs for t in o.threads)


class ResultsDir:
    """One run's directory under a results root."""

    def __init__(self, root: Path, run_id: str):
        self.root = Path(root)
        self.run_id = run_id
        self.path = self.root / run_id

    @classmethod
    def create(cls, root: Path, stem: Optional[str] = None, suffix: str = "") -> "ResultsDir":
        """A new run directory, never one another run has: os.mkdir is
        exclusive, so of two runs started in the same second (or given the
        same id) the second gets ``<stem>-2<suffix>``, and so on."""
        root = Path(root).absolute()  # board-side pytest processes have their own cwd
        root.mkdir(parents=True, exist_ok=True)
        stem = stem or new_run_id()
        for n in range(1, 10000):
            run_id = f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}"
            try:
                os.mkdir(root / run_id)
            except FileExistsError:
                continue
            return cls(root, run_id)
        raise OSError(f"{root}: no free run id for {stem}{suffix}")

    def job_dir(self, board: str, variant: str, repeat: int = 0) -> Path:
        """``<board>/<variant>``, plus ``r<N>`` for repeat N of a repeating campaign;
        both safe names (one level each), so a job directory, which
        :meth:`new_job_dir` empties, is always inside the run's."""
        for what, name in (("board", board), ("variant", variant)):
            try:
                check_name(name, what)
            except ParamError as e:
                raise InputError(self.path, f"job directory: {e}") from None
        return RunDir(self.path).job(board, variant, repeat).path

    def new_job_dir(self, board: str, variant: str, repeat: int = 0) -> Path:
        """An empty directory for the job (what an earlier attempt left is gone)."""
        d = self.job_dir(board, variant, repeat)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def keep(self, src: Path, name: str) -> None:
        """A copy of an input the run was made with (campaign.yaml, budgets.yaml)."""
        shutil.copyfile(src, self.path / name)

    def finish_job(self, jr: JobResult, budgets: Budgets) -> JobResult:
        """Judge the job's measurements (raw files are on disk) and write job.json."""
        judge_run(RunResult(self.run_id, "", "", jobs=[jr]), budgets)
        d = self.job_dir(jr.board, jr.variant, jr.repeat)
        d.mkdir(parents=True, exist_ok=True)
        JobDir(d).job_json.write_text(json.dumps(jr.to_json(), indent=2) + "\n")
        return jr

    def finish(self, run: RunResult) -> Path:
        """run.json, report.html, vendor.html (the vendor reports' tables,
        `rtlab report --vendor`), and ``latest`` pointing here."""
        RunDir(self.path).run_json.write_text(json.dumps(run.to_json(), indent=2) + "\n")
        write_html_report(run, self.path / "report.html")
        write_vendor_html(run, self.path / "vendor.html", run_dir=self.path)
        self.point_latest()
        return self.path

    def point_latest(self) -> None:
        """The one rule for ``latest``: a symlink to the run that finished
        last, replaced atomically; a ``latest`` that is not a symlink is
        someone's data and is left alone."""
        latest = self.root / LATEST
        if latest.exists() and not latest.is_symlink():
            return
        tmp = self.root / f".{LATEST}.{os.getpid()}"
        try:
            if tmp.is_symlink():
                tmp.unlink()
            tmp.symlink_to(self.run_id)
            os.replace(tmp, latest)
        except OSError:
            pass  # a results root without symlinks still has every run


def load_run(run_dir: Path) -> RunResult:
    """A run's RunResult from its directory (or its run.json): read bounded,
    never through a symlink out of the run directory, every value checked
    for type and range (rtlab.core.modelcheck) before the model sees it."""
    p = Path(run_dir)
    path = p if p.is_file() else RunDir(p).run_json
    if not path.is_file() and not path.is_symlink():
        raise InputError(path, "no run.json: not a results directory (expected results/<run_id>/run.json)")
    doc = modelcheck.load_checked(path, modelcheck.run, what="run result")
    try:
        return RunResult.from_json(doc)
    except (ValueError, KeyError, TypeError) as e:  # modelcheck should have named it
        raise InputError(path, f"not a valid run result: {type(e).__name__}: {e}") from None


def load_job(path: Path) -> JobResult:
    """A job's JobResult from its job.json, checked like run.json."""
    doc = modelcheck.load_checked(path, modelcheck.job, what="job result")
    try:
        return JobResult.from_json(doc)
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(path, f"not a valid job result: {type(e).__name__}: {e}") from None


load_comparison = modelcheck.load_comparison