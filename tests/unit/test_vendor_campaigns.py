"""The vendor reports' programmes as campaigns (campaigns/vendor-*.yaml):
each loads, builds the reports' commands, says how it is scaled, and
renders to LAVA jobs that pass LAVA's own schema; a campaign pinning a CPU
a board lacks is refused naming file and key."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.plan.campaign import load_campaign
from rtlab.errors import InputError
from rtlab.lava.boards import load_lava_boards
from rtlab.lava.render import render_campaign
from rtlab.lava.schema import validate_texts
from rtlab.suites import SUITES

ROOT = Path(__file__).resolve().parents[2]
VENDOR = sorted((ROOT / "campaigns").glob("vendor-*.yaml"))


def test_the_five_reports_have_a_campaign():
    assert [p.stem for p in VENDOR] == ["vendor-imx6-sabre", "vendor-rk3566-rtthread", "vendor-rk3568-oee",
                                        "vendor-spacechain", "vendor-xenomai-primitives"]


def commands(campaign):
    """{(board, variant, suite@load): command} of every job."""
    out = {}
    for j in campaign.jobs():
        for r in j.suites:
            cmd = SUITES[r.suite].command(r, j.board)
            out[(j.board.name, j.variant.name, r.id)] = cmd if isinstance(cmd, str) else shlex.join(cmd)
    return out


@pytest.mark.parametrize("path", VENDOR, ids=[p.stem for p in VENDOR])
def test_campaign_loads_states_its_scaling_and_renders_valid_lava_jobs(path, tmp_path):
    c = load_campaign(path)
    assert c.jobs() and all(j.suites for j in c.jobs())
    assert all(cmd for cmd in commands(c).values())
    header = "".join(ln for ln in path.read_text().splitlines(True) if ln.startswith("#"))
    # how much shorter than the report, in one line a reader finds
    scaled = re.search(r"^# Scaled: (.*)$", header, re.MULTILINE)
    assert scaled and "->" in scaled.group(1) and re.search(r"\d+ (s|min)\b", scaled.group(1))
    # the campaign's own boards, which are LAVA devices (the twins), each get jobs
    lava = load_lava_boards()
    own = [b.name for b in c.boards if b.name in lava]
    assert own == [b.name for b in c.boards]
    index = render_campaign(c, tmp_path, boards=own)
    texts = [(j["file"], (tmp_path / j["file"]).read_text()) for j in index["jobs"]]
    results, _ = validate_texts(texts)
    assert {k: e for k, e in results.items() if e} == {}
    for b in own:
        assert any(j["board"] == b for j in index["jobs"]), (b, index["not_rendered"])
    # nothing is dropped silently: a job not rendered says why
    assert all(n["reason"] for n in index["not_rendered"] + index["not_available"])


def test_rk3568_oee_runs_the_reports_commands_on_cpu_2():
    c = load_campaign(ROOT / "campaigns/vendor-rk3568-oee.yaml")
    cmds = commands(c)
    assert {v for _, v, _ in cmds} == {"voluntary", "rt"}
    by_suite = {s: cmd for (_, v, s), cmd in cmds.items() if v == "rt"}
    cyc = by_suite["cyclictest@stress"]  # under the classic stress mix
    for opt in ("-p 99", "-i 1000", "-h 100", "-a 2 -t 1"):
        assert opt in cyc
    assert "-p 99" in by_suite["signaltest@idle"] and "-t 4 -a2 " in by_suite["signaltest@idle"]
    for ipc in ("sigwaittest", "svsematest", "ptsematest", "pmqtest"):
        assert "-p 99" in by_suite[f"{ipc}@idle"] and "-a2 -t 2" in by_suite[f"{ipc}@idle"]


def test_imx6_sweeps_four_intervals_under_the_reports_loads_with_and_without_isolation():
    c = load_campaign(ROOT / "campaigns/vendor-imx6-sabre.yaml")
    cmds = commands(c)
    intervals = {re.search(r"-i (\d+)", cmd).group(1) for cmd in cmds.values()}
    assert intervals == {"100", "1000", "10000", "100000"}
    assert {s.split("@")[1] for _, _, s in cmds} == {"idle", "hackbench", "network", "disk"}
    assert {v for _, v, _ in cmds} == {"preempt", "rt", "preempt-iso", "rt-iso"}
    # -S style: every CPU measured, the isolated one too, with -h 400 -p 90
    assert all("-a 0-3 -t 4" in cmd and "-h 400" in cmd and "-p 90" in cmd for cmd in cmds.values())


def test_spacechain_single_and_multi_core_with_the_reports_hackbench():
    c = load_campaign(ROOT / "campaigns/vendor-spacechain.yaml")
    assert sorted(b.cpus for b in c.boards) == [1, 4]
    entry = next(e for e in c.suites if e.loads == ("hackbench",))
    # the real single-core board gets the report's -g 15 (the load would scale
    # it to 4); the TCG twin keeps the load's own scaling (one group per CPU)
    assert entry.overrides == {"am335x-bbb": {"load_opts": {"hackbench": {"groups": 15}}},
                               "local": {"histogram_us": 20000}}
    single = next(b for b in c.boards if b.cpus == 1)
    assert single.budget_class == "qemu-tcg" and not entry.params_for(single)["load_opts"]


def test_pinning_a_cpu_the_board_lacks_names_file_and_key(tmp_path):
    oee = ROOT / "campaigns/vendor-rk3568-oee.yaml"
    with pytest.raises(InputError) as e:
        load_campaign(oee, boards=["qemu-aarch64"])  # 2 CPUs
    assert e.value.path == str(oee)
    assert "suites[0].params.cpus: CPU(s) 2 do not exist on board qemu-aarch64 (2 CPUs: 0-1)" in str(e.value)
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "run", "--campaign", str(oee),
                          "--board", "qemu-aarch64", "--results", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "vendor-rk3568-oee.yaml: suites[0].params.cpus: CPU(s) 2" in res.stderr
    assert not list(tmp_path.iterdir())  # refused before anything ran
    # a LAVA lab board rendered with the campaign: not rendered, and said why
    index = render_campaign(load_campaign(oee), tmp_path / "lava", boards=["twin-am335x"])
    assert not index["jobs"] and index["not_rendered"]
    assert {n["reason"] for n in index["not_rendered"]} == {"pinned to CPU 2: the board has 1 CPU"}
    for bad, why in [("'2; reboot'", "a cpulist like"), ("true", "must be 'auto', 'all'"),
                     ("[1, x]", "must be 'auto', 'all'"), ("[0, 5]", "CPU(s) 5 do not exist")]:
        f = tmp_path / "c.yaml"
        f.write_text(f"name: t\nboards: [qemu-aarch64]\nsuites:\n  - name: x\n    suite: cyclictest\n"
                     f"  - name: cyclictest\n    params: {{cpus: {bad}}}\n")
        with pytest.raises(InputError, match=re.escape("suites[1].params.cpus: ") + ".*" + re.escape(why)):
            load_campaign(f)


@pytest.mark.parametrize("path", VENDOR, ids=[p.stem for p in VENDOR])
def test_every_measurement_has_a_budget_on_the_twins_and_the_local_board(path):
    """Nothing unjudged: each suite run of the campaign, on its own boards and
    on this machine (`--board local`), meets a budget whose percentiles its
    histogram reaches."""
    from rtlab.plan.budgets import load_budgets

    for boards in (None, ["local"]):
        try:
            c = load_campaign(path, boards=boards)
        except InputError as e:  # pins a CPU this machine lacks (the OEE report's CPU 2)
            assert boards and "do not exist on board local" in str(e)
            continue
        budgets = load_budgets(c.budgets)
        for j in c.jobs():
            for r in j.suites:
                if r.suite in ("hackbench", "pi_stress", "rt-migrate-test"):
                    continue  # whole-run results, not budgeted (budgets/default.yaml)
                b = budgets.lookup(j.board.budget_class, j.variant.name, r.name, r.load)
                assert b is not None, (path.stem, j.id, r.id)
                for p, limit in (b.percentiles_us or {}).items():
                    assert r.params["histogram_us"] >= limit, (path.stem, j.id, r.id, p)
