"""rtla timerlat and osnoise end to end (`rtlab run`): on both QEMU
architectures booting Debian's rt kernels (which have the tracers) they
measure and parse into IRQ, thread and noise measurements; on the local
board (this machine's kernel has neither tracer) they are "not available"
with the reason: not run, not passed, not failed."""
import json
import xml.etree.ElementTree as ET

import yaml

from conftest import ROOT, rtlab
from test_suites_programme import has_block, measurements, run_dir_of


def test_timerlat_and_osnoise_on_both_qemu_arches_and_not_on_local(tmp_path):
    budgets = {"budgets": {"qemu-tcg": {"*": {"*": {"*": {"max_us": 10000000}}}},
                           "local": {"*": {"*": {"*": {"max_us": 10000000}}}}}}
    (tmp_path / "budgets.yaml").write_text(yaml.safe_dump(budgets))
    rtla = yaml.safe_load((ROOT / "campaigns" / "rtla.yaml").read_text())
    suites = []
    for e in rtla["suites"]:
        e["loads"] = ["idle"]
        e["params"]["duration_s"] = 3
        suites.append(e)
    c = tmp_path / "campaign.yaml"
    c.write_text(yaml.safe_dump({"name": "rtla-test", "budgets": str(tmp_path / "budgets.yaml"),
                                 "boards": ["qemu-aarch64", "qemu-x86_64", "local"], "variants": ["rt"],
                                 "suites": suites}))
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "r", "--no-publish", timeout=900)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    run_dir = run_dir_of(res)
    ms = measurements(run_dir)
    for board in ("qemu-aarch64", "qemu-x86_64"):
        for suite, tool in (("timerlat-irq", "timerlat"), ("timerlat-thread", "timerlat"), ("osnoise", "osnoise")):
            m = ms[(board, "rt", suite, "idle")]
            assert m["verdict"] == "pass", (board, suite, m["reasons"])
            o = m["output"]
            assert o["tool"] == tool and [t["cpu"] for t in o["threads"]] == [0, 1], (board, suite)
            for t in o["threads"]:
                h = t["histogram"]
                assert sum(h["counts"].values()) + h["overflows"] == t["cycles"] > 0
            assert has_block(out, board, suite, "idle", "rt"), (board, suite)
        irq = ms[(board, "rt", "timerlat-irq", "idle")]["output"]["threads"]
        thr = ms[(board, "rt", "timerlat-thread", "idle")]["output"]["threads"]
        # one timer per period: as many thread wake-ups as IRQs (give or take the last)
        assert all(abs(a["cycles"] - b["cycles"]) <= 1 for a, b in zip(irq, thr))
        raw = run_dir / board / "rt" / "timerlat@idle"
        assert (raw / "stdout.txt").read_text().startswith("# RTLA timerlat histogram")
        assert (raw / "command.txt").read_text().startswith("rtla timerlat hist -d 3s -c 0-1 ")
    # the local board: no tracer in this machine's kernel
    assert not any(b == "local" for (b, *_rest) in ms)
    run = json.loads((run_dir / "run.json").read_text())
    (local,) = [j for j in run["jobs"] if j["board"] == "local"]
    assert {n["suite"] for n in local["not_available"]} == {"timerlat", "osnoise"}
    for n in local["not_available"]:
        assert f"the kernel has no {n['suite']} tracer (CONFIG_{n['suite'].upper()}_TRACER)" in n["reason"]
        assert f"local/host/{n['suite']}/idle: the kernel has no {n['suite']} tracer" in out
    assert run["verdict"] == "pass" and "Verdict: PASS" in out
    # JUnit: the local suites are skipped with the reason, never passed or failed
    j = rtlab("junit", run_dir, "-o", tmp_path / "junit.xml")
    assert j.returncode == 0, j.stdout + j.stderr
    cases = {(tc.get("classname"), tc.get("name")): tc for tc in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    for suite in ("timerlat", "osnoise"):
        skipped = cases[("local.host", f"{suite}@idle")].find("skipped")
        assert skipped is not None and "no " + suite + " tracer" in skipped.get("message")
    assert cases[("qemu-aarch64.rt", "timerlat-irq@idle")].find("failure") is None
