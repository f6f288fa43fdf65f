"""Run directories, budgets and campaigns that lie (issue #27): nothing outside
them is read, printed or overwritten; every read is bounded by the bytes
actually read; results are checked for type and range when loaded; budget
problems are found before anything boots; messages name the file and the key
and never echo a file's content. Each case failed on main before #27."""
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.errors import InputError
from rtlab.core.model import JobResult, Measurement, MeasurementKey, RunResult

from .conftest import ROOT, rtlab
from .test_store_auth import _run

SECRET = "s3cret-first-line hunter2: do not print"


@pytest.fixture
def secret(tmp_path):
    """A file outside every run dir and campaign dir, standing in for
    /etc/shadow: its content must never reach an error message or a report."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    f = d / "shadow"
    f.write_text(f"{SECRET}\nroot:$6$salt$hash:20228:0:99999:7:::\n")
    return f


def _run_dir(path: Path, run: RunResult = None, budgets: str = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "run.json").write_text(json.dumps((run or _run()).to_json()))
    (path / "budgets.yaml").write_text(budgets or "budgets:\n  local: {'*': {'*': {'*': {max_us: 10000000}}}}\n")
    return path


def _one_line(res) -> str:
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# -- nothing outside is followed ----------------------------------------------
def test_campaign_budgets_outside_the_checkout_are_refused_without_echo(tmp_path, secret):
    camp_dir = tmp_path / "camp"
    camp_dir.mkdir()
    for i, value in enumerate([str(secret), "../elsewhere/shadow", "/etc/shadow"]):
        c = camp_dir / f"c{i}.yaml"
        c.write_text(f"name: faults\nbudgets: {value}\nboards: [local]\nsuites:\n  - suite: cyclictest\n")
        res = rtlab("run", "--campaign", c, "--results", tmp_path / "results", "--no-publish", timeout=120)
        err = _one_line(res)
        assert res.returncode == 2 and str(c) in err and "budgets:" in err, err
        assert SECRET not in res.stdout + err and "root:" not in res.stdout + err
    assert not (tmp_path / "results").exists()  # refused before a run dir


def test_a_budgets_file_beside_the_campaign_or_given_with_budgets_is_used(tmp_path):
    from rtlab.plan.campaign import load_campaign

    (tmp_path / "b.yaml").write_text("budgets: {}\n")
    c = tmp_path / "c.yaml"
    c.write_text("name: faults\nbudgets: b.yaml\nboards: [local]\nsuites:\n  - suite: cyclictest\n")
    assert load_campaign(c).budgets == (tmp_path / "b.yaml").resolve()
    c.write_text("name: faults\nbudgets: /etc/passwd\nboards: [local]\nsuites:\n  - suite: cyclictest\n")
    other = tmp_path / "x" / "operator.yaml"  # the command line is the operator's: anywhere
    assert load_campaign(c, budgets=other).budgets == other.resolve()


def test_error_messages_never_echo_file_content(tmp_path):
    """A budget file whose keys and values are someone's secrets (a path
    that happened to be allowed): the error names file and key position."""
    b = tmp_path / "budgets.yaml"
    b.write_text(f'"{SECRET}": 1\n')
    res = rtlab("gate", _run_dir(tmp_path / "run"), "--budgets", b, timeout=120)
    assert res.returncode == 2 and str(b) in res.stderr and "<key 1>" in res.stderr, res.stderr
    assert SECRET not in res.stdout + res.stderr
    b.write_text(f'budgets:\n  local: {{"*": {{"*": {{"*": {{max_us: "{SECRET}"}}}}}}}}\n')
    res = rtlab("gate", tmp_path / "run", "--budgets", b, timeout=120)
    assert res.returncode == 2 and "budgets.local.*.*.*.max_us" in res.stderr, res.stderr
    assert SECRET not in res.stdout + res.stderr


def test_run_dir_budgets_symlinked_outside_is_refused(tmp_path, secret):
    run_dir = _run_dir(tmp_path / "run")
    (run_dir / "budgets.yaml").unlink()
    (run_dir / "budgets.yaml").symlink_to(secret)
    res = rtlab("gate", run_dir, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2 and "budgets.yaml" in err and "outside" in err, err
    assert SECRET not in res.stdout + err


def test_run_json_symlinked_outside_is_refused(tmp_path):
    elsewhere = _run_dir(tmp_path / "elsewhere")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").symlink_to(elsewhere / "run.json")
    res = rtlab("report", run_dir, timeout=120)
    assert res.returncode == 2 and "run.json" in res.stderr and "outside" in res.stderr, res.stderr


def _run_with_command(raw: str) -> RunResult:
    run = _run()
    run.jobs[0].measurements[0].raw = [raw]
    return run


@pytest.mark.parametrize("raw", ["cyclictest@idle/command.txt", "../../../elsewhere/command.txt"])
def test_vendor_report_does_not_follow_command_txt_out_of_the_job(tmp_path, secret, raw):
    run_dir = _run_dir(tmp_path / "run", _run_with_command(raw))
    job = run_dir / "local" / "host"
    (job / "cyclictest@idle").mkdir(parents=True)
    if raw.startswith(".."):
        (tmp_path / "elsewhere" / "command.txt").write_text(SECRET + "\n")
    else:
        (job / raw).symlink_to(secret)
    html = tmp_path / "v.html"
    res = rtlab("report", "--vendor", run_dir, "--html", html, timeout=120)
    assert res.returncode == 0, res.stderr
    assert SECRET not in res.stdout + res.stderr and SECRET not in html.read_text()


def test_vendor_report_still_shows_a_plain_command_txt(tmp_path):
    run_dir = _run_dir(tmp_path / "run", _run_with_command("cyclictest@idle/command.txt"))
    d = run_dir / "local" / "host" / "cyclictest@idle"
    d.mkdir(parents=True)
    (d / "command.txt").write_text("cyclictest -m -p 95 -i 1000\n")
    res = rtlab("report", "--vendor", run_dir, timeout=120)
    assert res.returncode == 0 and "cyclictest -m -p 95 -i 1000" in res.stdout, res.stdout


@pytest.mark.parametrize("how", ["compare", "gate --baseline"])
def test_compare_replaces_symlinks_in_the_candidate_dir_never_writes_through(tmp_path, how):
    base = _run_dir(tmp_path / "base")
    cand_run = _run()
    cand_run.run_id = "20261123T000001Z"
    cand = _run_dir(tmp_path / "cand", cand_run)
    victims = {}
    for name in ("compare.json", "report.html"):
        v = tmp_path / f"victim-{name}"
        v.write_text("KEEP\n")
        (cand / name).symlink_to(v)
        victims[name] = v
    if how == "compare":
        res = rtlab("compare", "--baseline", base, "--candidate", cand, timeout=120)
    else:
        res = rtlab("gate", cand, "--baseline", base, timeout=120)
    assert res.returncode in (0, 1, 2) and "Traceback" not in res.stderr, res.stderr
    for name, v in victims.items():
        assert v.read_text() == "KEEP\n", name
        assert not (cand / name).is_symlink() and (cand / name).is_file(), name
    assert "outcome" in json.loads((cand / "compare.json").read_text())


def test_campaign_name_is_a_name_not_a_path(tmp_path):
    target = tmp_path / "escaped"
    for i, name in enumerate(["../../../../../../" + str(target)[1:], str(target)]):
        c = tmp_path / f"c{i}.yaml"
        c.write_text(f"name: {json.dumps(name)}\nbudgets: {ROOT}/budgets/default.yaml\n"
                     "boards: [qemu-x86_64]\nvariants: [rt]\nsuites:\n  - suite: cyclictest\n")
        res = rtlab("lava", "render", "--campaign", c, "--no-validate", timeout=300)
        err = _one_line(res)
        assert res.returncode == 2 and str(c) in err and "name:" in err and "not a safe name" in err, err
        assert not target.exists()


# -- bounded ------------------------------------------------------------------
def _limited():
    # whatever happens, this test never takes the shared machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("what", ["/dev/zero", "fifo"])
def test_parse_of_a_device_or_fifo_exits_2_at_once(tmp_path, what):
    path = what
    if what == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # nobody writes: open() alone would block for ever
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "parse", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, preexec_fn=_limited)
    err = _one_line(res)
    assert res.returncode == 2 and str(path) in err and "not a regular file" in err, err
    assert time.monotonic() - t0 < 60


def test_parse_limit_counts_bytes_read_not_st_size(tmp_path, monkeypatch):
    """/proc files say st_size 0: the limit holds on what is read."""
    from rtlab.core.fsutil import read_bounded

    with pytest.raises(InputError, match="over the limit"):
        read_bounded("/proc/self/maps", 16, root="/proc/self")
    assert read_bounded("/proc/self/maps", 1 << 20, root="/proc/self")


def test_run_json_read_is_bounded(tmp_path):
    run_dir = _run_dir(tmp_path / "run")
    with open(run_dir / "run.json", "a") as f:
        f.write(" " * (2 << 20))  # valid JSON, 2 MB
    res = rtlab("gate", run_dir, timeout=120, env={"RTLAB_INPUT_MAX_MB": "1"})
    err = _one_line(res)
    assert res.returncode == 2 and "run.json" in err and "over the limit of 1 MB" in err, err


# -- validated when loaded ---------------------------------------------------
THREAD = "jobs[0].measurements[0].output.threads[0]"


@pytest.mark.parametrize("field,value,key", [
    ("max_us", float("nan"), f"{THREAD}.max_us"),
    ("max_us", float("inf"), f"{THREAD}.max_us"),
    ("cycles", "abc", f"{THREAD}.cycles"),
    ("cycles", -5, f"{THREAD}.cycles"),
    ("histogram", {"counts": {"2": -4}, "bucket_us": 1}, f"{THREAD}.histogram.counts.2"),
    ("histogram", {"counts": {"x": 4}}, f"{THREAD}.histogram.counts"),
    ("overflows", -1, f"{THREAD}.overflows"),
])
def test_run_json_values_are_typed_and_ranged(tmp_path, field, value, key):
    doc = _run().to_json()
    doc["jobs"][0]["measurements"][0]["output"]["threads"][0][field] = value
    run_dir = _run_dir(tmp_path / "run")
    (run_dir / "run.json").write_text(json.dumps(doc))
    res = rtlab("gate", run_dir, timeout=120)
    err = _one_line(res)
    assert res.returncode == 2 and f"{run_dir / 'run.json'}: not a valid run result: {key}:" in err, err


def test_a_nan_maximum_never_passes_the_gate_even_in_memory():
    from rtlab.plan.budgets import Budget
    from rtlab.judge.gate import judge
    from rtlab.core.model import Verdict

    m = _run().jobs[0].measurements[0]
    m.verdict = None
    m.output.threads[0].max_us = float("nan")
    assert judge(m, Budget(max_us=100)).verdict == Verdict.INFRA


def test_job_json_and_compare_json_are_checked(tmp_path):
    from rtlab.run.results import load_comparison, load_job

    job = _run().jobs[0].to_json()
    job["duration_s"] = -3
    (tmp_path / "job.json").write_text(json.dumps(job))
    with pytest.raises(InputError, match=r"job.json: not a valid job result: duration_s: must be >= 0"):
        load_job(tmp_path / "job.json")
    job["duration_s"] = 3
    job["measurements"][0]["verdict"] = "maybe"
    (tmp_path / "job.json").write_text(json.dumps(job))
    with pytest.raises(InputError, match=r"job.json: not a valid job result: measurements\[0\].verdict: must be one of"):
        load_job(tmp_path / "job.json")
    (tmp_path / "compare.json").write_text(json.dumps({"outcome": "no-regression", "keys": [{"line": 5}]}))
    with pytest.raises(InputError, match=r"compare.json: not a valid comparison: keys\[0\].line: must be a string"):
        load_comparison(tmp_path)


# -- messages ----------------------------------------------------------------
def test_pin_name_is_checked_like_names(tmp_path):
    res = rtlab("baseline", "pin", "a\nb", "--like", _run_dir(tmp_path / "run"), timeout=120,
                env={"RTLAB_INFLUX_URL": "http://127.0.0.1:9"})
    assert res.returncode == 2 and "pin name" in res.stderr and "not a safe name" in res.stderr, res.stderr
    res = rtlab("compare", "--pin", "a\nb", "--candidate", tmp_path / "run", timeout=120)
    assert res.returncode == 2 and "pin name" in res.stderr, res.stderr


def test_dirty_tree_bisect_error_names_the_path(tmp_path):
    from rtlab.verdict.bisect import Settings, check_inputs

    tree = tmp_path / "linux"
    tree.mkdir()
    for f in ("Makefile", "Kconfig", "a"):
        (tree / f).write_text("x\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(tree)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (tree / "a").write_text("changed\n")
    s = Settings(str(tree), "HEAD", "HEAD", "qemu-x86_64", "rt", "cyclictest", "idle", 1, 1, "c", str(tmp_path))
    with pytest.raises(InputError) as e:
        check_inputs(s)
    assert "e.g. a)" in str(e.value), str(e.value)


def test_gate_says_why_a_run_without_jobs_is_infra(tmp_path):
    run = _run()
    run.jobs = []
    res = rtlab("gate", _run_dir(tmp_path / "run", run), timeout=120)
    assert res.returncode == 2
    assert "gate: INFRA" in res.stdout and "no job measured anything" in res.stdout, res.stdout


def test_compare_counts_runs_as_the_statistics_do():
    from rtlab.verdict.compare import compare_runs

    def repeated(run_id):
        run = _run()
        run.run_id = run_id
        j = run.jobs[0]
        run.jobs = [JobResult(j.board, j.variant, j.arch, j.budget_class, {},
                              [Measurement(MeasurementKey(*m.key.__dict__.values()), m.output)
                               for m in j.measurements], repeat=r) for r in (1, 2, 3)]
        return run

    lines = compare_runs([repeated("b")], [repeated("c")]).lines()
    assert "(3 runs from 1 run dir)" in lines[0] and "(3 runs from 1 run dir)" in lines[1], lines[:2]


# -- found before booting ----------------------------------------------------
@pytest.mark.parametrize("budgets,key", [
    ("budgets: {}\n", "budgets.local:"),
    ("budgets:\n  locl: {'*': {'*': {'*': {max_us: 1000}}}}\n", "budgets.local:"),
    ("budgets:\n  local: {rt-isoo: {'*': {'*': {max_us: 1000}}}}\n", "budgets.local.rt-isoo:"),
    ("budgets:\n  local: {'*': {cyclictes: {'*': {max_us: 1000}}}}\n", "budgets.local.host.cyclictest.idle:"),
    ("budgets:\n  local: {'*': {'*': {idel: {max_us: 1000}}}}\n", "budgets.local.*.*.idel:"),
])
def test_budget_typos_are_found_before_any_boot(tmp_path, budgets, key):
    b = tmp_path / "budgets.yaml"
    b.write_text(budgets)
    c = tmp_path / "c.yaml"
    c.write_text("name: faults\nbudgets: budgets.yaml\nboards: [local]\n"
                 "suites:\n  - suite: cyclictest\n    params: {duration_s: 1}\n")
    t0 = time.monotonic()
    res = rtlab("run", "--campaign", c, "--results", tmp_path / "results", "--no-publish", timeout=300)
    err = _one_line(res)
    assert res.returncode == 2 and f"{b}: {key}" in err, err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
    assert time.monotonic() - t0 < 120


def test_a_key_given_twice_in_a_budget_file_is_refused_naming_it(tmp_path):
    """A second `oslat:` in one mapping would silently replace the first
    (a merge once added it twice); the file is refused, naming line and key."""
    from rtlab.plan.budgets import load_budgets
    from rtlab.errors import InputError

    f = tmp_path / "budgets.yaml"
    f.write_text('budgets:\n  local:\n    "*":\n      oslat: {"*": {max_us: 1}}\n      oslat: {"*": {max_us: 99}}\n')
    with pytest.raises(InputError) as err:
        load_budgets(f)
    assert str(f) in str(err.value) and "line 5" in str(err.value) and "'oslat' appears twice" in str(err.value)


@pytest.mark.parametrize("target", ["/dev/zero", "/etc/hostname"])
def test_result_json_files_are_read_bounded_and_never_through_a_link_out(tmp_path, target):
    """exit.json, kernel.json, checkpoints, host-noise.json, the LAVA record's
    job.json and log (rtlab.core.fsutil.read_json / read_bounded): a link to a
    device or out of the run is refused at once, never read without bound."""
    from rtlab.core.fsutil import read_json
    from rtlab.lava.logs import LavaLog

    job = tmp_path / "run" / "local" / "rt"
    job.mkdir(parents=True)
    (job / "kernel.json").symlink_to(target)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="kernel.json"):
        read_json(job / "kernel.json")
    (job / "lava-run.log").symlink_to(target)
    with pytest.raises(InputError, match="lava-run.log"):
        LavaLog.from_file(job / "lava-run.log")
    assert time.monotonic() - t0 < 5
    with pytest.raises(FileNotFoundError):
        read_json(job / "exit.json")
