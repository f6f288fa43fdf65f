"""rtbench (issue 4): build, C unit tests, and the real binary's JSON.

Builds with `make -C rtbench`, runs `make -C rtbench check` (C unit tests
under ASan/UBSan), then runs the binary on this machine with small loops and
validates the rt-tests-2.x-shaped JSON. Cross-builds for aarch64/armhf and
smoke-runs them under qemu user mode when the tools are installed.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RTBENCH = ROOT / "rtbench"
ARCH = os.uname().machine
BIN = RTBENCH / "build" / ARCH / "rtbench"

LOOPS = 300
REASONS = {"migration", "preempted", "interrupt", "not_blocked", "no_switch"}
BENCH_KEYS = {
    "min", "avg", "max", "median", "p99", "samples", "discarded",
    "discard_reasons", "iterations", "warmup", "cpu", "unit",
    "overhead_subtracted_ns", "divisor", "clamped_to_zero",
    "outlier_bound_ns", "method", "bucket_ns", "histogram_size",
    "overflows", "histogram",
}
TIME_RE = re.compile(r"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} "
                     r"\d{2}:\d{2}:\d{2} [+-]\d{4}$")
NULL_TOLERANCE_NS = 5


def make(*args, timeout=600):
    return subprocess.run(["make", "-C", str(RTBENCH), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built():
    r = make()
    assert r.returncode == 0, r.stdout + r.stderr
    assert BIN.exists()
    return BIN


def run(binary, *args, prefix=(), json_file=None, timeout=300,
        preexec_fn=None):
    cmd = [*prefix, str(binary), *args]
    if json_file is not None:
        cmd.append(f"--json={json_file}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=preexec_fn)
    return r


def names(binary, prefix=()):
    r = run(binary, "--list", prefix=prefix)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out and len(out) == len(set(out))
    return out


def validate(doc, listed, iterations, machine=None):
    """Shape and internal consistency of one rtbench JSON document."""
    assert doc["file_version"] == 1
    assert isinstance(doc["cmdline:"], str) and "rtbench" in doc["cmdline:"]
    assert isinstance(doc["rt_test_version:"], str)
    assert TIME_RE.match(doc["start_time"]), doc["start_time"]
    assert TIME_RE.match(doc["end_time"]), doc["end_time"]
    assert doc["return_code"] == 0, doc["skipped"]
    si = doc["sysinfo"]
    for k in ("sysname", "nodename", "release", "version", "machine"):
        assert isinstance(si[k], str)
    assert isinstance(si["realtime"], int)
    if machine:
        assert si["machine"] == machine
    assert isinstance(doc["warnings"], list)
    ovh = doc["timestamp_overhead"]
    assert ovh["method"] == "median" and ovh["subtracted_ns"] >= 0
    assert ovh["min_ns"] <= ovh["median_ns"] == ovh["subtracted_ns"]

    benches, skipped = doc["benchmarks"], doc["skipped"]
    # every listed benchmark is either measured or skipped with a reason
    for name in listed:
        assert (name in benches) != (name in skipped), name
        if name in skipped:
            assert isinstance(skipped[name], str) and skipped[name].strip()
            assert not skipped[name].startswith("error"), skipped[name]
    assert set(benches) | set(skipped) == set(listed)

    for name, b in benches.items():
        assert BENCH_KEYS <= set(b), (name, BENCH_KEYS - set(b))
        assert b["unit"] == "ns"
        for k in ("min", "max", "median", "p99", "samples", "discarded",
                  "iterations", "overflows", "bucket_ns", "histogram_size"):
            assert isinstance(b[k], int), (name, k)
        assert isinstance(b["avg"], (int, float))
        assert b["samples"] > 0, name
        assert 0 <= b["min"] <= b["avg"] <= b["max"], (name, b)
        assert b["min"] <= b["median"] <= b["p99"] <= b["max"], name
        assert b["samples"] + b["discarded"] == b["iterations"], name
        assert b["iterations"] == iterations, name
        assert set(b["discard_reasons"]) == REASONS, name
        assert sum(b["discard_reasons"].values()) == b["discarded"], name
        assert b["bucket_ns"] > 0
        hist = b["histogram"]
        for k, v in hist.items():
            assert 0 <= int(k) < b["histogram_size"], (name, k)
            assert isinstance(v, int) and v > 0
        assert sum(hist.values()) + b["overflows"] == b["samples"], name
        # the minimum falls in the first non-empty bucket (or overflows)
        if hist:
            assert min(int(k) for k in hist) == b["min"] // b["bucket_ns"]
        assert isinstance(b["cpu"], int)
        if name.endswith("_othercpu"):
            assert b["other_cpu"] != b["cpu"]
        else:
            assert "other_cpu" not in b
        want_div = 2 if name.startswith("context_switch") else 1
        assert b["divisor"] == want_div
        want_ovh = 0 if name == "clock_gettime" else ovh["subtracted_ns"]
        assert b["overhead_subtracted_ns"] == want_ovh
        assert b["method"]


@pytest.fixture(scope="module")
def checked(built):
    r = make("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_stats:" in r.stdout and " 0 failed" in r.stdout
    return r.stdout


def test_make_check_unit_tests(checked):
    # C unit tests (statistics, histogram, overheads, discards, parsers)
    # under -fsanitize=address,undefined plus the in-process null check
    assert re.search(r"test_stats: \d+ passed, 0 failed", checked)
    assert re.search(r"test_null: \d+ passed, 0 failed", checked)


@pytest.fixture(scope="module")
def full_run(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("rtbench") / "all.json"
    r = run(built, "-q", "-l", str(LOOPS), json_file=out)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""       # -q: silent
    return json.loads(out.read_text())


def test_full_run_shape(built, full_run):
    validate(full_run, names(built), LOOPS, machine=ARCH)


def test_cross_cpu_depends_on_cpus(full_run):
    cross = [n for n in full_run["benchmarks"] if n.endswith("_othercpu")]
    cross += [n for n in full_run["skipped"] if n.endswith("_othercpu")]
    assert len(cross) == 5
    if len(os.sched_getaffinity(0)) >= 2:
        for n in cross:
            assert n in full_run["benchmarks"], full_run["skipped"].get(n)


def test_single_cpu_reports_cross_not_run(built, tmp_path):
    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "one.json"
    sel = "wakeup_sem_samecpu,wakeup_sem_othercpu,wakeup_cond_othercpu"
    r = run(built, "-q", "-l", "100", "-t", sel, json_file=out,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    validate(doc, sel.split(","), 100)
    assert "wakeup_sem_samecpu" in doc["benchmarks"]
    for n in ("wakeup_sem_othercpu", "wakeup_cond_othercpu"):
        assert "one CPU" in doc["skipped"][n]
    assert doc["config"]["other_cpu"] is None
    assert any("one CPU" in w for w in doc["warnings"])


def test_null_measures_about_zero(built, full_run):
    """An empty operation is ~0 after overhead subtraction."""
    medians = [full_run["benchmarks"]["null"]["median"]]
    # timing on a shared machine: retry a couple of times before failing
    while medians[-1] > NULL_TOLERANCE_NS and len(medians) < 4:
        r = run(built, "-q", "-l", "3000", "-t", "null")
        assert r.returncode == 0, r.stderr
        medians.append(json.loads(r.stdout)["benchmarks"]["null"]["median"])
    assert medians[-1] <= NULL_TOLERANCE_NS, medians
    null = full_run["benchmarks"]["null"]
    assert null["min"] == 0
    # and real work is visibly more than nothing
    assert full_run["benchmarks"]["timer_arm"]["median"] > \
        NULL_TOLERANCE_NS
    assert full_run["benchmarks"]["thread_create_join"]["median"] > 1000


def test_selection_list_and_stdout(built):
    listed = names(built)
    for must in ("clock_gettime", "null", "sem_post_nowaiter",
                 "sem_wait_available", "sem_trywait_unavailable",
                 "sem_post_wait_pair", "mutex_lock", "mutex_pi_lock",
                 "wakeup_sem_samecpu", "wakeup_mutex_othercpu",
                 "wakeup_mq_samecpu", "wakeup_cond_othercpu",
                 "wakeup_eventfd_samecpu", "context_switch",
                 "thread_create_join", "timer_create", "timer_delete",
                 "timer_arm", "timer_cancel", "mq_open", "mq_close",
                 "prio_inversion_pi"):
        assert must in listed
    r = run(built, "-q", "-l", "50", "-t", "mutex_lock,null")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)                      # JSON on stdout
    assert set(doc["benchmarks"]) == {"mutex_lock", "null"}
    assert doc["skipped"] == {}
    validate(doc, ["mutex_lock", "null"], 50)

    bad = run(built, "-t", "no_such_benchmark")
    assert bad.returncode == 2 and "unknown benchmark" in bad.stderr
    assert run(built, "-l", "0").returncode == 2


def test_human_summary_with_json_file(built, tmp_path):
    out = tmp_path / "s.json"
    r = run(built, "-l", "50", "-t", "sem_trywait_unavailable", json_file=out)
    assert r.returncode == 0, r.stderr
    assert "sem_trywait_unavailable" in r.stdout    # table on stdout
    assert "timestamp overhead" in r.stdout
    json.loads(out.read_text())


def test_duration_cap(built, tmp_path):
    out = tmp_path / "cap.json"
    r = run(built, "-q", "-l", "2000000", "-D", "0.05", "-t", "null",
            json_file=out)
    assert r.returncode == 0, r.stderr
    b = json.loads(out.read_text())["benchmarks"]["null"]
    assert 0 < b["iterations"] < 2000000
    assert b["samples"] + b["discarded"] == b["iterations"]


def test_fallback_without_sched_fifo(built, tmp_path):
    out = tmp_path / "nort.json"
    sel = "null,context_switch,prio_inversion_pi,wakeup_sem_samecpu"
    r = run(built, "-q", "--no-rt", "-l", "100", "-t", sel, json_file=out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    validate(doc, sel.split(","), 100)
    assert doc["config"]["policy"] == "SCHED_OTHER"
    assert "SCHED_FIFO" in doc["skipped"]["context_switch"]
    assert "SCHED_FIFO" in doc["skipped"]["prio_inversion_pi"]
    assert any("SCHED_OTHER" in w for w in doc["warnings"])


def test_histogram_options(built):
    r = run(built, "-q", "-l", "200", "-B", "1", "-H", "5", "-t",
            "thread_create_join")
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)["benchmarks"]["thread_create_join"]
    assert b["bucket_ns"] == 1 and b["histogram_size"] == 5
    assert b["overflows"] == b["samples"]           # all > 5 ns
    assert b["histogram"] == {}


CROSS = [
    # (ARCH=, compiler, qemu user binary, uname machine)
    ("aarch64", "aarch64-linux-gnu-gcc", "qemu-aarch64-static", "aarch64"),
    ("armhf", "arm-linux-gnueabihf-gcc", "qemu-arm-static", "armv7l"),
]


@pytest.mark.parametrize("arch,cc,qemu,machine", CROSS,
                         ids=[c[0] for c in CROSS])
def test_cross_build_and_qemu_smoke(arch, cc, qemu, machine, tmp_path):
    if ARCH != "x86_64":
        pytest.skip("cross-build test is written for an x86_64 host")
    # make test installs the cross compilers (env/apt-packages.txt): missing is a failure
    assert shutil.which(cc), f"{cc} not installed (env/apt-packages.txt)"
    r = make(f"ARCH={arch}")
    assert r.returncode == 0, r.stdout + r.stderr
    binary = RTBENCH / "build" / arch / "rtbench"
    head = binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    q = shutil.which(qemu)
    assert q, f"{qemu} not installed (qemu-user-static, env/apt-packages.txt)"
    listed = names(binary, prefix=[q])
    out = tmp_path / f"{arch}.json"
    r = run(binary, "-q", "-l", "100", prefix=[q], json_file=out,
            timeout=600)
    assert r.returncode == 0, r.stderr
    validate(json.loads(out.read_text()), listed, 100, machine=machine)
