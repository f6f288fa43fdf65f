"""A soak's worst case, estimated, where people read it: beside the observed
max in the comparison table, as a return-level plot in report.html (rendered
in headless Chromium and looked at), in the vendor tables and in the store's
verdict point; "cannot estimate: <reason>" wherever a check refused it.

The soaks here are checkpoint states built segment by segment from samples of
a known distribution (no board: the estimator, the checkpoint merge and the
report code are the real ones)."""
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                              ToolOutput, Verdict)
from rtlab.report.plot import return_level_svg, write_html_report
from rtlab.report.table import comparison_table
from rtlab.report.vendor import vendor_tables, write_vendor_html
from rtlab.soak import checkpoint as soak
from rtlab.store.schema import VERDICT, field_type, points_for_run

NS = "{http://www.w3.org/2000/svg}"


def _segment(x: np.ndarray) -> ToolOutput:
    counts: dict[int, int] = {}
    for v in x.astype(int):
        counts[int(v)] = counts.get(int(v), 0) + 1
    h = Histogram(counts=counts, bucket_us=1, size=2000)
    return ToolOutput(path="x", tool="cyclictest", threads=[ThreadResult(
        thread=0, cpu=0, cycles=len(x), min_us=float(x.min()), avg_us=float(x.mean()), max_us=float(x.max()),
        histogram=h)])


def soak_output(seed: int, segments: int = 20, trend: float = 0.0) -> ToolOutput:
    """A complete soak of *segments* 5 s checkpoints at 1 ms: gamma latencies
    (an exponential-like tail, as cyclictest's), plus *trend* µs per segment."""
    rng = np.random.default_rng(seed)
    st = soak.new_state(5 * segments, 5, 1000, "cyclictest -i1000 ...")
    for i in range(segments):
        x = rng.gamma(4, 2, size=5000) + 5 + trend * i
        soak.add_segment(st, i, _segment(x), duration_s=5, elapsed_s=5, gap_before_s=0.2 if i else None)
    return soak.output_of(st, "checkpoint.json")


@pytest.fixture(scope="module")
def run():
    ok = Measurement(MeasurementKey("local", "rt", "cyclictest-soak"), soak_output(1), verdict=Verdict.PASS)
    bad = Measurement(MeasurementKey("local", "none", "cyclictest-soak"), soak_output(2, trend=3.0),
                      verdict=Verdict.PASS)
    assert ok.output.metrics["pwcet"]["refused"] is None, ok.output.metrics["pwcet"]
    assert bad.output.metrics["pwcet"]["refused"].startswith("cannot estimate: stationarity")
    return RunResult(run_id="soak-report", started="2026-11-26T16:00:00Z", campaign="soak", jobs=[
        JobResult(board="local", variant="rt", arch="x86_64", measurements=[ok]),
        JobResult(board="local", variant="none", arch="x86_64", measurements=[bad])])


def _rows(text):
    return {ln.split()[0] + (" " + ln.split()[1] if ln.startswith("pWCET") else ""): ln
            for ln in text.splitlines() if ln and not ln.startswith(" ")}


def test_table_shows_the_estimate_beside_the_observed_max_and_why_not(run):
    text = comparison_table(run)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("max "))
    assert lines[at + 1].startswith("pWCET 1e-9 ") and lines[at + 2].startswith("pWCET 1e-9/h ")
    est = run.jobs[0].measurements[0].output.metrics["pwcet"]
    lo, hi = est["per_sample_ci_us"]
    assert f"{est['per_sample_us']:,.0f} ({lo:,.0f}-{hi:,.0f})" in lines[at + 1]
    assert lines[at + 1].rstrip().endswith("n/a")  # the refused column ("none", second)
    assert "pWCET n/a (worst case not estimated):" in text
    assert "local/none cyclictest-soak@idle: cannot estimate: stationarity" in text


def test_vendor_tables_show_the_estimate_and_the_refusal(run):
    text = vendor_tables(run)
    est = run.jobs[0].measurements[0].output.metrics["pwcet"]
    (row,) = [ln for ln in text.splitlines() if ln.startswith("pWCET 1e-9/sample (90%)")]
    assert row.split()[-2] == "cannot" or "cannot estimate" in row
    assert f"{est['per_sample_us']:.1f}" in row
    (hour,) = [ln for ln in text.splitlines() if ln.startswith("pWCET 1e-9/hour (90%)")]
    assert f"{est['per_hour_us']:.1f}" in hour
    assert "note: pWCET none: cannot estimate: stationarity" in text


def test_vendor_html_has_the_rows_and_a_return_level_plot_per_soak(run, tmp_path):
    page = write_vendor_html(run, tmp_path / "vendor.html").read_text()
    assert "<th>pWCET 1e-9/sample (90%)</th>" in page and "<td>cannot estimate</td>" in page
    assert page.count('class="return-level"') == 2 and "local (x86_64) · cyclictest-soak · idle · rt · pWCET return level" in page


def test_store_verdict_point_carries_the_estimate_or_the_refusal(run):
    pts = {p.tags["variant"]: p for p in points_for_run(run) if p.measurement == VERDICT
           and p.tags.get("scope") == "measurement"}
    est = run.jobs[0].measurements[0].output.metrics["pwcet"]
    ok, bad = pts["rt"].fields, pts["none"].fields
    assert ok["pwcet_us"] == est["per_sample_us"] and ok["pwcet_hour_us"] == est["per_hour_us"]
    assert [ok["pwcet_lo_us"], ok["pwcet_hi_us"]] == est["per_sample_ci_us"]
    assert ok["pwcet_method"] == "pot-gpd" and "pwcet_refused" not in ok
    assert bad["pwcet_refused"].startswith("cannot estimate: stationarity") and "pwcet_us" not in bad
    for f in list(ok) + list(bad):
        if f.startswith("pwcet"):
            assert isinstance(ok.get(f, bad.get(f)), field_type(VERDICT, f))


def test_return_level_svg_draws_curve_band_points_and_marks(run):
    est = run.jobs[0].measurements[0].output.metrics["pwcet"]
    svg = ET.fromstring(return_level_svg(est, "t"))
    (band,) = [p for p in svg.iter(f"{NS}polygon") if p.get("class") == "band"]
    (line,) = [p for p in svg.iter(f"{NS}polyline") if p.get("class") == "level"]
    assert len(band.get("points").split()) == 2 * len(line.get("points").split())
    assert len([c for c in svg.iter(f"{NS}circle") if c.get("class") == "block-max"]) == 20
    texts = " ".join(t.text or "" for t in svg.iter(f"{NS}text"))
    assert f"pWCET 1e-9 per sample: {est['per_sample_us']:,.0f} µs" in texts
    assert "observed max" in texts and "1e16" in texts  # the axis reaches the per-hour level (1/2.8e-16)
    refused = run.jobs[1].measurements[0].output.metrics["pwcet"]
    svg = ET.fromstring(return_level_svg(refused, "t"))
    assert not [p for p in svg.iter(f"{NS}polyline")]
    assert len([c for c in svg.iter(f"{NS}circle") if c.get("class") == "block-max"]) == 20
    assert any((t.text or "").startswith("cannot estimate: stationarity") for t in svg.iter(f"{NS}text"))


def test_report_html_return_level_plot_is_rendered_in_chromium(run, tmp_path):
    page = write_html_report(run, tmp_path / "report.html")
    text = page.read_text()
    assert "<h2 id='pwcet'>Worst case, estimated (pWCET)</h2>" in text
    assert text.count('class="return-level"') == 2 and "cannot estimate: stationarity" in text
    # only the plot: the report's page with the histograms above it would push it off screen
    est = run.jobs[0].measurements[0].output.metrics["pwcet"]
    alone = tmp_path / "plot.html"
    alone.write_text("<!doctype html><meta charset='utf-8'><body style='margin:0'>"
                     + return_level_svg(est, "local/rt") + "</body>")
    chromium = shutil.which("chromium")
    assert chromium, "chromium (Debian package) is part of make test's set-up"
    for f, shot in ((alone, tmp_path / "plot.png"), (page, tmp_path / "page.png")):
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                        "--window-size=800,4000", f.as_uri()], capture_output=True, timeout=180, check=True)
    img = Image.open(tmp_path / "plot.png").convert("RGB")
    # the plot area (70..740 x 40..330 of the 760x380 SVG): the band (light
    # blue), the curve (#0072B2), the block maxima (#D55E00), the pWCET mark (#c00)
    px = [img.getpixel((x, y)) for y in range(40, 330, 2) for x in range(70, 740, 2)]

    def near(c, rgb, tol=40):
        return all(abs(a - b) < tol for a, b in zip(c, rgb))
    band = sum(1 for c in px if near(c, (0xC7, 0xDD, 0xEC), 20))  # #0072B2 at 22 % over white
    curve = sum(1 for c in px if near(c, (0x00, 0x72, 0xB2)))
    points = sum(1 for c in px if near(c, (0xD5, 0x5E, 0x00)))
    mark = sum(1 for c in px if near(c, (0xCC, 0x00, 0x00)))
    assert band > 300 and curve > 80 and points > 40 and mark > 10, (band, curve, points, mark)
    # and in the whole report: the two return-level plots are drawn below the histograms
    full = Image.open(tmp_path / "page.png").convert("RGB")
    assert len(full.getcolors(maxcolors=1 << 20)) > 50
    blue_band = sum(n for n, c in full.getcolors(maxcolors=1 << 20) if near(c, (0xC7, 0xDD, 0xEC), 20))
    assert blue_band > 1000, blue_band


def test_run_json_round_trip_keeps_the_curve(run):
    m = run.jobs[0].measurements[0]
    back = json.loads(json.dumps(m.output.metrics["pwcet"]))
    assert back["curve"] and back["block_maxima"] and back["block_samples"] == 5000


def test_a_heavy_tail_gets_a_log_latency_axis(run):
    """A tail whose levels span decades (a loaded host's: ~1e4 observed,
    ~1e10 per hour) on a linear axis would flatten the observed points to
    the floor: the latency axis turns logarithmic."""
    est = dict(run.jobs[0].measurements[0].output.metrics["pwcet"])
    # levels within a decade (the fixture's tail with a narrow band): a linear axis
    narrow = {**est, "curve": [[p, lv, lv * 0.95, lv * 1.05] for p, lv, _, _ in est["curve"]]}
    assert "latency (µs)" in [t.text for t in ET.fromstring(return_level_svg(narrow, "t")).iter(f"{NS}text")]
    est["curve"] = [[p, lv * 10 ** (i / 8), lo, hi * 10 ** (i / 4) if hi else hi]
                    for i, (p, lv, lo, hi) in enumerate(est["curve"])]
    svg = ET.fromstring(return_level_svg(est, "t"))
    texts = [t.text or "" for t in svg.iter(f"{NS}text")]
    assert "latency (µs, log scale)" in texts and any(t.startswith("1e") and int(t[2:]) >= 6 for t in texts
                                                      if t[2:].isdigit())
    ys = [float(c.get("cy")) for c in svg.iter(f"{NS}circle") if c.get("class") == "block-max"]
    assert all(y < 330 for y in ys)  # above the axis (330 px): drawn at their levels, not clipped to the floor


def test_the_soak_design_page_shows_a_soaks_return_level_plot():
    """The soak design page's picture of a soak's report is a return-level
    plot as report.html draws it (docs/img/soak-return-level.svg, made by
    return_level_svg from a local-board soak of bench_soak --validate)."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "design" / "soaks-and-pwcet.md").read_text()
    assert "](../img/soak-return-level.svg)" in page
    svg = ET.parse(root / "docs/img/soak-return-level.svg").getroot()
    assert svg.tag == f"{NS}svg" and "return-level" in (svg.get("class") or "")
    texts = [t.text or "" for t in svg.iter(f"{NS}text")]
    assert any(t.startswith("pWCET 1e-9 per sample: ") for t in texts)
    assert any(t.startswith("observed max ") for t in texts)
    assert len([c for c in svg.iter(f"{NS}circle")]) >= 10  # the checkpoints' block maxima
