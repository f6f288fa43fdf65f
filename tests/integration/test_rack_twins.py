"""The vendor reports' boards as virtual twins in the rack (labgrid/README.md,
"Virtual twins"): each twin is reserved and locked through the coordinator,
powered on through its PDU outlet, reached over ser2net, and boots its real
board's way where QEMU allows: the i.MX6Q twin (sabrelite, 4x Cortex-A9)
from the staged boot set, the AM335x twin (virt, 1x Cortex-A7) and the
RK356x twin (virt, 4x Cortex-A53) through U-Boot, DHCP and TFTP, the x86
IPC twin through SeaBIOS + iPXE over TFTP.

`make test` boots one variant per twin (rt: Debian's kernels, nothing to
build); every variant of every twin is `make test-rack`
(campaigns/rack-twins.yaml, `-m rack`). One rack for the module, on free
ports in a temporary directory.
"""
import json
import re
import time
from pathlib import Path

import pytest


import test_rack_service
from test_rack_service import BUDGETS, assert_no_locks, boots, pdu_log, run_rtlab

rack = test_rack_service.rack  # the module's fixture, by the name the tests ask for

#: env board -> (rack board, CPUs, uname -m, console, boot path)
TWINS = {
    "twin-imx6q": ("imx6q0", 4, "armv7l", "console=ttymxc1,115200", "direct"),
    "twin-am335x": ("am335x0", 1, "armv7l", "console=ttyAMA0,115200", "uboot"),
    "twin-rk356x": ("rk356x0", 4, "aarch64", "console=ttyAMA0,115200", "uboot"),
    "twin-x86-ipc": ("ipc0", 4, "x86_64", "console=ttyS0,115200n8", "pxe"),
}

def campaign(tmp_path: Path, boards, variants, duration_s=3) -> Path:
    (tmp_path / "budgets.yaml").write_text(BUDGETS)
    c = tmp_path / "campaign.yaml"
    c.write_text(f"""
name: twins
budgets: {tmp_path / 'budgets.yaml'}
boards: {list(boards)}
variants: {list(variants)}
suites:
  - name: cyclictest
    # a 10 ms period: four TCG twins on a busy 2-core host miss 1 ms wake-ups
    # by the hundred (cut short, INFRA); 10 ms keeps the full sample count
    params: {{interval_us: 10000, duration_s: {duration_s}, histogram_us: 2000}}
    overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
""")
    return c


def qemu_power_ons(rack, board: str) -> list[str]:
    log = Path(rack["dir"]) / "boards" / board / "qemu.log"
    return [l for l in log.read_text().splitlines() if l.startswith("--- power on")]


# make test-long: four twin boots; the rack with a lease is proven by test_rack_service.py, a twin through the
#   rack by test_irq_response.py's RK356x test
@pytest.mark.long
def test_every_twin_boots_rt_through_pdu_ser2net_and_its_boot_path(rack, tmp_path):
    t0 = time.monotonic()
    res = run_rtlab(rack, "run", "--campaign", campaign(tmp_path, TWINS, ["rt"]), "--places", "2",
                    "--results", tmp_path / "results", "--no-publish", timeout=1200)
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    jobs = {j["board"]: j for j in run["jobs"]}
    assert {b: j["verdict"] for b, j in jobs.items()} == {b: "pass" for b in TWINS}
    switched = {(e["board"], e["set"]) for e in pdu_log(rack)}
    for name, (board, cpus, machine, console, boot) in TWINS.items():
        job_dir = run_dir / name / "rt"
        spec = json.loads((job_dir / "job-spec.json").read_text())
        k = json.loads((job_dir / "kernel.json").read_text())
        # the place of this twin was reserved and locked, its outlet switched on
        assert spec["place"] == f"rack-{board}"
        assert (board, "on") in switched
        # the kernel running is the staged Debian rt kernel, on the twin's CPUs and arch
        assert k["release"] == spec["kernel"]["release"] and "PREEMPT_RT" in k["version"]
        assert k["realtime"] is True and k["machine"] == machine
        assert k["online"] == ("0" if cpus == 1 else f"0-{cpus - 1}")
        # the command line arrived the twin's way (uEnv.txt or the iPXE script)
        assert k["cmdline"].startswith(console) and "panic=-1" in k["cmdline"]
        # the console came over ser2net: the rack's UART log has what the job ran
        uart = (Path(rack["dir"]) / "boards" / board / "console.log").read_bytes()
        assert b"/proc/stat" in uart and b"rtlab# " in uart
        power_on = qemu_power_ons(rack, board)[-1]
        staged = Path(rack["dir"]) / "boards" / board / "tftp" / "rtlab"
        if boot == "uboot":  # U-Boot fetched uEnv.txt, kernel and initramfs over TFTP
            rec = next(r for r in reversed(boots(rack, board)) if "shell" in r["t"])
            files = {t["file"]: t.get("bytes") for t in rec["tftp"]}
            assert files["rtlab/kernel"] == Path(spec["kernel"]["path"]).stat().st_size
            assert files["rtlab/initrd"] == Path(spec["kernel"]["initrd"]).stat().st_size
            assert rec["t"]["uboot"] < rec["t"]["kernel_start"] < rec["t"]["linux"] < rec["t"]["shell"]
            assert "-bios" in power_on and "-kernel" not in power_on
        elif boot == "pxe":  # firmware netboot: QEMU got no kernel, iPXE fetched the staged script's
            assert "-boot order=n" in power_on and "bootfile=rtlab/boot.ipxe" in power_on
            assert "-kernel" not in power_on and "-bios" not in power_on
            script = (staged / "boot.ipxe").read_text()
            assert script.startswith("#!ipxe\n") and f"kernel kernel {k['cmdline']}\n" in script
        else:  # direct: QEMU loaded the staged boot set, with the SABRE Lite dtb
            assert f"-kernel {staged}/kernel -initrd {staged}/initrd" in power_on
            assert f"-dtb {staged}/board.dtb" in power_on
            assert (staged / "board.dtb").read_bytes()[:4] == b"\xd0\x0d\xfe\xed"  # FDT magic
            assert re.search(r"-serial null -serial chardev:uart0", power_on)
        print(f"{name}: {k['release']} on {k['online']}, {boot} boot, "
              f"{jobs[name]['duration_s']:.0f} s")
    print(f"4 twins, rt, --places 2: {wall:.0f} s wall")
    assert_no_locks(rack, timeout=30)


def test_a_one_cpu_twin_says_why_it_has_no_isolation_variant(rack, tmp_path):
    """The AM335x has one CPU: its -iso variants are not available, with the
    reason, and nothing boots (its outlet stays off)."""
    before = len(qemu_power_ons(rack, "am335x0")) if (Path(rack["dir"]) / "boards" / "am335x0" /
                                                      "qemu.log").exists() else 0
    res = run_rtlab(rack, "run", "--campaign", campaign(tmp_path, ["twin-am335x"], ["rt-iso", "none-iso"]),
                    "--results", tmp_path / "results", "--no-publish", timeout=300)
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["jobs"] == []
    assert {(n["variant"], n["reason"]) for n in run["not_available"]} == {
        (v, "twin-am335x has 1 CPU and no isolate_cpu: isolating a CPU would leave no CPU for the system")
        for v in ("rt-iso", "none-iso")}
    assert "not available: twin-am335x has 1 CPU" in res.stdout
    # not a pass: nothing was judged
    assert res.returncode != 0 and run["verdict"] != "pass"
    log = Path(rack["dir"]) / "boards" / "am335x0" / "qemu.log"
    assert (len(qemu_power_ons(rack, "am335x0")) if log.exists() else 0) == before


@pytest.mark.rack
@pytest.mark.parametrize("twin", sorted(TWINS))
def test_every_variant_of_every_twin(rack, tmp_path, twin):
    """`make test-rack`: every variant the twin's kernels allow (source builds
    for none/preempt where Debian has no such kernel, except where the twin
    cannot run them), the rest not available with their reason."""
    from rtlab.targets.boards import find_board
    from rtlab.targets.variants import load_variants

    variants = [v for v in load_variants() if v != "host"]
    res = run_rtlab(rack, "run", "--campaign", campaign(tmp_path, [twin], variants), "--places", "1",
                    "--results", tmp_path / "results", "--no-publish", timeout=7200)
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    verdicts = {j["variant"]: j["verdict"] for j in run["jobs"]}
    not_available = {n["variant"]: n["reason"] for n in run["not_available"]}
    assert set(verdicts) | set(not_available) == set(variants)
    assert all(v == "pass" for v in verdicts.values()), res.stdout[-6000:]
    cpus = TWINS[twin][1]
    if cpus == 1:
        assert set(not_available) == {v for v in variants if v.endswith("-iso")}
    elif find_board(twin).built_kernels_unusable:
        # imx6q: QEMU 7.2's i.MX UART cannot serve a 6.12 kernel's console;
        # what needs a source build is not available, with that reason
        assert set(not_available) == {v for v in variants if v.startswith(("none", "preempt"))}
        assert all("QEMU 7.2" in why for why in not_available.values()), not_available
    else:
        assert not not_available, not_available
    for j in run["jobs"]:  # each booted the model it asked for (Debian's armmp/arm64
        # generic kernels show none: no PREEMPT_DYNAMIC, no /proc/config.gz; they are voluntary)
        want = {"none": "none", "voluntary": "voluntary", "preempt": "full",
                "rt": "rt"}[j["variant"].removesuffix("-iso")]
        assert j["kernel"]["preempt"] == want or (want == "voluntary" and j["kernel"]["preempt"] is None), j
        assert j["kernel"]["realtime"] is (want == "rt")
        if j["variant"].endswith("-iso"):
            assert j["kernel"]["isolated"] == str(find_board(twin).isolate_cpu)
    assert_no_locks(rack, timeout=30)


@pytest.mark.rack
@pytest.mark.parametrize("twin", sorted(TWINS))
def test_each_twin_runs_a_lava_job_end_to_end_with_lava_run(tmp_path, twin):
    """`make test-rack`: each twin is also a LAVA device (lava/boards.yaml):
    the rendered job passes LAVA's schema and lava-run boots the twin's
    machine (U-Boot over TFTP for am335x/rk356x, QEMU's direct boot for
    imx6q/x86, lava/boards.yaml says why) and the result is ingested and judged."""
    out = tmp_path / "jobs"
    res = run_rtlab({"dir": str(tmp_path / "no-rack")}, "lava", "render", "-c",
                    campaign(tmp_path, [twin], ["rt"]), "-b", twin, "-V", "rt", "--out", out, timeout=600)
    assert res.returncode == 0 and "1/1 jobs valid" in res.stdout, res.stdout + res.stderr
    job = out / twin / "rt" / "cyclictest-idle.yaml"
    res = run_rtlab({"dir": str(tmp_path / "no-rack")}, "lava", "run", job, "--out", tmp_path / "records",
                    "--results", tmp_path / "results", timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    (j,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    _, cpus, machine, console, boot = TWINS[twin]
    assert j["verdict"] == "pass" and j["board"] == twin
    assert j["kernel"]["realtime"] is True and j["kernel"]["machine"] == machine
    assert j["kernel"]["online"] == ("0" if cpus == 1 else f"0-{cpus - 1}")
    assert j["kernel"]["cmdline"].startswith(console.split(",")[0])
    log = (run_dir / twin / "rt" / "cyclictest@idle" / "lava" / "lava-run.log").read_text()
    if boot == "uboot":
        assert '"case": "bootloader-overlay"' in log and "Bytes transferred" in log
