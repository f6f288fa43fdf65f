"""Histogram percentiles (nearest rank) and shares: the edge cases."""
from __future__ import annotations

import math

import pytest

from rtlab.core.model import PERCENTILES, Histogram, ThreadResult, ToolOutput


def thread(h: Histogram | None, max_us: float, cycles: int | None = None) -> ThreadResult:
    n = h.total if h is not None else (cycles or 0)
    return ThreadResult(thread=0, cpu=0, cycles=n if cycles is None else cycles, min_us=0.0,
                        avg_us=0.0, max_us=max_us, overflows=h.overflows if h else None, histogram=h)


# ---------------------------------------------------------------------------
# percentile: nearest rank, rank = ceil(p/100 * N), value = lower bound of its bucket

def test_empty_histogram_has_no_percentile():
    assert Histogram(counts={}).percentile(50) is None


def test_single_sample():
    h = Histogram(counts={7: 1})
    for p in (0, 0.001, 1, 50, 99.99, 100):
        assert h.percentile(p) == 7


def test_p100_is_the_highest_bucket_and_p0_the_lowest():
    h = Histogram(counts={3: 5, 9: 2, 40: 1})
    assert h.percentile(100) == 40
    assert h.percentile(0) == 3  # rank is at least 1


def test_p100_with_overflows_is_unknowable():
    h = Histogram(counts={3: 5}, size=10, overflows=1)
    assert h.percentile(100) is None
    assert h.percentile(80) == 3  # rank ceil(4.8) = 5 of 6: the last recorded one


def test_rank_exactly_at_a_bucket_boundary():
    h = Histogram(counts={10: 500, 20: 500})
    assert h.percentile(50) == 10      # rank 500: the last sample of bucket 10
    assert h.percentile(50.1) == 20    # rank 501: the first of bucket 20
    assert h.percentile(50.05) == 20   # ceil(500.5) = 501


@pytest.mark.parametrize("n", [1000, 2000, 10_000, 1_000_000, 100_000_000])
def test_p999_of_round_sample_counts_is_not_off_by_one(n):
    """99.9/100*1000 is 999.0000000000001 in floats: the rank must still be 999."""
    below = n * 999 // 1000
    h = Histogram(counts={1: below, 2: n - below})
    assert h.percentile(99.9) == 1
    h = Histogram(counts={1: below - 1, 2: n - below + 1})
    assert h.percentile(99.9) == 2


@pytest.mark.parametrize("p", [float(p) for p in PERCENTILES])
def test_percentile_matches_brute_force(p):
    counts = {0: 1, 3: 17, 4: 400, 5: 90, 11: 7, 60: 2, 199: 1}
    h = Histogram(counts=counts, size=200, overflows=3)
    samples = sorted(i for i, c in counts.items() for _ in range(c)) + [math.inf] * 3
    want = samples[max(1, math.ceil(round(p / 100 * len(samples), 9))) - 1]
    assert h.percentile(p) == (None if want == math.inf else want)


def test_all_samples_in_the_overflow():
    h = Histogram(counts={}, size=5, overflows=1000)
    assert h.total == 1000 and h.recorded == 0
    assert all(h.percentile(float(p)) is None for p in PERCENTILES)
    assert h.percentile(0) is None


def test_rank_just_inside_and_just_beyond_the_recorded_samples():
    h = Histogram(counts={1: 99}, size=10, overflows=1)   # N = 100
    assert h.percentile(99) == 1        # rank 99: recorded
    assert h.percentile(99.5) is None   # rank 100: the overflowed one


def test_bucket_width_scales_the_value():
    assert Histogram(counts={3: 1}, bucket_us=0.5).percentile(50) == 1.5
    assert Histogram(counts={17916: 1}, bucket_us=0.001).percentile(50) == 17916 * 0.001


def test_percentiles_us_without_histogram_are_none():
    t = ThreadResult(thread=0, cpu=None, cycles=10, min_us=1, avg_us=2, max_us=3)
    assert t.percentiles_us == {p: None for p in PERCENTILES}
    assert list(t.percentiles_us) == ["50", "99", "99.9", "99.99"]


# ---------------------------------------------------------------------------
# share_at_or_above / count_at_or_above / covers

def test_share_no_cycles_is_unknowable():
    assert thread(None, 0.0, cycles=0).share_at_or_above(10) is None


def test_share_below_max_is_zero_even_without_histogram():
    assert thread(None, 9.0, cycles=100).share_at_or_above(10) == 0.0


def test_share_needs_a_histogram_when_max_reaches_the_threshold():
    assert thread(None, 10.0, cycles=100).share_at_or_above(10) is None


def test_share_inside_the_range():
    h = Histogram(counts={5: 90, 10: 8, 30: 2}, size=100)
    t = thread(h, 30.0)
    assert t.share_at_or_above(10) == 10 / 100   # at: bucket 10 counts
    assert t.share_at_or_above(10.5) == 2 / 100  # inside bucket 10: only from bucket 11 on
    assert t.share_at_or_above(30) == 2 / 100
    assert t.share_at_or_above(31) == 0.0        # above max


def test_share_counts_overflows_as_above_and_refuses_beyond_the_range():
    h = Histogram(counts={5: 95}, size=20, overflows=5)
    t = thread(h, 500.0)
    assert t.share_at_or_above(6) == 5 / 100
    assert t.share_at_or_above(20) == 5 / 100    # exactly the range end: covered
    assert t.share_at_or_above(21) is None       # beyond: unknowable
    assert h.covers(20) and not h.covers(20.5)


def test_share_everything_overflowed():
    h = Histogram(counts={}, size=5, overflows=1000)
    t = thread(h, 346.0)
    assert t.share_at_or_above(5) == 1.0
    assert t.share_at_or_above(3) == 1.0
    assert t.share_at_or_above(6) is None


def test_share_with_fractional_buckets():
    h = Histogram(counts={14619: 1, 17916: 3, 29999: 1}, bucket_us=0.001, size=30000, overflows=5)
    t = thread(h, 80.09)
    assert t.share_at_or_above(17.916) == 9 / 10   # threshold exactly on a bucket edge
    assert t.share_at_or_above(17.9165) == 6 / 10
    assert t.share_at_or_above(30.0) == 5 / 10
    assert t.share_at_or_above(30.001) is None


def test_covers_without_size():
    assert Histogram(counts={1: 1}).covers(1e9)


# ---------------------------------------------------------------------------
# serialisation

def test_json_round_trip():
    h = Histogram(counts={1: 2, 40: 1}, bucket_us=0.1, size=400, overflows=3)
    assert Histogram.from_json(h.to_json()) == h
    t = ThreadResult(thread=1, cpu=None, cycles=6, min_us=0.1, avg_us=1.5, max_us=900.0,
                     overflows=3, histogram=h, extra={"benchmark": "x"})
    assert ThreadResult.from_json(t.to_json(with_histogram=True)) == t
    d = t.to_json()
    assert "histogram" not in d and d["percentiles_us"] == t.percentiles_us
    o = ToolOutput(path="p", tool="rtbench", threads=[t], return_code=0, metrics={"skipped": {}})
    assert ToolOutput.from_json(o.to_json(with_histogram=True)) == o
