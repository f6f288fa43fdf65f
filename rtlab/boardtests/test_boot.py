"""Boot test: the running kernel is the variant asked for, or nothing counts."""
import json

import pytest

from rtlab import snapshot
from rtlab.results import variant_problems
from rtlab.suites.board import kernel_facts


def test_boot(job, job_dir, board_shell):
    facts = kernel_facts(board_shell)
    (job_dir / "kernel.json").write_text(json.dumps(facts, indent=2) + "\n")
    # the system as it measures (rtlab.snapshot); counters again after the suites
    snapshot.write(job_dir / snapshot.SNAPSHOT_FILE, snapshot.take(board_shell))
    problems = variant_problems(job, facts)  # the same check as LAVA ingest's
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)
