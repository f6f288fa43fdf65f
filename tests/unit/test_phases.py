"""The phases of `make test` (tests/conftest.py, docs/testing.md): every
integration test of the default selection lands in exactly one, by its
marks, and the Makefile runs each phase as the phase says (two workers, or
one)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import PHASES  # noqa: E402


def collected(*args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *args, "tests/integration"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode in (0, 5), res.stdout[-2000:] + res.stderr[-2000:]
    return {line.strip() for line in res.stdout.splitlines() if "::" in line}


def test_each_integration_test_is_in_exactly_one_phase_by_its_marks():
    everything = collected()
    by_phase = {phase: collected("--phase", phase) for phase in PHASES}
    for a in PHASES:
        for b in PHASES:
            assert a == b or not by_phase[a] & by_phase[b], (a, b, by_phase[a] & by_phase[b])
    assert set().union(*by_phase.values()) == everything

    def phase_of(node: str) -> str:
        return next(p for p in PHASES if node in by_phase[p])

    def file_phases(name: str) -> set[str]:
        return {phase_of(n) for n in everything if n.startswith(f"tests/integration/{name}::")}

    # a statistical verdict on a QEMU guest's latency: nothing beside it
    for name in ("test_bisect.py", "test_paired.py", "test_gitlab_ci.py"):
        assert file_phases(name) == {"one-at-a-time"}, name
    # boots whose outcome no second guest can flip: two at a time
    for name in ("test_run.py", "test_lava_server.py", "test_suites_programme.py"):
        assert "two-at-a-time" in file_phases(name), name
    # latency of this machine (serial) and what boots nothing (light)
    assert phase_of("tests/integration/test_until_decided_local.py::"
                    "test_separate_sessions_a_seen_regression_is_red_and_nothing_is_green_unseen") == "alone"
    assert file_phases("test_store.py") == {"parallel"}


def test_the_makefile_runs_two_at_a_time_on_two_workers_and_one_at_a_time_on_none():
    text = ROOT.joinpath("Makefile").read_text()
    phases = re.search(r"^TEST_PHASES := (.*)$", text, re.M)
    assert phases and tuple(phases.group(1).split()) == PHASES
    recipe = text.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    workers = dict(re.findall(r"([a-z-]+)\) xdist=\"([^\"]*)\"", recipe))
    assert workers["two-at-a-time"] == "-n 2 --dist loadfile"
    assert workers["parallel"].startswith("-n ")
    assert re.search(r"\*\) xdist=\"\";", recipe)  # one-at-a-time and alone: no workers
