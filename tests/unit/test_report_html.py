"""report.html as a reviewer reads it, rendered in headless Chromium: the
verdict (broken budgets by how much, infra errors, the regression verdict
against its baseline, evidence links) is the first thing on the page, the
variants' numbers are HTML tables with coloured verdicts, and each variant
has its own histogram, the plots of a board on one latency axis.

The run is built from sampled histograms (no board); the comparison is the
real regression verdict (rtlab.verdict.compare) of sampled runs, written
to compare.json as the gate writes it. Chromium's layout is read back from
the page itself (a script appended to a copy prints every box into the DOM
that --dump-dom returns), and a screenshot is kept for a person to look at.
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rtlab.core.model import (Budget, Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult,
                              ToolOutput, Verdict)
from rtlab.report.plot import write_html_report
from rtlab.report.table import table_blocks
from rtlab.verdict.compare import compare_runs

sys.path.insert(0, str(Path(__file__).parent))
from test_compare import runs  # noqa: E402

VARIANTS = ("rt", "none", "voluntary", "lazy")
#: what the page's script measures: each box, the computed colours, the axes' tick labels
LAYOUT_JS = """
<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.top + scrollY, r.bottom + scrollY]; };
const out = {
  body: [...document.body.children].map(e => e.tagName + (e.id ? '#' + e.id : '')),
  verdict: box(document.getElementById('verdict')),
  tables: [...document.querySelectorAll('table')].map(t => ({cls: t.className, top: box(t)[0],
            caption: t.caption ? t.caption.textContent : ''})),
  pre_tables: [...document.querySelectorAll('pre')].filter(p => p.textContent.includes('budget max')).length,
  svgs: [...document.querySelectorAll('svg')].map(s => ({cls: s.getAttribute('class'), top: box(s)[0],
            variant: s.parentElement.dataset.variant || null,
            board: (s.closest('.multiples') || {previousElementSibling: {textContent: ''}})
                     .previousElementSibling.textContent.split(' · ')[0],
            ticks: [...s.querySelectorAll('text')].map(t => t.textContent).filter(t => /^[0-9,]+$/.test(t)),
            lines: s.querySelectorAll('polyline.hist').length,
            budget: s.querySelectorAll('.budget').length, max: s.querySelectorAll('.max').length})),
  colours: Object.fromEntries(['pass', 'fail', 'infra', 'shown', 'undecided', 'regression'].map(v => {
      const e = document.querySelector('td.v-' + v + ', li.v-' + v + ' .badge');
      return [v, e ? getComputedStyle(e).backgroundColor : null]; })),
  host_noise: [...document.querySelectorAll('#host-noise-summary')].map(p => p.textContent),
  details_open: [...document.querySelectorAll('details')].map(d => d.open),
  first_h2: document.querySelector('h2').textContent,
};
const pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""


def _hist(rng, level: float, n: int = 20000, tail: float = 0.0) -> tuple[Histogram, float]:
    x = rng.gamma(4, level / 4, size=n) + level / 2
    if tail:
        x[:5] = tail
    counts: dict[int, int] = {}
    for v in x.astype(int):
        counts[int(v)] = counts.get(int(v), 0) + 1
    return Histogram(counts=counts, bucket_us=1, size=2000), float(x.max())


def _measurement(rng, board, variant, suite, load, level, budget, verdict, tail=0.0, **kw) -> Measurement:
    h, mx = _hist(rng, level, tail=tail)
    t = ThreadResult(thread=0, cpu=0, cycles=h.total, min_us=float(min(h.counts)), avg_us=level,
                     max_us=mx, histogram=h)
    m = Measurement(MeasurementKey(board, variant, suite, load), ToolOutput(path="x", tool="cyclictest",
                                                                            threads=[t]),
                    verdict=verdict, budget=Budget(max_us=budget), raw=[f"{suite}@{load}/cyclictest.json"], **kw)
    m.share_over_budget = h.count_at_or_above(budget) / h.total
    if verdict == Verdict.FAIL:
        m.reasons = [f"max {mx:.0f} us >= budget {budget:.0f} us"]
    return m


@pytest.fixture(scope="module")
def run() -> RunResult:
    rng = np.random.default_rng(7)
    jobs = []
    for board, arch, scale in (("qemu-aarch64", "aarch64", 1.0), ("local", "x86_64", 0.2)):
        for v in VARIANTS[: 4 if board == "qemu-aarch64" else 2]:
            ms = []
            for load, level in (("idle", 20), ("hackbench", 45)):
                breach = board == "qemu-aarch64" and v == "none" and load == "hackbench"
                ms.append(_measurement(
                    rng, board, v, "cyclictest", load, level * scale * (1.6 if v == "none" else 1), 150 * scale,
                    Verdict.FAIL if breach else Verdict.PASS, tail=420 if breach else 0.0,
                    evidence={"dir": "cyclictest@hackbench/evidence",
                              "summary": "preempted by hackbench (pid 812) for 380 us on CPU 1"} if breach else None,
                    host_noise={"steal_ms": {"cpu0": 3.0 + len(v), "cpu1": 1.0}, "burst_ms": 2.0,
                                "max_gap_ms": 4.5, "window_s": 30} if board == "local" else None))
            jobs.append(JobResult(board=board, variant=v, arch=arch, budget_class=board, measurements=ms))
    jobs[-1].measurements[1].verdict = Verdict.SHOWN
    jobs.append(JobResult(board="local", variant="rt-debug", arch="x86_64", budget_class="local",
                          infra_error="console lost after 12 s (board did not answer)"))
    jobs[-2].retries = [{"dir": "measured-again/local-none/1", "reasons": ["host stole 9 ms"]}]
    return RunResult(run_id="20261128T040000Z", started="2026-11-28T04:00:00Z", campaign="default",
                     commit={"sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"}, jobs=jobs)


def _comparison(extras: bool) -> dict:
    rng = np.random.default_rng(2)
    base = runs("b", list(np.round(24 * np.exp(rng.normal(0, 0.15, 5)))))
    cand = runs("c", list(np.round(48 * np.exp(rng.normal(0, 0.15, 5)))))
    v = compare_runs(base, cand).to_json()
    v["baseline"]["source"] = "store: branch main, last 5 runs"
    v["html"] = "compare.html"
    assert v["outcome"] == "regression"
    if extras:  # fields a newer compare.json has per key
        v["keys"][0]["decided_by"] = "p99"
        v["keys"][0]["detectable"] = {"p99": "+25 %"}
    # a key the baseline lacks: undecided, as compare_runs says of a one-sided key
    only = compare_runs([], runs("c", [30.0] * 5)).to_json()["keys"][0]
    only["label"] = only["line"].split(": ")[0].replace("/idle", "/hackbench")
    only["line"] = only["label"] + ": " + only["line"].split(": ", 1)[1]
    v["keys"].append(only)
    return v


def _render(run, tmp_path: Path, comparison: dict | None, name: str) -> tuple[str, dict, Path]:
    d = tmp_path / name
    d.mkdir()
    if comparison is not None:
        (d / "compare.json").write_text(json.dumps(comparison))
    page = write_html_report(run, d / "report.html")
    text = page.read_text()
    chromium = shutil.which("chromium")
    assert chromium, "chromium (Debian package) is part of make test's set-up"
    probe = d / "probe.html"
    probe.write_text(text + LAYOUT_JS)
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180, check=True)
    m = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout, re.S)
    assert m, dom.stdout[-2000:] + dom.stderr[-2000:]
    import html as h
    shot = d / "report.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180, check=True)
    return text, json.loads(h.unescape(m.group(1))), shot


def test_a_reviewer_sees_the_verdict_first_then_tables_and_one_histogram_per_variant(run, tmp_path):
    text, lay, shot = _render(run, tmp_path, _comparison(extras=True), "with")
    # the verdict comes first: right after the title, above every table and plot,
    # inside the first screen
    before = lay["body"][:lay["body"].index("SECTION#verdict")]
    assert before == ["H1", "P"], lay["body"]
    assert lay["first_h2"].startswith("Verdict"), lay["first_h2"]
    top, bottom = lay["verdict"]
    assert top < 200 and bottom < 900, lay["verdict"]
    assert all(t["top"] > bottom for t in lay["tables"]) and all(s["top"] > bottom for s in lay["svgs"])
    summary = text[text.index("<section id='verdict'>"):text.index("</section>")]
    # what broke, by how much, the evidence; the infra error named as not a latency verdict
    assert "qemu-aarch64/none/cyclictest/hackbench" in summary and "against a budget of 150 µs" in summary
    assert re.search(r"<b>\+18\d %</b>", summary), summary  # 420 µs over 150 µs
    assert "href='qemu-aarch64/none/cyclictest@hackbench/evidence/trace.txt'" in summary
    assert "console lost after 12 s" in summary and "not a latency verdict" in summary
    # what regressed, against which baseline, the report to open, decided_by and detectable
    assert "Regression verdict: <span class='badge v-regression'>REGRESSION</span>" in summary
    assert "store: branch main, last 5 runs" in summary and "href='compare.html'" in summary
    assert re.search(r"qemu-aarch64/rt/cyclictest/idle: p99(\.9)? \+\d+ %", summary), summary
    assert "decided by p99; detectable effect p99: +25 %" in summary

    # tables are tables: one per board × suite × load, none as text in <pre>
    blocks = table_blocks(run)
    variants = [t for t in lay["tables"] if t["cls"] == "variants"]
    assert [t["caption"] for t in variants] == [b.title for b in blocks] and len(variants) == 4
    assert lay["pre_tables"] == 0 and any(t["cls"] == "regression" for t in lay["tables"])
    # verdict colours differ and are the palette's
    c = lay["colours"]
    assert c["pass"] == "rgb(227, 244, 227)" and c["fail"] == "rgb(251, 224, 224)", c
    assert c["infra"] == "rgb(255, 240, 208)" and c["shown"] == "rgb(228, 236, 247)", c
    assert c["regression"] == "rgb(251, 224, 224)" and c["undecided"] == "rgb(241, 230, 247)", c
    assert len({c[v] for v in ("pass", "fail", "infra", "shown")}) == 4

    # one histogram per variant, each with its own line, budget and max marked,
    # one shared latency axis per board
    hists = [s for s in lay["svgs"] if s["cls"] == "variant-hist"]
    assert len(hists) == 4 * 2 + 2 * 2  # qemu-aarch64: 4 variants x 2 loads; local: 2 x 2 (rt-debug measured nothing)
    assert all(s["lines"] == 1 and s["budget"] == 1 and s["max"] == 1 for s in hists), hists
    for board, n in (("qemu-aarch64", 8), ("local", 4)):
        mine = [s for s in hists if s["board"] == board]
        assert len(mine) == n and sorted({s["variant"] for s in mine}) == sorted(VARIANTS[: n // 2])
        assert len({tuple(s["ticks"]) for s in mine}) == 1, [s["ticks"] for s in mine]
    assert {tuple(s["ticks"]) for s in hists if s["board"] == "local"} != \
        {tuple(s["ticks"]) for s in hists if s["board"] == "qemu-aarch64"}

    # host noise: one line, the details folded away
    (line,) = lay["host_noise"]
    assert line.startswith("4 measurements watched: at most 8 ms stolen (local/voluntary") or \
        line.startswith("4 measurements watched: at most 8 ms stolen (local/none"), line
    assert "1 attempt measured again" in line
    assert lay["details_open"] and not any(lay["details_open"])

    # the screenshot: the top of the page carries the verdict's colours
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 900)
    colours = dict((rgb, n) for n, rgb in img.getcolors(maxcolors=1 << 20))
    assert colours.get((251, 224, 224), 0) > 2000 and colours.get((255, 240, 208), 0) > 500, \
        sorted(colours.items(), key=lambda kv: -kv[1])[:10]


def test_an_older_compare_json_and_none_at_all(run, tmp_path):
    text, lay, _ = _render(run, tmp_path, _comparison(extras=False), "older")
    summary = text[text.index("<section id='verdict'>"):text.index("</section>")]
    assert "REGRESSION" in summary and "decided by" not in text and "detectable" not in text
    text, lay, _ = _render(run, tmp_path, None, "none")
    assert "no regression verdict: this run was not compared" in text
    assert lay["first_h2"].startswith("Verdict") and not [t for t in lay["tables"] if t["cls"] == "regression"]


def test_a_hostile_or_broken_compare_json_is_undecided_never_a_pass(run, tmp_path):
    for name, content in (("bad-type", json.dumps({"outcome": 5, "keys": []})), ("not-json", "{")):
        d = tmp_path / name
        d.mkdir()
        (d / "compare.json").write_text(content)
        text = write_html_report(run, d / "report.html").read_text()
        summary = text[text.index("<section id='verdict'>"):text.index("</section>")]
        assert "Regression verdict: <span class='badge v-undecided'>UNDECIDED</span>" in summary, summary
        assert "compare.json unreadable" in summary
    d = tmp_path / "link"
    d.mkdir()
    (d / "compare.json").symlink_to("/etc/passwd")
    summary = write_html_report(run, d / "report.html").read_text()
    assert "compare.json unreadable" in summary and "root:" not in summary
