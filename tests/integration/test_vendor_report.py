"""`rtlab report --vendor` on a real run of this machine as a board: every
number in the tables is checked against the tools' own raw JSON files, and
the HTML is looked at in headless Chromium."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from conftest import rtlab
from rtlab.report.vendor import fmt_samples, fmt_share, fmt_us

SUITES = """
- name: cyclictest-1ms
  suite: cyclictest
  params: {interval_us: 1000, duration_s: 2, priority: 99, histogram_us: 100}
- name: cyclictest-100us
  suite: cyclictest
  params: {interval_us: 100, duration_s: 2, priority: 99, histogram_us: 100}
- name: sigwaittest
  params: {duration_s: 2}
"""
#: 150 lies beyond the 100 us histogram: exact 0 if the max is below it, else unknown
THRESHOLDS = (10, 70, 100, 150)


@pytest.fixture(scope="module")
def vendor_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vendor")
    budgets = tmp / "budgets.yaml"
    budgets.write_text('budgets:\n  local: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    camp = tmp / "campaign.yaml"
    camp.write_text(f"name: vendor-test\nbudgets: {budgets}\nboards: [local]\nsuites:\n"
                    + "".join(f"  {ln}\n" for ln in SUITES.strip().splitlines()))
    res = rtlab("run", "--campaign", camp, "--results", tmp / "results", "--no-publish", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    html = tmp / "vendor.html"
    rep = rtlab("report", "--vendor", run_dir, "--thresholds", ",".join(map(str, THRESHOLDS)),
                "--html", html)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    return run_dir, rep.stdout, html


def _block(text, title):
    """{row label: cell} of the one-variant block whose title starts with title."""
    lines = text.split(f"== {title}", 1)[1].split("\n== ", 1)[0].splitlines()[2:]
    rows = {}
    for ln in lines:
        if not ln.strip() or ln.startswith("  "):
            break
        label, _, cell = ln.rpartition("  ")
        rows[label.strip()] = cell.strip()
    return rows


def _expected_share(threads, thr, hist_size):
    """From the tool's raw JSON: exact inside the histogram, else 0 or unknown."""
    cycles = sum(t["cycles"] for t in threads)
    if min(t["min"] for t in threads) >= thr:
        return f"{fmt_share(1.0)} ({fmt_samples(cycles)})"
    if max(t["max"] for t in threads) < thr:
        return "0 %"
    if thr > hist_size:
        return "unknown"
    # samples beyond the histogram are cycles - sum(histogram), all >= hist_size >= thr
    n = sum(c for t in threads for b, c in t["histogram"].items() if int(b) >= thr)
    n += sum(t["cycles"] - sum(t["histogram"].values()) for t in threads)
    return f"{fmt_share(n / cycles)} ({fmt_samples(n)})" if n else "0 %"


def test_cyclictest_tables_match_the_raw_files(vendor_run):
    run_dir, text, _ = vendor_run
    for suite, interval in (("cyclictest-1ms", "1 ms"), ("cyclictest-100us", "100 us")):
        raw = json.loads((run_dir / "local/host" / f"{suite}@idle/cyclictest.json").read_text())
        threads = [raw["thread"][k] for k in sorted(raw["thread"], key=int)]
        rows = _block(text, f"local (x86_64) · {suite} · idle · interval {interval}")
        for i, t in enumerate(threads):
            assert rows[f"T: {i} CPU {t['cpu']} min/avg/max"] == \
                f"{fmt_us(t['min'])} / {fmt_us(t['avg'])} / {fmt_us(t['max'])}"
        cycles = sum(t["cycles"] for t in threads)
        assert rows["samples"] == fmt_samples(cycles) and cycles > 0
        assert rows["all min/avg/max"].endswith(f" / {fmt_us(max(t['max'] for t in threads))}")
        for thr in THRESHOLDS:
            assert rows[f">= {thr} us"] == _expected_share(threads, thr, 100), (suite, thr)
        assert rows["verdict"] == "PASS"
    # run.json says the same as the raw file (one result model)
    run = json.loads((run_dir / "run.json").read_text())
    assert f"  local/host: {run['jobs'][0]['kernel']['release']}" in text  # the column's kernel
    (m,) = [m for m in run["jobs"][0]["measurements"] if m["key"]["suite"] == "cyclictest-1ms"]
    assert f"{max(t['max_us'] for t in m['output']['threads']):,.0f}".replace(",", "") in \
        text.split("Max latency")[1].split("\n==")[0].replace(",", "")
    # the log-count histogram of the run, bucket counts adding up to the samples
    hist = text.split("== local (x86_64) · cyclictest-1ms")[1].split("histogram host")[1].split("\n==")[0]
    counted = sum(int(ln.rsplit("|", 1)[1].split()[-1].replace(",", "")) if "beyond" not in ln else
                  int(ln.split("|")[1].split()[1].replace(",", ""))
                  for ln in hist.splitlines()[1:] if "|" in ln and ln.split("|")[1].strip())
    assert counted == sum(t["cycles"] for t in m["output"]["threads"])


def test_ipc_pairs_as_the_tool_names_them(vendor_run):
    run_dir, text, _ = vendor_run
    raw = json.loads((run_dir / "local/host/sigwaittest@idle/sigwaittest.json").read_text())
    rows = _block(text, "local (x86_64) · sigwaittest · idle · interval 1 ms")
    for k, pair in raw["thread"].items():
        r = pair["receiver"]
        assert rows[f"#{2 * int(k) + 1} -> #{2 * int(k)} CPU {r['cpu']} min/avg/max"] == \
            f"{fmt_us(r['min'])} / {fmt_us(r['avg'])} / {fmt_us(r['max'])}"
    assert rows["samples"] == fmt_samples(sum(p["sender"]["samples"] for p in raw["thread"].values()))
    # no histogram: a share is known only below the max or at or under the min
    mx = max(p["receiver"]["max"] for p in raw["thread"].values())
    mn = min(p["receiver"]["min"] for p in raw["thread"].values())
    for thr in THRESHOLDS:
        want = "0 %" if mx < thr else ("100 %" if mn >= thr else "unknown")
        assert rows[f">= {thr} us"].split(" (")[0] == want


def test_html_tables_and_histograms_are_drawn_in_chromium(vendor_run, tmp_path):
    run_dir, _, html = vendor_run
    page = html.read_text()
    # every run writes the page itself (the report's programme in one command),
    # with the default thresholds
    own = (run_dir / "vendor.html").read_text()
    assert re.findall(r"<h2>(.*?)</h2>", own) == re.findall(r"<h2>(.*?)</h2>", page)
    assert "&gt;= 150 us" in page and "&gt;= 150 us" not in own and "&gt;= 100 us" in own
    # the two cyclictest blocks (sigwaittest keeps no histogram), each also per
    # thread (one per CPU of this machine), folded, where there are several
    raw = json.loads((run_dir / "local/host/cyclictest-1ms@idle/cyclictest.json").read_text())
    several = len(raw["thread"]) > 1
    assert page.count("<svg") == 2 + 2 * several and page.count("<details>") == 2 * several
    assert "&gt;= 70 µs" in page  # thresholds marked on the plots
    chromium = shutil.which("chromium")
    assert chromium, "chromium missing: make setup installs it (env/apt-packages.txt)"
    png = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,2400",
                    f"--screenshot={png}", html.as_uri()],
                   capture_output=True, timeout=180, check=True)
    img = Image.open(png).convert("RGB")
    assert img.size == (1000, 2400)
    colours = img.getcolors(maxcolors=1 << 20)
    # a blank or error page has a handful of colours; tables, text and plots have hundreds
    assert len(colours) > 50
    dark = sum(n for n, (r, g, b) in colours if r + g + b < 200)
    assert dark > 2000  # text of the tables
    # the histograms' step lines, in the plots' first colour (#0072B2): more
    # than the two 10x10 legend squares of that colour
    blue = sum(n for n, (r, g, b) in colours if abs(r - 0x00) < 40 and abs(g - 0x72) < 40 and abs(b - 0xB2) < 40)
    assert blue > 600


def test_several_runs_merge_as_repeats(vendor_run):
    run_dir, _, _ = vendor_run
    raw = json.loads((run_dir / "local/host/cyclictest-1ms@idle/cyclictest.json").read_text())
    threads = list(raw["thread"].values())
    # the same run twice (and once as its run.json): three repeats of each board x variant
    rep = rtlab("report", "--vendor", run_dir, run_dir, run_dir / "run.json")
    assert rep.returncode == 0, rep.stderr
    rows = _block(rep.stdout, "local (x86_64) · cyclictest-1ms · idle · interval 1 ms")
    assert rows["samples"] == fmt_samples(3 * sum(t["cycles"] for t in threads))
    mx = fmt_us(max(t["max"] for t in threads))
    assert rows["runs (max each)"] == f"3: {mx} / {mx} / {mx}"
    assert rep.stdout.count("command (host): cyclictest -q -m -p 99 -i 1000 ") == 1
    plain = rtlab("report", run_dir, run_dir)
    assert plain.returncode == 2 and "several only with --vendor" in plain.stderr
    bad = rtlab("report", "--vendor", run_dir, "--thresholds", "10,abc")
    assert bad.returncode == 2 and "threshold 'abc' is not a number" in bad.stderr


def test_a_repeating_campaign_is_merged_per_thread(tmp_path):
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text('budgets:\n  local: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    camp = tmp_path / "campaign.yaml"
    camp.write_text(f"name: vendor-repeat\nbudgets: {budgets}\nboards: [local]\nrepeat: 2\nsuites:\n"
                    "  - name: cyclictest\n    params: {interval_us: 1000, duration_s: 1, histogram_us: 100}\n")
    res = rtlab("run", "--campaign", camp, "--results", tmp_path / "results", "--no-publish", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    raws = [json.loads((run_dir / f"local/host/r{n}/cyclictest@idle/cyclictest.json").read_text())
            for n in (1, 2)]
    rep = rtlab("report", "--vendor", run_dir)
    assert rep.returncode == 0, rep.stderr
    rows = _block(rep.stdout, "local (x86_64) · cyclictest · idle · interval 1 ms")
    assert rows["samples"] == fmt_samples(sum(t["cycles"] for r in raws for t in r["thread"].values()))
    maxima = [fmt_us(max(t["max"] for t in r["thread"].values())) for r in raws]
    assert rows["runs (max each)"] == f"2: {maxima[0]} / {maxima[1]}"
    t0 = [r["thread"]["0"] for r in raws]
    assert rows[f"T: 0 CPU {t0[0]['cpu']} min/avg/max"].split(" / ")[::2] == \
        [fmt_us(min(t["min"] for t in t0)), fmt_us(max(t["max"] for t in t0))]
    assert "command (host): cyclictest " in rep.stdout  # found in the repeat's own directory
