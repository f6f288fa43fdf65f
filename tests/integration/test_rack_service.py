"""The virtual rack end to end: `rtlab rack up` (coordinator, exporter, HTTP PDU,
two U-Boot boards), `rtlab run` on rack-aarch64 through reserve + lock, PDU
power-on, U-Boot, DHCP + TFTP, shell; a hung board power-cycled; and no lock
left behind by a job that is interrupted or killed.

One rack for the module, on free ports in a temporary directory, so a
developer's own rack (.cache/rack, ports of labgrid/rack.yaml) is untouched.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.rack.control import pdu_request, rack_down, rack_up
from rtlab.lab.coordinator import Coordinator
from rtlab.lab.places import IDENTITY_RE

BUDGETS = """
budgets:
  qemu-tcg: {"*": {"*": {"*": {max_us: 10000000}}}}
"""


@pytest.fixture(scope="module")
def rack(tmp_path_factory):
    d = tmp_path_factory.mktemp("rack")
    st = rack_up(d, coordinator_port=0, pdu_port=0)
    try:
        yield st
    finally:
        rack_down(d)
        out = subprocess.run(["pgrep", "-f", f"tftp={d}"], capture_output=True, text=True).stdout
        assert not out.strip(), f"QEMU left running after rack down: {out}"


def campaign(tmp_path: Path, variants, duration_s=2) -> Path:
    (tmp_path / "budgets.yaml").write_text(BUDGETS)
    c = tmp_path / "campaign.yaml"
    c.write_text(f"""
name: rack
budgets: {tmp_path / 'budgets.yaml'}
boards: [rack-aarch64]
variants: {list(variants)}
suites:
  - name: cyclictest
    params: {{interval_us: 1000, duration_s: {duration_s}, histogram_us: 2000}}
    overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
""")
    return c


def rtlab_cmd(rack, *args):
    env = {**os.environ, "RTLAB_RACK_DIR": rack["dir"]}
    env.pop("LG_COORDINATOR", None)
    return [sys.executable, "-m", "rtlab.cli", *map(str, args)], env


def run_rtlab(rack, *args, timeout=600):
    cmd, env = rtlab_cmd(rack, *args)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def events(job_dir: Path) -> list:
    return [json.loads(x) for x in (job_dir / "events.jsonl").read_text().splitlines()]


def boots(rack, board: str) -> list:
    p = Path(rack["dir"]) / "boards" / board / "boots.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def pdu_log(rack) -> list:
    p = Path(rack["dir"]) / "pdu.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def assert_no_locks(rack, timeout=0.0) -> None:
    """No place acquired, no reservation, by the coordinator and by labgrid-client who."""
    deadline = time.monotonic() + timeout
    while True:
        with Coordinator(rack["coordinator"]) as c:
            held = {n: p.acquired for n, p in c.places().items() if p.acquired}
            res = {t: r.owner for t, r in c.reservations().items()}
        if (not held and not res) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not held, f"places still locked: {held}"
    assert not res, f"reservations left: {res}"
    who = subprocess.run([str(Path(sys.executable).parent / "labgrid-client"), "who"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LG_COORDINATOR": rack["coordinator"]})
    assert who.returncode == 0, who.stderr
    assert "rack-vb" not in who.stdout, who.stdout


def test_two_jobs_run_in_parallel_on_two_places_through_uboot_and_tftp(rack, tmp_path):
    before = {b: len(boots(rack, b)) for b in ("vb0", "vb1")}
    t0 = time.monotonic()
    res = run_rtlab(rack, "run", "--campaign", campaign(tmp_path, ["rt", "rt-iso"], 3),
                    "--places", "2", "--results", tmp_path / "results", "--no-publish")
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    assert [(j["variant"], j["verdict"]) for j in run["jobs"]] == [("rt", "pass"), ("rt-iso", "pass")]
    # each job held its own place...
    places = {v: json.loads((run_dir / "rack-aarch64" / v / "job-spec.json").read_text())["place"]
              for v in ("rt", "rt-iso")}
    assert sorted(places.values()) == ["rack-vb0", "rack-vb1"]
    # ...at the same time: each booted before the other one finished
    spans = {}
    for v in places:
        ev = events(run_dir / "rack-aarch64" / v)
        spans[v] = (next(e["t"] for e in ev if e["event"] == "booting"), ev[-1]["t"])
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1 and b0 < a1, f"jobs did not overlap: {spans}"
    # the running kernel is the variant asked for, booted by U-Boot with our bootargs
    rt_iso = run["jobs"][1]["kernel"]
    assert rt_iso["realtime"] is True and "isolcpus=" in rt_iso["cmdline"]
    assert "console=ttyAMA0,115200" in rt_iso["cmdline"]
    # the rack saw a cold boot through U-Boot and TFTP on both boards, of the
    # kernel and initramfs the runner staged
    staged = json.loads((run_dir / "rack-aarch64" / "rt" / "job-spec.json").read_text())["kernel"]
    for b in ("vb0", "vb1"):
        new = boots(rack, b)[before[b]:]
        rec = next(r for r in new if "shell" in r["t"])
        files = {t["file"]: t.get("bytes") for t in rec["tftp"]}
        assert files["rtlab/kernel"] == Path(staged["path"]).stat().st_size
        assert files["rtlab/initrd"] == Path(staged["initrd"]).stat().st_size
        assert "rtlab/uEnv.txt" in files
        assert rec["t"]["uboot"] < rec["t"]["kernel_start"] < rec["t"]["linux"] < rec["t"]["shell"]
        print(f"{b}: boot via U-Boot/TFTP {json.dumps(rec['t'])} tftp {json.dumps(rec['tftp'])}")
    switched = {(e["board"], e["set"]) for e in pdu_log(rack)}
    assert {("vb0", "on"), ("vb1", "on")} <= switched
    print(f"2 jobs on 2 places: {wall:.1f} s wall")
    assert_no_locks(rack)


# make test-long: a hung board's power cycle: two more boots; the rack's boot path is proven by the two
#   parallel jobs
@pytest.mark.long
def test_a_board_whose_console_hangs_is_power_cycled_and_boots(rack, tmp_path):
    for b in ("vb0", "vb1"):  # whichever place the job gets, its next power-on hangs
        pdu_request(rack, "POST", f"/rack/fault/{b}", "hang-boot")
    n_pdu = len(pdu_log(rack))
    try:
        res = run_rtlab(rack, "run", "--campaign", campaign(tmp_path, ["rt"]),
                        "--results", tmp_path / "results", "--no-publish")
    finally:
        for b in ("vb0", "vb1"):
            pdu_request(rack, "POST", f"/rack/fault/{b}", "clear")
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    place = json.loads((run_dir / "rack-aarch64" / "rt" / "job-spec.json").read_text())["place"]
    board = place.replace("rack-", "")
    # the PDU switched that board on (hung: frozen CPU, silent console), off, and on again
    switches = [e["set"] for e in pdu_log(rack)[n_pdu:] if e["board"] == board]
    assert switches[-3:] == ["on", "off", "on"], switches
    last_two = boots(rack, board)[-2:]
    assert last_two[0]["frozen"] is True and not last_two[0]["t"]
    assert last_two[1]["frozen"] is False and "shell" in last_two[1]["t"]
    assert_no_locks(rack)


def _start_job(rack, tmp_path, **extra_env):
    cmd, env = rtlab_cmd(rack, "run", "--campaign", campaign(tmp_path, ["rt"], duration_s=120),
                         "--results", tmp_path / "results", "--no-publish")
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**env, **extra_env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    # wait until the job holds a place under its identity and pytest is booting the board
    deadline = time.monotonic() + 120
    owner = None
    while time.monotonic() < deadline and proc.poll() is None:
        with Coordinator(rack["coordinator"]) as c:
            for p in c.places().values():
                m = p.acquired and IDENTITY_RE.match(p.acquired.split("/", 1)[1])
                if m and int(m.group("pid")) == proc.pid:
                    owner = p.acquired
        ev = list((tmp_path / "results").rglob("events.jsonl"))
        if owner and ev and "booting" in ev[0].read_text():
            return proc, owner
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"job never locked a place: {proc.communicate()[0][-2000:]}")


def _job_processes(tmp_path) -> list:
    out = subprocess.run(["pgrep", "-f", str(tmp_path / "results")], capture_output=True, text=True)
    return out.stdout.split()


def test_a_cancelled_job_releases_its_place_itself(rack, tmp_path):
    """SIGTERM, as a cancelled CI job gets: the runner ends the job and releases."""
    reaped_before = (Path(rack["dir"]) / "reaper.jsonl").read_text().count("\n") \
        if (Path(rack["dir"]) / "reaper.jsonl").exists() else 0
    proc, owner = _start_job(rack, tmp_path)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    # cancelled: INFRA, exit 2 (never 130/143, which CI would not retry as infra)
    assert proc.returncode == 2 and "cancelled (" in out, out
    assert_no_locks(rack)  # at once: the runner released it, not the reaper
    reaped = (Path(rack["dir"]) / "reaper.jsonl").read_text().count("\n") \
        if (Path(rack["dir"]) / "reaper.jsonl").exists() else 0
    assert reaped == reaped_before
    assert not _job_processes(tmp_path)


def test_a_killed_job_leaves_no_lock_after_cleanup(rack, tmp_path):
    proc, owner = _start_job(rack, tmp_path)
    proc.kill()  # SIGKILL: no finally, no exit handler runs
    proc.wait()
    # the rack's reaper notices the owner process is gone and releases its place
    assert_no_locks(rack, timeout=20)
    reaper = (Path(rack["dir"]) / "reaper.jsonl").read_text()
    assert owner in reaper
    time.sleep(1)
    assert not _job_processes(tmp_path), "the job's pytest outlived the runner"


def test_a_killed_job_of_another_host_is_released_when_its_lease_runs_out(rack, tmp_path):
    """The runner host is another machine (LG_HOSTNAME): its pids mean nothing
    here, so only the lease tells the rack's reaper that the job is gone."""
    from rtlab.lab import places as P
    proc, owner = _start_job(rack, tmp_path, LG_HOSTNAME="runner-elsewhere")
    assert owner.startswith("runner-elsewhere/")
    with Coordinator(rack["coordinator"]) as c:
        place = next(p for p in c.places().values() if p.acquired == owner)
    lease = P.read_lease(place)
    assert lease is not None and lease.owner == owner  # the job renews a lease on the place
    proc.kill()
    proc.wait()
    t_dead = time.monotonic()
    T = P.lease_seconds()
    assert_no_locks(rack, timeout=T + T / 3 + 30)
    released_after = time.monotonic() - t_dead
    reaper = (Path(rack["dir"]) / "reaper.jsonl").read_text()
    assert f"from {owner} (lease not renewed" in reaper
    # within T of its last renewal (at most T/3 before the kill), one reaper
    # second, and a loaded machine's round trips
    assert released_after <= T + T / 3 + 15, released_after


# make test-long (a rack and a 45 s loss): make test proves the lost board on the
# local board: tests/faults/test_console.py::test_a_board_whose_console_goes_silent_is_lost_within_its_duration_and_the_silence_limits
@pytest.mark.long
def test_a_board_lost_mid_measurement_is_infra_naming_it_within_its_duration_and_the_silence_limits(rack, tmp_path):
    """The board's QEMU dies while cyclictest runs (a board that lost power,
    crashed or froze: its console goes silent, the ser2net line stays up).
    The job ends INFRA naming the place and the silence within the tool's
    duration plus three console silence limits (probe, echo, fresh console),
    not after the tool's hung-tool timeout and the boot's login timeout."""
    silence_s, duration_s = 5.0, 8
    cmd, env = rtlab_cmd(rack, "run", "--campaign", campaign(tmp_path, ["rt"], duration_s=duration_s),
                         "--results", tmp_path / "results", "--no-publish")
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**env, "RTLAB_CONSOLE_SILENCE_S": str(silence_s)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            ev = list((tmp_path / "results").rglob("events.jsonl"))
            if ev and any(e["event"] == "suite" for e in events(ev[0].parent)):
                break
            time.sleep(0.2)
        time.sleep(3)  # the tool runs (its work dir made, the load started)
        job_dir = ev[0].parent
        place = json.loads((job_dir / "job-spec.json").read_text())["place"]
        board = place.replace("rack-", "")
        outlets = json.loads(pdu_request(rack, "GET", "/rack/status"))["outlets"]
        qemu = next(o for o in outlets if o["name"] == board)["qemu_pid"]
        assert proc.poll() is None and qemu
        os.killpg(qemu, signal.SIGKILL)
        t_lost = time.monotonic()
        bound = duration_s + 3 * silence_s + 30
        try:
            out = proc.communicate(timeout=bound + 30)[0]
        except subprocess.TimeoutExpired:
            raise AssertionError(f"board {place} lost {time.monotonic() - t_lost:.0f} s ago and the job "
                                 f"is not over (bound {bound:g} s)") from None
        lost_to_infra = time.monotonic() - t_lost
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, out
    run_dir = Path(out.split("results: ")[-1].split()[0])
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    (m,) = job["measurements"]
    assert job["verdict"] == "infra" and m["verdict"] == "infra", m
    why = " ".join(m["reasons"])
    assert f"board {place} lost while cyclictest ran: console silent" in why, why
    assert "no echo within 5 s" in why and "no shell on a fresh console within 5 s" in why, why
    # what was on disk stays: the command line, the job's own logs
    assert (job_dir / "cyclictest@idle" / "command.txt").is_file() and (job_dir / "pytest.log").is_file()
    # the tool's rest of its duration, three silence limits, and the job's
    # end (teardown, run.json, release) on a loaded 2-CPU machine; before,
    # 2 x duration + 60 s, two Ctrl-Cs and a 120 s login wait (~230 s for 20 s)
    print(f"board lost -> INFRA in {lost_to_infra:.1f} s (bound {bound:g} s)")
    assert lost_to_infra <= bound, (lost_to_infra, out)
    assert_no_locks(rack, timeout=30)
