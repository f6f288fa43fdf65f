"""The HTML report's histogram pictures: one line per variant, log counts."""
import xml.etree.ElementTree as ET

from rtlab.core.model import Histogram
from rtlab.report.plot import histogram_svg

NS = "{http://www.w3.org/2000/svg}"


def test_one_step_line_per_variant_with_log_decades_and_budget():
    a = Histogram(counts={10: 1000, 11: 50, 40: 1}, size=100)
    b = Histogram(counts={20: 10, 21: 3}, size=100, overflows=2)
    svg = ET.fromstring(histogram_svg([("rt", a), ("none", b)], "b · cyclictest · idle", budget_us=60))
    lines = svg.findall(f"{NS}polyline")
    assert len(lines) == 2
    texts = [t.text for t in svg.iter(f"{NS}text")]
    assert "1e0" in texts and "1e3" in texts and "1e4" in texts  # log decades up to the max count
    assert "rt" in texts and "none (+2 over range)" in texts
    assert "budget 60 µs" in texts
    # the step line of "rt" reaches the top count's height and returns to the axis
    pts = [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]
    assert min(y for _, y in pts) < max(y for _, y in pts)


def test_far_budget_is_noted_not_drawn_and_empty_input_says_so():
    h = Histogram(counts={10: 5}, size=100)
    svg = histogram_svg([("rt", h)], "t", budget_us=100000)
    assert "off scale" in svg
    assert "no histogram" in histogram_svg([], "t")
