"""The vendor tables' rules: thresholds, millions, shares that are exact,
zero, or unknown (never guessed), repeats merged, intervals kept apart."""
import pytest

from rtlab.core.model import (
    Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput, Verdict,
)
from rtlab.report.vendor import (
    block_rows, fmt_samples, fmt_share, parse_thresholds, share_at_or_above, text_histogram,
    vendor_blocks, vendor_tables,
)


def test_thresholds_are_parsed_sorted_and_bad_ones_named():
    assert parse_thresholds("100, 10,70") == (10.0, 70.0, 100.0)
    assert parse_thresholds("2.5") == (2.5,)
    for bad, why in [("10,x", "'x' is not a number"), ("0", "positive"), ("-5", "positive"),
                     ("nan", "positive"), ("inf", "positive"), ("10,10", "twice"), ("", "not a number")]:
        with pytest.raises(ValueError, match=why):
            parse_thresholds(bad)


def test_samples_in_millions_where_large():
    assert fmt_samples(43_200_000) == "43.2 M"
    assert fmt_samples(50_000_000) == "50 M"
    assert fmt_samples(1_000_000) == "1 M"
    assert fmt_samples(999_999) == "999,999"
    assert fmt_samples(3998) == "3,998"


def test_shares_print_like_the_reports_without_exponents():
    assert fmt_share(0.09506) == "9.506 %"
    assert fmt_share(0.000002894) == "0.0002894 %"
    assert fmt_share(2 / 50_000_000) == "0.000004 %"
    assert fmt_share(0.000090) == "0.009 %"
    assert fmt_share(1.0) == "100 %"
    assert fmt_share(0.0) == "0 %"
    assert fmt_share(None) == "unknown"


def _t(counts, size, overflows=0, mn=None, mx=None, **kw):
    h = Histogram(counts=counts, size=size, overflows=overflows) if counts is not None else None
    n = (sum(counts.values()) + overflows) if counts is not None else kw.pop("cycles")
    mn = min(counts) if mn is None else mn
    return ThreadResult(thread=kw.get("thread", 0), cpu=kw.get("cpu", 0), cycles=n, min_us=mn,
                        avg_us=kw.get("avg", 20.0), max_us=mx, histogram=h, overflows=overflows,
                        extra=kw.get("extra", {}))


def test_share_is_exact_inside_the_histogram_and_unknown_beyond_it():
    t = _t({5: 900, 12: 60, 80: 30}, size=100, overflows=10, mx=450.0)  # 1000 samples
    s = share_at_or_above(t, 10)
    assert (s.fraction, s.count) == (0.1, 100)  # 60 + 30 + 10 beyond the range
    assert share_at_or_above(t, 70).count == 40
    assert share_at_or_above(t, 100).count == 10  # the threshold is the range's end: exact
    beyond = share_at_or_above(t, 200)
    assert beyond.fraction is None and beyond.cell() == "unknown"
    assert "histogram ends at 100 µs" in beyond.unknown and "10 samples beyond" in beyond.unknown
    assert share_at_or_above(t, 451).fraction == 0.0  # above the exact max: none, known


def test_share_without_histogram_is_zero_below_max_all_above_min_else_unknown():
    t = _t(None, None, mn=4.0, mx=74.0, cycles=3000)
    assert share_at_or_above(t, 100).cell() == "0 %"
    assert share_at_or_above(t, 4).cell() == "100 % (3,000)"
    u = share_at_or_above(t, 70)
    assert u.fraction is None and "kept no histogram" in u.unknown


def test_text_histogram_merges_buckets_to_fit_and_counts_overflows():
    h = Histogram(counts={i: i + 1 for i in range(100)}, size=100, overflows=7)
    lines = text_histogram(h, rows=16)
    assert len(lines) == 10 + 1  # 10 us per row, then the overflow row
    assert lines[0].split("|")[1].endswith(f" {sum(range(1, 11)):,}")
    assert lines[-1].strip().startswith(">= 100 us") and "7 (beyond" in lines[-1]
    # log scale: 10x the count is not 10x the bar
    bars = [len(ln.split("|")[1].split()[0]) for ln in lines[:-1]]
    assert bars[-1] < 3 * bars[0]


def _m(board, variant, suite, load, threads, tool="cyclictest", verdict=Verdict.PASS):
    return Measurement(key=MeasurementKey(board, variant, suite, load),
                       output=ToolOutput(path="x", tool=tool, threads=threads), verdict=verdict)


def test_repeats_merge_per_thread_and_na_variants_and_intervals_stay_apart():
    h = lambda c: _t(c, size=100, mx=float(max(c)))  # noqa: E731
    jobs = [
        JobResult("b", "rt", arch="aarch64", measurements=[
            _m("b", "rt", "cyclictest-1ms", "idle", [h({10: 50, 12: 50})]),
            _m("b", "rt", "cyclictest-10ms", "idle", [h({30: 10})]),
            _m("b", "rt", "sigwaittest", "stress",
               [_t(None, None, mn=5.0, mx=20.0, cycles=10, thread=1, cpu=2, extra={"sender_cpu": 2})],
               tool="sigwaittest")]),
        JobResult("b", "rt", arch="aarch64", measurements=[  # a second run of the same pair
            _m("b", "rt", "cyclictest-1ms", "idle", [h({11: 100, 95: 1})])]),
        JobResult("b", "none", arch="aarch64", infra_error="no boot"),
    ]
    run = RunResult(run_id="r", started="t", campaign="c", jobs=jobs,
                    not_available=[{"board": "b", "variant": "rt-iso", "reason": "1 CPU"}])
    blocks = {b.suite: b for b in vendor_blocks(run)}
    assert list(blocks) == ["cyclictest-1ms", "cyclictest-10ms", "sigwaittest"]
    one = blocks["cyclictest-1ms"]
    assert one.variants == ["rt", "none", "rt-iso"]
    rows = dict(block_rows(one, (10, 90)))
    assert rows["T: 0 CPU 0 min/avg/max"]["rt"] == "10 / 20 / 95"
    assert rows["samples"]["rt"] == "201"
    assert rows[">= 90 us"]["rt"] == f"{fmt_share(1 / 201)} (1)"
    assert rows["runs (max each)"]["rt"] == "2: 12 / 95"
    assert rows["verdict"] == {"rt": "PASS", "none": "INFRA", "rt-iso": "n/a"}
    assert "rt-iso: not available (1 CPU)" in one.notes
    ipc = dict(block_rows(blocks["sigwaittest"], (10,)))
    assert "#3 -> #2 CPU 2 min/avg/max" in ipc
    assert ipc[">= 10 us"]["rt"] == "unknown"
    text = vendor_tables(run, (10, 90))
    assert "== b (aarch64) · cyclictest-10ms · idle" in text
    assert "Max latency" in text and "unjudged" not in text
    # jobs without numbers are listed with the reason, never just absent
    assert "  b/none: INFRA: no boot" in text and "  b/rt-iso: not available: 1 CPU" in text


def test_unjudged_measurement_is_said_so():
    run = RunResult(run_id="r", started="t", campaign="c", jobs=[JobResult("b", "rt", measurements=[
        _m("b", "rt", "cyclictest", "idle", [_t({10: 5}, size=100, mx=10.0)], verdict=None)])])
    (b,) = vendor_blocks(run)
    assert dict(block_rows(b, (10,)))["verdict"]["rt"] == "unjudged"


def test_microseconds_keep_nanosecond_operations_visible():
    from rtlab.report.vendor import fmt_us

    assert [fmt_us(v) for v in (0.004, 0.036, 0.0, 2.5, 26.37, 1189.0, 15226.0)] == \
        ["0.004", "0.036", "0", "2.5", "26.4", "1,189", "15,226"]


def test_whole_run_results_have_their_row():
    ms = []
    for t in (1.234, 2.5):  # two repeats
        m = _m("b", "rt", "hackbench", "idle", [], tool="hackbench")
        m.output.metrics["time_s"] = t
        ms.append(m)
    run = RunResult(run_id="r", started="t", campaign="c",
                    jobs=[JobResult("b", "rt", measurements=[m], repeat=i + 1) for i, m in enumerate(ms)])
    (b,) = vendor_blocks(run)
    rows = dict(block_rows(b, (10,)))
    first, second = rows["result"]["rt"].split(" / ")
    assert first.startswith("1.23") and second.startswith("2.5") and "samples" not in rows
