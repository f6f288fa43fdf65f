"""The phases of `make test` (docs/testing.md): each test of the default
selection (`-m 'not rack and not long'`, pyproject.toml) runs in exactly one.

    parallel        on both cores (pytest-xdist, `-n 2 --dist loadfile`: a
                    file's tests on one worker, one after another, its
                    module fixtures started once): tests/unit, tests/faults
                    (they kill runners, hold board locks and time deadlines,
                    so each uses a lock directory and markers of its own and
                    holds beside any other test) and the integration tests
                    marked `light` (they boot nothing, build nothing and
                    judge no latency of this machine: a real influxd, a
                    labgrid coordinator, Chromium)
    two-at-a-time   every other test (tests/integration, ...): QEMU boots,
                    kernel builds, the LAVA server, the rack's namespaces,
                    two files at a time (`-n 2 --dist loadfile`). Each must
                    hold beside one other such test, as on a loaded machine:
                    its deadlines, and budgets that only catch a hang under
                    TCG
    one-at-a-time   tests marked `guest_verdict`: their outcome is a
                    statistical verdict on a QEMU guest's latency (bisect,
                    paired boots, the pipelines' gates), and a second guest
                    beside them is emulation noise they would have to
                    outvote: one at a time, nothing of the suite beside them
    alone           tests marked `serial`: latency measured on this machine
                    (the local board), last, nothing beside them

`pytest --phase NAME` keeps the phase's tests and deselects the rest; without
`--phase` every test runs, as before. A new test file lands in its phase by
where it is and how it is marked, never by a list here."""
from pathlib import Path
from typing import Optional

import pytest

PHASES = ("parallel", "two-at-a-time", "one-at-a-time", "alone")
#: the phases that hold no test of PARALLEL's directories
HEAVY = ("two-at-a-time", "one-at-a-time")
#: the phases whose files share the machine (pytest-xdist, two workers)
SHARED = ("parallel", "two-at-a-time")
TESTS = Path(__file__).resolve().parent
#: the directories whose tests all run in the parallel phase
PARALLEL = (TESTS / "unit", TESTS / "faults")


def pytest_addoption(parser):
    parser.addoption("--phase", choices=PHASES, default=None,
                     help="run only this phase of make test (tests/conftest.py)")


def parallel_dir(path) -> Optional[Path]:
    """The directory of PARALLEL that holds *path*, or None."""
    path = Path(str(path)).resolve()
    return next((d for d in PARALLEL if path == d or d in path.parents), None)


def pytest_ignore_collect(collection_path, config):
    """Not even collected where a phase can hold none of them (seconds of
    imports): no test of PARALLEL's directories runs in a HEAVY phase. (The
    parallel phase collects everything: `light` tests are anywhere.)"""
    phase = config.getoption("--phase")
    path = Path(collection_path).resolve()
    if phase in HEAVY and parallel_dir(path) is not None:
        return True
    return None


def phase_of(item) -> str:
    """Which phase of make test runs *item*."""
    if item.get_closest_marker("serial"):
        return "alone"
    if parallel_dir(item.fspath) is not None or item.get_closest_marker("light"):
        return "parallel"
    if item.get_closest_marker("guest_verdict"):
        return "one-at-a-time"
    return "two-at-a-time"


@pytest.hookimpl(trylast=True)  # after -m and -k: what they deselected stays deselected
def pytest_collection_modifyitems(config, items):
    phase = config.getoption("--phase")
    if phase is None:
        return
    keep = [i for i in items if phase_of(i) == phase]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if phase_of(i) != phase])
        items[:] = keep
    if phase in SHARED:
        items[:] = longest_files_first(items)


def longest_files_first(items: list) -> list:
    """*items* with the files that hold a test marked `over_a_minute` first,
    then the files of more tests (pytest-xdist's own order, which make test
    turns off: --no-loadscope-reorder). A worker takes a file at a time, and
    a long one taken last keeps the phase waiting on it alone, the other
    worker idle: longest first, the short ones fill in at the end."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(str(item.fspath), []).append(item)

    def weight(tests: list) -> tuple[bool, int]:
        return (not any(t.get_closest_marker("over_a_minute") for t in tests), -len(tests))

    return [item for tests in sorted(files.values(), key=weight) for item in tests]
