"""The phases of `make test` (tests/conftest.py, docs/testing.md): every
integration test of the default selection lands in exactly one, by its
marks, and the Makefile runs each phase as the phase says (two workers, or
one)."""
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import PHASES  # noqa: E402


@functools.lru_cache(maxsize=None)  # the tests ask for some selections twice: seconds each
def collected_in_order(*args: str) -> tuple[str, ...]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *args, "tests/integration"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode in (0, 5), res.stdout[-2000:] + res.stderr[-2000:]
    return tuple(line.strip() for line in res.stdout.splitlines() if "::" in line)


def collected(*args: str) -> set[str]:
    return set(collected_in_order(*args))


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
    # the phase's own order (longest files first), not xdist's (most tests first)
    assert workers["two-at-a-time"] == "-n 2 --dist loadfile --no-loadscope-reorder"
    assert workers["parallel"].startswith("-n ") and workers["parallel"].endswith(" --no-loadscope-reorder")
    assert re.search(r"\*\) xdist=\"\";", recipe)  # one-at-a-time and alone: no workers


def over_a_minute_table() -> set[str]:
    """The tests docs/testing.md names under its tests of more than a minute."""
    text = ROOT.joinpath("docs", "testing.md").read_text()
    section = text.split("\n## The tests of more than a minute", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        module = None
        for ref in re.findall(r"`([^`]*::[^`]*)`", line.split("|")[1]):
            path, name = ref.split("::", 1)
            module = path or module
            names.add(f"tests/integration/{module}::{name}")
    return names


def test_the_tests_marked_over_a_minute_are_the_docs_table_of_them():
    marked = {node.split("[", 1)[0] for node in collected_in_order("-m", "over_a_minute")}
    assert marked and marked == over_a_minute_table()


def test_a_shared_phase_starts_with_the_files_of_tests_over_a_minute():
    order = collected_in_order("--phase", "two-at-a-time")
    marked = {node.split("[", 1)[0] for node in collected_in_order("-m", "over_a_minute")}
    files = list(dict.fromkeys(node.split("::", 1)[0] for node in order))
    long_files = {node.split("::", 1)[0] for node in marked} & set(files)
    assert "tests/integration/test_suites_programme.py" in long_files
    assert set(files[:len(long_files)]) == long_files, files
    # a file's tests stay together and in their order
    assert [n for n in order if n.startswith("tests/integration/test_run.py::")] == \
        [n for n in collected_in_order() if n.startswith("tests/integration/test_run.py::")]
