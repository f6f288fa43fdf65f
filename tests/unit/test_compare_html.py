"""The comparison report, looked at: headless Chromium renders it and the
screenshot is not blank (the histograms and the per-run points are drawn)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from test_compare import runs  # noqa: E402

from rtlab.cli import main  # noqa: E402
from rtlab.report.junit import junit_xml  # noqa: E402
from rtlab.run.results import load_run  # noqa: E402


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
    # every look of the sequential verdict, in the report and in compare.json
    assert "<table class='looks'>" in text and "<td>regression</td>" in text
    js = json.loads((Path(dirs["w"][0]) / "compare.json").read_text())
    looks = next(s["looks"] for s in js["keys"][0]["statistics"] if s["looks"])
    assert looks and {"runs", "ratio", "p", "upper", "decision"} <= set(looks[0])
    # the candidate's report links it; its JUnit names the key, the baseline and the report
    w0 = Path(dirs["w"][0])
    page = (w0 / "report.html").read_text()
    assert str(html) in page and "Regression verdict: <span class='badge v-regression'>REGRESSION</span>" in page
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
    img = Image.open(shot).convert("RGB")
    w, h = img.size
    assert (w, h) == (900, 1400)
    px = [img.getpixel((x, y)) for y in range(0, h, 2) for x in range(0, w, 2)]  # every 4th pixel
    # not blank: many non-white pixels, and the two series' colours are there
    ink = sum(1 for p in px if p != (255, 255, 255))
    assert ink > 0.02 * len(px), ink
    blue = sum(1 for r, g, b in px if b > 150 and r < 60)
    orange = sum(1 for r, g, b in px if r > 180 and b < 60)
    assert blue > 12 and orange > 12, (blue, orange)
