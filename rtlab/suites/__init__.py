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


class Suite:
    """Base of every suite; subclasses are registered by name in SUITES."""

    name: ClassVar[str]
    tool: ClassVar[str]
    #: parameters a campaign may set, with defaults
    defaults: ClassVar[dict[str, Any]] = {}
    #: file the tool writes its JSON to (relative to the work dir), if any
    json_file: ClassVar[str | None] = None

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.defaults)
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        return {**self.defaults, **given}

    def command(self, run: SuiteRun) -> str:
        raise NotImplementedError

    def duration_s(self, run: SuiteRun) -> float:
        """How long the tool runs, for console timeouts and progress."""
        return float(run.params.get("duration_s", 60))

    def parse(self, job_dir: Path, run: SuiteRun) -> ToolOutput:
        from ..parsers import parse_file

        return parse_file(job_dir / run.id / self.json_file, tool=self.tool)


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

    def command(self, run: SuiteRun) -> str:
        p = run.params
        cpus = format_cpulist(run.cpus)
        # -a names every measured CPU explicitly: rt-tests skips isolated CPUs
        # otherwise. -h forces -d 0, so threads never drift apart in interval.
        return (f"cyclictest -q -m -p {p['priority']} -i {p['interval_us']} -D {p['duration_s']} "
                f"-h {p['histogram_us']} -a {cpus} -t {len(run.cpus)} "
                f"--json={self.json_file} {p['extra_args']}").strip()


SUITES: dict[str, Suite] = {s.name: s for s in (Cyclictest(),)}
