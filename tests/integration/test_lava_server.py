"""A real LAVA lab on this machine (`rtlab lava lab up`: PostgreSQL,
lava-server 2023.01, its scheduler and a lava-worker, Debian's packages):
rtlab's jobs go through lavacli to the server, the worker runs them with
lava-run, rtlab fetches and ingests them through the one results path. The
verdict and the measurements' shape must equal those of the same job run by
`lava-run` alone; a job cancelled on the server is INFRA; a device whose
health check fails is taken offline by LAVA, never measured.

The jobs are rendered as CI renders them for a LAVA server elsewhere
(RTLAB_ARTIFACTS_URL): their kernels and images linked into a served
directory and fetched by the worker over HTTP from a server started with
env/systemd/rtlab-artifacts.service's command line, never file://."""
import json
from concurrent.futures import ThreadPoolExecutor
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, rtlab, rtlab_retry_infra
from rtlab.core.procutil import free_port
from rtlab.lab.systemd import LAB_ENV, load_unit


# make test runs as root with env/apt-packages.txt installed: a missing part
# is a broken set-up, so a failure, never a skip
assert os.geteuid() == 0, "lava-run and the lab's postgres (runuser) need root"
for tool in ("lava-server", "lava-worker", "lavacli", "lava-run"):
    assert shutil.which(tool), f"{tool} is not installed (env/apt-packages.txt)"


@pytest.fixture(scope="module")
def lab(lava_lab):
    """The session's lab (conftest.lava_lab: shared with the LAVA pipeline of
    test_gitlab_ci.py, down at the end of the session, checked that nothing
    of it is left running)."""
    return lava_lab


def lavacli(st, *args, timeout=120):
    return subprocess.run(["lavacli", "--uri", st.uri, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def wait_health(lab, st, device, want, timeout=1500):
    """Until the device's health is one of *want* (health checks run first)."""
    deadline = time.monotonic() + timeout
    health = None
    while time.monotonic() < deadline:
        health = lab.api(st, f"devices/{device}/")["health"]
        if health in want:
            return health
        time.sleep(5)
    raise AssertionError(f"device {device} still {health} after {timeout} s")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The runner's artifacts server: the unit's command line, serving a
    directory on a free loopback port (what RTLAB_ARTIFACTS_URL names)."""
    d = tmp_path_factory.mktemp("artifacts")
    port = free_port()
    unit = load_unit("rtlab-artifacts.service")
    lab_env = {LAB_ENV: {"RTLAB_ARTIFACTS_DIR": str(d / "served"), "RTLAB_ARTIFACTS_BIND": "127.0.0.1",
                         "RTLAB_ARTIFACTS_PORT": str(port)}}
    (d / "served").mkdir()
    log = open(d / "access.log", "wb")
    srv = subprocess.Popen(unit.exec_start(files=lab_env), env={**os.environ, **unit.environment(files=lab_env)},
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while subprocess.run(["curl", "-sf", "-o", "/dev/null", f"http://127.0.0.1:{port}/"]).returncode != 0:
        assert srv.poll() is None and time.monotonic() < deadline, (d / "access.log").read_text()
        time.sleep(0.2)
    yield {"url": f"http://127.0.0.1:{port}", "dir": d / "served", "log": d / "access.log"}
    srv.terminate()
    srv.wait(10)
    log.close()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, artifacts):
    d = tmp_path_factory.mktemp("lava-server")
    c = d / "campaign.yaml"
    c.write_text(textwrap.dedent(f"""
        name: lava-server
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-aarch64]
        variants: [rt]
        suites:
          - name: cyclictest
            params: {{interval_us: 1000, duration_s: 3, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 50000}}}}
          - name: cyclictest-long
            suite: cyclictest
            params: {{interval_us: 1000, duration_s: 600, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 50000}}}}
    """))
    res = rtlab("lava", "render", "--campaign", c, "--out", d / "jobs", "--no-lab-boards", "--commit",
                "0123456789abcdef0123", "--artifacts-url", artifacts["url"], "--artifacts-dir", artifacts["dir"])
    assert res.returncode == 0, res.stdout + res.stderr
    index = json.loads((d / "jobs" / "index.json").read_text())
    return {e["suite"]: d / "jobs" / e["file"] for e in index["jobs"]}


def _measurement(run_dir: Path) -> tuple[dict, dict]:
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    (m,) = job["measurements"]
    return job, m


@pytest.mark.over_a_minute
def test_server_job_equals_lava_run(lab, jobs, artifacts, tmp_path):
    lab_, st = lab
    # the health checks (an rtlab boot job per board) passed: the device is Good
    assert wait_health(lab_, st, "qemu-aarch64-01", {"Good", "Bad"}) == "Good"
    job_file = jobs["cyclictest@idle"]
    # the real lavacli, its command lines recorded on the way
    calls_log = tmp_path / "lavacli-calls.log"
    recorder = tmp_path / "lavacli"
    recorder.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        f"open({str(calls_log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                        f"os.execv({shutil.which('lavacli')!r}, ['lavacli', *sys.argv[1:]])\n")
    recorder.chmod(0o755)
    # the server's job and lava-run of the same job at once (each a QEMU guest
    # of its own), as a lab and a developer's desk would run them
    with ThreadPoolExecutor(2) as pool:
        server_side = pool.submit(rtlab_retry_infra, "lava", "submit", job_file, "--local-lab", "--wait", "--out",
                                  tmp_path / "fetched", "--results", tmp_path / "server", timeout=1800,
                                  env={"RTLAB_LAVACLI": str(recorder)})
        run_side = pool.submit(rtlab_retry_infra, "lava", "run", job_file, "--out", tmp_path / "records",
                               "--results", tmp_path / "local", timeout=1200)
        via_server, via_run = server_side.result(), run_side.result()
    assert via_server.returncode == 0, via_server.stdout + via_server.stderr
    assert via_run.returncode == 0, via_run.stdout + via_run.stderr
    s_job, s_m = _measurement(Path(via_server.stdout.split("results: ")[-1].split()[0]))
    r_job, r_m = _measurement(Path(via_run.stdout.split("results: ")[-1].split()[0]))
    # the same verdict, the same measurement: threads, CPUs, histogram range, a
    # kernel that is the variant (latency numbers differ run to run)
    assert s_job["verdict"] == r_job["verdict"] == "pass"
    assert s_job["infra_error"] is None and r_job["infra_error"] is None
    assert s_job["kernel"]["version"] == r_job["kernel"]["version"] and s_job["kernel"]["realtime"]
    for m in (s_m, r_m):
        assert [t["cpu"] for t in m["output"]["threads"]] == [0, 1]
        assert all(t["cycles"] > 0 and t["histogram"] for t in m["output"]["threads"])
    assert s_m["verdict"] == r_m["verdict"] == "pass"
    # what came from the server: its own record (definition, log, results)
    jid = via_server.stdout.split()[0]
    rec = tmp_path / "fetched" / f"job-{jid}"
    assert {p.name for p in rec.iterdir()} == {"job.json", "job.yaml", "results.yaml", "log.yaml"}
    show = json.loads((rec / "job.json").read_text())
    assert show["state"] == "Finished" and show["health"] == "Complete"
    # what rtlab asked the server (the last attempt): submit, --wait's polls of
    # `jobs show` (never `jobs wait`, whose long call a loaded gunicorn drops),
    # then the record's three exports
    calls = [json.loads(line) for line in calls_log.read_text().splitlines()]
    calls = calls[max(i for i, c in enumerate(calls) if c[2:4] == ["jobs", "submit"]):]
    assert all(c[:2] == ["--uri", st.uri] for c in calls)
    calls = [c[2:] for c in calls]
    assert calls[0] == ["jobs", "submit", str(job_file)]
    polls = calls[1:-3]
    assert polls and all(c == ["jobs", "show", jid, "--json"] for c in polls), polls
    assert calls[-3:] == [["jobs", "definition", jid], ["results", jid, "--yaml"],
                          ["jobs", "logs", jid, "--raw", "--no-follow"]]
    assert "Verdict: PASS" in via_server.stdout
    assert show["device"] == "qemu-aarch64-01"
    # the server's worker fetched the images over HTTP from the runner's server
    deploy = yaml.safe_load((rec / "job.yaml").read_text())["actions"][0]["deploy"]["images"]
    for image in ("kernel", "ramdisk"):
        url = deploy[image]["url"]
        assert url.startswith(artifacts["url"] + "/aarch64/"), url
        path = url.removeprefix(artifacts["url"])
        assert f'"GET {path} HTTP/1.1" 200' in artifacts["log"].read_text(), (path, artifacts["log"].read_text())
    # a LAVA admin sees the job by campaign, board, variant, suite and commit
    assert show["description"] == "rtlab lava-server qemu-aarch64 rt cyclictest@idle 0123456789ab"
    # and the measurements as test cases in the server's results API
    cases = {c["name"]: c for c in lab_.api(st, f"jobs/{jid}/tests/?limit=200")["results"]}
    assert cases["cyclictest"]["result"] == "pass"
    assert float(cases["t0-max-latency"]["measurement"]) == \
        pytest.approx(s_m["output"]["threads"][0]["max_us"], abs=1)


def test_a_job_the_server_refuses_is_an_error_not_a_job_id(lab, jobs, tmp_path):
    """The real server refuses a job for a device type it does not have
    (lavacli prints "Unable to submit" and still exits 0): rtlab's submit is
    an error (exit 2) naming the server's reason, with nothing waited for."""
    lab_, st = lab
    bad = tmp_path / "refused.yaml"
    text = jobs["cyclictest@idle"].read_text()
    assert "\ndevice_type: qemu\n" in text
    bad.write_text(text.replace("\ndevice_type: qemu\n", "\ndevice_type: rtlab-no-such-type\n"))
    # submitted jobs (the scheduler adds health checks on its own)
    before = lab_.api(st, "jobs/?limit=1&health_check=false")["count"]
    res = rtlab("lava", "submit", bad, "--local-lab", "--wait", "--out", tmp_path / "fetched", timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Unable to submit" in res.stderr and "rtlab-no-such-type" in res.stderr, res.stderr
    assert not (tmp_path / "fetched").exists()
    assert lab_.api(st, "jobs/?limit=1&health_check=false")["count"] == before  # no job was queued


# make test-long: a boot and 20 s waited out before the cancel; cancel is proven by
#   tests/faults/test_jobs.py::test_sigterm_cancels_kills_everything_keeps_raw_files_and_writes_run_json,
#   LAVA's INFRA outcomes by test_lava_run.py
@pytest.mark.long
def test_job_cancelled_on_the_server_is_infra(lab, jobs, tmp_path):
    _, st = lab
    res = lavacli(st, "jobs", "submit", jobs["cyclictest-long@idle"])
    jid = res.stdout.strip()
    assert res.returncode == 0 and jid.isdigit(), res.stdout + res.stderr
    deadline = time.monotonic() + 1500
    while time.monotonic() < deadline:
        state = json.loads(lavacli(st, "jobs", "show", jid, "--json").stdout)["state"]
        if state == "Running":
            break
        time.sleep(3)
    assert state == "Running"
    time.sleep(20)  # inside the job (deploy or boot), as an admin's cancel would be
    assert lavacli(st, "jobs", "cancel", jid).returncode == 0
    # fetch and ingest as CI does; a job still Canceling is not fetched ("not
    # finished"): again until the server has it Finished
    deadline = time.monotonic() + 300
    while True:
        w = rtlab("lava", "fetch", jid, "--local-lab", "--ingest", "--out", tmp_path / "fetched",
                  "--results", tmp_path / "results", timeout=600)
        if "not finished" not in w.stderr or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert w.returncode == 2, w.stdout + w.stderr
    show = json.loads((tmp_path / "fetched" / f"job-{jid}" / "job.json").read_text())
    assert show["health"] == "Canceled"
    run_dir = Path(w.stdout.split("results: ")[-1].split()[0])
    run = json.loads((run_dir / "run.json").read_text())
    (job,) = run["jobs"]
    assert job["verdict"] == "infra" and "Canceled" in job["infra_error"], job
    assert rtlab("gate", run_dir).returncode == 2


# make test-long: the server's path is proven by test_server_job_equals_lava_run; the twins' LAVA jobs run in
#   make test-rack too
@pytest.mark.long
def test_a_uboot_twin_gets_a_device_and_runs_its_jobs_over_tftp(lab, tmp_path):
    """`lab up --board twin-rk356x` on the running lab: the RK356x twin gets
    a device of type qemu-uboot-aarch64 whose health check (an rtlab boot
    job) passes; its job, routed by the board's tag, boots the way the RK
    boards boot (U-Boot, kernel and ramdisk over TFTP from the worker's
    TFTP root), measures and passes, as lava-run runs it
    (test_lava_run.py)."""
    lab_, _ = lab
    up = rtlab("lava", "lab", "up", "--board", "twin-rk356x", timeout=1200)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "device twin-rk356x-01 (device type qemu-uboot-aarch64, tag twin-rk356x)" in up.stdout + up.stderr
    st = lab_.read_state()
    assert {"qemu-aarch64-01", "twin-rk356x-01"} <= set(st.devices)  # the earlier devices stay
    assert wait_health(lab_, st, "twin-rk356x-01", {"Good", "Bad"}) == "Good"
    c = tmp_path / "campaign.yaml"
    c.write_text(json.dumps({
        "name": "lava-twin", "budgets": str(ROOT / "budgets" / "default.yaml"), "boards": ["qemu-aarch64"],
        "variants": ["rt"], "suites": [{"name": "cyclictest",
                                        "params": {"interval_us": 1000, "duration_s": 3, "histogram_us": 2000},
                                        "overrides": {"qemu-tcg": {"histogram_us": 50000}}}]}))
    res = rtlab("lava", "render", "--campaign", c, "--board", "twin-rk356x", "--out", tmp_path / "jobs")
    assert res.returncode == 0, res.stdout + res.stderr
    via_server = rtlab_retry_infra("lava", "submit", tmp_path / "jobs", "--local-lab", "--wait", "--out",
                                   tmp_path / "fetched", "--results", tmp_path / "server", timeout=1800)
    assert via_server.returncode == 0, via_server.stdout + via_server.stderr
    job, m = _measurement(Path(via_server.stdout.split("results: ")[-1].split()[0]))
    assert (job["board"], job["verdict"], m["verdict"]) == ("twin-rk356x", "pass", "pass"), job
    assert job["kernel"]["realtime"] and [t["cpu"] for t in m["output"]["threads"]] == [0, 1, 2, 3]
    jid = via_server.stdout.split()[0]
    rec = tmp_path / "fetched" / f"job-{jid}"
    show = json.loads((rec / "job.json").read_text())
    assert show["device"] == "twin-rk356x-01" and show["device_type"] == "qemu-uboot-aarch64"
    log = (rec / "log.yaml").read_text()
    # U-Boot fetched kernel and ramdisk from the TFTP server at QEMU's gateway
    assert "setenv serverip 10.0.2.2" in log and "tftp 0x40400000" in log and "Starting kernel" in log


@pytest.mark.long
def test_a_broken_device_is_taken_offline_by_its_health_check(lab):
    lab_, st = lab
    # a board whose QEMU cannot start (no such binary): its own template and
    # the rtlab health check of qemu-aarch64 under that template's name; the
    # check fails, LAVA marks the device Bad and gives it no job. (A `set` in
    # the device's dictionary would not do: the template it extends sets arch
    # after it, and the parent's set wins.)
    good = (lab_.dir / "device-types" / "rtlab-qemu-aarch64.jinja2").read_text()
    (lab_.dir / "device-types" / "rtlab-broken-aarch64.jinja2").write_text(
        good.replace("{% set arch = 'arm64' %}", "{% set arch = 'nosucharch' %}"))
    (lab_.dir / "health-checks" / "rtlab-broken-aarch64.yaml").write_text(
        (lab_.dir / "health-checks" / "rtlab-qemu-aarch64.yaml").read_text())
    (lab_.dir / "devices" / "broken-aarch64-01.jinja2").write_text("{% extends 'rtlab-broken-aarch64.jinja2' %}\n")
    lab_.add_device("broken-aarch64-01", "broken-aarch64")
    try:
        assert wait_health(lab_, st, "broken-aarch64-01", {"Good", "Bad"}, timeout=900) == "Bad"
        checks = [j for j in lab_.api(st, "jobs/?limit=100&health_check=true")["results"]
                  if j["actual_device"] == "broken-aarch64-01"]
        # its last health check (an earlier lab may have checked a device of that name)
        assert checks and max(checks, key=lambda j: j["id"])["health"] in ("Incomplete", "Canceled")
    finally:
        lab_.retire_device("broken-aarch64-01")
