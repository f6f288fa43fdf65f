"""Load health checks over real raw files (tests/fixtures/loads, captured on
this machine by the loads themselves): the measurement window, dead and
stalled loads, and each load's own throughput numbers."""
from pathlib import Path

import pytest

from rtlab.loads import LOADS, health
from rtlab.loads.base import load_cpus, LoadDied
from rtlab.loads.health import Sample, Snapshot, check_window
from rtlab.core.model import ToolOutput
from rtlab.suites import Suite

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "loads"


def snap(t, procs, ticks, alive=1, parts=1, dead=()):
    return Snapshot(Sample(t, procs, ticks, alive, parts), list(dead), {})


def test_samples_skip_lines_cut_by_a_kill():
    s = health.parse_samples("10.0 4 100 1 1\n11.0 4 200 1 1\n12.0 4 2")
    assert [x.t for x in s] == [10.0, 11.0]


def test_healthy_window_share_and_no_problems():
    samples = [Sample(10 + i, 4, 100 + 150 * i, 1, 1) for i in range(1, 5)]
    w = check_window(samples, snap(10.0, 4, 100), snap(15.0, 4, 850), ncpus=2, stall_s=5)
    assert w.problems == []
    assert w.cpu_s == 7.5 and w.share == pytest.approx(0.75)
    assert w.samples == 6 and w.max_stall_s == 0


def test_load_killed_mid_run_is_named_with_the_time():
    # real samples of a cpu load killed 2 s after it started (die_after_s)
    samples = health.parse_samples((FIX / "samples-cpu-killed.txt").read_text())
    first = snap(2601.15, 6, 40)
    last = snap(2605.22, 0, 0, alive=0, dead=["stress-ng"])
    w = check_window(samples, first, last, ncpus=2, stall_s=5)
    assert w.problems and w.problems[0].startswith("died mid-run: no process of the load left (stress-ng)")
    assert "0.5 s into the 4.1 s measurement" in w.problems[0]


def test_a_dead_part_is_caught_even_if_the_session_lives():
    samples = [Sample(11, 3, 200, 2, 2), Sample(12, 2, 260, 1, 2)]
    w = check_window(samples, snap(10, 3, 100, 2, 2), snap(13, 2, 300, 1, 2, dead=["iperf3"]),
                     ncpus=1, stall_s=5)
    assert w.problems == ["died mid-run: 1 of 2 load processes gone (iperf3) 2.0 s into the 3.0 s measurement"]


def test_a_stalled_load_is_caught():
    samples = [Sample(10 + i, 4, 500, 1, 1) for i in range(1, 8)]
    w = check_window(samples, snap(10, 4, 490), snap(18, 4, 500), ncpus=2, stall_s=5)
    assert any(p.startswith("no progress for 7.0 s") for p in w.problems)


def test_sparse_samples_with_progress_are_not_a_stall():
    # the sampler itself was starved for 8 s, but the load used CPU meanwhile
    w = check_window([], snap(10, 4, 100), snap(18, 4, 900), ncpus=2, stall_s=5)
    assert w.problems == []


def test_stress_ng_workers_must_stay():
    samples = [Sample(11, 5, 200, 1, 1), Sample(12, 4, 300, 1, 1)]
    w = check_window(samples, snap(10, 5, 100), snap(13, 5, 400), ncpus=2, stall_s=5,
                     stable_procs=True)
    assert w.problems == ["1 of its 5 processes exited during the measurement"]


def test_no_snapshot_is_a_problem_not_a_pass():
    w = check_window([], Snapshot(None, [], {}), snap(13, 5, 400), ncpus=2, stall_s=5)
    assert w.problems == ["no sample of the load at the start of the measurement"]


def test_cpu_busy_from_proc_stat():
    a = Snapshot.parse(["cpu  100 0 100 800 0 0 0 0 0 0", "cpu0 50 0 50 400 0 0 0 0 0 0"]).cpu
    b = Snapshot.parse(["cpu  200 0 200 1000 0 0 0 0 0 0", "cpu0 100 0 100 500 0 0 0 0 0 0"]).cpu
    assert health.cpu_busy(a, b) == {"cpu": 0.5, "cpu0": 0.5}


def test_stress_ng_yaml_and_log():
    m = health.stress_ng_metrics((FIX / "stress-ng-stress.yaml").read_text())
    assert set(m) == {"cpu", "io", "vm", "hdd"}
    assert m["cpu"]["bogo_ops"] == 1594 and m["cpu"]["bogo_ops_s"] == pytest.approx(301.1, abs=0.01)
    log = (FIX / "stress-ng-stress.log").read_text()
    assert health.stress_ng_errors(log) == []
    assert health.stress_ng_rates(log)["hdd_write_mb_s"] == 80.67
    bad = log.replace("successful run completed", "unsuccessful run completed")
    assert health.stress_ng_errors(bad)


def test_iperf3_intervals_in_binary_bytes():
    iv = health.iperf3_intervals((FIX / "iperf3-client.txt").read_text())
    assert len(iv) == 6  # the sender/receiver summary lines are not intervals
    assert iv[0] == (0.0, 1.0, 571 * 1024 * 1024)


def test_ping_mbw_hackbench_outputs():
    assert health.ping_stats((FIX / "ping.txt").read_text()) == \
        {"transmitted": 64602, "received": 64601, "loss": 0.0}
    mbw = health.mbw_runs((FIX / "mbw.txt").read_text())
    assert mbw["runs"] == 10 and mbw["mib"] == 1280.0 and mbw["mib_s"] > 0
    # the second round was cut by the stop (SIGTERM): only the first counts
    assert health.hackbench_rounds((FIX / "hackbench-loop.txt").read_text()) == \
        {"rounds": 1, "round_s_avg": 3.347, "round_s_max": 3.347}


def test_load_metrics_and_table_cells():
    summaries = [
        {"load": "stress", "window": {"cpu_share": 0.9}, "board_busy": {"cpu": 1.0},
         "throughput": {"stressors": {"cpu": {"bogo_ops_s": 1000.0}, "io": {"bogo_ops_s": 500.0}}}},
        {"load": "network", "window": {"cpu_share": 0.12},
         "throughput": {"tcp_mbit_s": 70.4, "ping": {"transmitted": 900}}},
    ]
    m = health.load_metrics(summaries)
    assert m == {"load.stress.cpu_share": 0.9, "load.stress.board_busy": 1.0,
                 "load.stress.bogo_ops_s": 1500.0, "load.network.cpu_share": 0.12,
                 "load.network.tcp_mbit_s": 70.4, "load.network.ping_tx": 900}
    assert health.load_cell("stress+network", m) == "stress 90% 1.5kop/s, network 12% 70Mb/s"
    assert health.load_cell("idle", {"load.idle.board_busy": 0.03}) == "busy 3%"
    # the whole-run result cell is the suite's own (rtlab.suites.Suite.result_cell)
    cell = lambda tool, metrics: Suite.for_tool(tool).result_cell(  # noqa: E731
        ToolOutput.from_json({"path": "", "tool": tool, "threads": [], "metrics": metrics}))
    assert cell("hackbench", {"time_s": 0.6921}) == "0.692 s"
    assert cell("pi_stress", {"inversions": 95400, "failed": 0}) == "95.4k inv"
    assert cell("pi_stress", {"failed": 1}) == "FAILED"
    assert cell("cyclictest", {"load.cpu.cpu_share": 1}) is None


def test_registry_composes_loads():
    assert "stress+network" in LOADS and LOADS["stress+network"].name == "stress+network"
    assert [l.name for l in LOADS["stress+network"].parts()] == ["stress", "network"]
    for bad in ("idle+cpu", "cpu+cpu", "cpu+nope", "nope"):
        assert bad not in LOADS and LOADS.get(bad) is None


def test_load_cpus_housekeeping_by_default():
    assert load_cpus("auto", [0, 1, 2, 3], [3]) == [0, 1, 2]
    assert load_cpus("auto", [0, 1], []) == [0, 1]
    assert load_cpus("all", [0, 1], [1]) == [0, 1]
    assert load_cpus("0", [0, 1], [1]) == [0]
    assert load_cpus([1], [0, 1], []) == [1]
    with pytest.raises(LoadDied, match="not online"):
        load_cpus([5], [0, 1], [])


@pytest.mark.parametrize("board, cpus, groups", [
    ({"kind": "qemu", "budget_class": "qemu-tcg"}, [0, 1], 2),
    # a virtual rack board is a remote place, but a TCG machine all the same
    ({"kind": "remote", "budget_class": "qemu-tcg"}, [0, 1], 2),
    ({"kind": "remote", "budget_class": "rk3568"}, [0, 1, 2, 3], 15),
    ({"kind": "local", "budget_class": "local"}, [0, 1], 8),
])
def test_hackbench_scales_to_the_board(board, cpus, groups):
    from pathlib import Path
    from rtlab.loads import LOADS, LoadEnv
    env = LoadEnv(sh=None, host_dir=Path("."), run=None, board=board, cpus=cpus)
    assert LOADS["hackbench"].groups(env) == groups
