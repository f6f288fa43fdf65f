"""rtlab.parsers against real rt-tests 2.4 outputs (tests/fixtures/README.md).

Measured values are never typed in: they are read from the fixture itself
with code independent of the parser (``json`` for JSON, a few regexes for
text), and text is compared with the JSON written by the same run.
Percentiles are checked against a brute-force expansion of the histogram.
"""
from __future__ import annotations

import bisect
import gzip
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from rtlab.errors import InputError
from rtlab.core.model import PERCENTILES, Histogram
from rtlab.parsers import known_tools, parse_file, parse_text
from rtlab.parsers._common import Opt, parse_optstring, scan_options
from rtlab.parsers.rtjson import cyclictest_histogram_size
import rtlab.suites  # noqa: F401  the suites register their tools' parsers (rtlab.parsers.registry)

#: every tool a suite parses (the suite registry names each one's parser)
TOOLS = known_tools()

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RT = FIX / "rt-tests-2.4"
NEW = FIX / "derived-2.7"
BAD = FIX / "malformed"
RTB = FIX / "rtbench"
REPO = FIX.parents[1]

CYCLICTEST_JSON = sorted(p.name for p in RT.glob("cyclictest-*.json"))
IPC = ["sigwaittest-t2", "svsematest-t2", "ptsematest-S", "pmqtest-S"]


# ---------------------------------------------------------------------------
# independent readers

def raw_json(path: Path) -> dict:
    """The fixture through plain ``json`` (only the known quote quirk fixed by hand)."""
    text = path.read_text()
    if path.name == "cyclictest-quote.json":
        text = text.replace('--json=cyclictest-quote".json', '--json=cyclictest-quote\\".json')
    return json.loads(text)


def brute_percentiles(counts: dict[int, int], bucket: float, overflows: int) -> dict:
    """Nearest rank on the expanded sample list; overflowed samples are +inf."""
    n = sum(counts.values()) + overflows
    out = {}
    if n == 0:
        return {p: None for p in PERCENTILES}
    if n <= 500_000:
        samples = [round(i * bucket, 9) for i in sorted(counts) for _ in range(counts[i])]
        samples += [math.inf] * overflows
        pick = lambda k: samples[k - 1]  # noqa: E731
    else:  # oslat: tens of millions of samples; same rank, found by bisection
        keys = sorted(counts)
        cum = list(itertools.accumulate(counts[k] for k in keys))
        pick = lambda k: round(keys[bisect.bisect_left(cum, k)] * bucket, 9) if k <= cum[-1] else math.inf  # noqa: E731
    for p in PERCENTILES:
        k = max(1, math.ceil(Fraction(p) * n / 100))
        v = pick(k)
        out[p] = None if v == math.inf else v
    return out


def hist_arg(cmdline: str) -> int:
    m = re.findall(r"\s-[hH]\s*(\d+)", cmdline)
    return int(m[-1]) if m else 0


def text_rows(text: str):
    """cyclictest histogram rows and summary lines, read naively."""
    rows, summary = {}, {}
    for line in text.splitlines():
        if re.fullmatch(r"\d+ \d+(\t\d+)*", line):
            b, counts = line.split(" ")
            rows[int(b)] = [int(c) for c in counts.split("\t")]
        m = re.match(r"# (Total|Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows):(.*)", line)
        if m:
            summary[m.group(1)] = [int(v) for v in m.group(2).split()]
    return rows, summary


def t_lines(text: str) -> dict[int, dict[str, int]]:
    """Last T: line per thread (the live display redraws them)."""
    out = {}
    for line in re.sub(r"\x1b\[\d*A", "", text).splitlines():
        m = re.match(r"T:\s*(\d+) \(\s*\d+\)(.*)", line)
        if m:
            out[int(m.group(1))] = {k: int(v) for k, v in re.findall(r"(\w+):\s*(\d+)", m.group(2))}
    return out


def text_of(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def assert_percentiles(t, counts, bucket, overflows):
    assert t.percentiles_us == brute_percentiles(counts, bucket, overflows)


# ---------------------------------------------------------------------------
# JSON, every tool

@pytest.mark.parametrize("name", CYCLICTEST_JSON)
def test_cyclictest_json_exact(name):
    raw = raw_json(RT / name)
    out = parse_file(RT / name)
    ns = raw["resolution_in_ns"] == 1
    size = hist_arg(raw["cmdline:"])
    scale = 1000 if ns else 1
    assert out.tool == "cyclictest" and out.path == str(RT / name)
    assert out.return_code == raw["return_code"]
    assert out.sysinfo["release"] == raw["sysinfo"]["release"]
    assert len(out.threads) == raw["num_threads"] == len(raw["thread"])
    for t in out.threads:
        r = raw["thread"][str(t.thread)]
        assert (t.cpu, t.cycles) == (r["cpu"], r["cycles"])
        assert (t.min_us, t.avg_us, t.max_us) == (r["min"] / scale, r["avg"] / scale, r["max"] / scale)
        if size == 0:  # 2.4 writes "histogram": {} without -h
            assert r["histogram"] == {}
            assert t.histogram is None and t.overflows is None
            assert t.percentiles_us == {p: None for p in PERCENTILES}
            continue
        counts = {int(k): v for k, v in r["histogram"].items()}
        overflows = r["cycles"] - sum(counts.values())
        assert t.overflows == overflows == t.histogram.overflows
        assert t.histogram.counts == counts
        assert t.histogram.size == size
        assert t.histogram.bucket_us == (0.001 if ns else 1.0)
        assert t.histogram.total == t.cycles
        assert_percentiles(t, counts, 0.001 if ns else 1.0, overflows)


@pytest.mark.parametrize("name", ["signaltest-t2", "cyclicdeadline-i10000"])
def test_signaltest_cyclicdeadline_json_exact(name):
    raw = raw_json(RT / f"{name}.json")
    out = parse_file(RT / f"{name}.json")
    assert out.tool == name.split("-")[0]
    assert len(out.threads) == raw["num_threads"]
    for t in out.threads:
        r = raw["thread"][str(t.thread)]
        assert (t.cycles, t.min_us, t.avg_us, t.max_us) == (r["cycles"], r["min"], r["avg"], r["max"])
        assert t.cpu == r.get("cpu")  # cyclicdeadline writes no cpu
        assert t.histogram is None and t.percentiles_us["99"] is None


@pytest.mark.parametrize("name", IPC)
def test_ipc_json_one_result_per_receiver(name):
    raw = raw_json(RT / f"{name}.json")
    out = parse_file(RT / f"{name}.json")
    assert out.tool == name.split("-")[0]
    assert len(out.threads) == raw["num_threads"] >= 2
    for t in out.threads:
        s, r = raw["thread"][str(t.thread)]["sender"], raw["thread"][str(t.thread)]["receiver"]
        assert t.cycles == s["samples"]
        assert (t.cpu, t.min_us, t.avg_us, t.max_us) == (r["cpu"], r["min"], r["avg"], r["max"])
        assert t.extra["sender_cpu"] == s["cpu"]
        assert t.extra["sender_priority"] == s["priority"]
        assert t.extra["receiver_priority"] == r["priority"]
        assert t.extra["interval_us"] == s["interval"]
        if name.startswith("pmqtest"):
            assert t.extra["timeoutcount"] == r["timeoutcount"]
        else:
            assert "timeoutcount" not in t.extra


def test_pi_stress_json_and_text():
    raw = raw_json(RT / "pi_stress.json")
    j = parse_file(RT / "pi_stress.json")
    assert j.tool == "pi_stress" and j.threads == []
    assert j.metrics["inversions"] == raw["inversion"]
    assert j.return_code == raw["return_code"] == 0
    t = parse_file(RT / "pi_stress.txt")
    total = re.search(r"Total inversion performed: (\d+)", (RT / "pi_stress.txt").read_text())
    assert t.metrics["inversions"] == int(total.group(1)) == raw["inversion"]
    assert t.metrics["duration_s"] >= 3


def test_rt_migrate_test_json_and_text():
    raw = raw_json(RT / "rt-migrate-test.json")
    text = (RT / "rt-migrate-test.txt").read_text()
    runs = len(re.findall(r"^\s+\d+:\s", text, re.M))
    assert runs == 10  # -l 10
    j = parse_file(RT / "rt-migrate-test.json")
    t = parse_file(RT / "rt-migrate-test.txt")
    assert j.tool == t.tool == "rt-migrate-test"
    assert len(j.threads) == len(t.threads) == raw["num_threads"]
    for a, b in zip(j.threads, t.threads):
        r = raw["thread"][str(a.thread)]
        assert (a.cycles, a.min_us, a.avg_us, a.max_us) == (runs, r["min"], r["avg"], r["max"])
        assert a.extra == {"priority": r["prio"], "total_us": r["total"]}
        block = re.search(rf"Task {a.thread} \(prio (\d+)\).*?Max: (\d+) us\s+Min: (\d+) us\s+"
                          r"Tot: (\d+) us\s+Avg: (\d+) us", text, re.S)
        prio, mx, mn, tot, avg = (int(x) for x in block.groups())
        assert (b.cycles, b.min_us, b.avg_us, b.max_us) == (runs, mn, avg, mx)
        assert b.extra == {"priority": prio, "total_us": tot}
        # same run: min/max identical; text avg = (ns/runs)/1000, JSON = (ns/1000)/runs
        assert (a.min_us, a.max_us, a.extra) == (b.min_us, b.max_us, b.extra)
        assert abs(a.avg_us - b.avg_us) <= 1
    assert t.metrics == {"check": "passed"}


def test_rt_migrate_test_cycles_recovered_when_cut_short():
    raw = raw_json(RT / "rt-migrate-test.json")
    # the same file as if asked for 50 runs (-D stopped it after 10)
    raw["cmdline:"] = "rt-migrate-test -q -p 90 -D 5 -c --json=x.json"
    out = parse_text(json.dumps(raw), "x.json")
    assert all(t.cycles == 10 for t in out.threads)


@pytest.mark.parametrize("name", ["oslat-c1", "oslat-c01-z"])
def test_oslat_json_and_text(name):
    raw = raw_json(RT / f"{name}.json")
    buckets = int(re.search(r"-b (\d+)", raw["cmdline:"]).group(1)) if "-b " in raw["cmdline:"] else 32
    j = parse_file(RT / f"{name}.json")
    t = parse_file(RT / f"{name}.txt")
    assert j.tool == t.tool == "oslat"
    assert len(j.threads) == len(t.threads) == raw["num_threads"]
    for a, b in zip(j.threads, t.threads):
        r = raw["thread"][str(a.thread)]
        labels = {int(k): v for k, v in r["histogram"].items()}
        last = labels.get(buckets, 0)  # "(including overflows)": always counted as overflow
        kept = {k: v for k, v in labels.items() if k < buckets}
        assert a.cycles == sum(labels.values())
        assert (a.cpu, a.min_us, a.avg_us, a.max_us) == (r["cpu"], r["min"], r["avg"], r["max"])
        assert a.overflows == last and a.histogram.counts == kept and a.histogram.size == buckets
        assert a.extra == {"freq_mhz": r["freq"], "duration_s": r["duration"]}
        assert_percentiles(a, kept, 1.0, last)
        # text of the same run: same samples; average printed with 3 decimals
        assert (b.cpu, b.cycles, b.min_us, b.max_us, b.overflows) == \
            (a.cpu, a.cycles, a.min_us, a.max_us, a.overflows)
        assert b.histogram == a.histogram
        assert abs(b.avg_us - a.avg_us) <= 0.0005


def test_hackbench_text():
    text = (RT / "hackbench.txt").read_text()
    out = parse_file(RT / "hackbench.txt")
    assert out.tool == "hackbench" and out.threads == []
    assert out.metrics["time_s"] == float(re.search(r"^Time: ([\d.]+)$", text, re.M).group(1))
    assert (out.metrics["groups"], out.metrics["loops"]) == (2, 50)


def test_cyclicdeadline_failure_output_is_an_input_error():
    """Linaro's -i 1000 fails without HRTICK: stdout has no summary at all."""
    with pytest.raises(InputError) as e:
        parse_file(RT / "cyclicdeadline-i1000.txt")
    assert e.value.path == str(RT / "cyclicdeadline-i1000.txt")
    with pytest.raises(InputError, match="no cyclicdeadline summary"):
        parse_file(RT / "cyclicdeadline-i1000.txt", tool="cyclicdeadline")
    assert "HRTICK" in (RT / "cyclicdeadline-i1000.stderr").read_text()


# ---------------------------------------------------------------------------
# text, checked against the text itself and against the JSON of the same run

TEXT_T_ONLY = ["cyclictest-noh", "cyclictest-N", "cyclictest-t2", "cyclictest-S",
               "cyclictest-quote", "signaltest-t2", "cyclicdeadline-i10000"]
TEXT_HIST = ["cyclictest-h400", "cyclictest-h5", "cyclictest-h30", "cyclictest-t2-h400",
             "cyclictest-S-H400"]


@pytest.mark.parametrize("name", TEXT_T_ONLY)
def test_t_lines_exact_and_equal_to_json(name):
    text = (RT / f"{name}.txt").read_text()
    ns = name == "cyclictest-N"
    scale = 1000 if ns else 1
    tl = t_lines(text)
    t = parse_file(RT / f"{name}.txt")
    j = parse_file(RT / f"{name}.json")
    assert t.tool == j.tool
    assert [x.thread for x in t.threads] == sorted(tl) == [x.thread for x in j.threads]
    for a, b in zip(t.threads, j.threads):
        f = tl[a.thread]
        assert (a.cycles, a.min_us, a.avg_us, a.max_us) == \
            (f["C"], f["Min"] / scale, f["Avg"] / scale, f["Max"] / scale)
        assert a.cpu is None and a.histogram is None and a.overflows is None
        # -q: the T: lines are printed after the threads ended: same numbers as
        # the JSON, except avg (text: truncated integer; JSON: 2 decimals)
        assert (a.cycles, a.min_us, a.max_us) == (b.cycles, b.min_us, b.max_us)
        assert 0 <= b.avg_us - a.avg_us < 1.01 / scale


@pytest.mark.parametrize("name", TEXT_HIST)
def test_histogram_text_exact_and_equal_to_json(name):
    text = (RT / f"{name}.txt").read_text()
    rows, summ = text_rows(text)
    nthreads = len(summ["Min Latencies"])
    t = parse_file(RT / f"{name}.txt")
    j = parse_file(RT / f"{name}.json")
    assert t.tool == "cyclictest" and len(t.threads) == nthreads == len(j.threads)
    assert sorted(rows) == list(range(len(rows)))  # 2.4: every row is printed
    for a, b in zip(t.threads, j.threads):
        k = a.thread
        counts = {bucket: c[k] for bucket, c in rows.items() if c[k]}
        overflows = summ["Histogram Overflows"][k]
        # cycles without T: lines = rows + overflows (= # Total: + overflows)
        assert a.cycles == sum(counts.values()) + overflows == summ["Total"][k] + overflows
        assert (a.min_us, a.avg_us, a.max_us) == \
            (summ["Min Latencies"][k], summ["Avg Latencies"][k], summ["Max Latencies"][k])
        assert a.overflows == overflows and a.histogram.counts == counts
        assert a.histogram.size == len(rows)
        assert_percentiles(a, counts, 1.0, overflows)
        # the JSON of the same run describes the same samples
        assert (a.cycles, a.min_us, a.max_us, a.overflows) == (b.cycles, b.min_us, b.max_us, b.overflows)
        assert a.histogram == b.histogram and a.percentiles_us == b.percentiles_us
        assert 0 <= b.avg_us - a.avg_us < 1.01


def test_overflow_cycle_numbers_kept():
    h5 = parse_file(RT / "cyclictest-h5.txt").threads[0]
    assert h5.extra["overflow_cycles"] == [0, 1, 2, 3, 4]  # at most -h N are listed
    assert h5.extra["overflow_cycles_not_listed"] == h5.overflows - 5
    h30 = parse_file(RT / "cyclictest-h30.txt").threads[0]
    assert len(h30.extra["overflow_cycles"]) == min(30, h30.overflows)


@pytest.mark.parametrize("name", IPC)
def test_ipc_text_exact_and_consistent_with_json(name):
    text = (RT / f"{name}.txt").read_text()
    heads = re.findall(r"^#(\d+): ID\d+, P(\d+), CPU(\d+), I(\d+); #\d+: ID\d+, P(\d+), CPU(\d+),"
                       r"(?: TO (\d+),)? Cycles (\d+)$", text, re.M)
    stats = re.findall(r"^#(\d+) -> #(\d+), Min +(\d+), Cur +\d+, Avg +(\d+), Max +(\d+)$", text, re.M)
    t = parse_file(RT / f"{name}.txt")
    j = parse_file(RT / f"{name}.json")
    assert t.tool == j.tool == name.split("-")[0]
    assert len(t.threads) == len(heads) == len(stats) == len(j.threads)
    for a, b, h, s in zip(t.threads, j.threads, heads, stats):
        assert int(h[0]) == 2 * a.thread and (int(s[0]), int(s[1])) == (2 * a.thread + 1, 2 * a.thread)
        assert (a.cycles, a.cpu, a.min_us, a.avg_us, a.max_us) == \
            (int(h[7]), int(h[5]), int(s[2]), int(s[3]), int(s[4]))
        assert a.extra["sender_cpu"] == int(h[2]) and a.extra["interval_us"] == int(h[3])
        # the text is printed just before the threads are stopped, the JSON
        # after: a pair may be a sample behind; the avg is rounded to integer
        assert a.cycles <= b.cycles and a.min_us >= b.min_us and a.max_us <= b.max_us
        assert abs(a.avg_us - b.avg_us) <= 0.505
        assert (a.cpu, a.extra) == (b.cpu, b.extra)
    assert t.threads[0].cycles == j.threads[0].cycles == 1000  # the pair that reached -l


def test_live_display_takes_the_last_t_lines():
    """Without -q the T: lines are redrawn with escapes; the last ones are a
    snapshot taken up to 100 ms before the end (the JSON is exact)."""
    text = (RT / "cyclictest-t2-live.txt").read_text()
    assert "\x1b[" in text
    tl = t_lines(text)
    t = parse_file(RT / "cyclictest-t2-live.txt")
    j = parse_file(RT / "cyclictest-t2-live.json")
    assert len(t.threads) == len(j.threads) == 2
    for a, b in zip(t.threads, j.threads):
        f = tl[a.thread]
        assert (a.cycles, a.min_us, a.avg_us, a.max_us) == (f["C"], f["Min"], f["Avg"], f["Max"])
        assert a.cycles <= b.cycles and a.min_us >= b.min_us and a.max_us <= b.max_us


def test_ns_text_is_recognised_from_t_lines():
    t = parse_file(RT / "cyclictest-N.txt").threads[0]
    j = parse_file(RT / "cyclictest-N.json").threads[0]
    assert (t.min_us, t.max_us) == (j.min_us, j.max_us)
    assert t.min_us < 1000  # µs, not ns
    # forcing the unit the other way is honoured
    assert parse_file(RT / "cyclictest-N.txt", nsecs=False).threads[0].min_us == t.min_us * 1000


def test_ns_histogram_text_needs_nsecs_and_then_equals_json():
    path = RT / "cyclictest-N-h30000.txt.gz"  # gzip read transparently
    text = text_of(path)
    rows, summ = text_rows(text)
    j = parse_file(RT / "cyclictest-N-h30000.json").threads[0]
    t = parse_file(path, nsecs=True).threads[0]
    assert (t.cycles, t.min_us, t.max_us, t.overflows) == (j.cycles, j.min_us, j.max_us, j.overflows)
    assert t.min_us == summ["Min Latencies"][0] / 1000
    assert t.histogram == j.histogram and t.histogram.bucket_us == 0.001
    assert t.histogram.size == len(rows) == 30000
    assert t.percentiles_us == j.percentiles_us
    assert_percentiles(t, {b: c[0] for b, c in rows.items() if c[0]}, 0.001, t.overflows)
    assert 0 <= j.avg_us - t.avg_us < 0.00101
    # nothing in a -N histogram says "ns": without nsecs=True it reads as µs
    assert parse_file(path).threads[0].min_us == summ["Min Latencies"][0]


# ---------------------------------------------------------------------------
# rt-tests >= 2.7 layout (derived from the 2.4 captures)

@pytest.mark.parametrize("name", sorted(p.stem for p in NEW.glob("*.txt")))
def test_new_format_equals_old_format(name):
    old = parse_file(RT / f"{name}.txt")
    new = parse_file(NEW / f"{name}.txt")
    js = parse_file(RT / f"{name}.json")
    assert "# Total:" not in (NEW / f"{name}.txt").read_text()
    assert [t.to_json() for t in new.threads] == [t.to_json() for t in old.threads]
    assert len(old.threads) == len(new.threads) == len(js.threads)
    for a, b, c in zip(old.threads, new.threads, js.threads):
        assert a.histogram.counts == b.histogram.counts == c.histogram.counts
        assert a.histogram.overflows == b.histogram.overflows == c.histogram.overflows
        # the omitted zero rows hide the range: a proven lower bound is kept
        assert b.histogram.size <= a.histogram.size == c.histogram.size


def test_new_format_size_is_a_lower_bound():
    h5 = parse_file(NEW / "cyclictest-h5.txt").threads[0]  # no row printed at all
    assert h5.histogram.counts == {} and h5.histogram.size == 0
    assert h5.cycles == h5.overflows == parse_file(RT / "cyclictest-h5.json").threads[0].cycles


# ---------------------------------------------------------------------------
# overflows and percentiles

def test_everything_overflowed_gives_no_percentile():
    for path in (RT / "cyclictest-h5.txt", RT / "cyclictest-h5.json"):
        t = parse_file(path).threads[0]
        assert t.overflows == t.cycles == 1000
        assert t.percentiles_us == {p: None for p in PERCENTILES}


def test_partial_overflow_gives_percentiles_only_inside_the_range():
    for path in (RT / "cyclictest-h30.txt", RT / "cyclictest-h30.json"):
        t = parse_file(path).threads[0]
        assert 0.01 * t.cycles < t.overflows < 0.5 * t.cycles  # as captured
        assert t.percentiles_us["50"] is not None and t.percentiles_us["50"] < 30
        assert t.percentiles_us["99"] is None and t.percentiles_us["99.99"] is None


@pytest.mark.parametrize("path", [RT / f"{n}.json" for n in TEXT_HIST + ["cyclictest-N-h30000", "oslat-c1",
                                                                       "oslat-c01-z"]],
                         ids=lambda p: p.name)
def test_percentile_is_none_exactly_when_its_rank_is_in_the_overflow(path):
    for t in parse_file(path).threads:
        h = t.histogram
        for p in PERCENTILES:
            rank = max(1, math.ceil(Fraction(p) * h.total / 100))
            assert (t.percentiles_us[p] is None) == (rank > h.recorded)


# ---------------------------------------------------------------------------
# JSON quirks and detection

def test_unescaped_quote_in_cmdline_is_repaired():
    with pytest.raises(json.JSONDecodeError):
        json.loads((RT / "cyclictest-quote.json").read_text())
    t = parse_file(RT / "cyclictest-quote.json").threads[0]
    assert t.cycles == raw_json(RT / "cyclictest-quote.json")["thread"]["0"]["cycles"] == 100


def test_nan_average_of_a_thread_without_samples():
    raw = raw_json(RT / "cyclictest-t2.json")
    text = json.dumps(raw, indent=2).replace(f'"avg": {raw["thread"]["1"]["avg"]}', '"avg": -nan')
    assert "-nan" in text
    t = parse_text(text, "nan.json").threads[1]
    assert math.isnan(t.avg_us)


def test_newer_json_without_histogram_key():
    """rt-tests >= 2.7 leaves "histogram" out without -h (2.4 writes {})."""
    raw = raw_json(RT / "cyclictest-t2.json")
    for t in raw["thread"].values():
        del t["histogram"]
    out = parse_text(json.dumps(raw), "new.json")
    assert [(t.histogram, t.overflows) for t in out.threads] == [(None, None), (None, None)]
    assert [t.to_json() for t in out.threads] == \
        [t.to_json() for t in parse_file(RT / "cyclictest-t2.json").threads]


def test_inconsistent_json_is_an_input_error():
    raw = raw_json(RT / "cyclictest-h400.json")
    raw["thread"]["0"]["cycles"] = 10  # fewer than the histogram holds
    with pytest.raises(InputError, match=r"key thread\.0\.histogram: holds \d+ samples, more than cycles"):
        parse_text(json.dumps(raw), "x.json")
    raw = raw_json(RT / "cyclictest-h400.json")
    raw["num_threads"] = 2
    with pytest.raises(InputError, match="key num_threads: says 2"):
        parse_text(json.dumps(raw), "x.json")
    raw = raw_json(RT / "cyclictest-h400.json")
    raw["cmdline:"] = raw["cmdline:"].replace("-h 400", "-h 40")
    with pytest.raises(InputError, match="beyond the -h 40"):
        parse_text(json.dumps(raw), "x.json")
    with pytest.raises(InputError, match="no JSON output"):
        parse_file(RT / "cyclictest-h400.json", tool="hackbench")


def test_json_without_cmdline_is_detected_by_shape():
    for name, tool in (("cyclictest-h400", "cyclictest"), ("signaltest-t2", "signaltest"),
                       ("pmqtest-S", "pmqtest"), ("oslat-c1", "oslat"), ("pi_stress", "pi_stress"),
                       ("rt-migrate-test", "rt-migrate-test"),
                       ("cyclicdeadline-i10000", "cyclicdeadline")):
        raw = raw_json(RT / f"{name}.json")
        del raw["cmdline:"]
        assert parse_text(json.dumps(raw), f"{name}.json").tool == tool
    raw = raw_json(RT / "svsematest-t2.json")
    del raw["cmdline:"]
    with pytest.raises(InputError, match="force"):
        parse_text(json.dumps(raw), "x.json")
    assert parse_text(json.dumps(raw), "x.json", tool="svsematest").tool == "svsematest"


def test_histogram_size_from_cmdline():
    assert cyclictest_histogram_size("cyclictest -q -h 400 -m") == 400
    assert cyclictest_histogram_size("/usr/bin/cyclictest -qmh400") == 400
    assert cyclictest_histogram_size("cyclictest --histogram=50 -p 90") == 50
    assert cyclictest_histogram_size("cyclictest --histofall 70 -S") == 70
    assert cyclictest_histogram_size("cyclictest -H 20 -h 30") == 30  # the last one wins
    assert cyclictest_histogram_size("cyclictest --histog=12") == 12  # getopt abbreviation
    assert cyclictest_histogram_size("cyclictest -h 5000000") == 1000000  # HIST_MAX
    assert cyclictest_histogram_size("cyclictest -q -p 90 -i 200") == 0
    assert cyclictest_histogram_size("cyclictest -p 90 --json=-h400.json") == 0
    assert cyclictest_histogram_size("cyclictest -a 1 -t 2 -h 9") == 9
    opts = scan_options("x -ab3 --long v -c", parse_optstring("ab:c"), {"long": Opt.REQUIRED})
    assert opts == [("a", None), ("b", "3"), ("long", "v"), ("c", None)]


def test_ipc_text_tool_from_file_name_or_forced(tmp_path):
    text = (RT / "sigwaittest-t2.txt").read_text()
    anon = tmp_path / "out.txt"
    anon.write_text(text)
    with pytest.raises(InputError, match="force") as e:
        parse_file(anon)
    assert e.value.path == str(anon)
    assert parse_file(anon, tool="sigwaittest").tool == "sigwaittest"
    assert parse_file(RT / "sigwaittest-t2.txt").tool == "sigwaittest"  # from its name
    assert parse_file(RT / "pmqtest-S.txt").tool == "pmqtest"  # "TO n" says it


def test_forced_tool():
    assert parse_file(RT / "cyclictest-noh.json", tool="cyclictest").tool == "cyclictest"
    with pytest.raises(InputError, match="unknown tool 'nosuch'"):
        parse_file(RT / "cyclictest-noh.json", tool="nosuch")
    assert "rtbench" in TOOLS and "hackbench" in TOOLS


def test_parse_text_equals_parse_file():
    for name in ("cyclictest-h400.json", "cyclictest-h400.txt", "pmqtest-S.txt"):
        p = RT / name
        assert parse_text(p.read_text(), str(p)).to_json(True) == parse_file(p).to_json(True)


# ---------------------------------------------------------------------------
# rtbench

def test_rtbench_handmade():
    path = RTB / "rtbench-handmade.json"
    raw = json.loads(path.read_text())
    assert raw["_fixture"].startswith("HAND-MADE")
    out = parse_file(path)
    assert out.tool == "rtbench" and out.return_code == 0
    assert [t.extra["benchmark"] for t in out.threads] == sorted(raw["benchmarks"])
    assert [t.thread for t in out.threads] == list(range(len(raw["benchmarks"])))
    assert out.metrics["skipped"] == raw["skipped"]
    for t in out.threads:
        b = raw["benchmarks"][t.extra["benchmark"]]
        assert (t.cpu, t.cycles) == (b["cpu"], b["samples"])
        assert (t.min_us, t.avg_us, t.max_us) == (b["min"] / 1000, b["avg"] / 1000, b["max"] / 1000)
        assert t.overflows == b["overflows"]
        assert t.extra["discarded"] == b["discarded"] and t.extra["other_cpu"] == b["other_cpu"]
        assert t.extra["discard_reasons"] == b["discard_reasons"]
        counts = {int(k): v for k, v in b["histogram"].items()}
        assert t.histogram == Histogram(counts=counts, bucket_us=b["bucket_ns"] / 1000,
                                        size=b["histogram_size"], overflows=b["overflows"])
        assert_percentiles(t, counts, b["bucket_ns"] / 1000, b["overflows"])


def test_rtbench_inconsistent_histogram_is_an_input_error():
    raw = json.loads((RTB / "rtbench-handmade.json").read_text())
    raw["benchmarks"]["sem_post_wake"]["samples"] += 1
    with pytest.raises(InputError, match=r"key benchmarks\.sem_post_wake: histogram"):
        parse_text(json.dumps(raw), "rb.json")
    raw["benchmarks"]["sem_post_wake"]["samples"] -= 1
    raw["benchmarks"]["sem_post_wake"]["unit"] = "furlongs"
    with pytest.raises(InputError, match="unit"):
        parse_text(json.dumps(raw), "rb.json")


def test_rtbench_real_capture():
    """rtbench/build/x86_64/rtbench -q -l 500 -D 2 (see tests/fixtures/README.md)."""
    path = RTB / "rtbench-real-l500.json"
    raw = json.loads(path.read_text())
    out = parse_file(path)
    assert out.tool == "rtbench" and out.return_code == raw["return_code"]
    assert [t.extra["benchmark"] for t in out.threads] == sorted(raw["benchmarks"])
    for t in out.threads:
        b = raw["benchmarks"][t.extra["benchmark"]]
        bucket = b["bucket_ns"] / 1000
        counts = {int(k): v for k, v in b["histogram"].items()}
        assert (t.cpu, t.cycles, t.overflows) == (b["cpu"], b["samples"], b["overflows"])
        assert (t.min_us, t.avg_us, t.max_us) == (b["min"] / 1000, b["avg"] / 1000, b["max"] / 1000)
        assert t.extra.get("other_cpu") == b.get("other_cpu")  # cross-CPU benchmarks only
        assert t.extra["discarded"] == b["discarded"] and t.extra["iterations"] == b["iterations"]
        assert t.histogram.counts == counts and t.histogram.size == b["histogram_size"]
        assert_percentiles(t, counts, bucket, b["overflows"])
        # rtbench's own nearest-rank median/p99 (exact values) lie in the
        # bucket whose lower bound the histogram percentile reports
        for p, own in (("50", b["median"] / 1000), ("99", b["p99"] / 1000)):
            v = t.percentiles_us[p]
            assert v is None or v - 1e-9 <= own < v + bucket + 1e-9, (t.extra["benchmark"], p)


# ---------------------------------------------------------------------------
# malformed input

MALFORMED = {
    "cyclictest-h400-cut.json": "truncated JSON",
    "pmqtest-S-cut.json": "truncated JSON",
    "cyclictest-h400-cut-mid-row.txt": r"no '# Min Latencies:' line; the histogram stops at line \d+",
    "cyclictest-t2-h400-cut-mid-row.txt": r"line \d+: histogram row has 1 counts, the rows above have 2",
    "cyclictest-h400-no-summary.txt": "no '# Min Latencies:' line",
    "cyclictest-h400-row-missing.txt": r"line \d+: '# Total:' of thread 0",
    "cyclictest-noh-nonnumeric.txt": r"line 2: field 'Max' is not an integer: '1a3'",
    "cyclictest-h400-nonnumeric.txt": r"line \d+: field 'Max Latencies' is not an integer",
    "cyclictest-noh-nonnumeric.json": r"key thread\.0\.max: expected a number",
    "signaltest-t2-cut.txt": r"line 2: 'T:' line has no 'Avg:' field",
    "sigwaittest-t2-no-stats.txt": r"line 1: pair has no '#1 -> #0, Min \.\.' line",
    "oslat-c1-cut.txt": "no oslat 'Maximum:' line",
    "hackbench-no-time.txt": "no hackbench 'Time:' line",
    "rt-migrate-test-cut.txt": "'Task N' blocks",
    "unknown-tool.json": "key 'cmdline:': unknown tool 'jitterz'",
    "garbage.txt": "no rt-tests output recognised",
    "garbage.bin": "not a text file",
    "empty.txt": "empty file",
}


def test_every_malformed_fixture_is_listed():
    assert sorted(p.name for p in BAD.iterdir()) == sorted(MALFORMED)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_raises_input_error_naming_the_file(name):
    path = BAD / name
    with pytest.raises(InputError) as e:
        parse_file(path)
    assert e.value.path == str(path)
    assert str(e.value).startswith(f"{path}: ")
    assert re.search(MALFORMED[name], e.value.what), e.value.what


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        parse_file(tmp_path / "nope.json")


# ---------------------------------------------------------------------------
# the CLI

def rtlab(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "rtlab.cli", "parse", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=60)


def test_cli_parse_json_shape():
    files = [RT / "cyclictest-t2-h400.json", RT / "cyclictest-h30.txt", RT / "pmqtest-S.json",
             RTB / "rtbench-handmade.json"]
    r = rtlab(*files, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == ["files"] and len(doc["files"]) == len(files)
    for f, path in zip(doc["files"], files):
        assert f["path"] == str(path) and f["tool"] in TOOLS
        assert f["tool"] == parse_file(path).tool
        for t in f["threads"]:
            assert {"thread", "cpu", "cycles", "min_us", "avg_us", "max_us", "overflows",
                    "percentiles_us"} <= set(t)
            assert set(t["percentiles_us"]) == {"50", "99", "99.9", "99.99"}
    ct = doc["files"][0]["threads"]
    assert [t["percentiles_us"] for t in ct] == [t.percentiles_us for t in parse_file(files[0]).threads]
    assert doc["files"][1]["threads"][0]["percentiles_us"]["99"] is None  # in the overflow


def test_cli_exits_non_zero_naming_the_truncated_file():
    bad = BAD / "cyclictest-h400-cut.json"
    r = rtlab(RT / "cyclictest-h400.json", bad, "--json")
    assert r.returncode != 0
    assert str(bad) in r.stderr and "truncated JSON" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_relative_path(tmp_path):
    shutil.copy(RT / "cyclictest-h400.txt", tmp_path / "ct.txt")
    r = rtlab("ct.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"][0]["path"] == "ct.txt"
