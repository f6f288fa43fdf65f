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


#: written to a suite's raw dir when the board cannot run it: {"reason": ...}
NOT_AVAILABLE_FILE = "not_available.json"


def not_available(host_dir: Path) -> str | None:
    """The reason recorded on the board that the suite could not run, or None."""
    import json

    try:
        return str(json.loads((host_dir / NOT_AVAILABLE_FILE).read_text())["reason"])
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


class Suite:
    """Base of every suite; subclasses are registered by name in SUITES."""

    name: ClassVar[str]
    tool: ClassVar[str]
    #: parameters a campaign may set, with defaults
    defaults: ClassVar[dict[str, Any]] = {}
    #: file the tool writes its JSON to (relative to the work dir), if any
    json_file: ClassVar[str | None] = None

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        # "cpus" is the campaign's (which CPUs to measure), taken off by rtlab.campaign
        unknown = set(given) - set(self.defaults) - set(COMMON_DEFAULTS) - {"cpus"}
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        _check_load_opts(given.get("load_opts") or {})
        return {**COMMON_DEFAULTS, **self.defaults, **given}

    def command(self, run: SuiteRun, board: dict | None = None) -> str:
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

    def unavailable(self, sh) -> str | None:
        """Why the board (a BoardShell) cannot run this suite at all, or None.
        Checked on the board before the load starts; a reason makes the suite
        "not available" there: not run, neither passed nor failed."""
        return None

    def parse_outputs(self, job_dir: Path, run: SuiteRun) -> dict[str, ToolOutput]:
        """Every measurement of one run, by suffix of the suite's name: ""
        for one measurement; a tool measuring two things (rtla timerlat: IRQ
        and thread latency) returns one output per thing ("irq", "thread")."""
        return {"": self.parse(job_dir, run)}

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


def _check_load_opts(opts: dict) -> None:
    from ..loads import BASE_LOADS

    known = {l.name: l for l in BASE_LOADS}
    if not isinstance(opts, dict):
        raise KeyError("load_opts (must be a mapping {load: {option: value}})")
    for load, o in opts.items():
        if load not in known:
            raise KeyError(f"load_opts.{load} (loads: {', '.join(sorted(known))})")
        bad = set(o or {}) - set(known[load].options)
        if bad:
            raise KeyError(", ".join(f"load_opts.{load}.{b}" for b in sorted(bad))
                           + f" (options of {load}: {', '.join(sorted(known[load].options)) or 'none'})")


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
        "extra_args": "",
    }

    def command(self, run: SuiteRun, board: dict | None = None) -> str:
        p = run.params
        cpus = format_cpulist(run.cpus)
        # -a names every measured CPU explicitly: rt-tests skips isolated CPUs
        # otherwise. -h forces -d 0, so threads never drift apart in interval.
        return (f"cyclictest -q -m -p {p['priority']} -i {p['interval_us']} -D {p['duration_s']} "
                f"-h {p['histogram_us']} -a {cpus} -t {len(run.cpus)} "
                f"--json={self.json_file} {p['extra_args']}").strip()


from .rttests import (  # noqa: E402 - they subclass Suite
    Cyclicdeadline, Hackbench, Pmqtest, PiStress, Ptsematest, RtMigrateTest, Signaltest,
    Sigwaittest, Svsematest,
)
from .rtbench import Rtbench  # noqa: E402
from .rtla import Osnoise, Timerlat  # noqa: E402

SUITES: dict[str, Suite] = {s.name: s for s in (
    Cyclictest(), Signaltest(), Sigwaittest(), Svsematest(), Ptsematest(), Pmqtest(),
    PiStress(), Hackbench(), Cyclicdeadline(), RtMigrateTest(), Rtbench(), Timerlat(), Osnoise(),
)}
