"""Suites: what runs on a board to measure, and how its raw output is read.

A suite is the small interface between a campaign entry and the board: it
builds the tool's command line from the campaign's parameters and the CPUs to
measure, names the files the tool writes, and turns the raw files into the
result model. Running it over a console is the same for every suite
(:mod:`rtlab.suites.board`), so every suite gets raw outputs on disk before
anything is parsed or judged.

A suite describes itself (class attributes, below) and registers itself by
being defined: subclassing :class:`Suite` with a ``name`` puts an instance in
:data:`SUITES`. What the rest of rtlab needs to know about a tool is asked of
its suite: the result kind (the gate), kernel failures vs crashes (the
results path), LAVA test cases (lava/render), the table cell (report), the
dashboards' IPC group (store/schema). Adding a suite is its class, its
parser if the output format is new, a campaign entry and a test.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, ContextManager, Optional

from ..targets.boards import Board
from ..core.config import format_cpulist
from ..loads import LOADS
from ..loads.health import load_metrics
from ..core.model import ToolOutput
from ..core.params import LOAD_OPTION_SPECS, Args, Bool, Cpus, Int, Num, ParamError, Spec, check_mapping  # noqa: F401
from ..errors import InputError
from ..parsers import FormatParser, parse_file, read_text, rt_tests
from ..parsers.rttext import summary_maxima
from ..registry import SUITES as _SUITES
from ..core.fsutil import read_json
from ..core.rundir import MeasurementDir

#: every suite, by name (rtlab.registry: filled by Suite.__init_subclass__,
#: every module of this package imported on first read)
SUITES = _SUITES

#: Suite.result_kind: latency samples (ThreadResults, judged against budgets)
LATENCY = "latency"
#: Suite.result_kind: a whole-run number in ToolOutput.metrics (shown, not budgeted)
METRICS = "metrics"


#: written to a suite's raw dir when the board cannot run it: {"reason": ...}


def not_available(host_dir: Path) -> str | None:
    """The reason recorded on the board that the suite could not run, or None."""
    try:
        return str(read_json(MeasurementDir(host_dir).not_available)["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class SuiteRun:
    """One campaign entry on one board: what the board-side code needs."""

    id: str              # unique within a job: "<name>@<load>"
    name: str            # the campaign's name for it (measurement key "suite")
    suite: str           # registry key: which Suite class
    load: str
    params: dict[str, Any] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # CPUs to measure on, named explicitly
    #: evidence armed: where to stop and trace ({"max_us": ..} cyclictest,
    #: {"thread_us", "irq_us"} timerlat; rtlab.judge.evidence), None when not
    evidence: Optional[dict[str, float]] = None
    #: record every sample over this many µs with its time (cyclictest
    #: --spike), so the gate can hold the late ones against the host's stalls
    #: (rtlab.core.hostattr); None: not recorded
    spike_us: Optional[int] = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "suite": self.suite, "load": self.load,
             "params": self.params, "cpus": list(self.cpus)}
        if self.evidence:
            d["evidence"] = self.evidence
        if self.spike_us is not None:
            d["spike_us"] = self.spike_us
        return d

    @classmethod
    def from_json(cls, d: dict) -> "SuiteRun":
        return cls(id=d["id"], name=d["name"], suite=d["suite"], load=d["load"],
                   params=d.get("params", {}), cpus=tuple(d.get("cpus", ())),
                   evidence=d.get("evidence") or None,
                   spike_us=int(d["spike_us"]) if d.get("spike_us") is not None else None)


#: parameters every suite takes, besides its own (see rtlab.loads)
COMMON_DEFAULTS: dict[str, Any] = {
    # CPUs the load runs on: "auto" (housekeeping CPUs, or all CPUs without
    # isolation), "all", or a list / cpulist string
    "load_cpus": "auto",
    # per load options: {<load>: {<option>: value}} (rtlab/loads/catalog.py)
    "load_opts": {},
}
COMMON_SPEC: dict[str, Spec] = {"load_cpus": Cpus(), "cpus": Cpus()}

#: ranges shared by the suites' specs
PRIORITY = Int(1, 99)
DURATION_S = Int(1, 7 * 86400)
INTERVAL_US = Int(1, 10_000_000)


class Suite:
    """Base of every suite; a subclass with a ``name`` registers itself in SUITES."""

    name: ClassVar[str]
    tool: ClassVar[str]
    #: parameters a campaign may set, with defaults
    defaults: ClassVar[dict[str, Any]] = {}
    #: type and range of every parameter in defaults (rtlab.core.params), checked at load
    spec: ClassVar[dict[str, Spec]] = {}
    #: file the tool writes its JSON to (relative to the work dir), if any
    json_file: ClassVar[Optional[str]] = None
    #: LATENCY or METRICS (then ``metric`` names the whole-run number)
    result_kind: ClassVar[str] = LATENCY
    metric: ClassVar[Optional[str]] = None
    #: signal/IPC wake-up latency between threads (the dashboards' IPC panel)
    ipc: ClassVar[bool] = False
    #: the format parser of the tool's output file (rtlab.parsers: rt_tests,
    #: rtbench_json ...), wrapped in staticmethod(); parse_file(path, tool=...)
    #: finds it here. None: the suite reads its raw files itself (parse_outputs)
    parser: Optional[FormatParser] = None
    #: the layout of the tool's rt-tests style JSON (rtlab.parsers.rtjson.LAYOUTS:
    #: "histogram", "plain", "ipc", "ipc_timeouts", "priority_order",
    #: "frequency", "benchmarks", "inversions"); None: the tool writes no JSON
    json_layout: ClassVar[Optional[str]] = None
    #: the layout of its text output (rtlab.parsers.rttext.LAYOUTS: "summary",
    #: "summary_histogram", "ipc", "time", "inversions", "priority_order",
    #: "frequency"); None: no text summary (JSON only)
    text_layout: ClassVar[Optional[str]] = None
    #: telling a file of this tool by content, without --tool: a JSON file
    #: without "cmdline:" by its shape (doc, first thread or None) -> bool;
    #: a text by a line only it prints (a regex on the stripped line); a
    #: ``T:`` summary line by its field names (names -> bool)
    #: (staticmethods: typed Any, as mypy reads a callable class attribute as a method)
    json_shape: ClassVar[Any] = None     # (doc: dict, first_thread: dict | None) -> bool
    text_marker: ClassVar[Optional[str]] = None
    t_line_shape: ClassVar[Any] = None   # (names: set[str]) -> bool
    #: its results are sender/receiver pairs (the IPC tools: one result per
    #: receiver; reports name them "#1 -> #0")
    pairs: ClassVar[bool] = False
    #: its "threads" are different operations (rtbench's benchmarks): the
    #: vendor report shows no all-threads row and no shares
    per_operation: ClassVar[bool] = False
    #: its command line's -i is its wake-up interval (vendor report); False
    #: where -i means something else or there is none
    interval_option: ClassVar[bool] = True
    #: the suite that measures this one in checkpointed segments, which a
    #: kill keeps: a campaign entry longer than one of its segments is warned
    #: about at load (rtlab.plan.campaign)
    segmented_by: ClassVar[Optional[str]] = None
    #: LAVA: the board reports per-thread test cases from the tool's rt-tests
    #: JSON (cyclictest layout, rtlab.lava.onboard) besides the exit case
    lava_thread_cases: ClassVar[bool] = False
    #: the measurements one run gives, as suffixes of the campaign's suite
    #: name (parse_outputs' keys): "" for one; rtla timerlat: "irq", "thread".
    #: Each needs a budget or an ``unbudgeted:`` entry (budgets/*.yaml)
    parts: ClassVar[tuple[str, ...]] = ("",)
    #: the first line of the tool's raw output, when no format parser reads
    #: it (``parser`` None) but its content says which tool wrote it (rtla's
    #: histograms): ``rtlab parse`` finds the suite of a file by it
    raw_header: ClassVar[Optional[str]] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        SUITES.subclass_hook(cls)  # bases shared by several tools (_Ipc) have no name: not registered

    @classmethod
    def for_tool(cls, tool: str) -> Optional["Suite"]:
        """The suite whose tool wrote a ToolOutput (None: parsed outside a suite)."""
        return next((s for s in SUITES.values() if s.tool == tool), None)

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults completed by *given*, every value typed and ranged;
        ParamError names the key ("cpus" is the campaign's: which CPUs to
        measure, taken off by rtlab.plan.campaign)."""
        given = dict(given)
        opts = given.pop("load_opts", None)
        checked = check_mapping(given, {**self.spec, **COMMON_SPEC})
        if opts is not None:
            checked["load_opts"] = _check_load_opts(opts)
        return {**COMMON_DEFAULTS, **self.defaults, **checked}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        """The tool's argument vector (each item one argument, never split
        or interpreted); rtlab.suites.board.shell_line quotes it, in one place,
        for the board's shell. *board* is the board it runs on (its arch,
        kind, CPUs, isolated CPU, ``emulated``, options), the same typed
        :class:`rtlab.targets.boards.Board` for the labgrid and the LAVA path; None
        where no board is known (a command shown or checked on its own)."""
        raise NotImplementedError

    def outputs(self, run: SuiteRun) -> list[str]:
        """Files the tool writes in its work dir, fetched besides stdout/stderr."""
        return [self.json_file] if self.json_file else []

    def duration_s(self, run: SuiteRun) -> float:
        """How long the tool runs, for console timeouts and progress."""
        return float(run.params.get("duration_s", 60))

    def expected_samples(self, run: SuiteRun) -> Optional[int]:
        """Samples each measuring thread takes in a full run (duration ÷
        interval), None where the tool's count does not follow from its
        parameters. A run well short of it was cut off: INFRA, not a verdict."""
        return None

    #: exit codes with which the tool lost a start-up race of its own: neither
    #: a latency nor the lab, so INFRA and measured again (rtlab.run.runner),
    #: each with the words that say so
    start_race_exits: ClassVar[dict[int, str]] = {}

    def accepts_exit(self, rc: int, host_dir: Path) -> bool:
        """Whether a run that exited with *rc* still produced a result (a
        kernel failure the gate judges as FAIL) rather than an infra error."""
        return rc == 0

    #: evidence armed: the board's tracefs records scheduler/IRQ events while
    #: the tool runs, read when it broke (cyclictest -b; rtla saves its own)
    traces_kernel: ClassVar[bool] = False
    #: it records its late samples with their times when asked (SuiteRun.spike_us)
    records_spikes: ClassVar[bool] = False

    def spike_outputs(self, host_dir: Path) -> list[Path]:
        """The raw files holding the recorded late samples of one run."""
        return []

    def spike_threshold(self, name: str, load: str, lookup) -> Optional[int]:
        """The spike trigger for one run: one µs under the lowest threshold
        its budget sets (a budget breaks at the limit), so every sample that
        can break one is recorded; None where it records none or has no budget."""
        return None

    def evidence_outputs(self, run: SuiteRun) -> list[str]:
        """Files the tool writes when it stopped at the breach (rtla's saved trace)."""
        return []

    def breached(self, host_dir: Path, run: SuiteRun) -> bool:
        """Whether the tool, armed with run.evidence, stopped at a sample over it."""
        return False

    def board_check(self) -> str | None:
        """The same check as :meth:`unavailable` as one shell line for boards
        without a host-side console (LAVA): prints the reason and fails
        when the board cannot run the suite; None: nothing to check."""
        return None

    def unavailable(self, sh) -> str | None:
        """Why the board (a BoardShell) cannot run this suite at all, or None.
        Checked on the board before the load starts; a reason makes the suite
        "not available" there: not run, neither passed nor failed."""
        return None

    def host_unavailable(self, target: Any, run: SuiteRun) -> str | None:
        """Why the lab around the board (its labgrid *target*: an external
        probe, say) cannot run this suite, or None; checked on the host
        before :meth:`unavailable`. A reason makes it "not available"."""
        return None

    def host_side(self, target: Any, run: SuiteRun, host_dir: Path) -> ContextManager[None]:
        """What the host does while the tool runs on the board: a context
        manager around the run (irq-response arms its probe before and
        collects the probe's result after, into *host_dir*)."""
        return contextlib.nullcontext()

    def run_on_board(self, sh, run: SuiteRun, host_dir: Path, argv: list[str], *,
                     board: Optional[Board] = None,
                     on_checkpoint: Optional[Callable[[dict], None]] = None) -> int:
        """Run the tool on the board (*sh*, its console shell) and copy its
        outputs into *host_dir*; the tool's exit code. One run of *argv*
        (:meth:`command`) by default; a soak overrides it with checkpointed
        segments and reports each checkpoint to *on_checkpoint*."""
        from .board import run_tool

        # a hung tool on a board that answers: twice its duration and a minute;
        # a lost board: its duration and the console silence limits (run_tool)
        expected_s = self.duration_s(run)
        return run_tool(sh, run.id, argv, host_dir, self.outputs(run) + self.evidence_outputs(run),
                        timeout=expected_s * 2 + 60, expected_s=expected_s)

    def parse_outputs(self, job_dir: Path, run: SuiteRun) -> dict[str, ToolOutput]:
        """Every measurement of one run, by suffix of the suite's name: ""
        for one measurement; a tool measuring two things (rtla timerlat: IRQ
        and thread latency) returns one output per thing ("irq", "thread")."""
        return {"": self.parse(job_dir, run)}

    def parse_raw_file(self, path: Path) -> dict[str, ToolOutput]:
        """One raw output file alone, outside a run (``rtlab parse``): its
        measurements by part, as :meth:`parse_outputs` gives them."""
        return {"": parse_file(path, tool=self.tool)}

    @classmethod
    def for_raw_file(cls, text: str) -> Optional["Suite"]:
        """The suite whose ``raw_header`` begins *text* (None: none does)."""
        first = text.lstrip().split("\n", 1)[0].strip()
        return next((s for s in SUITES.values() if s.raw_header and first == s.raw_header), None)

    def evidence_thresholds(self, name: str, load: str, lookup) -> dict[str, float]:
        """What to break at for one run of this suite (evidence at the breach,
        rtlab.judge.evidence): {} when the tool cannot stop at a threshold.
        *lookup(measurement name, load)* is the budget lookup."""
        return {}

    #: the parameters that set the range of the tool's histogram, where it
    #: keeps one a budget's percentile can lie beyond: a campaign that sets
    #: one sets the range (checked at load to hold the budgets); otherwise
    #: it is derived from the budgets (rtlab.plan.campaign)
    range_params: ClassVar[tuple[str, ...]] = ()

    def histogram_range_us(self, params: dict[str, Any]) -> Optional[float]:
        """The histogram's range (us) these parameters give; None: no range."""
        return None

    def with_histogram_range(self, params: dict[str, Any], range_us: float) -> dict[str, Any]:
        """*params* widened to hold *range_us* (never narrowed); ParamError
        where the tool cannot keep that much."""
        return params

    def holds_range(self, params: dict[str, Any], range_us: float) -> bool:
        """Whether the tool can keep a histogram of *range_us* (from
        *params*): :meth:`with_histogram_range` without a ParamError."""
        try:
            self.with_histogram_range(params, range_us)
        except ParamError:
            return False
        return True

    def measurement_names(self, name: str) -> list[str]:
        """The budget keys of a campaign entry named *name* (see ``parts``)."""
        return [f"{name}-{p}" if p else name for p in self.parts]

    def parse(self, job_dir: Path, run: SuiteRun) -> ToolOutput:
        """The tool's output in the model, plus the loads' health numbers
        (``load.<load>.<what>`` metrics from ``load-<load>.json``)."""
        host_dir = job_dir / run.id
        out = self.parse_output(host_dir, run)
        out.metrics.update(_load_metrics(host_dir))
        return out

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        assert self.json_file, f"{type(self).__name__}: no json_file, so it parses its own output"
        return parse_file(host_dir / self.json_file, tool=self.tool)

    def result_cell(self, out: ToolOutput) -> Optional[str]:
        """The table cell of a whole-run result (None: latency only)."""
        if out.failure is not None:
            return "FAILED"
        if self.metric and self.metric in out.metrics:
            return f"{_si(out.metrics[self.metric])} {self.metric_unit}"
        return None

    #: unit of ``metric`` in the table
    metric_unit: ClassVar[str] = ""


def _si(x: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _check_load_opts(opts: Any) -> dict:
    known = dict(LOADS.items())
    if not isinstance(opts, dict):
        raise ParamError("load_opts: must be a mapping {load: {option: value}}")
    out = {}
    for load, o in opts.items():
        if load not in known:
            raise ParamError(f"load_opts.{load}: unknown load (loads: {', '.join(sorted(known))})")
        if o is None:
            o = {}
        if not isinstance(o, dict):
            raise ParamError(f"load_opts.{load}: must be a mapping {{option: value}}")
        bad = set(o) - set(known[load].options)
        if bad:
            raise ParamError(", ".join(f"load_opts.{load}.{b}" for b in sorted(bad))
                             + f": unknown option (options of {load}: "
                             + f"{', '.join(sorted(known[load].options)) or 'none'})")
        out[load] = check_mapping(o, LOAD_OPTION_SPECS, ("load_opts", str(load)))
    return out


def _load_metrics(host_dir: Path) -> dict[str, Any]:
    names = set(LOADS)
    summaries = []
    for p in sorted(host_dir.glob("load-*.json")):
        if p.stem[len("load-"):] in names:
            try:
                summaries.append(read_json(p))
            except ValueError:
                pass
    return load_metrics(summaries)


#: the most buckets a histogram parameter takes (cyclictest clamps -h to it)
MAX_BUCKETS = 1_000_000


def widened(name: str, buckets: int, range_us: float, bucket_us: float) -> int:
    """*buckets* of *bucket_us* raised to hold *range_us*: ParamError where
    the tool cannot keep that many."""
    need = max(int(buckets), math.ceil(range_us / bucket_us - 1e-9))
    if need > MAX_BUCKETS:
        raise ParamError(f"{name}: {need} buckets of {bucket_us:g} us would hold {range_us:g} us, more than the "
                         f"tool's {MAX_BUCKETS}")
    return need


class Cyclictest(Suite):
    """cyclictest: timer wake-up latency, one thread per measured CPU."""

    name = "cyclictest"
    tool = "cyclictest"
    json_file = "cyclictest.json"
    parser = staticmethod(rt_tests)
    json_layout = "histogram"
    text_layout = "summary_histogram"
    json_shape = staticmethod(lambda doc, t: t is not None and "node" in t)
    text_marker = r"^# Histogram$"
    segmented_by = "cyclictest-soak"
    # T: lines with both P: and I: (or neither): signaltest and cyclicdeadline lack one
    t_line_shape = staticmethod(lambda names: ("P" in names) == ("I" in names))
    lava_thread_cases = True
    traces_kernel = True
    records_spikes = True
    defaults = {
        "interval_us": 1000,
        "duration_s": 10,
        "priority": 90,
        # histogram buckets (1 us each); samples above are counted as overflows
        "histogram_us": 1000,
        # more arguments, a list, each passed as one argument
        "extra_args": [],
    }
    spec = {"interval_us": INTERVAL_US, "duration_s": DURATION_S, "priority": PRIORITY,
            "histogram_us": Int(1, 1_000_000), "extra_args": Args()}

    range_params = ("histogram_us",)

    def histogram_range_us(self, params: dict[str, Any]) -> Optional[float]:
        return float(params["histogram_us"])

    def with_histogram_range(self, params: dict[str, Any], range_us: float) -> dict[str, Any]:
        return {**params, "histogram_us": widened("histogram_us", params["histogram_us"], range_us, 1.0)}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        cpus = format_cpulist(run.cpus)
        # -a names every measured CPU explicitly: rt-tests skips isolated CPUs
        # otherwise. -h forces -d 0, so threads never drift apart in interval.
        return ["cyclictest", "-q", "-m", "-p", str(p["priority"]), "-i", str(p["interval_us"]),
                "-D", str(p["duration_s"]), "-h", str(p["histogram_us"]), "-a", cpus,
                "-t", str(len(run.cpus)), f"--json={self.json_file}", *self._breaktrace(run),
                *self._spikes(run), *p["extra_args"]]

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        """The JSON, with each thread's maximum raised to the closing
        summary's. rt-tests 2.4 writes its JSON as -D runs out, before the
        threads are joined: a thread a FIFO task still holds off its CPU
        wakes after that, and its one late sample (the breach, the sample -b
        broke at) is only in the summary printed once every thread ended."""
        out = super().parse_output(host_dir, run)
        stdout = MeasurementDir(host_dir).stdout
        if not stdout.is_file():
            return out
        threads = sorted(out.threads, key=lambda t: t.thread)
        # the units the JSON states (resolution_in_ns, read into its histograms'
        # buckets): the summary's own text does not say
        nsecs = any(t.histogram is not None and t.histogram.bucket_us < 1 for t in threads)
        maxima = summary_maxima(read_text(stdout), stdout, nsecs)
        if maxima is None:
            return out
        if len(maxima) != len(threads):
            raise InputError(stdout, f"'# Max Latencies:' lists {len(maxima)} threads, "
                                     f"{self.json_file} {len(threads)}")
        for t, m in zip(threads, maxima):
            t.max_us = max(t.max_us, m)
        return out

    def _spikes(self, run: SuiteRun) -> list[str]:
        # every sample over the trigger with its wake-up time, printed at the
        # end; the list is bounded (--spike-nodes), so is the board's memory
        if run.spike_us is None:
            return []
        from ..core.hostattr import spike_nodes
        samples = int(float(run.params["duration_s"]) * 1e6 / float(run.params["interval_us"])) * len(run.cpus)
        return [f"--spike={max(1, int(run.spike_us))}", f"--spike-nodes={spike_nodes(samples)}"]

    def spike_outputs(self, host_dir: Path) -> list[Path]:
        return [MeasurementDir(host_dir).stdout]

    def spike_threshold(self, name: str, load: str, lookup) -> Optional[int]:
        b = lookup(name, load)
        limits = [v for v in ([b.max_us] + list(b.percentiles_us.values())) if v is not None] if b else []
        return max(1, int(math.ceil(min(limits))) - 1) if limits else None

    @staticmethod
    def _breaktrace(run: SuiteRun) -> list[str]:
        # -b stops at a sample > USEC; a budget is broken AT max_us, so one
        # microsecond below. --tracemark marks the trace where it broke.
        if run.evidence and run.evidence.get("max_us"):
            return ["-b", str(max(1, int(run.evidence["max_us"]) - 1)), "--tracemark"]
        return []

    def breached(self, host_dir: Path, run: SuiteRun) -> bool:
        try:
            return "# Break thread:" in MeasurementDir(host_dir).stdout.read_text(errors="replace")
        except OSError:
            return False

    def evidence_thresholds(self, name: str, load: str, lookup) -> dict[str, float]:
        # -b: stop at the first sample over the budget's maximum
        b = lookup(name, load)
        return {"max_us": float(b.max_us)} if b is not None and b.max_us is not None else {}

    def expected_samples(self, run: SuiteRun) -> Optional[int]:
        return int(float(run.params["duration_s"]) * 1e6 / float(run.params["interval_us"]))


# a new suite is one new file here (rtlab/suites/<name>.py): the registry
# imports every module of this package; one that fails to is an error naming it
SUITES.load()
