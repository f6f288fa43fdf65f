"""docs/testing.md's capability table: every capability of make test named,
each with the one end-to-end test that proves it, and that test exists and
is collected by make test's default selection (a test moved to `long` or
`rack`, renamed or deleted fails here)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"
HEADING = "## Capabilities and the test that proves each"

#: what make test must prove end to end (issue 39), one row each
CAPABILITIES = {
    "boot + variant check", "suite family: rt-tests and rtbench", "suite family: rtla", "loads",
    "store publish + dashboard queries", "budgets gate", "the regression verdict", "paired boots", "bisect",
    "evidence", "soak checkpoint/resume", "rack with a lease", "multi-host lab", "irq probe twin",
    "LAVA dispatcher", "LAVA server", "GitLab pipeline: kernel push", "GitLab pipeline: kernel merge request",
    "GitLab pipeline: rtlab merge request", "hostile input", "cancel", "a kernel tree's build confined",
    "git runs nothing of a tree's configuration", "CI jobs as the runner's own user",
    # issue 46: CI gates what the lab measures; a real lab's units and resources
    "CI matrix from the lab's campaign", "schedules run as written", "lab service units",
    "real-lab resources through labgrid", "a new board's first budgets",
}


def capability_table() -> dict[str, str]:
    """capability -> test node id, from the table under HEADING."""
    text = DOC.read_text()
    assert HEADING in text, f"{DOC}: no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        # a cell's words, its glossary links dropped (docs/reference/glossary.md)
        line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 2 or cells[0] in ("capability", "") or set(cells[0]) <= set("-"):
            continue
        ids = re.findall(r"`([^`]+)`", cells[1])
        assert len(ids) == 1, f"{DOC}: {cells[0]!r} names {len(ids)} tests, not one"
        assert cells[0] not in rows, f"{DOC}: {cells[0]!r} twice"
        rows[cells[0]] = ids[0]
    return rows


def test_the_table_names_every_capability_once():
    assert set(capability_table()) == CAPABILITIES


def test_make_test_keeps_the_default_selection():
    """make test passes no -m of its own: pyproject's addopts is the
    selection the next test collects under."""
    recipe = ROOT.joinpath("Makefile").read_text().split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    assert "pytest --phase" in recipe and not re.search(r"\s-m\s+(?!pytest\b)", recipe), recipe


def test_every_proof_exists_and_make_test_collects_it():
    table = capability_table()
    ids = sorted(set(table.values()))
    for node in ids:
        assert (ROOT / node.split("::")[0]).is_file(), node
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ids],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    collected = [line.strip() for line in res.stdout.splitlines() if "::" in line]
    missing = {cap: node for cap, node in table.items()
               if not any(c == node or c.startswith(node + "[") for c in collected)}
    assert not missing, f"not collected by make test's selection: {missing}\n{res.stdout[-3000:]}{res.stderr[-2000:]}"
