"""The run directory's layout: the names of the files rtlab keeps in a run,
a job and a measurement directory, owned here (the bottom layer) so that
the runner, LAVA ingest, the gate, the report and the fetchers agree on
them without importing each other.

    <results>/<run id>/               run.json, campaign.yaml, budgets.yaml,
                                      run-started.json (until run.json exists)
      <board>/<variant>[/r<N>]/       a job: job.json, job-spec.json, kernel.json
        <suite>@<load>/               a measurement: exit.json, stdout.txt,
                                      stderr.txt, command.txt,
                                      not_available.json, the tool's own files
                                      (exit_code: the board side's $?)

The names are constants (for globs and for lists of files to fetch) and
:class:`RunDir` / :class:`JobDir` / :class:`MeasurementDir` give the paths,
so no other module spells a file name of this layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: run level
RUN_JSON = "run.json"
#: in a run directory from its start: who ran it; run.json is its end. A
#: directory with this and no run.json is a run that was killed (rtlab.judge.gate)
RUN_STARTED = "run-started.json"
CAMPAIGN_COPY = "campaign.yaml"
BUDGETS_COPY = "budgets.yaml"
#: earlier attempts of suites the runner measured again (a host-stolen breach,
#: a tool's start-up race): <dir>/<board>-<variant>[-r<N>]/<attempt>/
RETRIED_DIR = "measured-again"

#: job level
JOB_JSON = "job.json"
JOB_SPEC = "job-spec.json"
KERNEL_JSON = "kernel.json"

#: measurement level
EXIT_JSON = "exit.json"
STDOUT = "stdout.txt"
STDERR = "stderr.txt"
COMMAND = "command.txt"
NOT_AVAILABLE = "not_available.json"
#: on the board, beside stdout.txt: the shell's $? (exit.json is made from it)
EXIT_CODE = "exit_code"

#: every file name above: tests/unit/test_rundir_names.py fails when one of
#: them is spelled as a literal anywhere else in rtlab/
NAMES = (RUN_JSON, RUN_STARTED, CAMPAIGN_COPY, BUDGETS_COPY, RETRIED_DIR, JOB_JSON, JOB_SPEC, KERNEL_JSON,
         EXIT_JSON, STDOUT, STDERR, COMMAND, NOT_AVAILABLE, EXIT_CODE)


@dataclass(frozen=True)
class MeasurementDir:
    """``<job>/<suite>@<load>/``: one suite run's raw files (the tool's own
    ones are the suite's business; these are every suite's)."""

    path: Path

    @property
    def exit_json(self) -> Path:
        return self.path / EXIT_JSON

    @property
    def stdout(self) -> Path:
        return self.path / STDOUT

    @property
    def stderr(self) -> Path:
        return self.path / STDERR

    @property
    def command(self) -> Path:
        return self.path / COMMAND

    @property
    def not_available(self) -> Path:
        return self.path / NOT_AVAILABLE

    @property
    def exit_code(self) -> Path:
        return self.path / EXIT_CODE

    @property
    def kernel_json(self) -> Path:
        """LAVA ingest: the facts of the boot this suite ran on (each LAVA
        suite reports its own; the job's kernel.json is the first)."""
        return self.path / KERNEL_JSON


@dataclass(frozen=True)
class JobDir:
    """``<run>/<board>/<variant>[/r<N>]/``: one job (board × variant)."""

    path: Path

    @property
    def job_json(self) -> Path:
        return self.path / JOB_JSON

    @property
    def job_spec(self) -> Path:
        return self.path / JOB_SPEC

    @property
    def kernel_json(self) -> Path:
        return self.path / KERNEL_JSON

    def measurement(self, suite_run_id: str) -> MeasurementDir:
        """The directory of one suite run, by its id (``<suite>@<load>``)."""
        return MeasurementDir(self.path / suite_run_id)


@dataclass(frozen=True)
class RunDir:
    """``<results>/<run id>/``: one run."""

    path: Path

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def run_started(self) -> Path:
        return self.path / RUN_STARTED

    @property
    def campaign_copy(self) -> Path:
        return self.path / CAMPAIGN_COPY

    @property
    def budgets_copy(self) -> Path:
        return self.path / BUDGETS_COPY

    def job(self, board: str, variant: str, repeat: int = 0) -> JobDir:
        """``<board>/<variant>``, plus ``r<N>`` for repeat N of a repeating campaign."""
        d = self.path / board / variant
        return JobDir(d / f"r{repeat}" if repeat else d)

    def job_specs(self) -> list[Path]:
        """Every job's job-spec.json under the run, in path order."""
        return sorted(self.path.rglob(JOB_SPEC))

