"""Boot test: the running kernel is the variant asked for, or nothing counts."""
import json

import pytest

from rtlab.results import variant_problems
from rtlab.suites.board import kernel_facts


def test_boot(job, job_dir, board_shell):
    facts = kernel_facts(board_shell)
    (job_dir / "kernel.json").write_text(json.dumps(facts, indent=2) + "\n")
    problems = variant_problems(job, facts)  # the same check as LAVA ingest's
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)
