"""Boot test: the running kernel is the variant asked for, or nothing counts."""
import json

import pytest

from rtlab.report import snapshot
from rtlab.run.results import variant_problems
from rtlab.suites.board import boot_batch
from rtlab.suites.events import phase
from ..core.rundir import JobDir


def test_boot(request, job, job_dir, board_shell):
    with phase(request.config, "kernel_facts"):  # and the snapshot's commands, in one batch
        facts, replay = boot_batch(board_shell, snapshot.batch_commands(snapshot.COMMANDS))
    JobDir(job_dir).kernel_json.write_text(json.dumps(facts, indent=2) + "\n")
    # the system as it measures (rtlab.report.snapshot); counters again after the suites
    problems = variant_problems(job, facts)  # the same check as LAVA ingest's
    with phase(request.config, "snapshot"):
        try:  # context for people, never a verdict: a failed snapshot says why and the job goes on
            snap = snapshot.take(replay)
            if not problems and job.kernel:  # the running kernel is the staged one: its config is known
                snap = snapshot.config_from_staged(snap, job.kernel)
        except Exception as e:  # noqa: BLE001
            snap = {"error": f"{type(e).__name__}: {e}"}
        snapshot.write(job_dir / snapshot.SNAPSHOT_FILE, snap)
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)
