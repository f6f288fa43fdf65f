"""The LAVA path end to end with Debian's real dispatcher: `rtlab lava render`
-> `rtlab lava run` (lava-run 2023.01 boots the QEMU board, TCG) -> ingest
-> `rtlab report` / `rtlab gate`, one job per arch; plus the failures that
must never pass: a sabotaged test command, a job LAVA could not run."""
import json
import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, rtlab, rtlab_retry_infra

# make test runs as root and installs lava-dispatcher (env/apt-packages.txt):
# either missing is a broken set-up, so a failure, never a skip
assert os.geteuid() == 0, "lava-run runs as root"
assert shutil.which("lava-run"), "Debian's lava-dispatcher is not installed (env/apt-packages.txt)"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Short jobs (cyclictest 3 s) for both QEMU boards and the lab board."""
    d = tmp_path_factory.mktemp("lava")
    c = d / "campaign.yaml"
    c.write_text(textwrap.dedent(f"""
        name: lava-integration
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-x86_64, qemu-aarch64, local]
        variants: [rt, rt-iso]
        suites:
          - name: cyclictest
            params: {{interval_us: 1000, duration_s: 3}}
            overrides: {{qemu-tcg: {{histogram_us: 50000}}}}
    """))
    res = rtlab("lava", "render", "--campaign", c, "--out", d / "jobs")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "jobs valid" in res.stdout
    return d / "jobs"


def test_each_arch_runs_through_lava_run_ingests_and_gates(jobs, tmp_path):
    t0 = time.monotonic()
    res = rtlab_retry_infra("lava", "run", jobs, "--variant", "rt", "--board", "qemu-x86_64", "--board",
                            "qemu-aarch64", "--board", "rk3568-rock-3a", "--out", tmp_path / "records",
                            "--results", tmp_path / "results", timeout=900)
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    assert "skip rk3568-rock-3a/rt/cyclictest@idle: lab board" in res.stdout
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    jobs_ = {(j["board"], j["variant"]): j for j in run["jobs"]}
    assert set(jobs_) == {("qemu-x86_64", "rt"), ("qemu-aarch64", "rt")}
    timings = {}
    for (board, variant), j in jobs_.items():
        assert j["verdict"] == "pass" and j["infra_error"] is None, j
        (m,) = j["measurements"]
        assert [t["cpu"] for t in m["output"]["threads"]] == [0, 1]
        assert all(t["cycles"] > 0 and t["histogram"] for t in m["output"]["threads"])
        assert j["kernel"]["realtime"] is True and "PREEMPT_RT" in j["kernel"]["version"]
        raw = run_dir / board / variant / "cyclictest@idle"
        assert (raw / "cyclictest.json").is_file() and (raw / "lava" / "lava-run.log").is_file()
        assert "-D 3 -h 50000 -a 0-1 -t 2" in (raw / "command.txt").read_text()
        meta = json.loads((raw / "lava" / "job.json").read_text())
        assert meta["runner"] == "lava-run" and meta["returncode"] == 0
        timings[board] = meta["wall_s"]
    # time per LAVA job per arch (lava-run wall clock: deploy + boot + tests + teardown)
    print(f"\nlava-run wall time per job: {timings}, whole command {wall:.0f} s")
    assert all(t < 300 for t in timings.values())
    # the rest of rtlab reads the ingested run unchanged
    gate = rtlab("gate", run_dir)
    assert gate.returncode == 0 and "Verdict: PASS" in gate.stdout, gate.stdout
    report = rtlab("report", run_dir)
    assert report.returncode == 0 and "qemu-aarch64 (aarch64, budget class qemu-tcg)" in report.stdout
    tight = tmp_path / "tight.yaml"
    tight.write_text('budgets:\n  qemu-tcg: {"*": {cyclictest: {"*": {max_us: 1}}}}\n')
    assert rtlab("gate", run_dir, "--budgets", tight).returncode == 1


# make test-long: lava-run is proven by test_each_arch_runs_through_lava_run_ingests_and_gates; the U-Boot
#   job's pipeline by --validate
@pytest.mark.long
def test_uboot_tftp_path_runs_end_to_end_on_qemu_as_a_board(jobs, tmp_path):
    """The rk3568 jobs' path (deploy to tftp, LAVA's u-boot method, overlay in
    the ramdisk with a U-Boot header, context.extra_kernel_args) on the
    qemu-aarch64 machine with Debian's U-Boot as firmware."""
    # a busy host (another TCG guest on the two cores) can miss LAVA's
    # auto-login timeout: one retry of an INFRA result, never a pass for it
    res = rtlab_retry_infra("lava", "run", jobs / "qemu-aarch64-uboot" / "rt-iso" / "cyclictest-idle.yaml",
                            "--out", tmp_path / "records", "--results", tmp_path / "results", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    assert job["verdict"] == "pass" and job["board"] == "qemu-aarch64-uboot", job
    # booted through U-Boot with the variant's arguments, isolated CPU 1 measured
    assert "isolcpus=nohz,domain,managed_irq,1" in job["kernel"]["cmdline"] and job["kernel"]["isolated"] == "1"
    assert [t["cpu"] for t in job["measurements"][0]["output"]["threads"]] == [1]
    log = (run_dir / "qemu-aarch64-uboot/rt-iso/cyclictest@idle/lava/lava-run.log").read_text()
    assert '"case": "bootloader-overlay"' in log and "Bytes transferred" in log
    meta = json.loads((run_dir / "qemu-aarch64-uboot/rt-iso/cyclictest@idle/lava/job.json").read_text())
    print(f"\nlava-run wall time, U-Boot/TFTP job on qemu-aarch64: {meta['wall_s']} s")


# make test-long: one more lava-run boot; a job LAVA cannot run stays in make test
@pytest.mark.long
def test_sabotaged_test_command_is_reported_with_its_missing_measurements(jobs, tmp_path):
    src = jobs / "qemu-aarch64" / "rt-iso" / "cyclictest-idle.yaml"
    text = src.read_text()
    assert "'{ cyclictest -q " in text
    job = tmp_path / "sabotaged.yaml"
    job.write_text(text.replace("'{ cyclictest -q ", "'{ cyclictest-sabotaged -q "))
    res = rtlab("lava", "run", job, "--out", tmp_path / "records", "--results", tmp_path / "results",
                timeout=600)
    assert res.returncode == 2, res.stdout + res.stderr  # not a pass, not a latency failure
    out = res.stdout.split("Not passed:")[-1]
    assert "cyclictest exited with 127" in out and "cyclictest-sabotaged: not found" in out
    assert "missing 8 declared test case(s)" in out and "1_cyclictest-idle/t0-max-latency" in out
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    assert rtlab("gate", run_dir).returncode == 2
    # the boot was fine: the board is rt-iso, isolated CPU 1
    run = json.loads((run_dir / "run.json").read_text())
    assert run["jobs"][0]["kernel"]["isolated"] == "1" and run["jobs"][0]["infra_error"] is None


def test_job_lava_cannot_run_is_infra(jobs, tmp_path):
    job = yaml.safe_load((jobs / "qemu-x86_64" / "rt" / "cyclictest-idle.yaml").read_text())
    job["actions"][0]["deploy"]["images"]["kernel"]["url"] = "file:///nonexistent/bzImage"
    f = tmp_path / "nokernel.yaml"
    f.write_text(yaml.safe_dump(job))
    res = rtlab("lava", "run", f, "--out", tmp_path / "records", "--results", tmp_path / "results")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Incomplete" in res.stdout and "/nonexistent/bzImage" in res.stdout
    assert "INFRA qemu-x86_64/rt" in res.stdout


def test_uboot_job_builds_a_valid_pipeline_for_the_real_board(jobs):
    """No rk3568 here: lava-run --validate builds the whole U-Boot/TFTP
    pipeline against the board's device dictionary without powering it."""
    for variant in ("rt", "rt-iso"):
        res = rtlab("lava", "validate", "--pipeline", jobs / "rk3568-rock-3a" / variant / "cyclictest-idle.yaml")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "pipeline ok" in res.stdout


# make test-long: loads are proven by test_suites_programme.py, a dead load by tests/faults/test_lab_faults.py
@pytest.mark.long
def test_loads_run_inside_the_lava_job_and_a_dead_load_is_infra(tmp_path):
    """cyclictest under a cpu load on qemu-aarch64 through lava-run: the load's
    raw files come back and pass the labgrid path's health check; the same
    load killed 1 s into the measurement makes the measurement INFRA naming
    the load, never a latency result."""
    c = tmp_path / "campaign.yaml"
    c.write_text(textwrap.dedent(f"""
        name: lava-loads
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-aarch64]
        variants: [rt]
        suites:
          - name: cyclictest
            loads: [cpu]
            params: {{interval_us: 1000, duration_s: 4}}
            overrides: {{qemu-tcg: {{histogram_us: 50000}}}}
          - name: cyclictest-dies
            suite: cyclictest
            loads: [cpu]
            params: {{interval_us: 1000, duration_s: 4,
                      load_opts: {{cpu: {{die_after_s: 1}}}}}}
            overrides: {{qemu-tcg: {{histogram_us: 50000}}}}
    """))
    res = rtlab("lava", "render", "--campaign", c, "--out", tmp_path / "jobs")
    assert res.returncode == 0 and "not_rendered" not in res.stdout, res.stdout + res.stderr
    res = rtlab("lava", "run", tmp_path / "jobs", "--board", "qemu-aarch64", "--out", tmp_path / "records",
                "--results", tmp_path / "results", timeout=900)
    out = res.stdout
    assert res.returncode == 2, out + res.stderr  # the dead load: infra, and nothing over budget
    assert "INFRA qemu-aarch64/rt/cyclictest-dies/cpu" in out and "load cpu: die_after_s: killing the load" in out
    run_dir = Path(out.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    ms = {m["key"]["suite"]: m for m in job["measurements"]}
    assert ms["cyclictest"]["verdict"] == "pass", ms["cyclictest"]["reasons"]
    assert ms["cyclictest-dies"]["verdict"] == "infra"
    assert any(r.startswith("load cpu: die_after_s: killing the load") for r in ms["cyclictest-dies"]["reasons"])
    raw = run_dir / "qemu-aarch64" / "rt" / "cyclictest@cpu"
    load = json.loads((raw / "load-cpu.json").read_text())
    assert load["driver"] == "lava" and load["problems"] == [] and load["cpus"] == [0, 1]
    w = load["window"]
    # the window spans the 4 s measurement, and the load burned CPU all along it
    assert w["window_s"] >= 4 and w["cpu_s"] > 0 and w["max_stall_s"] <= 5 and w["samples"] >= 3, w
    assert load["throughput"]["stressors"]["cpu"]["bogo_ops"] > 0
    for f in ("samples.txt", "cmd.sh", "first.txt", "last.txt", "stress-ng.yaml"):
        assert (raw / f"load-cpu-{f}").stat().st_size > 0, f
    assert "stress-ng --cpu 2" in (raw / "load-cpu-cmd.sh").read_text()
    dead = json.loads((run_dir / "qemu-aarch64" / "rt" / "cyclictest-dies@cpu" / "load-cpu.json").read_text())
    assert dead["problems"][0] == "die_after_s: killing the load"
