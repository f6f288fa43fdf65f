"""The suites of the programme: command lines (CPU placement, params), the
raw files they leave parsed into the model, and how the gate and the table
treat results that are not latencies (pi_stress, hackbench)."""
import json
import shutil
from pathlib import Path

import pytest

from rtlab.targets.boards import Board
from rtlab.plan.budgets import Budget
from rtlab.plan.campaign import CAMPAIGN_DIR, load_campaign
from rtlab.judge.gate import judge
from rtlab.loads import LOADS
from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult, Verdict
from rtlab.report.table import comparison_table
from rtlab.core.params import ParamError
from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import shell_line

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RT = FIX / "rt-tests-2.4"


def run_of(suite, cpus=(0, 1), load="idle", **params):
    s = SUITES[suite]
    return SuiteRun(id=f"{suite}@{load}", name=suite, suite=suite, load=load,
                    params=s.params(params), cpus=tuple(cpus))


def cmd(suite, cpus=(0, 1), board=None, **params):
    """The board shell line of a suite's command (rtlab.suites.board.shell_line)."""
    argv = SUITES[suite].command(run_of(suite, cpus, **params), board=board)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return shell_line(argv)


def test_every_registered_suite_is_in_a_shipped_campaign_and_back():
    """Read from the registry (rtlab.registry.SUITES), not a list kept here:
    every suite some campaign runs exists, and none exists that no campaign runs."""
    used = {e.suite for p in sorted(CAMPAIGN_DIR.glob("*.yaml")) for e in load_campaign(p).suites}
    assert used == set(SUITES) and len(SUITES) >= 14
    for name, s in SUITES.items():
        if s.json_file:  # the rest have no --json: parsed from stdout
            assert f"--json={s.json_file}" in cmd(name)


def test_ipc_pairs_are_placed_on_the_measured_cpus():
    assert "-a -t 2 " in cmd("pmqtest", (0, 1))          # pair i on CPU i
    assert "-a1 -t 1 " in cmd("ptsematest", (1,))        # the isolated CPU, attached form
    c = cmd("sigwaittest", (0, 2))
    assert c.startswith("taskset -c 0,2 sigwaittest") and "-t 2 " in c and " -a" not in c
    assert "-i 1000 -d 500 -D 3 " in cmd("pmqtest", duration_s=3)
    # svsematest makes its IPC keys with ftok() on $_ or argv[0]: both the full path
    sv = SUITES["svsematest"].command(run_of("svsematest", (1,)))
    assert sv[:4] == ["sh", "-c", 't=$(command -v svsematest) || exit 127; _=$t "$t" "$@"', "svsematest"]
    assert sv[4] == "-q"


def test_other_placements_and_params():
    assert "-a0-1 " in cmd("signaltest") and "-t 2 " in cmd("signaltest", threads=1)
    assert cmd("pi_stress", duration_s=4) == "pi_stress -q -m -D 4 --json=pi_stress.json"
    assert "-g 3 " in cmd("pi_stress", groups=3)
    assert cmd("cyclicdeadline", (1,)) == \
        "cyclicdeadline -q -i 10000 -s 500 -t 1 -D 10 --json=cyclicdeadline.json"
    assert cmd("rt-migrate-test", check=True) == \
        "rt-migrate-test -q -p 80 -l 25 -c --json=rt-migrate-test.json"
    hb = cmd("hackbench", (1,), runs=2)
    assert hb.endswith(" hackbench-runs 2 taskset -c 1 hackbench -P -g 10 -f 20 -l 100 -s 100")
    assert '"$@" > "hackbench-$i.txt"' in hb
    assert SUITES["hackbench"].outputs(run_of("hackbench", runs=2)) == ["hackbench-1.txt", "hackbench-2.txt"]
    # rtbench: the board image has it on PATH; the local board runs the build by path
    assert cmd("rtbench", (1,)).startswith("rtbench -q -l 1000 -D 0.2 -p 80 -a 1 ")
    local = cmd("rtbench", (0, 1), board=Board(name="local", env_file=Path("local.yaml"), arch="x86_64",
                                                   cpus=2, isolate_cpu=None, budget_class="local", kind="local"))
    assert local.startswith(str(FIX.parents[1] / "rtbench/build/x86_64/rtbench") + " ") and "-a 1 " in local


def test_params_and_load_opts_are_checked():
    with pytest.raises(ParamError, match="nope"):
        SUITES["pmqtest"].params({"nope": 1})
    with pytest.raises(ParamError, match="load_opts.nope"):
        SUITES["pmqtest"].params({"load_opts": {"nope": {}}})
    with pytest.raises(ParamError, match="load_opts.hackbench.size"):
        SUITES["pmqtest"].params({"load_opts": {"hackbench": {"size": 1}}})
    p = SUITES["pmqtest"].params({"load_cpus": [0], "load_opts": {"hackbench": {"groups": 2}}})
    assert p["load_cpus"] == [0] and p["pairs"] == "auto"


RTLA = {"timerlat", "osnoise"}


def test_presets_cover_the_programme():
    c = load_campaign("programme")
    (local, qemu) = c.jobs()
    loads = {l.name for l in LOADS.values() if not l.deliberate_breach}
    for job in (local, qemu):
        runs = {(r.suite, r.load) for r in job.suites}
        # the rtla suites need the kernel's tracers: their own preset (campaigns/rtla.yaml)
        # irq-response needs an external probe: campaigns/vendor-rk3568-oee.yaml;
        # cyclictest-soak is cyclictest for hours (rtlab.soak.checkpoint): the vendor campaigns
        assert {s for s, _ in runs} == set(SUITES) - RTLA - {"irq-response", "cyclictest-soak"}
        assert {l for _, l in runs} == loads | {"stress+network"}
        assert len(runs) == len(set(SUITES) - RTLA - {"irq-response", "cyclictest-soak"}) * (len(loads) + 1)
    rtla = load_campaign("rtla").jobs()
    assert {(j.board.name, j.variant.name) for j in rtla} >= {("qemu-aarch64", "rt"), ("qemu-x86_64", "rt")}
    assert {r.suite for j in rtla for r in j.suites} == RTLA
    smp = next(r for r in qemu.suites if r.name == "cyclictest-smp")
    assert smp.cpus == (0, 1)
    iso = load_campaign("programme", boards=["qemu-x86_64"], variants=["rt-iso"]).jobs()[0]
    assert next(r for r in iso.suites if r.name == "cyclictest").cpus == (1,)
    assert next(r for r in iso.suites if r.name == "cyclictest-smp").cpus == (0, 1)
    sweep = load_campaign("interval-sweep").jobs()
    assert {r.params["interval_us"] for r in sweep[0].suites} == {100, 1000, 10000}
    assert {r.load for r in sweep[0].suites} == {"idle", "hackbench"}
    cmp_ = load_campaign("variant-comparison").jobs()
    assert [j.variant.name for j in cmp_ if j.board.name == "qemu-x86_64"] == ["voluntary", "rt", "rt-iso"]


# --- raw files -> model -> gate ----------------------------------------------------

def raw_dir(tmp_path, run, files: dict, rc=0):
    d = tmp_path / run.id
    d.mkdir(parents=True)
    for name, src in files.items():
        if isinstance(src, Path):
            shutil.copy(src, d / name)
        else:
            (d / name).write_text(src)
    (d / "exit.json").write_text(json.dumps({"exit_code": rc, "elapsed_s": 1.0}))
    return d


def judged(run, out, budget=None):
    m = Measurement(MeasurementKey("b", "rt", run.name, run.load), out)
    return judge(m, budget)


def test_pi_stress_inversions_pass_as_a_metric(tmp_path):
    run = run_of("pi_stress")
    d = raw_dir(tmp_path, run, {"pi_stress.json": RT / "pi_stress.json", "stdout.txt": RT / "pi_stress.txt"})
    assert SUITES["pi_stress"].accepts_exit(0, d)
    out = SUITES["pi_stress"].parse(tmp_path, run)
    assert out.metrics == {"inversions": 237108, "failed": 0} and not out.threads
    m = judged(run, out, Budget(max_us=500000))
    # its own check (no deadlocked inversion group) judged it
    assert m.verdict == Verdict.PASS and "pi_stress's own check passed" in m.reasons[0]


WATCHDOG = ("WATCHDOG triggered: group 0 is deadlocked!\n"
            "reporter stopping due to watchdog event\n")


def test_pi_stress_deadlock_is_a_kernel_fail_not_infra(tmp_path):
    # pi_stress's watchdog fires, it SIGTERMs itself: no JSON, exit 143
    run = run_of("pi_stress")
    d = raw_dir(tmp_path, run, {"stderr.txt": WATCHDOG, "stdout.txt": ""}, rc=143)
    suite = SUITES["pi_stress"]
    assert suite.accepts_exit(143, d)  # the board test passes: the result is judged
    out = suite.parse(tmp_path, run)
    assert out.metrics["failed"] == 1 and out.return_code == 143
    m = judged(run, out, Budget(max_us=500000))
    assert m.verdict == Verdict.FAIL
    assert m.reasons == ["priority inheritance failed: WATCHDOG triggered: group 0 is deadlocked!"]


def test_pi_stress_that_could_not_start_is_infra(tmp_path):
    run = run_of("pi_stress")
    d = raw_dir(tmp_path, run, {"stderr.txt": "main: boosting to max priority: 0x1\n"}, rc=255)
    assert not SUITES["pi_stress"].accepts_exit(255, d)  # SuiteFailure on the board: INFRA


def test_rt_migrate_test_failed_check_is_fail(tmp_path):
    run = run_of("rt-migrate-test", check=True)
    text = (RT / "rt-migrate-test.txt").read_text().replace("Passed!", "Failed!")
    d = raw_dir(tmp_path, run, {"rt-migrate-test.json": RT / "rt-migrate-test.json",
                                "stdout.txt": text}, rc=255)
    assert SUITES["rt-migrate-test"].accepts_exit(255, d)
    m = judged(run, SUITES["rt-migrate-test"].parse(tmp_path, run))
    assert m.verdict == Verdict.FAIL and "Failed!" in m.reasons[0]


def test_hackbench_runs_give_mean_min_max(tmp_path):
    run = run_of("hackbench", runs=2)
    second = (RT / "hackbench.txt").read_text().replace("Time: 0.066", "Time: 0.100")
    raw_dir(tmp_path, run, {"hackbench-1.txt": RT / "hackbench.txt", "hackbench-2.txt": second})
    out = SUITES["hackbench"].parse(tmp_path, run)
    assert out.metrics["time_s"] == 0.083 and out.metrics["time_min_s"] == 0.066
    assert out.metrics["time_max_s"] == 0.1 and out.metrics["runs"] == 2 and out.metrics["tasks"] == 80
    # seconds of messaging, no check of its own: shown, judged against nothing
    m = judged(run, out, Budget(max_us=1))
    assert m.verdict == Verdict.SHOWN and "not latency: shown, not judged" in m.reasons[0]


def test_ipc_results_carry_the_loads_health(tmp_path):
    run = run_of("pmqtest", load="stress+network")
    summary = {"load": "stress", "window": {"cpu_share": 0.93},
               "throughput": {"stressors": {"cpu": {"bogo_ops_s": 120.0}}}}
    raw_dir(tmp_path, run, {"pmqtest.json": RT / "pmqtest-S.json",
                            "load-stress.json": json.dumps(summary),
                            "load-network-iperf3-server.json": "{}"})
    out = SUITES["pmqtest"].parse(tmp_path, run)
    assert len(out.threads) == 2 and out.tool == "pmqtest"
    assert out.metrics == {"load.stress.cpu_share": 0.93, "load.stress.bogo_ops_s": 120.0}
    m = judged(run, out, Budget(max_us=100000))
    assert m.verdict == Verdict.PASS  # load numbers are not latency, never judged


def test_table_shows_results_and_loads(tmp_path):
    run = run_of("pi_stress")
    raw_dir(tmp_path, run, {"pi_stress.json": RT / "pi_stress.json",
                            "load-idle.json": json.dumps({"load": "idle", "board_busy": {"cpu": 0.04}})})
    out = SUITES["pi_stress"].parse(tmp_path, run)
    m = judged(run, out)
    job = JobResult(board="b", variant="rt", arch="x86_64", budget_class="c", measurements=[m])
    table = comparison_table(RunResult("r", "2026-01-01T00:00:00Z", "c", jobs=[job]))
    lines = table.splitlines()
    assert any(l.split() == ["result", "237k", "inv"] for l in lines)
    assert any(l.split() == ["load", "busy", "4%"] for l in lines)


# --- suites own their parser ------------------------------------------------------------

#: a real capture of every tool whose suite has a single-file parser
CAPTURES = {"cyclictest": "cyclictest-h400.json", "signaltest": "signaltest-t2.json",
            "cyclicdeadline": "cyclicdeadline-i10000.json", "rt-migrate-test": "rt-migrate-test.json",
            "oslat": "oslat-c1.json", "sigwaittest": "sigwaittest-t2.json", "svsematest": "svsematest-t2.json",
            "ptsematest": "ptsematest-S.json", "pmqtest": "pmqtest-S.json", "pi_stress": "pi_stress.json",
            "hackbench": "hackbench.txt"}


@pytest.mark.parametrize("name", sorted(SUITES))
def test_parse_file_finds_each_suites_parser_in_the_registry(name):
    """parse_file(tool=...) resolves through the suite registry: the parser
    called is the one the suite names, and every suite's tool is either
    parseable by it or read by the suite itself (rtla's two histograms)."""
    from rtlab.errors import InputError
    from rtlab.parsers import known_tools, parse_file, parser_for
    from rtlab.suites import Suite
    suite = SUITES[name]
    if suite.parser is None:
        assert type(suite).parse_outputs is not Suite.parse_outputs or \
            type(suite).parse_output is not Suite.parse_output
        assert suite.tool not in known_tools()
        with pytest.raises(InputError, match=f"{suite.tool}: its suite reads its raw files itself"):
            parser_for(suite.tool, "x")
        return
    assert parser_for(suite.tool, "x") is suite.parser and suite.tool in known_tools()
    path = FIX / "rtbench" / "rtbench-real-l500.json" if suite.tool == "rtbench" else RT / CAPTURES[suite.tool]
    out = parse_file(path, tool=suite.tool)
    assert out.tool == suite.tool and (out.threads or out.metrics)


def test_a_new_suite_is_parseable_by_its_tool_with_no_table_to_edit(tmp_path):
    """A suite class naming its parser is all it takes: parse_file and the
    results path (Suite.parse, used by the labgrid runner and LAVA ingest
    alike) call it; once the suite is gone, its tool is unknown again."""
    from rtlab.errors import InputError
    from rtlab.core.model import ToolOutput
    from rtlab.parsers import known_tools, parse_file
    from rtlab.suites import Suite

    seen = []

    def fakejit_format(box, path, tool, nsecs):
        seen.append((box.pop(), tool))
        return ToolOutput(path=str(path), tool=tool, metrics={"jitter": 1.0})

    class Fakejit(Suite):
        name = tool = "fakejit"
        json_file = "fakejit.json"
        parser = staticmethod(fakejit_format)

    try:
        f = tmp_path / "out.json"
        f.write_text('{"jitter": 1}')
        assert parse_file(f, tool="fakejit").metrics == {"jitter": 1.0}
        assert seen == [('{"jitter": 1}', "fakejit")] and "fakejit" in known_tools()
        run = SuiteRun(id="fakejit@idle", name="fakejit", suite="fakejit", load="idle")
        (tmp_path / run.id).mkdir()
        (tmp_path / run.id / "fakejit.json").write_text("{}")
        assert SUITES["fakejit"].parse(tmp_path, run).tool == "fakejit" and seen[-1] == ("{}", "fakejit")
    finally:
        SUITES.pop("fakejit", None)
    with pytest.raises(InputError, match="unknown tool 'fakejit'"):
        parse_file(f, tool="fakejit")
