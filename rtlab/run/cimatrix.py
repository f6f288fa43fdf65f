"""The CI pipeline's job matrices, from the lab's own description (`rtlab ci matrix`).

.gitlab-ci.yml names the campaign that gates kernel commits (``variables:
RTLAB_CAMPAIGN``) and the one its nightly schedule runs (the workflow rule
of schedules); the campaigns name boards × variants, env/ says what each
board is, kernel-configs/variants.yaml which kernel each variant boots. From
them, and nothing else:

    build       one job per kernel the test jobs boot: arch × kernel config.
                Variants that boot one kernel share its build (none,
                voluntary, preempt and their -iso forms boot one
                PREEMPT_DYNAMIC kernel; rt and rt-iso one PREEMPT_RT
                kernel): the job is named by the first of them
    test        one job per board × variant of the gate campaign that can
                boot the commit under test (the others are listed with why)
    test-lava   the same boards × variants, as LAVA jobs
    reference   the gate campaign's boards
    report:<c>  a schedule with RTLAB_CAMPAIGN=<c> (the vendor reports,
                campaigns/vendor-*.yaml): the campaign's own boards × the
                variants they can run, with a timeout that holds the
                campaign at its full length (RTLAB_FULL=1)

The generated YAML sits in .gitlab-ci.yml between marker comments (``#
rtlab ci matrix <region>: ...`` and ``# rtlab ci matrix end``); `rtlab ci
matrix --write` rewrites them, ``--check`` says whether they are current
(tests/unit/test_ci_matrix.py runs it). Why the matrix is written into the
file rather than a child pipeline: docs/gating-merge-requests.md.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .. import ROOT
from ..errors import InputError
from ..images.config import load_config as load_image_config
from ..kernel.fragments import with_base
from ..plan.budgets import load_budgets
from ..plan.campaign import CAMPAIGN_DIR, Campaign, Job, load_campaign
from ..targets.boards import Board
from .runner import board_cannot, job_planned_s

PIPELINE = ROOT / ".gitlab-ci.yml"
#: campaigns a schedule may name as RTLAB_CAMPAIGN to run a vendor report
REPORT_GLOB = "vendor-*.yaml"
#: what a CI job may spend building a kernel before it measures: a cold cross
#: build of the pinned source took 20-40 min on a 2-core runner
#: (docs/measurements/kernel-builds.md); warm builds are seconds
KERNEL_BUILD_ALLOWANCE_S = 3600
#: a job's wait for its board: `rtlab run --lock-timeout`'s default
#: (RTLAB_LOCK_TIMEOUT_S), someone else's run holding the board
LOCK_WAIT_ALLOWANCE_S = 3600

_START = re.compile(r"^(?P<indent>[ ]*)# rtlab ci matrix (?P<region>[a-z-]+):")
_END = re.compile(r"^[ ]*# rtlab ci matrix end\s*$")


@dataclass(frozen=True)
class Excluded:
    """A board × variant a campaign names that CI does not run, and why."""

    board: str
    variant: str
    why: str

    def line(self) -> str:
        return f"{self.board}/{self.variant}: {self.why}"


@dataclass(frozen=True)
class KernelBuild:
    """One build job: the kernel *variants* boot on boards of *arch*."""

    arch: str
    #: the board whose base fragment the kernel starts from, where it has one
    #: of its own (None: base-qemu-<arch>, the build job's default)
    base_board: Optional[str]
    fragments: tuple[str, ...]
    variants: tuple[str, ...]

    @property
    def variant(self) -> str:
        """The variant the build job names (`rtlab kernel build --variant`)."""
        return self.variants[0]


@dataclass(frozen=True)
class ReportJobs:
    """A schedule's jobs: *campaign*'s own boards × variants."""

    campaign: Campaign
    jobs: tuple[Job, ...]
    excluded: tuple[Excluded, ...]
    #: the campaign's time per job at its full length (`rtlab run --full`), if it has one
    full: bool

    @property
    def name(self) -> str:
        return f"report:{self.campaign.name}"

    def timeout_s(self) -> int:
        return job_timeout_s(self.jobs, self.campaign.repeat)


@dataclass
class CiMatrix:
    gate: Campaign
    nightly: Optional[Campaign]
    #: the test job's board × variant pairs, in the campaign's order
    jobs: list[Job]
    excluded: list[Excluded]
    builds: list[KernelBuild]
    reports: list[ReportJobs] = field(default_factory=list)

    def boards(self) -> list[Board]:
        seen: dict[str, Board] = {}
        for j in self.jobs:
            seen.setdefault(j.board.name, j.board)
        return list(seen.values())

    def test_matrix(self) -> list[dict]:
        return [{"BOARD": b.name, "VARIANT": [j.variant.name for j in self.jobs if j.board.name == b.name]}
                for b in self.boards()]

    def build_matrix(self) -> list[dict]:
        out: list[dict] = []
        for b in self.builds:
            row = next((r for r in out if r["ARCH"] == b.arch and r.get("BOARD") == b.base_board), None)
            if row is None:
                row = {"ARCH": b.arch, **({"BOARD": b.base_board} if b.base_board else {}), "VARIANT": []}
                out.append(row)
            row["VARIANT"].append(b.variant)
        return out

    def reference_matrix(self) -> list[dict]:
        return [{"BOARD": [b.name for b in self.boards()]}]


def job_timeout_s(jobs, repeat: int = 1) -> int:
    """The CI timeout that holds the longest of *jobs* (each one CI job,
    one board × variant): its planned time per repeat, a kernel build and a
    wait for the board, in whole hours (GitLab's `timeout:`)."""
    need = max(job_planned_s(j) for j in jobs) * repeat + KERNEL_BUILD_ALLOWANCE_S + LOCK_WAIT_ALLOWANCE_S
    return 3600 * math.ceil(need / 3600)


def boots_the_commit(job: Job) -> Optional[str]:
    """Why *job* cannot measure a kernel built from the commit under test
    (`rtlab run --kernel-tree`), or None: the test job's question."""
    board, variant = job.board, job.variant
    if board.fixed_kernel:
        return "boots its own kernel (this machine), never the commit under test"
    if not board.boots_built_kernels:
        return ("boots the kernels the lab stages for it, not one built from the commit under test "
                "(QEMU boards, rack twins and LAVA boards boot --kernel-tree builds)")
    if board.built_kernels_unusable:
        return f"cannot run kernels built from source: {board.built_kernels_unusable}"
    why = board_cannot(job)
    if why:
        return why
    if not variant.fragments_for(board.arch):
        return f"variant {variant.name} has no kernel.build fragments: it cannot be built from a commit"
    return None


def runs_as_written(job: Job) -> Optional[str]:
    """Why *job* cannot run as its campaign names it (`rtlab run` without
    --kernel-tree: Debian's pinned kernels, the pinned source built for what
    they cannot be), or None: a report schedule's question."""
    board, variant = job.board, job.variant
    why = board_cannot(job)
    if why or board.fixed_kernel or not variant.prebuilt:
        return why
    debian = load_image_config(board.arch).kernels.get(variant.prebuilt)
    if debian is not None and variant.unavailable_on(debian.preempt) is None:
        return None
    if variant.fragments_for(board.arch) and board.boots_built_kernels and not board.built_kernels_unusable:
        return None  # built from the pinned source
    debian_says = (f"Debian's {board.arch} {variant.prebuilt} kernel cannot be it" if debian is None
                   else variant.unavailable_on(debian.preempt))
    build = (f"{board.name} cannot run kernels built from source ({board.env_file.name}: built_kernels_unusable)"
             if board.built_kernels_unusable else "no kernel built from source runs there")
    return f"{debian_says}, and {build}"


def kernel_builds(jobs: list[Job]) -> list[KernelBuild]:
    """The kernels *jobs* boot, each once: per arch and board base, one
    build per distinct fragment list, named by its first variant."""
    groups: dict[tuple, list[str]] = {}
    for job in jobs:
        board = job.board
        base = with_base(board.arch, job.variant.fragments_for(board.arch), board.name)
        default = with_base(board.arch, job.variant.fragments_for(board.arch))
        key = (board.arch, None if base == default else board.name, tuple(base[1:]))
        names = groups.setdefault(key, [])
        if job.variant.name not in names:
            names.append(job.variant.name)
    return [KernelBuild(arch=a, base_board=b, fragments=f, variants=tuple(v)) for (a, b, f), v in groups.items()]


def _single(campaign: Campaign) -> Campaign:
    return dataclasses.replace(campaign, repeat=1)


def _partition(campaign: Campaign, why_not: Callable[[Job], str]) -> tuple[list[Job], list[Excluded]]:
    """The campaign's jobs (one repeat each) CI runs, and those *why_not* leaves out, with why."""
    jobs, excluded = [], []
    for job in _single(campaign).jobs():
        why = why_not(job)
        if why:
            excluded.append(Excluded(job.board.name, job.variant.name, why))
        else:
            jobs.append(job)
    return jobs, excluded


def gate_jobs(campaign: Campaign) -> tuple[list[Job], list[Excluded]]:
    return _partition(campaign, boots_the_commit)


def report_jobs(campaign: Campaign) -> ReportJobs:
    from ..soak.checkpoint import full_length

    try:
        measured, full = full_length(campaign), True
    except InputError:  # no full_duration_s: its length is the one it says
        measured, full = campaign, False
    jobs, excluded = _partition(measured, runs_as_written)
    if not jobs:
        raise InputError(campaign.path, "no board × variant of the campaign can run: " +
                         "; ".join(e.line() for e in excluded))
    return ReportJobs(campaign=campaign, jobs=tuple(jobs), excluded=tuple(excluded), full=full)


def pipeline_campaigns(pipeline: Path = PIPELINE) -> tuple[str, Optional[str]]:
    """(the gate's campaign, the nightly schedule's) as .gitlab-ci.yml names
    them: its RTLAB_CAMPAIGN variable, and the workflow rule of schedules."""
    ci = _load_pipeline(pipeline)
    gate = (ci.get("variables") or {}).get("RTLAB_CAMPAIGN")
    if not isinstance(gate, str) or not gate:
        raise InputError(pipeline, "variables.RTLAB_CAMPAIGN: missing (the campaign CI gates with)")
    nightly = None
    for rule in (ci.get("workflow") or {}).get("rules") or []:
        if isinstance(rule, dict) and rule.get("if") == '$CI_PIPELINE_SOURCE == "schedule"':
            nightly = (rule.get("variables") or {}).get("RTLAB_CAMPAIGN")
    return gate, nightly


def report_campaigns(campaign_dir: Path = CAMPAIGN_DIR) -> list[Path]:
    return sorted(Path(campaign_dir).glob(REPORT_GLOB))


def ci_matrix(gate: Path | str, nightly: Optional[Path | str] = None,
              reports: Optional[list[Path]] = None) -> CiMatrix:
    """The matrices of the pipeline for these campaigns (names or paths).
    The nightly schedule runs its campaign's suites on the test job's boards
    × variants (`--board`, `--variant`): every CPU it pins must exist on
    each of them, or this is an InputError naming the board and key."""
    g = load_campaign(Path(gate))
    jobs, excluded = gate_jobs(g)
    if not jobs:
        raise InputError(g.path, "no board × variant of the campaign can boot the commit under test: " +
                         "; ".join(e.line() for e in excluded))
    n = None
    if nightly is not None:
        n = load_campaign(Path(nightly))
        for board in dict.fromkeys(j.board.name for j in jobs):
            try:
                load_campaign(Path(nightly), boards=[board])
            except InputError as e:
                raise InputError(n.path, f"the nightly schedule runs {n.name} on the test job's board {board}: "
                                         f"{e.what}") from None
    budgets = load_budgets(g.budgets)
    missing = budgets.uncovered(jobs)
    if missing:
        raise InputError(g.budgets, missing[0])
    return CiMatrix(gate=g, nightly=n, jobs=jobs, excluded=excluded, builds=kernel_builds(jobs),
                    reports=[report_jobs(load_campaign(p)) for p in (reports or [])])


def lab_matrix(pipeline: Path = PIPELINE, campaign_dir: Path = CAMPAIGN_DIR) -> CiMatrix:
    """The matrices of the lab's own pipeline: the campaigns .gitlab-ci.yml
    names, and every report campaign as a schedule."""
    gate, nightly = pipeline_campaigns(pipeline)
    return ci_matrix(gate, nightly, report_campaigns(campaign_dir))


# -- the generated YAML -------------------------------------------------------------
class _Dumper(yaml.SafeDumper):
    """Block style, but a list of names on one line (``VARIANT: [none, rt]``)."""

    def represent_list(self, data):
        flow = all(isinstance(x, (str, int, float)) for x in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _Dumper.represent_list)


def _dump(data: Any, indent: int) -> list[str]:
    text = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=1000)
    assert yaml.safe_load(text) == data  # names are check_name'd: nothing YAML would read otherwise
    return [(" " * indent + ln) if ln else ln for ln in text.rstrip("\n").split("\n")]


def _hours(seconds: int) -> str:
    return f"{seconds // 3600}h"


def regions(m: CiMatrix, indent: dict[str, int]) -> dict[str, list[str]]:
    """The lines of each generated region (without its marker lines), at
    the indentation of its start marker."""
    out: dict[str, list[str]] = {}
    i = indent.get("build", 0)
    lines = [" " * i + f"# the kernels of {m.gate.name}'s boards × variants, each built once "
                       "(the variants after ':' boot it):"]
    for b in m.builds:
        lines.append(" " * i + f"#   {b.arch}{' ' + b.base_board if b.base_board else ''} [{', '.join(b.fragments)}]: "
                               f"{', '.join(b.variants)}")
    out["build"] = lines + _dump({"matrix": m.build_matrix()}, i)
    for region in ("test", "test-lava"):
        i = indent.get(region, 0)
        lines = [" " * i + f"# {m.gate.name}'s boards × variants that boot the commit under test"]
        lines += [" " * i + f"#   not {e.line()}" for e in m.excluded]
        out[region] = lines + _dump({"matrix": m.test_matrix()}, i)
    out["reference"] = _dump({"matrix": m.reference_matrix()}, indent.get("reference", 0))
    jobs: list[str] = []
    for r in m.reports:
        i = indent.get("reports", 0)
        camp = r.campaign
        jobs.append(" " * i + f"# a schedule with RTLAB_CAMPAIGN={camp.name}"
                    + (" (RTLAB_FULL=1: its full length)" if r.full else "")
                    + f": {len(r.jobs)} job(s) of at most {max(job_planned_s(j) for j in r.jobs) / 3600:.1f} h"
                    + (f" x {camp.repeat} repeats" if camp.repeat > 1 else ""))
        jobs += [" " * i + f"#   not {e.line()}" for e in r.excluded]
        boards: list[dict] = []
        for j in r.jobs:
            row = next((b for b in boards if b["BOARD"] == j.board.name), None)
            if row is None:
                boards.append(row := {"BOARD": j.board.name, "VARIANT": []})
            row["VARIANT"].append(j.variant.name)
        jobs += _dump({r.name: {
            "extends": ".report",
            "rules": [{"if": f'$CI_PIPELINE_SOURCE == "schedule" && $RTLAB_CAMPAIGN == "{camp.name}"'}],
            "parallel": {"matrix": boards},
            "timeout": _hours(r.timeout_s()),
        }}, i)
    out["reports"] = jobs
    return out


def rewrite(text: str, m: CiMatrix, where: Path | str = PIPELINE) -> str:
    """*text* (.gitlab-ci.yml) with every generated region replaced."""
    lines = text.split("\n")
    spans: dict[str, tuple[int, int, int]] = {}
    k = 0
    while k < len(lines):
        start = _START.match(lines[k])
        if start:
            end = next((e for e in range(k + 1, len(lines)) if _END.match(lines[e])), None)
            if end is None:
                raise InputError(where, f"line {k + 1}: '# rtlab ci matrix {start['region']}:' has no "
                                        "'# rtlab ci matrix end' after it")
            if start["region"] in spans:
                raise InputError(where, f"line {k + 1}: a second region {start['region']!r}")
            spans[start["region"]] = (k, end, len(start["indent"]))
            k = end
        k += 1
    wanted = regions(m, {r: s[2] for r, s in spans.items()})
    missing = sorted(set(wanted) - set(spans))
    unknown = sorted(set(spans) - set(wanted))
    if missing or unknown:
        raise InputError(where, f"generated regions: missing {missing or 'none'}, unknown {unknown or 'none'} "
                                f"(each is '# rtlab ci matrix <region>: ...' ... '# rtlab ci matrix end')")
    for region, (a, b, _) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
        lines[a + 1:b] = wanted[region]
    return "\n".join(lines)


def _load_pipeline(pipeline: Path) -> dict:
    try:
        ci = yaml.safe_load(Path(pipeline).read_text())
    except OSError as e:
        raise InputError(pipeline, f"cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InputError(pipeline, f"invalid YAML: {e}") from None
    if not isinstance(ci, dict):
        raise InputError(pipeline, "expected a mapping at the top level")
    return ci


# -- what is gated, for people ------------------------------------------------------
def _limits(b) -> str:
    parts = [f"max < {b.max_us:,.0f} us"] if b.max_us is not None else []
    parts += [f"p{p} < {v:,.0f} us" for p, v in b.percentiles_us.items()]
    return ", ".join(parts)


def gated_table(m: CiMatrix) -> str:
    """Markdown: per board of the test job, its variants, what each job
    measures and the budget that judges it (the campaign's budget file)."""
    budgets = load_budgets(m.gate.budgets)
    rel = Path(m.gate.budgets).resolve()
    shown = rel.relative_to(ROOT) if rel.is_relative_to(ROOT) else rel
    rows = ["| board | arch, CPUs, budget class | variants (one test job each) | measured per job "
            f"| budget ({shown}) |", "|---|---|---|---|---|"]
    for board in m.boards():
        jobs = [j for j in m.jobs if j.board.name == board.name]
        measured = sorted({f"{s.name}@{s.load} {_tool_time(s)}" for j in jobs for s in j.suites})
        by_limit: dict[str, list[str]] = {}
        for j in jobs:
            for s in j.suites:
                for name in _measured_names(s):
                    b = budgets.lookup(board.budget_class, j.variant.name, name, s.load)
                    text = f"{name}@{s.load}: " + (_limits(b) + f" (`{b.source.split(': ', 1)[-1]}`)"
                                                   if b else "unbudgeted")
                    by_limit.setdefault(text, []).append(j.variant.name)
        variants = [j.variant.name for j in jobs]
        budget = "; ".join(f"{text}{'' if set(vs) == set(variants) else ' for ' + ', '.join(vs)}"
                           for text, vs in by_limit.items())
        rows.append(f"| `{board.name}` | {board.arch}, {board.cpus}, `{board.budget_class}` | "
                    f"{', '.join(variants)} | {', '.join(measured)} | {budget} |")
    for e in m.excluded:
        rows.append(f"| `{e.board}` | | not gated: {e.variant} | | {e.why} |")
    return "\n".join(rows)


def _measured_names(run) -> list[str]:
    from ..suites import SUITES

    suite = SUITES.get(run.suite)
    return suite.measurement_names(run.name) if suite is not None else [run.name]


def _tool_time(run) -> str:
    from ..suites import SUITES

    return f"{SUITES[run.suite].duration_s(run):g} s"


def schedules_table(m: CiMatrix) -> str:
    """Markdown: each schedule the pipeline runs, its jobs and their time."""
    rows = ["| schedule variables | jobs (board: variants) | per job, planned | job timeout |", "|---|---|---|---|"]
    if m.nightly is not None:
        jobs = _single(m.nightly).jobs()
        mine = [j for j in jobs if not boots_the_commit(j)]
        rows.append(f"| none (the workflow sets `RTLAB_CAMPAIGN={m.nightly.name}`) | `test`: "
                    + "; ".join(f"{b}: {', '.join(j.variant.name for j in mine if j.board.name == b)}"
                                for b in dict.fromkeys(j.board.name for j in mine))
                    + f" | {max(job_planned_s(j) for j in mine) / 60:.0f} min | the test job's |")
    for r in m.reports:
        boards = dict.fromkeys(j.board.name for j in r.jobs)
        rows.append(f"| `RTLAB_CAMPAIGN={r.campaign.name}`" + (" `RTLAB_FULL=1`" if r.full else "")
                    + f" | `{r.name}`: " + "; ".join(f"{b}: {', '.join(j.variant.name for j in r.jobs if j.board.name == b)}"
                                                     for b in boards)
                    + f" | {max(job_planned_s(j) for j in r.jobs) / 3600:.1f} h"
                    + (f" x {r.campaign.repeat}" if r.campaign.repeat > 1 else "")
                    + f" | {_hours(r.timeout_s())} |")
    return "\n".join(rows)

