"""rtla timerlat/osnoise hist parsing against the real captures of
tests/fixtures/rtla-6.1 (COMMANDS.md says how they were made), the suites'
command lines, and damaged outputs refused with the line named."""
from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.errors import InputError
from rtlab.parsers.rtla import parse_osnoise_hist, parse_timerlat_hist
from rtlab.suites import SUITES, SuiteRun

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rtla-6.1"

# (cpu, count, over, min, avg, max) per column, as printed in the captures
TIMERLAT = {
    "aarch64": {"irq": [(0, 2974, 12, 19, 729, 148079), (1, 3245, 11, 35, 588, 109461)],
                "thread": [(0, 2974, 17, 51, 856, 148304), (1, 3245, 15, 63, 720, 110064)]},
    "x86_64": {"irq": [(0, 2876, 13, 1, 799, 60836), (1, 2770, 9, 10, 795, 60687)],
               "thread": [(0, 2875, 17, 20, 921, 61003), (1, 2770, 17, 37, 955, 60748)]},
}
OSNOISE = {
    "aarch64": [(0, 761430, 221, 0, 4, 54690), (1, 744398, 224, 0, 4, 36420)],
    "x86_64": [(0, 329119, 139, 0, 35, 239440), (1, 320464, 125, 0, 35, 285380)],
}


def rows(path: Path, column: int) -> dict[int, int]:
    """The non-zero histogram rows of one column, read naively."""
    out = {}
    for line in path.read_text().splitlines():
        toks = line.split()
        if toks and toks[0].isdigit() and int(toks[column]):
            out[int(toks[0])] = int(toks[column])
    return out


def check(out, path, expected, bucket, entries, first_column, stride):
    assert [(t.cpu, t.cycles, t.overflows, t.min_us, t.avg_us, t.max_us) for t in out.threads] == expected
    for i, t in enumerate(out.threads):
        h = t.histogram
        assert h.bucket_us == bucket and h.size == entries and h.overflows == t.overflows
        assert {k * bucket: v for k, v in h.counts.items()} == rows(path, first_column + i * stride)
        assert h.total == t.cycles


@pytest.mark.parametrize("arch", ["aarch64", "x86_64"])
def test_timerlat_capture_parses_exactly(arch):
    path = FIX / f"timerlat-hist-{arch}.txt"
    irq, thread = parse_timerlat_hist(path.read_text(), path, bucket=100, entries=200)
    assert irq.tool == thread.tool == "timerlat" and irq.metrics["duration_s"] == 5
    # columns IRQ-000 Thr-000 IRQ-001 Thr-001: IRQ is column 1, 3; thread 2, 4
    check(irq, path, TIMERLAT[arch]["irq"], 100, 200, 1, 2)
    check(thread, path, TIMERLAT[arch]["thread"], 100, 200, 2, 2)
    # the thread wakes after its IRQ: its worst latency is never below the IRQ's
    assert thread.combined().max_us >= irq.combined().max_us


@pytest.mark.parametrize("arch", ["aarch64", "x86_64"])
def test_osnoise_capture_parses_exactly(arch):
    path = FIX / f"osnoise-hist-{arch}.txt"
    out = parse_osnoise_hist(path.read_text(), path, bucket=10, entries=500)
    assert out.tool == "osnoise"
    check(out, path, OSNOISE[arch], 10, 500, 1, 1)


def test_percentiles_come_from_the_histogram():
    path = FIX / "timerlat-hist-aarch64.txt"
    irq, _ = parse_timerlat_hist(path.read_text(), path, bucket=100, entries=200)
    t = irq.threads[0]
    # rank ceil(0.99 * 2974) = 2945; walk the naive rows to find its bucket
    seen, p99 = 0, None
    for idx, n in sorted(rows(path, 1).items()):
        seen += n
        if seen >= 2945:
            p99 = idx
            break
    assert t.percentiles_us["99"] == p99 == 9900
    # p99.99 falls among the 12 samples over the 20 ms range: unknown, not guessed
    assert t.percentiles_us["99.99"] is None


def test_bucket_inferred_without_the_command():
    path = FIX / "timerlat-hist-aarch64.txt"
    irq, _ = parse_timerlat_hist(path.read_text(), path)
    assert irq.threads[0].histogram.bucket_us == 100 and irq.threads[0].histogram.size is None


def damaged(tmp_path, edit):
    text = (FIX / "timerlat-hist-aarch64.txt").read_text()
    p = tmp_path / "t.txt"
    p.write_text(edit(text))
    return p


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("count:     2974", "count:     2975", 1), "rows (2962) + over (12) != count (2975)"),
    (lambda t: t.replace("max:     148079", "max:     1x8079"), "line 136: max of IRQ-000 is not a count"),
    (lambda t: t.split("over:")[0], "summary lines missing"),
    (lambda t: t.replace("# RTLA timerlat histogram", "# something else"), "not rtla hist output"),
    (lambda t: t.replace("\n100 ", "\n150 ", 1), "index 150 is not a multiple of the bucket size 100"),
    (lambda t: t.replace("\n200 ", "\n20000 ", 1), "beyond -E 200"),
    (lambda t: t.replace("IRQ-001", "XYZ-001"), "unknown column 'XYZ-001'"),
    (lambda t: t.replace("\n0          2411       397      2601       430 ", "\n0          2411       397"),
     "line 5: 2 values for 4 columns"),
])
def test_damaged_output_is_refused_naming_the_place(tmp_path, edit, message):
    p = damaged(tmp_path, edit)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        parse_timerlat_hist(p.read_text(), p, bucket=100, entries=200)


def test_osnoise_output_is_not_timerlat():
    path = FIX / "osnoise-hist-aarch64.txt"
    with pytest.raises(InputError, match="expected rtla timerlat hist output"):
        parse_timerlat_hist(path.read_text(), path)


def test_suite_commands():
    run = SuiteRun(id="timerlat@idle", name="timerlat", suite="timerlat", load="idle",
                   params=SUITES["timerlat"].params({"duration_s": 5}), cpus=(0, 1))
    assert SUITES["timerlat"].command(run) == \
        "rtla timerlat hist -d 5s -c 0-1 -p 1000 -P f:95 -b 1 -E 1000".split()
    run = SuiteRun(id="osnoise@idle", name="osnoise", suite="osnoise", load="idle",
                   params=SUITES["osnoise"].params({"duration_s": 5, "priority": 90}), cpus=(1,))
    assert SUITES["osnoise"].command(run) == \
        "rtla osnoise hist -d 5s -c 1 -p 1000000 -r 900000 -T 1 -P f:90 -b 1 -E 1000".split()


def test_params_are_typed_and_ranged():
    from rtlab.core.params import ParamError

    for suite, bad in (("timerlat", {"period_us": "1000; reboot"}), ("timerlat", {"priority": 100}),
                       ("osnoise", {"runtime_us": 2000000, "period_us": 1000000}),
                       ("osnoise", {"entries": 0})):
        with pytest.raises(ParamError):
            SUITES[suite].params(bad)


def test_timerlat_is_two_measurements(tmp_path):
    """The suite's raw dir gives an IRQ and a thread output (suite names
    <name>-irq and <name>-thread in the runner)."""
    run = SuiteRun(id="timerlat@idle", name="timerlat", suite="timerlat", load="idle",
                   params=SUITES["timerlat"].params({"bucket_us": 100, "entries": 200}), cpus=(0, 1))
    raw = tmp_path / run.id
    raw.mkdir()
    (raw / "stdout.txt").write_bytes((FIX / "timerlat-hist-x86_64.txt").read_bytes())
    outs = SUITES["timerlat"].parse_outputs(tmp_path, run)
    assert set(outs) == {"irq", "thread"}
    assert outs["irq"].threads[0].max_us == 60836 and outs["thread"].threads[0].max_us == 61003


def test_stopped_run_parses_with_its_stop_lines():
    """Evidence armed (-T/-i): rtla stops at the first sample over the
    threshold and says so after the summary (real capture, fifo-hog load)."""
    path = FIX / "timerlat-hist-stopped-aarch64.txt"
    irq, thread = parse_timerlat_hist(path.read_text(), path, bucket=100, entries=200)
    assert thread.metrics["stopped"] == 1 and thread.metrics["trace_saved_as"] == "imerlat_trace.txt"
    assert [t.max_us for t in thread.threads] == [87047, 3728889]
    assert [t.cycles for t in irq.threads] == [892, 110]
    # a row after the stop lines is still refused
    bad = path.read_text() + "100 1 1 1 1\n"
    with pytest.raises(InputError, match="after the summary"):
        parse_timerlat_hist(bad, path, bucket=100, entries=200)


def test_stopped_run_with_an_empty_column():
    """Real (fifo-hog on CPU 1, stopped after 1 s): CPU 1 recorded no IRQ
    sample; rtla prints its min as ULLONG_MAX and its avg as '-'. The empty
    column is no thread, and is named; the others parse."""
    path = FIX / "timerlat-hist-stopped-noirq-aarch64.txt"
    irq, thread = parse_timerlat_hist(path.read_text(), path, bucket=100, entries=200)
    assert [(t.cpu, t.cycles, t.max_us) for t in irq.threads] == [(0, 472, 276275)]
    assert irq.metrics["cpus_without_samples"] == [1] and irq.metrics["duration_s"] == 1
    assert [(t.cpu, t.cycles, t.max_us, t.overflows) for t in thread.threads] == \
        [(0, 472, 276569, 49), (1, 1, 3775954, 1)]
    assert "cpus_without_samples" not in thread.metrics


def test_rtlab_parse_takes_rtla_outputs_like_any_raw_output():
    """`rtlab parse` reads every raw output a suite keeps: rtla's histograms
    are told by their first line and parsed by their suite, one entry per
    measurement (timerlat: -irq and -thread), beside an rt-tests JSON."""
    import json
    import subprocess
    import sys

    RTLAB = str(Path(sys.executable).parent / "rtlab")
    rt = sorted((FIX.parent / "rt-tests-2.4").glob("cyclictest-*.json"))[0]
    files = [FIX / "timerlat-hist-x86_64.txt", FIX / "osnoise-hist-x86_64.txt", rt]
    p = subprocess.run([RTLAB, "parse", *map(str, files)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)["files"]
    assert [(f["tool"], f.get("measurement")) for f in got] == [
        ("timerlat", "timerlat-irq"), ("timerlat", "timerlat-thread"), ("osnoise", "osnoise"),
        ("cyclictest", None)]
    maxima = [[t["max_us"] for t in f["threads"]] for f in got[:3]]
    assert maxima == [[r[5] for r in TIMERLAT["x86_64"]["irq"]], [r[5] for r in TIMERLAT["x86_64"]["thread"]],
                      [r[5] for r in OSNOISE["x86_64"]]]
    # forced: --tool timerlat on an osnoise file is refused naming the file
    bad = subprocess.run([RTLAB, "parse", "--tool", "timerlat", str(files[1])],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "osnoise-hist-x86_64.txt" in bad.stderr, bad.stderr
