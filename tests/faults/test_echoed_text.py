"""Terminal escapes never reach the CI log (#40): text from outside rtlab (a
run directory's name, a LAVA failure comment, a probe's message kept as a
measurement's reason) passes one filter (rtlab.core.printable) on its way to
stdout and stderr, whichever command prints it."""
import json
import re
from pathlib import Path

from rtlab.core.model import Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput

from rtlab.cli import main

#: retitle the terminal, clear the screen, colour, ring the bell, back up, return to the line start
EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\x07\x08\r"
BUDGETS = "budgets:\n  qemu-tcg: {'*': {'*': {'*': {max_us: 10000000}}}}\n"
#: what a terminal may be sent: printable text, newline and tab
UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _run_dir(d: Path, max_us: int) -> Path:
    t = ThreadResult(thread=0, cpu=0, cycles=1000, min_us=10, avg_us=12, max_us=max_us, overflows=0,
                     histogram=Histogram({10: 985, max_us // 2: 10, max_us: 5}, 1.0, 100_000, 0))
    m = Measurement(MeasurementKey("qemu-x86_64", "rt", "cyclictest", "idle"),
                    ToolOutput("cyclictest.json", "cyclictest", [t]), reasons=["probe said " + EVIL])
    run = RunResult(d.name, "2026-11-28T00:00:00Z", "ci", {"sha": "a" * 40, "subject": "fix " + EVIL},
                    [JobResult("qemu-x86_64", "rt", "x86_64", "qemu-tcg", {}, [m], duration_s=3),
                     JobResult("qemu-aarch64", "rt", "aarch64", "qemu-tcg", {}, [], infra_error="LAVA: " + EVIL)])
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(run.to_json()))
    (d / "budgets.yaml").write_text(BUDGETS)
    return d


def _printed(capsys, *args) -> tuple[int, str]:
    """The command's exit code and all it wrote to stdout and stderr, none of it unprintable."""
    rc = main([str(a) for a in args])
    got = capsys.readouterr()
    out = got.out + got.err
    assert UNPRINTABLE.search(out) is None, repr(out[:3000])
    return rc, out


def test_escapes_in_names_and_messages_never_reach_stdout_or_stderr(tmp_path, capsys):
    base = _run_dir(tmp_path / f"base{EVIL}", 100)
    cand = _run_dir(tmp_path / f"cand{EVIL}", 160)

    _, out = _printed(capsys, "compare", "--baseline", base, "--candidate", cand)
    assert f"baseline: runs {tmp_path}/basered (1 run)" in out, out  # the name, its escapes gone

    _, out = _printed(capsys, "baseline", "plan", "--baseline", base)
    assert f"baseline: runs {tmp_path}/basered" in out, out

    rc, out = _printed(capsys, "report", cand)
    assert rc == 0 and "INFRA qemu-aarch64/rt: LAVA: red" in out, out

    # a killed run (no run.json) under such a name: the report of what was kept
    killed = tmp_path / f"killed{EVIL}"
    killed.mkdir()
    (killed / "run-started.json").write_text(json.dumps({"pid": 1, "started": "2026-11-28T00:00:00Z"}))
    _printed(capsys, "report", killed)
    rc, out = _printed(capsys, "gate", killed)
    assert rc == 2 and "run killed" in out, out
