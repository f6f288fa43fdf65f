"""The phases of `make test` (docs/testing.md): each test of the default
selection (`-m 'not rack and not long'`, pyproject.toml) runs in exactly one.

    parallel        tests/unit, on both cores (pytest-xdist, `-n 2`)
    one-at-a-time   every other test (tests/integration, tests/faults, ...):
                    one at a time, nothing of the suite beside it
    alone           tests marked `serial`: latency measured on this machine
                    (the local board), last, nothing beside them

`pytest --phase NAME` keeps the phase's tests and deselects the rest; without
`--phase` every test runs, as before. A new test file lands in its phase by
where it is and how it is marked, never by a list here."""
from pathlib import Path

import pytest

PHASES = ("parallel", "one-at-a-time", "alone")
UNIT = Path(__file__).resolve().parent / "unit"


def pytest_addoption(parser):
    parser.addoption("--phase", choices=PHASES, default=None,
                     help="run only this phase of make test (tests/conftest.py)")


def pytest_ignore_collect(collection_path, config):
    """Not even collected where a phase can hold none of them (seconds of
    imports per phase): no unit test runs one-at-a-time, only unit tests run
    in parallel."""
    phase = config.getoption("--phase")
    path = Path(collection_path).resolve()
    inside = path == UNIT or UNIT in path.parents
    if phase == "one-at-a-time" and inside:
        return True
    if phase == "parallel" and not inside and path not in UNIT.parents:
        return True
    return None


def phase_of(item) -> str:
    """Which phase of make test runs *item*."""
    if item.get_closest_marker("serial"):
        return "alone"
    if UNIT in Path(str(item.fspath)).resolve().parents:
        return "parallel"
    return "one-at-a-time"


@pytest.hookimpl(trylast=True)  # after -m and -k: what they deselected stays deselected
def pytest_collection_modifyitems(config, items):
    phase = config.getoption("--phase")
    if phase is None:
        return
    keep = [i for i in items if phase_of(i) == phase]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if phase_of(i) != phase])
        items[:] = keep
