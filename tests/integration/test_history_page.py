"""`rtlab history --html` against a real influxd holding a history of real
cyclictest runs with a regression at a known commit
(tests/integration/regression_history.py), after `rtlab regressions` wrote
its change points: the page shows the change point at the first bad commit
and the budget lines (looked at in headless Chromium, its layout read back
from the page), and its numbers are what the regressions dashboard's
panels return from the same store, their InfluxQL taken from the dashboard
JSON with Grafana's variables filled in here, independently of rtlab's
own filling."""
from __future__ import annotations

import html as htmlmod
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from regression_history import GOOD_COMMITS, seeded_store
from rtlab.core.model import Budget
from rtlab.store import rows, series

#: boots nothing, builds nothing, judges no latency of this machine: make test runs it beside the unit tests
pytestmark = pytest.mark.light

ROOT = Path(__file__).resolve().parents[2]
DASH = json.loads((ROOT / "dashboards" / "json" / "regressions.json").read_text())
LAYOUT_JS = """
<script>
const out = [...document.querySelectorAll('.series')].map(d => {
  const svg = d.querySelector('svg.trend'), r = svg.getBoundingClientRect();
  const inside = e => { const b = e.getBoundingClientRect();
    return b.width + b.height > 0 && b.left >= r.left - 1 && b.right <= r.right + 1 &&
           b.top >= r.top - 1 && b.bottom <= r.bottom + 1; };
  return {key: d.dataset.key,
          changes: [...svg.querySelectorAll('line.change-point')].map(l => ({commit: l.dataset.commit,
                     metric: l.dataset.metric, visible: inside(l), stroke: getComputedStyle(l).stroke})),
          budgets: [...svg.querySelectorAll('line.budget-max, line.budget-p999')].map(l => ({
                     cls: l.getAttribute('class'), value: +l.dataset.value, visible: inside(l)})),
          points: svg.querySelectorAll('circle.max-point').length,
          latest: d.querySelectorAll('svg.runs-hist polyline.latest-hist').length,
          earlier: d.querySelectorAll('svg.runs-hist polyline.earlier-hist').length};
});
const pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""


def budget_of(outputs):
    """A budget the good commits keep and the bad ones (x3) break: on the plots' scale."""
    base = sorted(o.combined().max_us for o in outputs)[len(outputs) // 2]
    return Budget(max_us=float(round(2.2 * base)), percentiles_us={"99.9": float(round(1.5 * base))})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    srv, facts = seeded_store(tmp_path_factory, "t_history", budget_of)
    env = {**os.environ, "RTLAB_INFLUX_URL": srv.url, "RTLAB_INFLUX_DB": facts["db"],
           "RTLAB_STATE_DIR": str(facts["state"] / "cli")}
    reg = subprocess.run([sys.executable, "-m", "rtlab.cli", "regressions"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert reg.returncode == 1, reg.stdout + reg.stderr  # the active regression, annotated
    yield {**facts, "env": env}
    srv.stop()


def history(store, *args):
    return subprocess.run([sys.executable, "-m", "rtlab.cli", "history", *args], cwd=ROOT, env=store["env"],
                          capture_output=True, text=True, timeout=300)


class Numbers(HTMLParser):
    """The page's numbers tables: key -> [(time, max, p99.9)]."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.key, self.row, self.cell, self.exact = None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("class") == "numbers":
            self.key = a["data-key"]
            self.tables[self.key] = []
        elif tag == "tr" and self.key:
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell = ""
            self.exact = a.get("data-value")  # the number exactly; the text is rounded

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row.append(self.exact if self.exact is not None else self.cell)
            self.cell = None
        elif tag == "tr" and self.row:
            self.tables[self.key].append(self.row)
            self.row = None
        elif tag == "table":
            self.key = None


def grafana(query: str, board: str) -> str:
    """The query as Grafana sends it for board=<board>, everything else All,
    the last 30 days, every run its own interval."""
    q = query.replace("$timeFilter", "time > now() - 30d").replace("$__interval", "1s")
    q = q.replace("$board", re.sub(r"([-.])", r"\\\1", board))
    for var in ("variant", "load", "suite", "pipeline"):
        q = q.replace(f"${var}", ".*")
    assert not re.search(r"\$[A-Za-z_]", q), q
    return q


@pytest.fixture(scope="module")
def page(store):
    out = store["tmp"] / "history.html"
    r = history(store, "--html", str(out), "--days", "30")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "active change point" in r.stderr
    return out


def test_change_point_and_budget_lines_are_seen_in_chromium(store, page):
    chromium = shutil.which("chromium")
    assert chromium, "chromium (Debian package) is part of make test's set-up"
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text() + LAYOUT_JS)
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--user-data-dir={store['tmp'] / 'profile'}", "--window-size=1280,1000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180, check=True)
    m = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout, re.S)
    assert m, dom.stderr[-2000:]
    lay = {s["key"]: s for s in json.loads(htmlmod.unescape(m.group(1)))}
    local = lay["local/rt/cyclictest/idle"]
    shas = store["shas"]
    # the seeded change point, at its first bad commit, drawn inside the plot
    found = [c for c in local["changes"] if c["commit"] == shas[GOOD_COMMITS]]
    assert found and all(c["visible"] for c in found), local["changes"]
    assert {c["metric"] for c in found} & {"p99_us", "p999_us"}
    # the latency statistics' changes are all there (share over budget has its own, noisier, series)
    assert not [c for c in local["changes"] if c["commit"] != shas[GOOD_COMMITS]
                and c["metric"] in ("p99_us", "p999_us")], local["changes"]
    # both budget lines, at the budget's values, inside the plot
    b = store["budget"]
    assert sorted((x["cls"], x["value"], x["visible"]) for x in local["budgets"]) == \
        [("budget-max", b.max_us, True), ("budget-p999", b.percentiles_us["99.9"], True)]
    # one point per commit; the latest run's histogram over the earlier ones
    assert local["points"] == len(shas)
    assert local["latest"] == 1 and local["earlier"] >= 5
    shot = page.with_name("history.png")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={store['tmp'] / 'profile'}", "--window-size=1280,1000",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180, check=True)
    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)

    def near(rgb, tol=40):
        return sum(n for n, c in colours if all(abs(a - b) < tol for a, b in zip(c, rgb)))
    assert near((0x7B, 0x2D, 0x8E)) > 150, "the change point's purple line is on screen"
    assert near((0xCC, 0x00, 0x00)) > 150, "the red budget line is on screen"


def test_page_numbers_are_the_dashboard_panels(store, page):
    client = store["client"]
    tables = Numbers()
    tables.feed(page.read_text())
    titles = {r["time"]: r["title"] for r in rows(client.query(grafana(
        [a for a in DASH["annotations"]["list"] if a["name"] == "Commits"][0]["query"], "local"), epoch="s"))}
    (max_panel,) = [p for p in DASH["panels"] if p["title"].startswith("Max latency per commit")]
    (p999_panel,) = [p for p in DASH["panels"] if p["title"].startswith("p99.9 latency per commit")]
    checked = 0
    for board in ("local", "rk3568-lab"):
        want: dict[str, dict[str, dict[str, float]]] = {}
        for name, panel in (("max", max_panel), ("p999", p999_panel)):
            (a,) = [t for t in panel["targets"] if t["refId"] == "A"]
            for s in series(client.query(grafana(a["query"], board), epoch="s")):
                t = s["tags"]
                key = f"{board}/{t['variant']}/{t['suite']}/{t['load']}"
                per_commit = want.setdefault(key, {}).setdefault(name, {})
                for when, v in s["values"]:
                    c = titles[when]  # every point is a run the Commits annotation names
                    per_commit[c] = max(per_commit.get(c, v), v)
        for key, got in want.items():
            shown = tables.tables[key]
            assert [r[0] for r in shown] == list(got["max"]), key  # the commits, in time order
            assert {r[0]: float(r[2]) for r in shown} == got["max"], key
            assert {r[0]: float(r[3]) for r in shown} == got["p999"], key
            checked += 1
    assert checked == 2
    # what the regression verdict could see per commit (the local board's
    # commits from the fourth on carry one): the page's column is the
    # dashboard panel's detectable effect, and its class's limit is drawn
    (det_panel,) = [p for p in DASH["panels"] if p["title"].startswith("What the regression verdict can see")]
    (a,) = [t for t in det_panel["targets"] if t["refId"] == "A"]
    sees: dict[str, float] = {}
    for s in series(client.query(grafana(a["query"], "local"), epoch="s")):
        for when, v in s["values"]:
            sees[titles[when]] = max(sees.get(titles[when], v), v)
    shown = {r[0]: float(r[4]) for r in tables.tables["local/rt/cyclictest/idle"] if r[4]}
    assert shown == sees and len(sees) == len(store["shas"]) - 3, (shown, sees)
    assert all(v > 0 for v in sees.values())
    assert len(re.findall(r'class="detectable-point"', page.read_text())) == len(sees)
    assert re.search(r'class="detectable-limit" data-value="1\.0"', page.read_text())
    # the budget lines are the panels' budget targets (B), their latest value
    layout_budget = re.findall(r'class="budget-max" data-value="([0-9.e+]+)"', page.read_text())
    (b,) = [t for t in max_panel["targets"] if t["refId"] == "B"]
    budgets = [v for s in series(client.query(grafana(b["query"], "local"), epoch="s")) for _, v in s["values"]]
    assert layout_budget and float(layout_budget[0]) == budgets[-1] == store["budget"].max_us
    # the change points: the dashboard's change-point table names the same commits
    (cp,) = [p for p in DASH["panels"] if p["title"].startswith("Change points")]
    cps = [r for board in ("local", "rk3568-lab") for r in rows(client.query(grafana(cp["targets"][0]["query"],
                                                                                      board)))]
    marked = re.findall(r'class="change-point" data-commit="([0-9a-f]*)" data-metric="([a-z0-9_]+)"',
                        page.read_text())
    assert sorted((r["commit"] or "", r["series"].split("/")[-1]) for r in cps) == sorted(marked)
    assert (store["shas"][GOOD_COMMITS], "p999_us") in marked or (store["shas"][GOOD_COMMITS], "p99_us") in marked


def test_filters_and_bad_input(store, tmp_path):
    out = tmp_path / "one.html"
    r = history(store, "--html", str(out), "--board", "local", "--variant", "rt", "--per", "day")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert 'data-key="local/rt/cyclictest/idle"' in text.replace("'", '"') and "rk3568-lab" not in text
    points = len(re.findall(r'class="max-point"', text))
    assert 5 <= points <= 9  # 14 commits over 7 days, one point per day
    for bad, words in ((["--board", "x'; DROP"], "--board"), (["--days", "0"], "--days"),
                       (["--variant", "/etc"], "--variant")):
        r = history(store, "--html", str(tmp_path / "bad.html"), *bad)
        assert r.returncode == 2 and words in r.stderr, (bad, r.stderr)
        assert not (tmp_path / "bad.html").exists()
