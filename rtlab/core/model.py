"""The one typed result model of rtlab.

It flows, unchanged, from the parsers (rt-tests, rtbench, LAVA results) to
the results directory, the store (InfluxDB), the report and the gate.

Units: every latency is in microseconds (float). Parsers convert tools that
report in nanoseconds (cyclictest -N, rtbench) so nothing downstream has to
know which tool produced a number.
"""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Optional

#: percentiles every thread reports; keys are the strings used in JSON,
#: budgets and the store ("99.9" rather than 99.9 so they survive YAML/JSON)
PERCENTILES = ("50", "99", "99.9", "99.99")


@dataclass(frozen=True)
class Budget:
    """The limits one measurement is judged against (rtlab.plan.budgets finds
    the one that applies; it lives here because a Measurement carries it)."""

    max_us: Optional[float] = None
    percentiles_us: dict[str, float] = field(default_factory=dict)
    #: where it came from: "file: class.variant.suite.load"
    source: str = ""

    def to_json(self) -> dict:
        return {"max_us": self.max_us, "percentiles_us": dict(self.percentiles_us),
                "source": self.source}

    @classmethod
    def from_json(cls, d: dict) -> "Budget":
        return cls(max_us=d.get("max_us"), percentiles_us=dict(d.get("percentiles_us") or {}),
                   source=d.get("source", ""))


@dataclass(frozen=True)
class Histogram:
    """A latency histogram as the tool recorded it.

    ``counts`` maps bucket index to sample count (non-zero buckets only);
    bucket ``i`` holds samples in ``[i*bucket_us, (i+1)*bucket_us)``.
    ``size`` is the number of buckets the tool kept (cyclictest ``-h N``);
    samples beyond it are ``overflows``, which count towards the total but
    whose values are unknown (only the thread's exact ``max`` survives).
    """

    counts: dict[int, int]
    bucket_us: float = 1.0
    size: Optional[int] = None
    overflows: int = 0

    @property
    def recorded(self) -> int:
        return sum(self.counts.values())

    @property
    def total(self) -> int:
        return self.recorded + self.overflows

    def percentile(self, p: float) -> Optional[float]:
        """Nearest-rank percentile over all samples, overflows included.

        Returns the lower bound of the bucket holding the sample of rank
        ceil(p/100 * N). A rank that falls among the overflowed samples is
        beyond what the histogram knows: None, never a guess.
        """
        n = self.total
        if n == 0:
            return None
        # exact decimal arithmetic: in floats 99.9/100*1000 is 999.0000000000001,
        # which would make p99.9 of 1000 samples the 1000th rather than the 999th
        rank = max(1, math.ceil(Fraction(str(p)) * n / 100))
        seen = 0
        for idx in sorted(self.counts):
            seen += self.counts[idx]
            if seen >= rank:
                return round(idx * self.bucket_us, 9)  # no float dust (10 ns buckets)
        return None

    def count_at_or_above(self, threshold_us: float) -> int:
        """Samples whose latency is >= threshold (overflows are above the range).

        Only exact where the threshold lies inside the histogram range; callers
        check :meth:`covers` first.
        """
        first = math.ceil(threshold_us / self.bucket_us - 1e-9)
        return sum(c for i, c in self.counts.items() if i >= first) + self.overflows

    def covers(self, threshold_us: float) -> bool:
        return self.size is None or threshold_us <= self.size * self.bucket_us

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket_us": self.bucket_us,
            "size": self.size,
            "overflows": self.overflows,
            "counts": {str(k): v for k, v in sorted(self.counts.items())},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Histogram":
        return cls(
            counts={int(k): int(v) for k, v in d["counts"].items()},
            bucket_us=float(d.get("bucket_us", 1.0)),
            size=d.get("size"),
            overflows=int(d.get("overflows", 0)),
        )


@dataclass
class ThreadResult:
    """One measuring thread (cyclictest) or one receiver (IPC tools)."""

    thread: int
    cpu: Optional[int]
    cycles: int
    min_us: float
    avg_us: float
    max_us: float
    #: samples above the histogram range; None where the input does not say
    overflows: Optional[int] = None
    histogram: Optional[Histogram] = None
    #: tool-specific numbers that have no common column (sender cpu, timeouts…)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def percentiles_us(self) -> dict[str, Optional[float]]:
        if self.histogram is None:
            return {p: None for p in PERCENTILES}
        return {p: self.histogram.percentile(float(p)) for p in PERCENTILES}

    def share_at_or_above(self, threshold_us: float) -> Optional[float]:
        """Share of samples at or above a threshold, None if unknowable."""
        if self.cycles == 0:
            return None
        if self.max_us < threshold_us:
            return 0.0
        if self.histogram is None or not self.histogram.covers(threshold_us):
            return None
        return self.histogram.count_at_or_above(threshold_us) / self.histogram.total

    def to_json(self, with_histogram: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "thread": self.thread,
            "cpu": self.cpu,
            "cycles": self.cycles,
            "min_us": self.min_us,
            "avg_us": self.avg_us,
            "max_us": self.max_us,
            "overflows": self.overflows,
            "percentiles_us": self.percentiles_us,
        }
        if self.extra:
            d["extra"] = self.extra
        if with_histogram:
            d["histogram"] = self.histogram.to_json() if self.histogram else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ThreadResult":
        h = d.get("histogram")
        return cls(
            thread=d["thread"], cpu=d.get("cpu"), cycles=d["cycles"],
            min_us=d["min_us"], avg_us=d["avg_us"], max_us=d["max_us"],
            overflows=d.get("overflows"),
            histogram=Histogram.from_json(h) if h else None,
            extra=d.get("extra", {}),
        )


@dataclass(frozen=True)
class ToolFailure:
    """The tool's own verdict that the kernel failed (pi_stress: a deadlocked
    inversion group; rt-migrate-test -c: priority order broken). A kernel
    result, judged FAIL, never INFRA; a tool that crashed is not one."""

    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class ToolOutput:
    """One parsed output file of one tool run."""

    path: str
    tool: str
    threads: list[ThreadResult] = field(default_factory=list)
    return_code: Optional[int] = None
    #: kernel facts the tool recorded itself (rt-tests JSON ``sysinfo``)
    sysinfo: dict[str, Any] = field(default_factory=dict)
    #: whole-run numbers: hackbench ``time_s``, pi_stress ``inversions``…
    #: (``failed`` 0/1 too, for the store, where the tool checks the kernel)
    metrics: dict[str, Any] = field(default_factory=dict)
    #: the tool said the kernel failed (see ToolFailure), None otherwise
    failure: Optional[ToolFailure] = None

    def worst(self) -> Optional[ThreadResult]:
        return max(self.threads, key=lambda t: t.max_us, default=None)

    def combined(self) -> Optional[ThreadResult]:
        """All threads as one (what a per-board, per-variant table shows and
        the gate judges): min of mins, max of maxes, cycle-weighted average,
        histograms added bucket by bucket when they share a layout."""
        ts = self.threads
        if not ts:
            return None
        if len(ts) == 1:
            return ts[0]
        cycles = sum(t.cycles for t in ts)
        avg = sum(t.avg_us * t.cycles for t in ts) / cycles if cycles else 0.0
        hists = [t.histogram for t in ts]
        hist = None
        if all(h is not None for h in hists) and len({(h.bucket_us, h.size) for h in hists}) == 1:
            counts: dict[int, int] = {}
            for h in hists:
                for k, v in h.counts.items():
                    counts[k] = counts.get(k, 0) + v
            hist = Histogram(counts=counts, bucket_us=hists[0].bucket_us, size=hists[0].size,
                             overflows=sum(h.overflows for h in hists))
        overflows = None if any(t.overflows is None for t in ts) else sum(t.overflows for t in ts)
        return ThreadResult(thread=-1, cpu=None, cycles=cycles, min_us=min(t.min_us for t in ts),
                            avg_us=avg, max_us=max(t.max_us for t in ts), overflows=overflows,
                            histogram=hist)

    def to_json(self, with_histogram: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "tool": self.tool,
            "threads": [t.to_json(with_histogram) for t in self.threads],
        }
        if self.return_code is not None:
            d["return_code"] = self.return_code
        if self.metrics:
            d["metrics"] = self.metrics
        if self.sysinfo:
            d["sysinfo"] = self.sysinfo
        if self.failure is not None:
            d["failure"] = self.failure.message
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ToolOutput":
        metrics = dict(d.get("metrics", {}))
        failure = d.get("failure")
        if failure is None and metrics.get("failed"):  # run.json of rtlab before ToolFailure
            failure = str(metrics.pop("failure", "") or f"{d['tool']} reported a failure")
        return cls(
            path=d["path"], tool=d["tool"],
            threads=[ThreadResult.from_json(t) for t in d["threads"]],
            return_code=d.get("return_code"), sysinfo=d.get("sysinfo", {}),
            metrics=metrics, failure=ToolFailure(failure) if failure else None,
        )


class Verdict(str, enum.Enum):
    """What the gate says about one measurement or one job.

    INFRA is never a latency statement: the board did not boot, the console
    was lost, a load died or a tool crashed, so nothing was judged.
    SHOWN is measured but judged against nothing, on purpose: a suite the
    budget file lists under ``unbudgeted``, or a whole-run number that is not
    a latency (hackbench's seconds). It is never a pass: a job or run that
    judged nothing else is SHOWN, and its exit code is not 0.
    """

    PASS = "pass"
    FAIL = "fail"
    INFRA = "infra"
    SHOWN = "shown"


class InfraCause(str, enum.Enum):
    """Why a measurement is INFRA, where a fresh attempt on a fresh boot can
    cure it (the runner measures those again, rtlab.run.runner); any other
    INFRA has no cause set and stays as judged."""

    #: the hypervisor's steal explains every breach (rtlab.core.hostnoise)
    HOST_STEAL = "host-steal"
    #: every CPU of the host stopped at once, steal or not (rtlab.core.stallwitness)
    HOST_STALL = "host-stall"
    #: the tool lost a start-up race of its own (Suite.start_race_exits)
    TOOL_RACE = "tool-race"
    #: the tool ran, exited 0 and recorded no sample at all in some thread
    NO_SAMPLES = "no-samples"


def combine_verdicts(verdicts) -> Verdict:
    """One verdict for many. A broken budget is definitive (a retry cannot
    fix it), so FAIL wins; otherwise any INFRA (or a measurement never
    judged) makes the whole incomplete; PASS when everything judged passed
    and something was judged (SHOWN parts beside it are shown, not passed);
    SHOWN when nothing was judged at all. Each part keeps its own verdict:
    nothing is relabelled."""
    vs = set(verdicts)
    if Verdict.FAIL in vs:
        return Verdict.FAIL
    if vs - {Verdict.PASS, Verdict.SHOWN}:
        return Verdict.INFRA
    return Verdict.PASS if Verdict.PASS in vs else Verdict.SHOWN


@dataclass(frozen=True)
class MeasurementKey:
    """Where a measurement comes from; the tags of the store."""

    board: str
    variant: str
    suite: str
    load: str = "idle"

    def label(self) -> str:
        return f"{self.board}/{self.variant}/{self.suite}/{self.load}"


@dataclass(frozen=True)
class DelayedSample:
    """One late sample whose delay a stall of the host covers, at least in
    part (rtlab.core.hostattr): the thread, its latency, the part of that
    latency the host's stalls on its CPU cover (µs) and which stalls:
    ``machine`` (every CPU stopped at once) or ``steal`` (its own CPU stolen)."""

    thread: int
    latency_us: float
    host_us: float
    kind: str = "machine"

    def explained_below(self, threshold_us: float) -> bool:
        """Whether, without the host's part, this sample stays under *threshold_us*."""
        return self.latency_us >= threshold_us and self.latency_us - self.host_us < threshold_us


@dataclass
class HostDelays:
    """The samples' own times held against the host's stalls
    (rtlab.core.hostattr): every recorded sample over ``from_us`` is
    placed by its wake-up time on its CPU; ``delayed`` lists those a stall
    of the host covers. A sample over ``from_us`` that was not recorded
    (``recorded < total``: the tool's list was full) is never the host's.
    ``beyond_us``: the latencies of the recorded samples at or over
    ``range_us`` (the histogram's range), which the histogram only counts."""

    from_us: float
    recorded: int
    total: int
    delayed: list[DelayedSample] = field(default_factory=list)
    range_us: Optional[float] = None
    beyond_us: list[float] = field(default_factory=list)
    #: recorded samples beyond the range not kept in beyond_us (only the largest are)
    beyond_dropped: int = 0
    #: how the samples' times were put on the host's clock
    clock: str = ""

    def excused(self, threshold_us: float) -> tuple[int, set[str]]:
        """How many samples at or over *threshold_us* the host's stalls bring
        under it, and by which kinds of stall."""
        hit = [d for d in self.delayed if d.explained_below(threshold_us)]
        return len(hit), {d.kind for d in hit}

    def at_or_above(self, threshold_us: float) -> Optional[int]:
        """Samples at or over *threshold_us* beyond the histogram's range,
        counted from the recorded ones: None unless every sample over
        ``from_us`` was recorded and the threshold lies beyond the range."""
        if self.recorded < self.total or threshold_us <= self.from_us or self.range_us is None \
                or threshold_us < self.range_us:
            return None
        if self.beyond_dropped and (not self.beyond_us or threshold_us <= self.beyond_us[0]):
            return None  # some of those under the threshold's reach were not kept
        return sum(1 for x in self.beyond_us if x >= threshold_us)

    def to_json(self) -> dict[str, Any]:
        return {"from_us": self.from_us, "recorded": self.recorded, "total": self.total, "clock": self.clock,
                "range_us": self.range_us, "beyond_us": self.beyond_us,
                **({"beyond_dropped": self.beyond_dropped} if self.beyond_dropped else {}),
                "delayed": [[d.thread, d.latency_us, d.host_us, d.kind] for d in self.delayed]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "HostDelays":
        return cls(from_us=float(d["from_us"]), recorded=int(d["recorded"]), total=int(d["total"]),
                   clock=str(d.get("clock") or ""),
                   range_us=float(d["range_us"]) if d.get("range_us") is not None else None,
                   beyond_us=sorted(float(x) for x in d.get("beyond_us") or []),
                   beyond_dropped=int(d.get("beyond_dropped") or 0),
                   delayed=[DelayedSample(int(t), float(lat), float(h), str(k))
                            for t, lat, h, k in d.get("delayed") or []])


@dataclass
class Measurement:
    """A parsed tool output in its context, plus the gate's judgement."""

    key: MeasurementKey
    output: ToolOutput
    raw: list[str] = field(default_factory=list)  # raw files, relative to the job dir
    verdict: Optional[Verdict] = None
    reasons: list[str] = field(default_factory=list)
    #: the budget applied, None if none
    budget: Optional[Budget] = None
    #: share of samples at or above budget max_us (worst thread), None if unknowable
    share_over_budget: Optional[float] = None
    #: the breach evidence (rtlab.judge.evidence): {"dir": raw dir of the trace and
    #: analysis, relative to the job dir, "summary": one line or None}
    evidence: Optional[dict[str, Any]] = None
    #: the parameters the suite ran with (duration_s, interval_us,
    #: histogram_us, priority, cpus ...): a regression verdict compares only
    #: runs made alike (rtlab.verdict.compare)
    params: dict[str, Any] = field(default_factory=dict)
    #: the host's steal and stalls while the tool ran (rtlab.core.hostnoise,
    #: host-noise.json), None where nobody watched (LAVA, older runs)
    host_noise: Optional[dict[str, Any]] = None
    #: with an INFRA verdict: the cause a fresh attempt can cure, None otherwise
    infra_cause: Optional[InfraCause] = None
    #: the late samples a stall of the host covers, placed by their own
    #: times (rtlab.core.hostattr); None where the tool gives no sample times
    host_delays: Optional[HostDelays] = None

    def __post_init__(self) -> None:
        if isinstance(self.budget, dict):  # as run.json holds it
            self.budget = Budget.from_json(self.budget)
        if isinstance(self.infra_cause, str) and not isinstance(self.infra_cause, InfraCause):
            self.infra_cause = InfraCause(self.infra_cause)

    def set_infra(self, reasons: list[str], cause: Optional[InfraCause] = None) -> None:
        """INFRA for *reasons*; *cause* only where measuring again can cure it."""
        self.verdict, self.reasons, self.infra_cause = Verdict.INFRA, list(reasons), cause

    def to_json(self) -> dict[str, Any]:
        return {
            "key": asdict(self.key),
            "output": self.output.to_json(with_histogram=True),
            "raw": self.raw,
            "verdict": self.verdict.value if self.verdict else None,
            "reasons": self.reasons,
            "budget": self.budget.to_json() if self.budget is not None else None,
            "share_over_budget": self.share_over_budget,
            "evidence": self.evidence,
            **({"params": self.params} if self.params else {}),
            "host_noise": self.host_noise,
            **({"infra_cause": self.infra_cause.value} if self.infra_cause else {}),
            **({"host_delays": self.host_delays.to_json()} if self.host_delays is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Measurement":
        return cls(
            key=MeasurementKey(**d["key"]),
            output=ToolOutput.from_json(d["output"]),
            raw=d.get("raw", []),
            verdict=Verdict(d["verdict"]) if d.get("verdict") else None,
            reasons=d.get("reasons", []),
            budget=d.get("budget") or None,
            share_over_budget=d.get("share_over_budget"),
            evidence=d.get("evidence"),
            params=dict(d.get("params") or {}),
            host_noise=d.get("host_noise"),
            infra_cause=InfraCause(d["infra_cause"]) if d.get("infra_cause") else None,
            host_delays=HostDelays.from_json(d["host_delays"]) if d.get("host_delays") else None,
        )


@dataclass
class JobResult:
    """One board × variant job: boot, then every suite under every load."""

    board: str
    variant: str
    arch: str = ""
    budget_class: str = ""
    #: facts the boot test read off the running kernel (uname, cmdline, …)
    kernel: dict[str, Any] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)
    #: set when the job could not produce trustworthy measurements
    infra_error: Optional[str] = None
    duration_s: float = 0.0
    #: set when the commit under test could not be built into this variant
    #: (an option dropped by olddefconfig, a compile error): a FAIL
    build_error: Optional[str] = None
    #: which repeat of the job this is (1..N, each a fresh boot or a fresh
    #: tool run); 0: the campaign does not repeat
    repeat: int = 0
    #: suites this board could not run at all ({"suite", "load", "reason"}:
    #: rtla timerlat on a kernel without the tracer): neither pass nor fail
    not_available: list[dict[str, str]] = field(default_factory=list)
    #: seconds the job waited for its rack place (rtlab.lab.places); None: no place
    place_wait_s: Optional[float] = None
    #: earlier attempts the runner measured again (rtlab.run.runner): a breach
    #: the host's steal explains (rtlab.core.hostnoise), or a tool that lost a
    #: start-up race of its own (Suite.start_race_exits); each {"dir" (raw
    #: files, relative to the run), "reasons", "measured_again" (suite ids),
    #: "causes" (InfraCause values)}
    retries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def only_not_available(self) -> bool:
        """Nothing ran because the board can run none of the job's suites:
        like a board x variant pair that is not available, no verdict."""
        return bool(self.not_available) and not (self.measurements or self.infra_error or self.build_error)

    @property
    def verdict(self) -> Verdict:
        if self.build_error:
            return Verdict.FAIL
        return combine_verdicts(
            [m.verdict for m in self.measurements]
            + ([Verdict.INFRA] if self.infra_error or not self.measurements else []))

    def to_json(self) -> dict[str, Any]:
        return {
            "board": self.board, "variant": self.variant, "arch": self.arch,
            "budget_class": self.budget_class, "kernel": self.kernel,
            "measurements": [m.to_json() for m in self.measurements],
            "infra_error": self.infra_error, "duration_s": self.duration_s,
            "build_error": self.build_error, "not_available": self.not_available,
            "verdict": self.verdict.value, "repeat": self.repeat,
            **({"place_wait_s": self.place_wait_s} if self.place_wait_s is not None else {}),
            "retries": self.retries,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobResult":
        return cls(
            board=d["board"], variant=d["variant"], arch=d.get("arch", ""),
            budget_class=d.get("budget_class", ""), kernel=d.get("kernel", {}),
            measurements=[Measurement.from_json(m) for m in d.get("measurements", [])],
            infra_error=d.get("infra_error"), duration_s=d.get("duration_s", 0.0),
            build_error=d.get("build_error"), not_available=d.get("not_available", []),
            repeat=int(d.get("repeat") or 0),
            place_wait_s=d.get("place_wait_s"),
            # host_noise_retries: its name in run.json before tool races were retried too
            retries=d.get("retries") or d.get("host_noise_retries") or [],
        )


@dataclass
class RunResult:
    """A whole campaign run: what the store, report and gate consume."""

    run_id: str
    started: str  # ISO 8601 UTC; the one timestamp of every stored point
    campaign: str
    commit: dict[str, Any] = field(default_factory=dict)  # sha, subject, pipeline…
    jobs: list[JobResult] = field(default_factory=list)
    #: board × variant pairs planned but not run because the board's kernels
    #: cannot be that variant ({"board", "variant", "reason"}): no verdict
    not_available: list[dict[str, str]] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        # jobs that could run none of their suites say nothing, like the
        # pairs in not_available; with nothing else measured, nothing passed
        return combine_verdicts([j.verdict for j in self.jobs if not j.only_not_available]
                                or [Verdict.INFRA])

    def measurements(self):
        for j in self.jobs:
            yield from j.measurements

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "started": self.started,
            "campaign": self.campaign, "commit": self.commit,
            "jobs": [j.to_json() for j in self.jobs],
            "not_available": self.not_available,
            "verdict": self.verdict.value,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RunResult":
        return cls(
            run_id=d["run_id"], started=d["started"], campaign=d.get("campaign", ""),
            commit=d.get("commit", {}),
            jobs=[JobResult.from_json(j) for j in d.get("jobs", [])],
            not_available=d.get("not_available", []),
        )


#: exit codes of `rtlab run` and `rtlab gate`: a run that judged nothing
#: (every measurement shown only) has no verdict to pass, like INFRA
EXIT_CODE = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.INFRA: 2, Verdict.SHOWN: 2}
