"""LAVA results -> an rtlab results directory (run.json in the runner's layout).

Input: one *record* directory per LAVA job, as `rtlab lava run` and
`rtlab lava fetch` write them::

    job.yaml        the job definition (carries rtlab's spec in its metadata)
    lava-run.log    lava-run's stderr log stream            } either, optional:
    log.yaml        a server's log (lavacli jobs logs --raw) } raw outputs live here
    results.yaml    lavacli results ID --yaml               (else: from the log)
    job.json        lavacli jobs show --json (health) / rtlab's lava-run summary

Output: ``<results>/<run_id>/`` written by :mod:`rtlab.run.results`, the same
code the labgrid runner uses (run.json, campaign.yaml, budgets.yaml,
<board>/<variant>/job.json, kernel.json, job-spec.json, <suite>@<load>/ raw
files), plus each LAVA job's evidence under ``<suite>@<load>/lava/``, so
`rtlab report`, `rtlab gate` and `rtlab publish` work unchanged and the same
raw outputs get the same verdicts whichever backend brought them.

Verdicts, in the gate's terms:

* job ended Incomplete / Canceled, or a case of LAVA's own ``lava`` suite
  failed (http-download, login-action, auto-login-action, the test
  definition runs...), or the board is not running the variant: **INFRA**,
  job-level ``infra_error`` naming the LAVA job and the cause; its
  measurements are not judged.
* the tool exited non-zero, or its raw output is missing or unreadable:
  **INFRA** on that measurement (as the labgrid path does).
* a declared test case is missing (``metadata.rtlab.expected``): **INFRA**
  on that measurement, naming every missing case: the job must not pass, and
  nothing was measured that could be called a latency failure; `rtlab gate`
  exits 2 (non-zero) and lists them. A FAIL (exit 1) would tell CI "the kernel
  got slower", which a test harness that lost its output does not show.
* the board's lava-test-case numbers disagree with rtlab's parse of the raw
  JSON: **INFRA** (one of the two reporting paths is broken).
* otherwise the measurement is judged against the budgets like any other.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from .. import ROOT
from ..targets.boards import Board
from ..plan.budgets import load_budgets
from ..plan.campaign import BUDGETS_DIR, DEFAULT_BUDGETS
from ..core.config import load_yaml
from ..errors import InputError
from ..core.fsutil import read_text_bounded
from ..core.modelcheck import thread_contradiction
from ..core.model import JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput, Verdict
from ..run.results import JobSpec, ResultsDir, collect, new_run_id, raw_files, variant_problems
from ..suites import SUITES, SuiteRun
from ..suites.board import BoardShell, read_kernel_facts
from ..targets.variants import Variant
from . import loads as lava_loads
from . import onboard
from .logs import LavaLog, RawBlock, job_outcome, raw_blocks, results_from_server
from .render import NOT_AVAILABLE_TEXT, spec_of
from .specs import check_spec, lab_file
from ..core.rundir import BUDGETS_COPY, CAMPAIGN_COPY, JobDir, MeasurementDir

LOG_NAMES = ("lava-run.log", "log.yaml")


@dataclass
class LavaRecord:
    """Everything one LAVA job left, read from a record directory."""

    source: Path
    definition: dict
    spec: dict
    job_id: str = ""
    log: Optional[LavaLog] = None
    log_file: Optional[Path] = None
    results: list[dict] = field(default_factory=list)
    health: str = "Unknown"
    failure: Optional[str] = None
    duration_s: float = 0.0
    started: Optional[dt.datetime] = None

    @property
    def label(self) -> str:
        s = self.spec
        return f"LAVA job {self.job_id or '?'} ({s['board']['name']}/{s['variant']['name']}/{s['suite']['id']})"


def load_record(path: Path) -> LavaRecord:
    path = Path(path)
    if not path.is_dir():
        raise InputError(path, "not a LAVA record directory (expected job.yaml and a log or results.yaml)")
    job_file = path / "job.yaml"
    if not job_file.is_file():
        raise InputError(path, "no job.yaml (the job definition carries rtlab's spec)")
    definition = load_yaml(job_file)
    if not isinstance(definition, dict):
        raise InputError(job_file, "not a LAVA job definition")
    rec = LavaRecord(source=path, definition=definition, spec=spec_of(definition, job_file))
    meta = {}
    if (path / "job.json").is_file():
        try:
            meta = json.loads(read_text_bounded(path / "job.json"))
        except ValueError as e:
            raise InputError(path / "job.json", f"invalid JSON: {e}") from None
    rec.job_id = str(meta.get("id") or meta.get("job_id") or "")
    for name in LOG_NAMES:
        if (path / name).is_file():
            rec.log = LavaLog.from_file(path / name)
            rec.log_file = path / name
            break
    if (path / "results.yaml").is_file():
        rec.results = results_from_server(load_yaml(path / "results.yaml"), path / "results.yaml")
    elif rec.log is not None:
        rec.results = rec.log.results()
    if rec.log is None and not rec.results:
        raise InputError(path, "neither a log (lava-run.log, log.yaml) nor results.yaml")
    health, failure = job_outcome(rec.results)
    if meta.get("health"):  # a server's own word on the job wins
        health = str(meta["health"])
        failure = meta.get("failure_comment") or failure
    if health is None:
        health = "Incomplete"
        failure = ("lava-run exited with %s before reporting the job result" % meta["returncode"]
                   if meta.get("returncode") not in (None, 0) else
                   "the log ends before LAVA reported the job result")
    rec.health, rec.failure = health, failure
    _check_case_numbers(rec, path / "results.yaml" if (path / "results.yaml").is_file() else rec.log_file)
    if rec.log is not None:
        rec.duration_s = rec.log.span_s()
        rec.started = rec.log.started()
    if meta.get("wall_s"):
        rec.duration_s = float(meta["wall_s"])
    return rec


class _ReplayShell(BoardShell):
    """Answers kernel_facts' commands with what the board printed for them."""

    def __init__(self, answers: dict[str, tuple[list[str], int]]):
        super().__init__(None)
        self.answers = answers
        self.missing: list[str] = []

    def run(self, cmd: str, timeout: float = 30.0):
        if cmd not in self.answers:
            self.missing.append(cmd)
            return [], 1
        return self.answers[cmd]


def replay_facts(spec: dict, blocks: dict[tuple[str, str], RawBlock]) -> tuple[Optional[dict], list[str]]:
    """kernel_facts() run over the board's recorded answers: (facts, problems)."""
    answers: dict[str, tuple[list[str], int]] = {}
    problems = []
    for i, cmd in enumerate(spec["facts"]):
        blk = blocks.get(("facts", f"cmd{i}"))
        if blk is None or blk.data is None or blk.rc is None:
            why = blk.error if blk is not None and blk.error else "not in the log"
            problems.append(f"kernel fact `{cmd}`: {why}")
            continue
        answers[cmd] = (blk.data.decode(errors="replace").splitlines(), blk.rc)
    if problems:
        return None, problems
    sh = _ReplayShell(answers)
    facts = read_kernel_facts(sh)
    if sh.missing:  # kernel_facts changed since the job was rendered
        return None, [f"kernel fact `{c}` was not recorded on the board (re-render the job)" for c in sh.missing]
    return facts, []


def _lava_failures(rec: LavaRecord) -> list[str]:
    out = []
    for r in rec.results:
        if r["definition"] == "lava" and r["case"] != "job" and r["result"] == "fail":
            why = ": ".join(" ".join(str(x).split()) for x in (r.get("error_type"), r.get("error_msg")) if x)
            out.append(f"LAVA {r['case']} failed" + (f" ({why})" if why else ""))
    return out


def _suite_cases(rec: LavaRecord) -> dict[str, dict]:
    suite_def = (rec.spec.get("definitions") or {}).get("suite")
    return {r["case"]: r for r in rec.results if r["definition"] == suite_def}


def missing_cases(rec: LavaRecord) -> list[str]:
    present = {f"{r['definition']}/{r['case']}" for r in rec.results}
    return [c for c in rec.spec["expected"] if c not in present]


def _check_case_numbers(rec: LavaRecord, where) -> None:
    """The board's lava-test-case numbers, refused at load when they cannot be
    true: a latency below zero, a thread whose min, avg and max contradict
    each other (the key: the test case)."""
    for name, r in _suite_cases(rec).items():
        split = onboard.split_case(name)
        v = r.get("measurement")
        if split and v is not None and split[1] != "cycles" and v < 0:
            raise InputError(where, f"test case {name}: a latency cannot be negative, got {v!r}")
    for t in _threads_from_cases(_suite_cases(rec)):
        problem = thread_contradiction(t.cycles, t.min_us, t.avg_us, t.max_us, None)
        if problem is not None:
            case = f"t{t.thread}-{problem[0].replace('_us', '')}-latency"
            raise InputError(where, f"test case {case}: {problem[2]}")


def _threads_from_cases(cases: dict[str, dict]) -> list[ThreadResult]:
    """Results-only ingest: threads from the board's lava-test-case numbers
    (no histogram, so no percentiles: those need the raw JSON in the log)."""
    vals: dict[int, dict[str, float]] = {}
    for name, r in cases.items():
        split = onboard.split_case(name)
        if split and r.get("measurement") is not None:
            vals.setdefault(split[0], {})[split[1]] = r["measurement"]
    threads = []
    for t, v in sorted(vals.items()):
        if {"cycles", "min", "avg", "max"} <= set(v):
            threads.append(ThreadResult(thread=t, cpu=None, cycles=int(v["cycles"]), min_us=v["min"],
                                        avg_us=v["avg"], max_us=v["max"]))
    return threads


def cross_check(out: ToolOutput, cases: dict[str, dict]) -> list[str]:
    """Where the board's lava-test-case numbers differ from rtlab's parse."""
    problems = []
    for t in out.threads:
        mine = {"cycles": t.cycles, "min": t.min_us, "avg": t.avg_us, "max": t.max_us,
                **{f"p{p}": v for p, v in t.percentiles_us.items()}}
        for what, v in mine.items():
            name = (f"t{t.thread}-{what}" if what == "cycles" else
                    f"t{t.thread}-{onboard.percentile_case_name(what[1:]) if what.startswith('p') else what}-latency")
            r = cases.get(name)
            if r is None:
                continue  # missing cases are reported on their own
            lava = r.get("measurement")
            if v is None or v != v:  # unknowable (overflows) or NaN: the board skips it
                if r["result"] != "skip":
                    problems.append(f"{name}: board reported {lava}, rtlab finds no value")
            elif lava is None or abs(lava - v) > max(1e-3, 1e-6 * abs(v)):
                problems.append(f"{name}: board reported {lava}, rtlab parsed {v:g}")
    return problems


def _copy_evidence(rec: LavaRecord, dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for name in ("job.yaml", *LOG_NAMES, "results.yaml", "job.json"):
        src = rec.source / name
        if src.is_file():
            if src.resolve() != (dest / name).resolve():
                shutil.copyfile(src, dest / name)
            names.append(name)
    return names


def ingest_records(records: list[LavaRecord], results_root: Path, *, run_id: Optional[str] = None,
                   budgets_file: Optional[Path] = None, commit: Optional[dict] = None,
                   build_failed: Sequence[dict] = (),
                   progress: Callable[[str], None] = lambda m: None) -> tuple[RunResult, Path]:
    """*build_failed*: the render index's board/variant pairs whose kernel
    did not build from the commit under test (no LAVA job): FAIL, as on the
    labgrid path."""
    if not records and not build_failed:
        raise InputError("rtlab lava ingest", "no LAVA records given")
    for b in build_failed:  # the render index's entries: as hostile as a job file
        check_spec(b, "render index build_failed", job=False)
    spec0, where0 = (records[0].spec, records[0].source / "job.yaml") if records else (build_failed[0], "render index")
    # the lab's budgets: --budgets, else the spec's when it names one of the
    # lab's budget files (checked at load), else the lab's default
    budgets_file = (Path(budgets_file) if budgets_file
                    else lab_file(spec0.get("budgets"), "budgets", where0, BUDGETS_DIR) or DEFAULT_BUDGETS)
    budgets = load_budgets(budgets_file)
    started = min((r.started for r in records if r.started), default=None) or dt.datetime.utcnow()
    started = started.replace(microsecond=0)
    if run_id:
        rd = ResultsDir.create(results_root, run_id)
    else:
        rd = ResultsDir.create(results_root, new_run_id(started.replace(tzinfo=dt.timezone.utc)), suffix="-lava")
    rd.keep(budgets_file, BUDGETS_COPY)
    campaign_file = lab_file(spec0.get("campaign_file"), "campaign_file", where0, ROOT)
    if campaign_file is not None:
        rd.keep(campaign_file, CAMPAIGN_COPY)

    run = RunResult(run_id=rd.run_id, started=started.isoformat() + "Z",
                    campaign=spec0.get("campaign", ""), commit=dict(commit or {}))
    built_from = next((r.spec.get("kernel", {}).get("commit") for r in records
                       if r.spec.get("kernel", {}).get("commit")), None)
    if built_from and not run.commit.get("sha"):  # kernels built from the commit under test (--kernel-tree)
        run.commit["sha"] = built_from
    jobs: dict[tuple[str, str], tuple[JobResult, JobSpec]] = {}
    for rec in records:
        s = rec.spec
        board, variant = Board.from_json(s["board"]), Variant.from_json(s["variant"])
        key = (board.name, variant.name)
        if key not in jobs:
            jobs[key] = (JobResult(board=board.name, variant=variant.name, arch=board.arch,
                                   budget_class=board.budget_class),
                         JobSpec(job_dir=rd.new_job_dir(board.name, variant.name), board=board, variant=variant,
                                 boot_args=s["boot_args"], kernel=s["kernel"], lava=s["lava"]))
        jr, spec = jobs[key]
        spec.suites.append(SuiteRun.from_json(s["suite"]))
        spec.write()
        jr.duration_s = round(jr.duration_s + rec.duration_s, 3)
        ms = _ingest_one(rec, jr, spec)  # rtla timerlat: IRQ and thread
        jr.measurements.extend(ms)
        m = ms[0] if ms else None
        progress(f"{rec.label}: {rec.health}" + (f" ({rec.failure})" if rec.failure else "")
                 + (f", {m.key.suite}@{m.key.load} parsed" if m is not None and m.verdict is None else "")
                 + (f", {m.verdict.value}: {'; '.join(m.reasons)}" if m is not None and m.verdict else ""))
    run.jobs = [jr for jr, _ in jobs.values()]
    for b in build_failed:
        board, variant = Board.from_json(b["board"]), Variant.from_json(b["variant"])
        if (board.name, variant.name) in jobs:
            continue
        jr = JobResult(board=board.name, variant=variant.name, arch=board.arch, budget_class=board.budget_class,
                       build_error=str(b["error"]))
        progress(f"{board.name}/{variant.name}: FAIL: {jr.build_error}")
        run.jobs.append(jr)
    for jr in run.jobs:
        rd.finish_job(jr, budgets)
    rd.finish(run)
    return run, rd.path


def _ingest_one(rec: LavaRecord, jr: JobResult, spec: JobSpec) -> list[Measurement]:
    s = rec.spec
    job_dir = spec.job_dir
    run = SuiteRun.from_json(s["suite"])
    suite = SUITES[run.suite]
    mkey = MeasurementKey(board=jr.board, variant=jr.variant, suite=run.name, load=run.load)
    suite_dir = job_dir / run.id
    suite_dir.mkdir(parents=True, exist_ok=True)
    _copy_evidence(rec, suite_dir / "lava")
    MeasurementDir(suite_dir).command.write_text(s["command"] + "\n")
    blocks = raw_blocks(rec.log.target_lines()) if rec.log is not None else {}

    infra: list[str] = []
    if rec.health != "Complete":
        infra.append(f"{rec.health}" + (f": {rec.failure}" if rec.failure else ""))
    infra += _lava_failures(rec)
    facts = None
    if rec.log is not None:
        facts, fact_problems = replay_facts(s, blocks)
        if facts is not None:
            MeasurementDir(suite_dir).kernel_json.write_text(json.dumps(facts, indent=2) + "\n")
            if not jr.kernel:
                jr.kernel = facts
                JobDir(job_dir).kernel_json.write_text(json.dumps(facts, indent=2) + "\n")
            infra += variant_problems(spec, facts)  # the boot test's check
        elif rec.health == "Complete":
            infra += fact_problems
    if infra:
        msg = f"{rec.label}: " + "; ".join(infra)
        jr.infra_error = f"{jr.infra_error}; {msg}" if jr.infra_error else msg
        return []  # nothing trustworthy was measured: the job-level error says why

    # raw outputs first, byte-exact, before anything is judged
    transfer: list[str] = []
    for (bkey, name), blk in sorted(blocks.items()):
        if bkey != run.id:
            continue
        if blk.data is not None:
            (suite_dir / name).write_bytes(blk.data)
        elif blk.error:
            transfer.append(f"{name} {blk.error}")
    if MeasurementDir(suite_dir).exit_code.is_file():  # exit.json, as run_tool writes it on the labgrid path
        text = MeasurementDir(suite_dir).exit_code.read_text().strip()
        rc = int(text) if text.lstrip("-").isdigit() else None
        MeasurementDir(suite_dir).exit_json.write_text(json.dumps({"exit_code": rc}) + "\n")
    na = suite_dir / NOT_AVAILABLE_TEXT
    if na.is_file():  # the board could not run it (rtla without the tracer): not judged
        jr.not_available.append({"suite": run.name, "load": run.load,
                                 "reason": na.read_text(errors="replace").strip() or "not available"})
        return []
    # the loads' raw files are on disk now: the labgrid path's health check
    load_problems: list[str] = []
    for part in s.get("loads") or []:
        load_problems += [f"load {part['name']}: {p}"
                          for p in lava_loads.check_load(part, suite_dir, run, spec.board)]

    cases = _suite_cases(rec)
    missing = missing_cases(rec)
    after = [*(["raw output " + "; ".join(transfer)] if transfer else []),
             # a latency measured while the load was not running is not a
             # measurement under that load (rtlab.loads.LoadDied on the labgrid path)
             *load_problems,
             *([f"{rec.label} is missing {len(missing)} declared test case(s): " + ", ".join(missing)]
               if missing else [])]
    if rec.log is None:  # results only: the board's lava-test-case numbers, no raw files
        threads = _threads_from_cases(cases)
        m = Measurement(mkey, ToolOutput(path="", tool=suite.tool, threads=threads), raw_files(job_dir, run))
        reasons = ([] if threads else ["no log and no measurements in the results: nothing to judge"]) + after
        if reasons:
            m.verdict, m.reasons = Verdict.INFRA, reasons
        return [m]

    def disagree(out: ToolOutput) -> list[str]:
        d = cross_check(out, cases)
        return ["the board's lava-test-case numbers disagree with the raw output: " + "; ".join(d)] if d else []

    return collect(job_dir, mkey, suite, run, after=after, check=disagree,
                   no_exit_code=f"on the board, see lava/{rec.log_file.name}" if rec.log_file else "")
