"""rtlab history's parts without a store: the dashboards' queries filled in
as Grafana fills them (rtlab.store.dashboard), and the page escaping what
the store holds (tag values and commits come from merge requests' runs)."""
import json
import xml.etree.ElementTree as ET

import pytest

from rtlab.core.model import Histogram
from rtlab.errors import InputError
from rtlab.report.history import ChangeMark, Point, SeriesPlot, runs_histogram_svg, trend_svg, write_history_html
from rtlab.store.dashboard import DashboardQueries, Window, regex_value

NS = "{http://www.w3.org/2000/svg}"


def test_queries_are_the_dashboards_with_grafanas_variables():
    d = DashboardQueries("regressions")
    value_q, budget_q = d.panel_queries("Max latency per commit")
    raw = json.loads(d.path.read_text())
    (panel,) = [p for p in raw["panels"] if p["title"].startswith("Max latency per commit")]
    assert [value_q, budget_q] == [t["query"] for t in panel["targets"]]
    q = d.fill(value_q, Window(days=7, interval="1d"), {"board": "qemu-aarch64", "variant": None})
    assert "time > now() - 7d" in q and "GROUP BY time(1d)" in q
    assert '"board" =~ /^qemu\\-aarch64$/' in q and '"variant" =~ /^.*$/' in q and "$" not in q.replace("$/", "")
    # a value cannot leave its regex: every special character escaped, / included
    assert regex_value("a/b.c|d") == "a\\/b\\.c\\|d"
    h = DashboardQueries("histogram")
    (hist_q,) = h.panel_queries("Histogram, thread")
    filled = h.fill(hist_q, Window(), {"board": "b", "variant": "rt", "suite": "cyclictest", "load": "idle",
                                       "run": "2026-11-28T04:00:00Z"})
    assert "time = '2026-11-28T04:00:00Z'" in filled and '"thread" =~ /^.*$/' in filled
    with pytest.raises(InputError, match="run timestamp"):
        h.fill(hist_q, Window(), {"board": "b", "variant": "v", "suite": "s", "load": "l", "run": "now()' OR '1"})
    with pytest.raises(InputError, match=r"\$board has no value"):
        h.fill(hist_q, Window(), {"run": "2026-11-28T04:00:00Z"})
    for bad in ({"days": 0}, {"days": 4000}, {"interval": "1d; DROP"}):
        with pytest.raises(InputError):
            Window(**bad)


def test_page_escapes_the_store_and_marks_changes_and_budgets(tmp_path):
    evil = "<script>alert(1)</script>"
    plot = SeriesPlot("board'\"><x", evil, "cyclictest", "idle",
                      max=[Point(1.8e9 + i * 3600, f"c{i} {evil}", 10.0 + 20 * (i >= 3)) for i in range(6)],
                      p999=[Point(1.8e9 + i * 3600, f"c{i}", 5.0 + 10 * (i >= 3)) for i in range(6)],
                      budget_max=40.0, budget_p999=20.0,
                      changes=[ChangeMark(1.8e9 + 3 * 3600, "p999_us", "active", 200.0, "c2", f"c3{evil}")],
                      histograms=[(f"2026-11-2{i}T00:00:00Z", Histogram({5: 10 * i + 1, 9: i + 1})) for i in range(4)])
    svg = ET.fromstring(trend_svg(plot, 1.8e9 - 600, 1.8e9 + 6 * 3600))
    cls = [e.get("class") for e in svg.iter()]
    assert cls.count("max-point") == 6 and cls.count("p999-point") == 6
    assert cls.count("budget-max") == 1 and cls.count("budget-p999") == 1 and cls.count("change-point") == 1
    hist = ET.fromstring(runs_histogram_svg(plot))
    lines = [e for e in hist.iter(f"{NS}polyline")]
    assert [e.get("class") for e in lines] == ["earlier-hist"] * 3 + ["latest-hist"]
    assert lines[-1].get("stroke") == "#0072B2" and lines[0].get("stroke") == "#999"
    page = write_history_html([plot], tmp_path / "h.html", 30, "commit", "InfluxV1('x')").read_text()
    assert "<script>" not in page and "<x" not in page and "&lt;script&gt;" in page
    assert "p99.9 active +200 % at c3&lt;script&gt;" in page
