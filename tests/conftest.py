"""The phases of `make test` (docs/testing.md): each test of the default
selection (`-m 'not rack and not long'`, pyproject.toml) runs in exactly one.

    parallel        tests/unit, on both cores (pytest-xdist, `-n 2 --dist
                    loadgroup`)
    one-at-a-time   every other test (tests/faults, tests/integration, ...):
                    one at a time, nothing of the suite beside it. The fault
                    tests kill runners, hold board locks and time deadlines;
                    beside the unit tests' load one of them failed in 2 of 2
                    fresh-clone runs (a killed job's process outlived the
                    board lock without cgroups), so they run here
    alone           tests marked `serial`: latency measured on this machine
                    (the local board), last, nothing beside them

`pytest --phase NAME` keeps the phase's tests and deselects the rest; without
`--phase` every test runs, as before. A new test file lands in its phase by
where it is and how it is marked, never by a list here."""
from pathlib import Path
from typing import Optional

import pytest

PHASES = ("parallel", "one-at-a-time", "alone")
TESTS = Path(__file__).resolve().parent
#: the directories of the parallel phase -> the xdist group their tests form (None: none)
PARALLEL = {TESTS / "unit": None}


def pytest_addoption(parser):
    parser.addoption("--phase", choices=PHASES, default=None,
                     help="run only this phase of make test (tests/conftest.py)")


def parallel_dir(path) -> Optional[Path]:
    """The directory of PARALLEL that holds *path*, or None."""
    path = Path(str(path)).resolve()
    return next((d for d in PARALLEL if path == d or d in path.parents), None)


def pytest_ignore_collect(collection_path, config):
    """Not even collected where a phase can hold none of them (seconds of
    imports per phase): no test of PARALLEL's directories runs one at a
    time, only theirs run in parallel."""
    phase = config.getoption("--phase")
    path = Path(collection_path).resolve()
    inside = parallel_dir(path) is not None
    if phase == "one-at-a-time" and inside:
        return True
    if phase == "parallel" and not inside and not any(path in d.parents for d in PARALLEL):
        return True
    return None


def phase_of(item) -> str:
    """Which phase of make test runs *item*."""
    if item.get_closest_marker("serial"):
        return "alone"
    if parallel_dir(item.fspath) is not None:
        return "parallel"
    return "one-at-a-time"


def pytest_itemcollected(item):
    """A parallel directory's group on each of its tests (as it is collected:
    before xdist's worker reads the groups)."""
    d = parallel_dir(item.fspath)
    if d is not None and PARALLEL[d] and not item.get_closest_marker("xdist_group"):
        item.add_marker(pytest.mark.xdist_group(PARALLEL[d]))


@pytest.hookimpl(trylast=True)  # after -m and -k: what they deselected stays deselected
def pytest_collection_modifyitems(config, items):
    phase = config.getoption("--phase")
    if phase is None:
        return
    keep = [i for i in items if phase_of(i) == phase]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if phase_of(i) != phase])
        items[:] = keep
