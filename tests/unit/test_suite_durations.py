"""bench/suite_durations.py: the time per test file from make test's JUnit
XML (one file per phase) and from pytest's --durations=0 text."""
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import suite_durations as sd  # noqa: E402


def write_junit(path: Path, wall: float, cases: list[tuple[str, str, float]]) -> Path:
    body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}"/>' for c, n, t in cases)
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest" time="{wall}" '
                    f'tests="{len(cases)}">{body}</testsuite></testsuites>')
    return path


def test_per_file_seconds_across_phases_slowest_first(tmp_path, capsys):
    unit = write_junit(tmp_path / "parallel.xml", 5.0, [
        ("tests.unit.test_arch", "test_a", 2.0), ("tests.unit.test_arch", "test_b", 3.0),
        ("tests.unit.test_capability_table", "test_c", 4.0)])
    (tmp_path / "parallel.load").write_text("3.10 2.00 1.00 1/100 9\n0.50 1.00 1.00 1/100 9\n")
    integ = write_junit(tmp_path / "one-at-a-time.xml", 100.0, [
        # a test in a class: the module is the longest dotted prefix that is a file
        ("tests.integration.test_gitlab_ci.TestX", "test_d", 90.0), ("tests.faults.test_jobs", "test_e", 10.0)])
    assert sd.main([str(unit), str(integ), "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "phase parallel: 3 tests, wall 5 s, tests' summed time 9 s, load 3.10 2.00 1.00 -> 0.50 1.00 1.00"
    assert out[1].startswith("phase one-at-a-time: 2 tests, wall 100 s")
    rows = [line.split() for line in out[3:]]
    assert [r[-1] for r in rows[:3]] == ["tests/integration/test_gitlab_ci.py", "tests/faults/test_jobs.py",
                                          "tests/unit/test_arch.py"]
    assert rows[0][:2] == ["90.0", "1"] and rows[2][:2] == ["5.0", "2"]
    assert rows[3][-3:] == ["(1", "more", "files)"] and rows[3][0] == "4.0"


def test_durations_text_of_a_ci_log(tmp_path, capsys):
    log = tmp_path / "ci.log"
    log.write_text(textwrap.dedent("""\
        ============================= slowest durations ==============================
        120.50s call     tests/integration/test_run.py::test_each_arch_boots_its_variant_and_measures
        3.25s setup    tests/integration/test_run.py::test_each_arch_boots_its_variant_and_measures
        7.00s call     tests/unit/test_lint.py::test_mypy[x]
        ================= 3 passed, 14 deselected in 140.20s (0:02:20) =================
        """))
    assert sd.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "phase ci.log: 2 tests, wall 140 s, tests' summed time 131 s" in out
    assert "   123.8     1  94.6%  tests/integration/test_run.py\n" in out


def test_no_input_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sd, "DEFAULT_DIR", tmp_path)
    assert sd.main([]) == 2 and "run make test first" in capsys.readouterr().err
