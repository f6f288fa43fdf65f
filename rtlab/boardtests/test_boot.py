"""Boot test: the running kernel is the variant asked for, or nothing counts."""
import json

import pytest

from rtlab.suites.board import check_variant, kernel_facts
from rtlab.variants import Variant


def test_boot(job, job_dir, board_shell):
    facts = kernel_facts(board_shell)
    (job_dir / "kernel.json").write_text(json.dumps(facts, indent=2) + "\n")
    variant = Variant.from_json(job["variant"])
    problems = check_variant(variant, facts, job["boot_args"], job["board"]["isolate_cpu"],
                             kernel=job.get("kernel"))
    if problems:
        pytest.fail(f"board {job['board']['name']} is not running variant {variant.name}: "
                    + "; ".join(problems), pytrace=False)
