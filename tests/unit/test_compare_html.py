"""The comparison report, looked at: headless Chromium renders it and the
screenshot is not blank (the histograms and the per-run points are drawn)."""
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_compare import runs  # noqa: E402

from rtlab.cli import main  # noqa: E402
from rtlab.junit import junit_xml  # noqa: E402
from rtlab.results import load_run  # noqa: E402


def png_pixels(path: Path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # PNG filters (RFC 2083 6.)
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def test_compare_html_renders_and_is_linked_from_report_and_junit(tmp_path):
    dirs = {}
    for name, vals in (("b", [23, 25, 24, 26, 22]), ("w", [50, 46, 52, 48, 55])):
        dirs[name] = []
        for r in runs(name, vals):
            d = tmp_path / r.run_id
            d.mkdir()
            (d / "run.json").write_text(json.dumps(r.to_json()))
            (d / "report.html").write_text("old")
            dirs[name].append(str(d))
    html = tmp_path / "compare.html"
    assert main(["compare", "--baseline", *dirs["b"], "--candidate", *dirs["w"], "--html", str(html)]) == 1
    text = html.read_text()
    assert text.count("<polyline") == 2  # baseline and candidate histograms overlaid
    assert text.count("<circle") == 2 * 10  # one point per run, p99 and p99.9
    # the candidate's report links it; its JUnit names the key, the baseline and the report
    w0 = Path(dirs["w"][0])
    assert str(html) in (w0 / "report.html").read_text() and "Regression verdict: REGRESSION" in (w0 / "report.html").read_text()
    verdict = json.loads((w0 / "compare.json").read_text())
    xml = junit_xml([load_run(w0)], {"w0": verdict}).getroot()
    (failure,) = xml.iter("failure")
    assert "qemu-aarch64/rt/cyclictest/idle: p99 +" in failure.text and str(html) in failure.text
    assert "baseline: runs " in failure.text

    chromium = shutil.which("chromium")
    assert chromium, "chromium (Debian package) is part of make test's set-up"
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=900,1400", html.as_uri()],
                   capture_output=True, timeout=120, check=True)
    w, h, bpp, rows = png_pixels(shot)
    assert (w, h) == (900, 1400)
    # not blank: many non-white pixels, and the two series' colours are there
    ink = sum(1 for row in rows for i in range(0, len(row), bpp) if row[i:i + 3] != b"\xff\xff\xff")
    assert ink > 0.02 * w * h, ink
    blue = sum(1 for row in rows for i in range(0, len(row), bpp) if row[i + 2] > 150 and row[i] < 60)
    orange = sum(1 for row in rows for i in range(0, len(row), bpp) if row[i] > 180 and row[i + 2] < 60)
    assert blue > 50 and orange > 50, (blue, orange)
