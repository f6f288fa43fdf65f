"""`rtlab parse` memory is bounded: a file over the size limit, or a
document with more members (histogram buckets) than the limit, is refused
with exit 2 and one line naming the file and the limit, before the memory
is spent. (How much memory a file under the limits takes: bench/bench_parse.py.)"""
import gzip
import json

from .conftest import ROOT, rtlab_inproc

FIX = ROOT / "tests" / "fixtures" / "rt-tests-2.4"


def test_too_many_buckets_is_refused_naming_file_and_limit(tmp_path, monkeypatch, capsys):
    f = FIX / "cyclictest-N-h30000.json"
    rc, err = rtlab_inproc("parse", f, capsys=capsys)
    assert rc == 0
    monkeypatch.setenv("RTLAB_PARSE_MAX_ENTRIES", "100")
    rc, err = rtlab_inproc("parse", f, capsys=capsys)
    assert rc == 2 and err.count("\n") == 1
    assert f"{f}: more than 100 JSON members" in err and "RTLAB_PARSE_MAX_ENTRIES" in err


def test_too_big_a_file_or_a_gzip_bomb_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RTLAB_PARSE_MAX_MB", "1")
    big = tmp_path / "big.json"
    big.write_text('{"x": "' + "a" * (2 * 1024 * 1024) + '"}')
    rc, err = rtlab_inproc("parse", big, capsys=capsys)
    assert rc == 2 and f"{big}: over the parse limit of 1 MB (RTLAB_PARSE_MAX_MB)" in err
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (50 * 1024 * 1024) + b"{}"))  # 50 kB on disk
    rc, err = rtlab_inproc("parse", bomb, capsys=capsys)
    assert rc == 2 and f"{bomb}: decompressed, over the parse limit of 1 MB" in err
    assert "Traceback" not in err


def test_histograms_decode_the_same_through_the_compact_path():
    """The decoder builds histograms straight into int-keyed counts; the
    result equals the plain reading of the same JSON."""
    import rtlab.suites  # noqa: F401  the suites register their tools' parsers
    from rtlab.parsers import parse_file
    f = FIX / "cyclictest-t2-h400.json"
    out = parse_file(f)
    doc = json.loads(f.read_text())
    for t in out.threads:
        plain = {int(k): v for k, v in doc["thread"][str(t.thread)]["histogram"].items() if v}
        assert t.histogram.counts == plain and plain
