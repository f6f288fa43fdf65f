"""Suites: what runs on a board to measure, and how its raw output is read.

A suite is the small interface between a campaign entry and the board: it
builds the tool's command line from the campaign's parameters and the CPUs to
measure, names the files the tool writes, and turns the raw files into the
result model. Running it over a console is the same for every suite
(:mod:`rtlab.suites.board`), so every suite gets raw outputs on disk before
anything is parsed or judged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..config import format_cpulist
from ..model import ToolOutput
from ..params import (LOAD_OPTION_SPECS, Args, Bool, Cpus, Int, Num, ParamError, Spec,  # noqa: F401
                      check_mapping)


@dataclass(frozen=True)
class SuiteRun:
    """One campaign entry on one board: what the board-side code needs."""

    id: str              # unique within a job: "<name>@<load>"
    name: str            # the campaign's name for it (measurement key "suite")
    suite: str           # registry key: which Suite class
    load: str
    params: dict[str, Any] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # CPUs to measure on, named explicitly

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "suite": self.suite, "load": self.load,
                "params": self.params, "cpus": list(self.cpus)}

    @classmethod
    def from_json(cls, d: dict) -> "SuiteRun":
        return cls(id=d["id"], name=d["name"], suite=d["suite"], load=d["load"],
                   params=d.get("params", {}), cpus=tuple(d.get("cpus", ())))


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
    """Base of every suite; subclasses are registered by name in SUITES."""

    name: ClassVar[str]
    tool: ClassVar[str]
    #: parameters a campaign may set, with defaults
    defaults: ClassVar[dict[str, Any]] = {}
    #: type and range of every parameter in defaults (rtlab.params), checked at load
    spec: ClassVar[dict[str, Spec]] = {}
    #: file the tool writes its JSON to (relative to the work dir), if any
    json_file: ClassVar[str | None] = None

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults completed by *given*, every value typed and ranged;
        ParamError names the key ("cpus" is the campaign's: which CPUs to
        measure, taken off by rtlab.campaign)."""
        given = dict(given)
        opts = given.pop("load_opts", None)
        checked = check_mapping(given, {**self.spec, **COMMON_SPEC})
        if opts is not None:
            checked["load_opts"] = _check_load_opts(opts)
        return {**COMMON_DEFAULTS, **self.defaults, **checked}

    def command(self, run: SuiteRun, board: dict | None = None) -> list[str]:
        """The tool's argument vector (each item one argument, never split
        or interpreted); rtlab.suites.board.shell_line quotes it, in one place,
        for the board's shell."""
        raise NotImplementedError

    def outputs(self, run: SuiteRun) -> list[str]:
        """Files the tool writes in its work dir, fetched besides stdout/stderr."""
        return [self.json_file] if self.json_file else []

    def duration_s(self, run: SuiteRun) -> float:
        """How long the tool runs, for console timeouts and progress."""
        return float(run.params.get("duration_s", 60))

    def accepts_exit(self, rc: int, host_dir: Path) -> bool:
        """Whether a run that exited with *rc* still produced a result (a
        kernel failure the gate judges as FAIL) rather than an infra error."""
        return rc == 0

    def parse(self, job_dir: Path, run: SuiteRun) -> ToolOutput:
        """The tool's output in the model, plus the loads' health numbers
        (``load.<load>.<what>`` metrics from ``load-<load>.json``)."""
        host_dir = job_dir / run.id
        out = self.parse_output(host_dir, run)
        out.metrics.update(_load_metrics(host_dir))
        return out

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        from ..parsers import parse_file

        return parse_file(host_dir / self.json_file, tool=self.tool)


def _check_load_opts(opts: Any) -> dict:
    from ..loads import BASE_LOADS

    known = {l.name: l for l in BASE_LOADS}
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
    import json

    from ..loads import BASE_LOADS
    from ..loads.health import load_metrics

    names = {l.name for l in BASE_LOADS}
    summaries = []
    for p in sorted(host_dir.glob("load-*.json")):
        if p.stem[len("load-"):] in names:
            try:
                summaries.append(json.loads(p.read_text()))
            except ValueError:
                pass
    return load_metrics(summaries)


class Cyclictest(Suite):
    """cyclictest: timer wake-up latency, one thread per measured CPU."""

    name = "cyclictest"
    tool = "cyclictest"
    json_file = "cyclictest.json"
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

    def command(self, run: SuiteRun, board: dict | None = None) -> list[str]:
        p = run.params
        cpus = format_cpulist(run.cpus)
        # -a names every measured CPU explicitly: rt-tests skips isolated CPUs
        # otherwise. -h forces -d 0, so threads never drift apart in interval.
        return ["cyclictest", "-q", "-m", "-p", str(p["priority"]), "-i", str(p["interval_us"]),
                "-D", str(p["duration_s"]), "-h", str(p["histogram_us"]), "-a", cpus,
                "-t", str(len(run.cpus)), f"--json={self.json_file}", *p["extra_args"]]


from .rttests import (  # noqa: E402 - they subclass Suite
    Cyclicdeadline, Hackbench, Pmqtest, PiStress, Ptsematest, RtMigrateTest, Signaltest,
    Sigwaittest, Svsematest,
)
from .rtbench import Rtbench  # noqa: E402

SUITES: dict[str, Suite] = {s.name: s for s in (
    Cyclictest(), Signaltest(), Sigwaittest(), Svsematest(), Ptsematest(), Pmqtest(),
    PiStress(), Hackbench(), Cyclicdeadline(), RtMigrateTest(), Rtbench(),
)}
