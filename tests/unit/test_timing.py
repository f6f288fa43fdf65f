"""rtlab.core.timing: a job's timing events add up per part, pytest's own start
and exit is its process time less what the board tests account for, and
what no event covers is reported as such (bench/bench_spine.py prints it)."""
import json

import pytest

from rtlab.core import timing


def write_job(jd, pytest_s=20.0):
    jd.mkdir(parents=True)
    timing.append(jd / "events.jsonl", "stage", 0.25)
    lines = [
        {"event": "booting"},
        {"event": "booted", "duration_s": 6.0},
        {"event": "phase", "name": "kernel_facts", "duration_s": 0.5},
        {"event": "phase", "name": "snapshot", "duration_s": 1.0},
        {"event": "test", "test": "test_boot", "duration_s": 1.5},  # not a part: its phases are
        {"event": "phase", "name": "load_start", "duration_s": 0.75},
    ]
    with open(jd / "events.jsonl", "a") as f:
        for ev in lines:
            f.write(json.dumps(ev) + "\n")
        f.write('{"event": "phase", "name": "clea')  # a line cut by a killed writer
    with open(jd / "events.jsonl", "a") as f:
        f.write("\n")
    timing.append(jd / "events.jsonl", "pytest_process", pytest_s)
    timing.append(jd / "events.jsonl", "collect", 0.125)
    (jd / "cyclictest@idle").mkdir()
    (jd / "cyclictest@idle" / "exit.json").write_text(json.dumps(
        {"exit_code": 0, "elapsed_s": 10.0, "fetch_s": 1.25, "prep_s": 0.25}))


def test_job_parts_add_up_and_pytest_is_the_remainder_of_its_process(tmp_path):
    jd = tmp_path / "run" / "qemu-aarch64" / "rt"
    write_job(jd)
    parts = timing.job_parts(jd)
    assert parts["boot"] == 6.0 and parts["tool"] == 10.0
    assert parts["fetch"] == 1.25 and parts["suite_setup"] == 0.25
    assert parts["stage"] == 0.25 and parts["collect"] == 0.125  # the host's, outside pytest
    # 20 s of pytest process: 6 + 0.5 + 1 + 0.75 + 10 + 1.25 + 0.25 = 19.75 s board side
    assert parts["pytest"] == pytest.approx(0.25)
    assert timing.own_seconds(parts) == 16.0


def test_run_parts_table_reports_what_no_event_accounts_for(tmp_path):
    run = tmp_path / "run"
    write_job(run / "a" / "rt")
    write_job(run / "b" / "rt", pytest_s=21.0)
    timing.append(run / timing.RUN_TIMING_FILE, "finish", 0.5)
    parts = timing.run_parts(run, [run / "a" / "rt", run / "b" / "rt"])
    assert parts["boot"] == 12.0 and parts["finish"] == 0.5
    assert parts["pytest"] == pytest.approx(1.5)
    wall = sum(parts.values()) + 4.0
    rows = {label.split(":")[0]: (s, share) for label, s, share in timing.table(parts, wall)}
    assert rows["not accounted for"][0] == pytest.approx(4.0)
    assert rows["tool"][1] == pytest.approx(20.0 / wall)
    text = timing.format_table(parts, wall)
    assert "tool: on-board tool run (the board's) *" in text and "not accounted for" in text


def test_timed_block_is_recorded_also_when_it_raises(tmp_path):
    path = tmp_path / "events.jsonl"
    with pytest.raises(RuntimeError):
        with timing.timed(path, "judge"):
            raise RuntimeError("boom")
    with timing.timed(None, "judge"):  # nowhere to write: nothing written, no error
        pass
    (ev,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert ev["event"] == "phase" and ev["name"] == "judge" and ev["duration_s"] >= 0
