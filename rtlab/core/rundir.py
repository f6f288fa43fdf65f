"""The run directory's layout: the names of the files rtlab keeps in a run,
a job and a measurement directory, owned here (the bottom layer) so that
the runner, LAVA ingest, the gate, the report and the fetchers agree on
them without importing each other.

    <results>/<run id>/          run.json, campaign.yaml, budgets.yaml,
                                 run-started.json (until run.json exists)
      <job>/                     job.json, job-spec.json, kernel.json
        <board>/<suite>@<load>/  exit.json, stdout.txt, stderr.txt,
                                 command.txt, not_available.json, the
                                 tool's own files
"""
from __future__ import annotations

#: run level
RUN_JSON = "run.json"
#: in a run directory from its start: who ran it; run.json is its end. A
#: directory with this and no run.json is a run that was killed (rtlab.judge.gate)
RUN_STARTED = "run-started.json"
CAMPAIGN_COPY = "campaign.yaml"
BUDGETS_COPY = "budgets.yaml"

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
