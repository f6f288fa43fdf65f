"""Which late samples a stall of the host explains (rtlab.core.hostattr and
the gate's rule, rtlab.judge.gate.host_explained): by the samples' own
times, on their own CPU, never by a share of the window stolen.

Over real runs of the local board (tests/fixtures/host-attribution,
capture.py there): a SCHED_FIFO spin on every CPU, a 30 ms spin on one CPU,
and the job frozen as a paused VM freezes it. Steal that rises with the
spin (the issue measured 3.6-5.5 % under it, 2-3 % quiet) cannot be made on
demand: it is written into the recorded run's numbers."""
import copy
import json
import shutil
from pathlib import Path

import pytest

from rtlab.core import hostattr, modelcheck
from rtlab.core.hostattr import BoardClock, HostStalls, anchored, delays, steal_covers
from rtlab.core.model import (HostDelays, InfraCause, JobResult, Measurement, MeasurementKey, RunResult, ToolOutput,
                              Verdict)
from rtlab.errors import InputError
from rtlab.judge.gate import judge
from rtlab.parsers import parse_file, rttext
from rtlab.plan.budgets import Budget, load_budgets
from rtlab.run.results import host_delays
from rtlab.suites import SUITES, SuiteRun

from test_gate import meas, thread

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "host-attribution"
KEY = MeasurementKey("local", "host", "cyclictest", "idle")


def local_budget() -> Budget:
    return load_budgets(ROOT / "budgets" / "default.yaml").lookup("local", "host", "cyclictest", "idle")


def recorded(tmp_path: Path, name: str, noise_edit=None, timeline_edit=None) -> Measurement:
    """A fixture run as `rtlab run` collects it (rtlab.run.results.host_delays),
    its host-noise.json and host-stalls.json edited first where a case says."""
    d = tmp_path / name
    shutil.copytree(FIX / name, d)
    for fname, edit in (("host-noise.json", noise_edit), ("host-stalls.json", timeline_edit)):
        if edit is not None:
            doc = json.loads((d / fname).read_text())
            edit(doc)
            (d / fname).write_text(json.dumps(doc))
    out = parse_file(d / "cyclictest.json", tool="cyclictest")
    run = SuiteRun(id="cyclictest@idle", name="cyclictest", suite="cyclictest", load="idle",
                   params=SUITES["cyclictest"].params({"duration_s": 5, "histogram_us": 2000}), cpus=(0, 1),
                   spike_us=299)
    m = Measurement(KEY, out)
    m.host_noise = json.loads((d / "host-noise.json").read_text())
    m.host_delays = host_delays(SUITES["cyclictest"], run, d, m.host_noise, out)
    return m


def steal_rising_with_the_spin(share: float):
    """The summary of a VM whose steal rose with the guest's CPU use: *share*
    of each CPU's time stolen over the window, in bursts of 30 ms."""
    def edit(noise):
        ms = round(share * noise["window_s"] * 1000, -1)
        noise["steal_ms"] = {"cpu0": ms, "cpu1": ms}
        noise["burst_ms"], noise["burst_cpu"] = 30.0, "cpu0"
    return edit


def test_a_spin_on_every_cpu_is_the_kernels_however_much_steal_rises_with_it(tmp_path):
    """The issue's case: a SCHED_FIFO 99 spin on every CPU breaks p99, and
    the VM's steal rises with it (5.5 % of each CPU, more than the 1 % of
    late samples a p99 breach needs). The gate at 1ddfe76 read that share
    as the excuse (INFRA "host stole 5.5 % of the CPUs' time"); by the
    samples' times only those inside a stall of their own CPU are the host's,
    and the rest still break p99."""
    for edit in (None, steal_rising_with_the_spin(0.036), steal_rising_with_the_spin(0.055)):
        m = judge(recorded(tmp_path / str(id(edit)), "spin-every-cpu", noise_edit=edit), local_budget())
        assert m.verdict == Verdict.FAIL and m.infra_cause is None, m.reasons
        assert m.reasons[0].startswith("p99 ") and ">= budget 300 us" in m.reasons[0]
        hd = m.host_delays
        late = m.output.combined().histogram.count_at_or_above(300)
        assert hd.recorded == hd.total and late > 200  # ~5 % of 10,000 wake-ups late
        assert hd.excused(300)[0] < late / 10, "the host's stalls cover a few of the spin's late samples"


def test_steal_counted_on_every_stall_of_the_witness_still_excuses_only_those_samples(tmp_path):
    """Adversarial: every gap the witness saw on either CPU counted as that
    CPU's steal. Only the samples inside those gaps come off; the spin's
    late samples elsewhere still break p99."""
    def all_stolen(tl):
        for gaps in tl["cpus"].values():
            for g in gaps:
                g[2] = 1000.0
    m = judge(recorded(tmp_path, "spin-every-cpu", noise_edit=steal_rising_with_the_spin(0.055),
                       timeline_edit=all_stolen), local_budget())
    assert m.verdict == Verdict.FAIL, m.reasons


def test_a_30_ms_spin_on_one_cpu_is_fail_though_the_host_stole_20_ms_from_the_other(tmp_path):
    """The issue's case: cpu0 stopped 30 ms by a kernel latency while the
    hypervisor stole 20 ms from cpu1 in the same window, and the witness saw
    only cpu0 stop. cpu1's steal is not cpu0's: FAIL (the gate at 1ddfe76
    consulted steal first, from any CPU, and said INFRA)."""
    def cpu1_stolen(tl):  # cpu1's counter gained a tick across each of its own short gaps
        for g in tl["cpus"]["cpu1"]:
            g[2] = max(g[2], 1.0)

    def burst_on_cpu1(noise):
        noise["burst_ms"], noise["burst_cpu"] = 20.0, "cpu1"
        noise["steal_ms"]["cpu1"] = max(noise["steal_ms"]["cpu1"], 20.0)
    m = judge(recorded(tmp_path, "spin-one-cpu", noise_edit=burst_on_cpu1, timeline_edit=cpu1_stolen),
              local_budget())
    assert m.verdict == Verdict.FAIL and m.reasons[0].startswith("max ") and "(thread 0, cpu 0)" in m.reasons[0]
    placed = HostStalls.from_timeline(json.loads((tmp_path / "spin-one-cpu" / "host-stalls.json").read_text()),
                                      True, 10.0)
    assert placed.steal["cpu1"], "cpu1's stalls were placed: they are just not cpu0's"


def test_a_stall_of_every_cpu_at_once_is_the_hosts(tmp_path):
    """The job frozen 30 ms every 80 ms (bench/hoststall.py), max and p99
    broken: every late sample inside a stall of every CPU at once. INFRA,
    measured again; with the witness untrusted (a real-time load could have
    stopped its samplers) the same breach is the kernel's."""
    m = judge(recorded(tmp_path / "a", "host-stall"), local_budget())
    assert m.verdict == Verdict.INFRA and m.infra_cause in (InfraCause.HOST_STALL, InfraCause.HOST_STEAL), m.reasons
    assert m.reasons[0].startswith(("host stalled", "host stole")) and "max: " in m.reasons[0], m.reasons
    assert "max " in m.reasons[1] and ">= budget 20000 us" in m.reasons[1]

    def untrusted(noise):
        noise["stall"]["trusted"] = False
    m = judge(recorded(tmp_path / "b", "host-stall", noise_edit=untrusted), local_budget())
    assert m.verdict == Verdict.FAIL, m.reasons


LOCAL = BoardClock()


def one_breach(stalls: HostStalls, clock=LOCAL, wake_s=100.030, cpu=0) -> Measurement:
    """A 25 ms sample on *cpu* woken at *wake_s* (host clock), 9,999 quiet ones."""
    m = meas(thread({10: 9999}, size=2000, overflows=1, max_us=25000, cpu=cpu))
    m.host_noise = {"window_s": 10.0, "tick_ms": 10.0, "stall": {"stall_ms": 0.0, "trusted": True}}
    m.host_delays = delays([(0, 25000, int((wake_s + clock.offset_s) * 1e6))], 1, 299.0, {0: cpu}, stalls, clock,
                           range_us=2000.0)
    return judge(m, Budget(max_us=20000, percentiles_us={"99": 300}))


def timeline(**cpus):
    return {"cpus": {c: [list(g) for g in gaps] for c, gaps in cpus.items()}}


def test_a_cpus_own_steal_places_a_stall_on_it_and_nowhere_else():
    gap = (100.004, 100.031)  # the sample due at 100.005, woken at 100.030
    own = HostStalls.from_timeline(timeline(cpu0=[(*gap, 3)], cpu1=[]), True, 10.0)
    m = one_breach(own)
    assert m.verdict == Verdict.INFRA and m.infra_cause == InfraCause.HOST_STEAL, m.reasons
    assert m.reasons[0].startswith("host stole (their own CPU's steal)") and "max: 1 of the 1 samples" in m.reasons[0]
    # no steal across the gap: a latency of the kernel on cpu0
    assert one_breach(HostStalls.from_timeline(timeline(cpu0=[(*gap, 0)], cpu1=[]), True, 10.0)).verdict \
        == Verdict.FAIL
    # one tick across 27 ms: steal does not cover it
    assert one_breach(HostStalls.from_timeline(timeline(cpu0=[(*gap, 1)], cpu1=[]), True, 10.0)).verdict \
        == Verdict.FAIL
    # the steal was cpu1's (3 ms of it, with a tick to show): 3 ms of every CPU at once leave 22 ms
    other = timeline(cpu0=[(*gap, 0)], cpu1=[(100.010, 100.013, 1)])
    assert one_breach(HostStalls.from_timeline(other, True, 10.0)).verdict == Verdict.FAIL
    # the stall explains 15 of 25 ms: 10 ms of it stay the kernel's, under 20 ms: still the host's
    short = HostStalls.from_timeline(timeline(cpu0=[(100.015, 100.031, 2)], cpu1=[]), True, 10.0)
    assert one_breach(short).verdict == Verdict.INFRA
    # a stall at another time: nothing to do with this sample
    later = HostStalls.from_timeline(timeline(cpu0=[(100.5, 100.53, 3)], cpu1=[]), True, 10.0)
    assert one_breach(later).verdict == Verdict.FAIL


def test_every_cpu_at_once_is_the_hosts_only_where_the_witness_is_trusted():
    both = timeline(cpu0=[(100.004, 100.031, 0)], cpu1=[(100.003, 100.032, 0)])
    m = one_breach(HostStalls.from_timeline(both, True, 10.0))
    assert m.verdict == Verdict.INFRA and m.infra_cause == InfraCause.HOST_STALL
    assert m.reasons[0].startswith("host stalled (every CPU stopped at once)")
    assert one_breach(HostStalls.from_timeline(both, False, 10.0)).verdict == Verdict.FAIL


def test_a_guests_samples_count_only_stalls_of_every_host_cpu_and_its_clock_is_anchored():
    """A QEMU board: its vCPUs run on any host CPU, so one host CPU's steal
    is no vCPU's; its clock is the guest's, mapped by the console anchors."""
    clock = anchored([(50.0, 1050.002, 0.004), (60.0, 1060.001, 0.020)], 0.01)
    assert clock.guest and clock.offset_s == pytest.approx(1000.002)
    assert clock.uncertainty_s == pytest.approx(0.004 + 0.01 + 0.001)
    own_cpu = HostStalls.from_timeline(timeline(cpu0=[(100.004, 100.031, 3)], cpu1=[]), True, 10.0)
    assert one_breach(own_cpu, clock).verdict == Verdict.FAIL
    both = HostStalls.from_timeline(timeline(cpu0=[(100.004, 100.031, 0)], cpu1=[(100.004, 100.031, 0)]), True, 10.0)
    assert one_breach(both, clock).verdict == Verdict.INFRA
    assert one_breach(both, clock, wake_s=100.5).verdict == Verdict.FAIL


def test_steal_covers_a_gap_only_with_about_as_much_steal():
    assert steal_covers(27.0, 2, 10.0) and steal_covers(27.0, 3, 10.0)
    assert not steal_covers(27.0, 1, 10.0) and not steal_covers(3.0, 0, 10.0)
    assert steal_covers(3.0, 1, 10.0)  # a tick: counted whole
    assert not steal_covers(300.0, 5, 10.0)  # 50 ms of steal does not make a 300 ms gap the host's


def test_a_sample_list_cut_short_excuses_nothing_it_did_not_record():
    """cyclictest keeps --spike-nodes spikes and counts the rest: samples it
    did not record cannot be placed, so a max beyond the histogram whose
    every sample is not accounted for stays the kernel's."""
    stalls = HostStalls.from_timeline(timeline(cpu0=[(100.004, 100.031, 0)], cpu1=[(100.004, 100.031, 0)]),
                                      True, 10.0)
    m = meas(thread({10: 9998}, size=2000, overflows=2, max_us=25000))
    m.host_noise = {"window_s": 10.0, "stall": {"stall_ms": 27.0, "trusted": True}}
    m.host_delays = delays([(0, 25000, 100_030_000)], 2, 299.0, {0: 0}, stalls, BoardClock(), range_us=2000.0)
    assert judge(m, Budget(max_us=20000)).verdict == Verdict.FAIL
    m.verdict = None
    m.host_delays.total = 1  # every spike recorded
    assert judge(m, Budget(max_us=20000)).verdict == Verdict.INFRA


def test_a_percentile_breach_without_sample_times_is_never_the_hosts():
    m = meas(thread({10: 980, 400: 20}, size=2000))
    m.host_noise = {"window_s": 5.0, "tick_ms": 10.0, "steal_ms": {"cpu0": 500.0, "cpu1": 500.0},
                    "burst_ms": 200.0, "burst_cpu": "cpu0", "stall": {"stall_ms": 300.0, "trusted": True}}
    assert judge(m, Budget(max_us=20000, percentiles_us={"99": 300})).verdict == Verdict.FAIL


def test_host_delays_round_trip_and_hostile_values_are_refused(tmp_path):
    hd = HostDelays(from_us=299.0, recorded=3, total=5, range_us=2000.0, beyond_us=[25000.0],
                    delayed=[hostattr.DelayedSample(0, 25000.0, 24000.0, "steal")], clock="x")
    m = Measurement(KEY, ToolOutput(path="x", tool="cyclictest"), host_delays=hd)
    back = Measurement.from_json(json.loads(json.dumps(m.to_json())))
    assert back.host_delays == hd
    good = RunResult("r", "2026-11-29T00:00:00Z", "c", jobs=[JobResult(board="b", variant="v", measurements=[m])]).to_json()
    for path, bad, words in [(("recorded",), 9, "more samples recorded than counted"),
                             (("delayed", 0, 2), 30000.0, "more than the latency"),
                             (("delayed", 0, 3), "cpu9", "must be one of machine, steal"),
                             (("beyond_us", 0), float("nan"), "finite"),
                             (("from_us",), "299; rm -rf /", "must be a number")]:
        doc = copy.deepcopy(good)
        node = doc["jobs"][0]["measurements"][0]["host_delays"]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = bad
        f = tmp_path / "run.json"
        f.write_text(json.dumps(doc))
        with pytest.raises(InputError) as e:
            modelcheck.load_checked(f, modelcheck.run)
        assert "host_delays" in str(e.value) and words in str(e.value), str(e.value)


def test_the_runner_arms_the_spike_trigger_under_the_lowest_limit_on_boards_of_this_host(tmp_path):
    from rtlab.plan.campaign import load_campaign
    from rtlab.run.runner import arm_spikes

    budgets = load_budgets(ROOT / "budgets" / "default.yaml")
    jobs = {j.board.name: arm_spikes(j, budgets) for j in load_campaign(ROOT / "campaigns" / "default.yaml").jobs()
            if j.variant.name in ("host", "rt")}
    (local,) = jobs["local"].suites
    assert local.spike_us == 299  # p99 300 us, max 20 ms: every sample that can break either
    (tcg,) = jobs["qemu-x86_64"].suites
    assert tcg.spike_us == 1999999
    argv = SUITES["cyclictest"].command(local)
    assert "--spike=299" in argv and "--spike-nodes=1000" in argv
    soak = SuiteRun(id="s", name="s", suite="cyclictest-soak", load="idle", cpus=(0, 1), spike_us=299,
                    params=SUITES["cyclictest-soak"].params({"duration_s": 43200, "checkpoint_s": 60}))
    assert "--spike-nodes=6000" in SUITES["cyclictest-soak"].segment_command(soak, 60)
    assert "--spike" not in SUITES["cyclictest-soak"].checkpoint_command(soak)  # a resume may differ in it
    long = SuiteRun(id="c", name="c", suite="cyclictest", load="idle", cpus=(0, 1), spike_us=9,
                    params=SUITES["cyclictest"].params({"duration_s": 86400, "interval_us": 100}))
    assert f"--spike-nodes={hostattr.MAX_SPIKES}" in SUITES["cyclictest"].command(long)
    # a board elsewhere (a rack, LAVA): this host's stalls are not its own
    import dataclasses
    remote = dataclasses.replace(jobs["local"], board=dataclasses.replace(jobs["local"].board, kind="remote"),
                                 suites=tuple(dataclasses.replace(s, spike_us=None) for s in jobs["local"].suites))
    assert arm_spikes(remote, budgets).suites[0].spike_us is None


def test_the_spike_lines_are_read_and_do_not_disturb_the_text_parser():
    text = (FIX / "spin-every-cpu" / "stdout.txt").read_text()
    found, total = rttext.spikes(text)
    assert total == len(found) > 200 and all(lat >= 300 for _, lat, _ in found)
    assert {t for t, _, _ in found} == {0, 1}
    out = rttext.parse(text, "stdout.txt", "cyclictest")
    js = parse_file(FIX / "spin-every-cpu" / "cyclictest.json", tool="cyclictest")
    assert [t.max_us for t in out.threads] == [t.max_us for t in js.threads]
    assert [t.cycles for t in out.threads] == [t.cycles for t in js.threads]


def test_a_soaks_samples_are_placed_a_run_at_a_time_and_kept_bounded(monkeypatch):
    """A 12 h soak's 720 segments: each segment's spikes placed, then let
    go; of the samples beyond the histogram only the largest MAX_SPIKES are
    kept, and a count that would need a dropped one is unknown, not guessed."""
    monkeypatch.setattr(hostattr, "MAX_SPIKES", 10)
    stalls = HostStalls.from_timeline(timeline(cpu0=[(100.0, 101.0, 0)], cpu1=[(100.0, 101.0, 0)]), True, 10.0)
    placer = hostattr.Placer(299.0, {0: 0}, stalls, BoardClock(), range_us=2000.0)
    for seg in range(30):
        placer.add([(0, 3000 + seg, int((200 + seg) * 1e6)), (0, 400, int(100.5 * 1e6))], 2)
    hd = placer.result()
    assert hd.recorded == hd.total == 60 and len(hd.delayed) == 30  # the ones inside the stall
    assert hd.beyond_us == [3000.0 + s for s in range(20, 30)] and hd.beyond_dropped == 20
    assert hd.at_or_above(3025) == 5 and hd.at_or_above(3005) is None
