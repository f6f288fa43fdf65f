"""`rtlab lava ingest`: LAVA's log stream and results into rtlab's results
layout, judged like any run: infra never becomes a latency verdict, a job
missing its declared measurements never passes.

Logs here are built in LAVA's formats around a real rendered job: lava-run's
stderr stream (flow mappings, tagged numbers) and a server's export
(`lavacli jobs logs --raw`, `lavacli results --yaml`, `lavacli jobs show
--json`). The real lava-run path runs in tests/integration/test_lava_run.py.
"""
import base64
import datetime as dt
import gzip
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from rtlab.plan.campaign import load_campaign
from rtlab.lava import onboard
from rtlab.lava.dispatch import lavacli_cmd
from rtlab.lava.ingest import ingest_records, load_record
from rtlab.lava.logs import LavaLog, results_from_server
from rtlab.lava.render import load_job, render_campaign
from rtlab.core.model import RunResult, Verdict
from rtlab.parsers import parse_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/rt-tests-2.4/cyclictest-t2-h400.json"
SAMPLES = ROOT / "lava" / "samples"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Real rendered jobs: qemu-x86_64 rt and rt-iso (2 CPUs, isolated CPU 1)."""
    out = tmp_path_factory.mktemp("jobs")
    c = tmp_path_factory.mktemp("c") / "c.yaml"
    c.write_text(textwrap.dedent(f"""
        name: lava-unit
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-x86_64]
        variants: [rt, rt-iso]
        suites:
          - name: cyclictest
          # the fixture ran 1000 loops of 1 ms: a 1 s run (a longer one would be cut short)
            params: {{duration_s: 1, histogram_us: 400}}
    """))
    index = render_campaign(load_campaign(c), out, lab_boards=False)
    return {j["variant"]: out / j["file"] for j in index["jobs"]}


# -------------------------------------------------------------- a fake board

def fact_answers(spec, **override):
    k, v = spec["kernel"], spec["variant"]
    iso = spec["board"]["isolate_cpu"] if v["isolated"] else None
    answers = {
        "osrelease": (k["release"] + "\n", 0), "kernel/version": (k["uname_v"] + "\n", 0),
        "uname -m": ("x86_64\n", 0), "cmdline": (spec["kernel_args"] + "\n", 0),
        "realtime": ("1\n", 0) if k["preempt"] == "rt" else ("", 1),
        "isolated": (f"{iso}\n" if iso is not None else "\n", 0),
        "nohz_full": (f"{iso}\n" if iso is not None else "(null)\n", 0),
        "online": ("0-1\n", 0), "sched/preempt": ("", 1), "config.gz": ("", 1),
    }
    answers.update(override)
    out = []
    for cmd in spec["facts"]:
        key = next(k for k in answers if k in cmd)
        out.append(answers[key])
    return out


def block(key, name, data: bytes, rc="-"):
    b64 = base64.b64encode(gzip.compress(data)).decode()
    return ([f"{onboard.MARK_BEGIN} {key} {name} {len(data)} {hashlib.sha256(data).hexdigest()} {rc}"]
            + [b64[i:i + 76] for i in range(0, len(b64), 76)] + [f"{onboard.MARK_END} {key} {name}"])


def board_cases(json_bytes: bytes, tmp: Path) -> list[tuple[str, str, object, str]]:
    """What rtlab_rt_cases reports for a JSON file (from rtlab's own parse;
    tests/unit/test_lava_onboard.py proves the board's awk says the same)."""
    f = tmp / "c.json"
    f.write_bytes(json_bytes)
    out = []
    for t in parse_file(f).threads:
        out += [(f"t{t.thread}-cycles", "pass", t.cycles, "count"), (f"t{t.thread}-min-latency", "pass", t.min_us, "us"),
                (f"t{t.thread}-avg-latency", "pass", t.avg_us, "us"), (f"t{t.thread}-max-latency", "pass", t.max_us, "us")]
        for p, v in t.percentiles_us.items():
            name = f"t{t.thread}-{onboard.percentile_case_name(p)}-latency"
            out.append((name, "pass", v, "us") if v is not None else (name, "skip", None, None))
    return out


class Board:
    """Emits what a board + lava-run would for a rendered job."""

    def __init__(self, job_file: Path, tmp: Path):
        self.job_file = job_file
        self.definition, self.spec = load_job(job_file)
        self.tmp = tmp
        self.facts = fact_answers(self.spec)
        self.raw = {"stdout.txt": b"", "stderr.txt": b"", "cyclictest.json": FIXTURE.read_bytes(),
                    "exit_code": b"0\n"}
        self.cases = board_cases(self.raw["cyclictest.json"], tmp)
        self.drop: set[str] = set()
        self.job = {"case": "job", "definition": "lava", "result": "pass"}
        self.lava_cases = [{"case": "login-action", "definition": "lava", "result": "pass", "duration": "5.1"}]
        self.t0 = dt.datetime(2026, 11, 21, 6, 0, 0)

    def events(self):
        """(lvl, msg) in order."""
        s, d = self.spec, self.spec["definitions"]
        ev = [("info", "start: 1 tmpfs-deploy (timeout 00:05:00) [common]")]
        ev += [("results", c) for c in self.lava_cases]
        ev.append(("target", "rtlab# "))
        for i, (out, rc) in enumerate(self.facts):
            ev += [("target", l) for l in block("facts", f"cmd{i}", out.encode(), rc)]
        boot_cases = [c.split("/", 1)[1] for c in s["expected"] if c.startswith(d["boot"] + "/")]
        ev += [("results", {"definition": d["boot"], "case": c, "result": "pass"}) for c in boot_cases]
        ev.append(("target", f"+ {{ {s['command']} ; }} > stdout.txt 2> stderr.txt; echo $? > exit_code"))
        for name, data in self.raw.items():
            if data is None:
                ev.append(("target", f"{onboard.MARK_ABSENT} {s['suite']['id']} {name}"))
            else:
                ev += [("target", l) for l in block(s["suite"]["id"], name, data)]
        rc = (self.raw.get("exit_code") or b"").strip()
        ev.append(("results", {"definition": d["suite"], "case": "cyclictest",
                               "result": "pass" if rc == b"0" else "fail"}))
        for name, result, value, units in self.cases:
            if name in self.drop:
                continue
            msg = {"definition": d["suite"], "case": name, "result": result}
            if value is not None:
                msg.update(measurement=float(value), units=units)
            ev.append(("results", msg))
        ev.append(("results", self.job))
        return ev

    def lava_run_log(self) -> str:
        """lava-run's stderr: one flow mapping per line, numbers tagged `! "x"`."""
        lines = []
        for i, (lvl, msg) in enumerate(self.events()):
            stamp = (self.t0 + dt.timedelta(seconds=i * 0.05)).isoformat()
            if isinstance(msg, dict):
                body = ", ".join(f'"{k}": ' + (f'! "{v}"' if isinstance(v, float) else json.dumps(v))
                                 for k, v in sorted(msg.items()))
                m = "{" + body + "}"
            else:
                m = json.dumps(msg)
            lines.append(f'{{"dt": "{stamp}", "lvl": "{lvl}", "msg": {m}}}')
        return "\n".join(lines) + "\n"

    def record(self, name="rec", **server) -> Path:
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "job.yaml").write_text(self.job_file.read_text())
        if not server:
            (d / "lava-run.log").write_text(self.lava_run_log())
            (d / "job.json").write_text(json.dumps({"job_id": 900123, "runner": "lava-run", "returncode": 0}))
            return d
        return server_record(self, d, **server)


def server_log(board: Board) -> str:
    """`lavacli jobs logs ID --raw`: lavacli's own dump of each record."""
    out = []
    for i, (lvl, msg) in enumerate(board.events()):
        rec = {"dt": (board.t0 + dt.timedelta(seconds=i)).isoformat(), "lvl": lvl, "msg": msg}
        out.append("- " + yaml.dump(rec, default_flow_style=True, default_style='"', width=10 ** 6)[:-1])
    return "\n".join(out) + "\n"


def server_results(board: Board, job_id=4242) -> list[dict]:
    """`lavacli results ID --yaml`: lava_results_app export_testcase() fields,
    all strings ("None" when absent), the dispatcher's record in metadata."""
    out = []
    for i, (lvl, msg) in enumerate(board.events()):
        if lvl != "results":
            continue
        m = msg.get("measurement")
        out.append({
            "name": msg["case"], "job": str(job_id), "suite": msg["definition"], "result": msg["result"],
            "measurement": "None" if m is None else f"{m:.10f}", "unit": str(msg.get("units")),
            "level": msg.get("level", ""), "url": f"/results/testcase/{1000 + i}", "id": str(1000 + i),
            "logged": "2026-11-21 06:00:00+00:00", "log_start_line": "", "log_end_line": "",
            "metadata": {k: (str(v) if isinstance(v, float) else v) for k, v in msg.items()},
        })
    return out


def server_record(board: Board, d: Path, *, log=True, health="Complete", job_id=4242) -> Path:
    (d / "job.json").write_text(json.dumps({"id": job_id, "state": "Finished", "health": health,
                                            "failure_comment": None if health == "Complete" else "boot failed"}))
    (d / "results.yaml").write_text(yaml.dump(server_results(board, job_id), default_flow_style=None))
    if log:
        (d / "log.yaml").write_text(server_log(board))
    return d


def ingest(tmp, *records, budgets=None):
    run, run_dir = ingest_records([load_record(r) for r in records], tmp / "results", budgets_file=budgets)
    return run, run_dir


def gate(run_dir, *extra):
    return subprocess.run([sys.executable, "-m", "rtlab.cli", "gate", str(run_dir), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


# -------------------------------------------------------------------- tests

def test_complete_job_lands_in_the_runner_layout_and_passes(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    run, run_dir = ingest(tmp_path, b.record())
    (job,) = run.jobs
    assert job.infra_error is None, job.infra_error
    (m,) = job.measurements
    assert m.verdict == Verdict.PASS and [t.cycles for t in m.output.threads] == [1000, 1000]
    assert m.output.threads[0].histogram is not None  # from the raw JSON, not the LAVA numbers
    jd = run_dir / "qemu-x86_64" / "rt"
    raw = jd / "cyclictest@idle"
    assert (raw / "cyclictest.json").read_bytes() == FIXTURE.read_bytes()
    assert json.loads((raw / "exit.json").read_text()) == {"exit_code": 0}
    assert (raw / "command.txt").read_text().strip() == b.spec["command"]
    assert (raw / "lava" / "lava-run.log").is_file() and (raw / "lava" / "job.yaml").is_file()
    assert json.loads((jd / "kernel.json").read_text())["release"] == b.spec["kernel"]["release"]
    assert json.loads((jd / "job-spec.json").read_text())["suites"][0]["id"] == "cyclictest@idle"
    assert (run_dir / "budgets.yaml").is_file() and (jd / "job.json").is_file()
    # the rest of rtlab reads it unchanged
    assert RunResult.from_json(json.loads((run_dir / "run.json").read_text())).verdict == Verdict.PASS
    res = gate(run_dir)
    assert res.returncode == 0 and "Verdict: PASS" in res.stdout, res.stdout + res.stderr
    from rtlab.store.publish import load_run
    from rtlab.store.schema import points_for_run
    assert len(points_for_run(load_run(run_dir))) > 0


def test_budget_broken_is_a_latency_failure(jobs, tmp_path):
    tight = tmp_path / "tight.yaml"
    tight.write_text('budgets:\n  qemu-tcg: {"*": {cyclictest: {"*": {max_us: 100}}}}\n')
    run, run_dir = ingest(tmp_path, Board(jobs["rt"], tmp_path).record(), budgets=tight)
    assert run.verdict == Verdict.FAIL
    res = gate(run_dir, "--budgets", tight)  # the gate judges by the lab's budgets unless given others
    assert res.returncode == 1 and "FAIL qemu-x86_64/rt/cyclictest/idle: max" in res.stdout


def test_missing_declared_measurements_are_named_and_never_pass(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    b.drop = {"t1-max-latency", "t1-p99_9-latency"}  # the raw JSON is all there
    run, run_dir = ingest(tmp_path, b.record())
    (m,) = run.jobs[0].measurements
    assert m.verdict == Verdict.INFRA
    why = " ".join(m.reasons)
    assert "missing 2 declared test case(s)" in why
    assert "1_cyclictest-idle/t1-max-latency" in why and "1_cyclictest-idle/t1-p99_9-latency" in why
    res = gate(run_dir)  # re-judging cannot turn it into a pass
    assert res.returncode == 2, res.stdout
    assert "t1-max-latency" in res.stdout and "Verdict: INFRA" in res.stdout


def test_tool_that_did_not_run_is_infra_with_its_error_and_missing_cases(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    b.raw.update({"cyclictest.json": None, "exit_code": b"127\n",
                  "stderr.txt": b"run.sh: line 16: cyclictest-sabotaged: not found\n"})
    b.cases = []
    run, run_dir = ingest(tmp_path, b.record())
    (m,) = run.jobs[0].measurements
    assert m.verdict == Verdict.INFRA
    assert "cyclictest exited with 127: run.sh: line 16: cyclictest-sabotaged: not found" in m.reasons[0]
    assert "missing 16 declared test case(s)" in m.reasons[-1]
    assert gate(run_dir).returncode == 2


@pytest.mark.parametrize("case,why", [
    ({"case": "job", "definition": "lava", "result": "fail", "error_type": "Infrastructure",
      "error_msg": "auto-login-action timed out after 180 seconds\n"}, "Incomplete: Infrastructure: auto-login-action timed out"),
    ({"case": "job", "definition": "lava", "result": "fail", "error_type": "Job",
      "error_msg": "Invalid job data"}, "Incomplete: Job: Invalid job data"),
])
def test_incomplete_job_is_job_level_infra(jobs, tmp_path, case, why):
    b = Board(jobs["rt"], tmp_path)
    b.job = case
    run, run_dir = ingest(tmp_path, b.record())
    (job,) = run.jobs
    assert job.verdict == Verdict.INFRA and not job.measurements
    assert why in job.infra_error and "LAVA job 900123 (qemu-x86_64/rt/cyclictest@idle)" in job.infra_error
    res = gate(run_dir)
    assert res.returncode == 2 and "FAIL" not in res.stdout.split("Verdict:")[-1].split("(")[0]


def test_failed_lava_infrastructure_case_is_infra(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    b.lava_cases = [{"case": "http-download", "definition": "lava", "result": "fail",
                     "error_type": "Infrastructure", "error_msg": "Unable to fetch kernel"}]
    run, _ = ingest(tmp_path, b.record())
    assert "LAVA http-download failed (Infrastructure: Unable to fetch kernel)" in run.jobs[0].infra_error
    assert run.verdict == Verdict.INFRA


def test_log_that_stops_before_the_job_result_is_incomplete(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    rec = b.record()
    log = (rec / "lava-run.log").read_text().splitlines()
    (rec / "lava-run.log").write_text("\n".join(log[:len(log) // 2]) + "\n{\"dt\": \"2026-11-21T06:0")
    run, _ = ingest(tmp_path, rec)
    assert "the log ends before LAVA reported the job result" in run.jobs[0].infra_error


def test_wrong_kernel_is_infra_not_a_measurement(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    b.facts = fact_answers(b.spec, **{"osrelease": ("6.1.0-50-amd64\n", 0), "realtime": ("", 1),
                                      "kernel/version": ("#1 SMP PREEMPT_DYNAMIC Debian 6.1.176-1\n", 0)})
    run, _ = ingest(tmp_path, b.record())
    (job,) = run.jobs
    assert "is not running variant rt" in job.infra_error and "uname -r is '6.1.0-50-amd64'" in job.infra_error
    assert not job.measurements and run.verdict == Verdict.INFRA


def test_isolation_is_checked_on_the_running_kernel(jobs, tmp_path):
    b = Board(jobs["rt-iso"], tmp_path)
    ok, _ = ingest(tmp_path, b.record("ok"))
    assert ok.verdict == Verdict.PASS, ok.jobs[0].infra_error
    b.facts = fact_answers(b.spec, isolated=("\n", 0))
    bad, _ = ingest(tmp_path, b.record("bad"))
    assert "CPU 1 not isolated" in bad.jobs[0].infra_error


def test_raw_output_broken_in_transfer_is_infra(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    rec = b.record()
    text = (rec / "lava-run.log").read_text()
    key = '"msg": "H4sI'  # the first base64 line of a gzip stream
    i = text.index(key, text.index("RTLAB-RAW-BEGIN cyclictest@idle cyclictest.json"))
    (rec / "lava-run.log").write_text(text[:i + 12] + "XXXX" + text[i + 16:])
    run, _ = ingest(tmp_path, rec)
    (m,) = run.jobs[0].measurements
    assert m.verdict == Verdict.INFRA and "cyclictest.json" in " ".join(m.reasons)


def test_board_numbers_that_disagree_with_the_raw_output_are_infra(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    b.cases = [(n, r, (v + 1 if n == "t0-max-latency" else v), u) for n, r, v, u in b.cases]
    run, _ = ingest(tmp_path, b.record())
    (m,) = run.jobs[0].measurements
    assert m.verdict == Verdict.INFRA and "t0-max-latency: board reported" in " ".join(m.reasons)


def test_several_lava_jobs_of_one_board_and_variant_make_one_job(jobs, tmp_path):
    good = Board(jobs["rt"], tmp_path).record("good")
    b = Board(jobs["rt"], tmp_path)
    b.job = {"case": "job", "definition": "lava", "result": "fail", "error_type": "Infrastructure",
             "error_msg": "lost the serial console"}
    bad = b.record("bad")
    run, _ = ingest(tmp_path, good, bad)
    (job,) = run.jobs
    assert len(job.measurements) == 1 and job.measurements[0].verdict == Verdict.PASS
    assert "lost the serial console" in job.infra_error and job.verdict == Verdict.INFRA


def test_server_records_log_and_results(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    run, run_dir = ingest(tmp_path, b.record("srv", log=True))
    assert run.verdict == Verdict.PASS, [j.infra_error for j in run.jobs]
    assert run.jobs[0].measurements[0].output.threads[0].histogram is not None
    assert (run_dir / "qemu-x86_64/rt/cyclictest@idle/lava/log.yaml").is_file()
    # the server's own health wins over the log
    b2 = Board(jobs["rt"], tmp_path)
    run2, _ = ingest(tmp_path, b2.record("srv-inc", log=True, health="Incomplete"))
    assert "Incomplete: boot failed" in run2.jobs[0].infra_error


def test_results_only_ingest_judges_max_but_not_percentiles(jobs, tmp_path):
    b = Board(jobs["rt"], tmp_path)
    rec = b.record("only", log=False)
    run, _ = ingest(tmp_path, rec)
    (m,) = run.jobs[0].measurements
    assert m.verdict == Verdict.PASS and m.output.threads[1].max_us == 384
    assert m.output.threads[0].histogram is None  # percentiles need the raw JSON of the log
    pct = tmp_path / "pct.yaml"
    pct.write_text('budgets:\n  qemu-tcg: {"*": {cyclictest: {"*": {max_us: 100000, percentiles_us: {"99.9": 1000}}}}}\n')
    run, _ = ingest(tmp_path, rec, budgets=pct)
    assert run.jobs[0].measurements[0].verdict == Verdict.INFRA


def test_server_results_sample_parses():
    """lava/samples/lavacli-results.yaml: the export format of `lavacli results ID --yaml`."""
    data = yaml.safe_load((SAMPLES / "lavacli-results.yaml").read_text())
    res = results_from_server(data)
    by = {(r["definition"], r["case"]): r for r in res}
    assert by[("lava", "job")]["result"] == "pass"
    assert by[("1_cyclictest-idle", "t0-max-latency")]["measurement"] > 0
    assert by[("1_cyclictest-idle", "t0-max-latency")]["units"] == "us"
    assert by[("lava", "login-action")]["measurement"] is None
    log = LavaLog.from_file(SAMPLES / "lavacli-logs-raw.yaml")
    assert log.unreadable == 0 and any(r["case"] == "t0-max-latency" for r in log.results())


# ------------------------------------------------------------ lavacli (no server here)

#: A fake lavacli, only for what needs a server that is not here: unit tests
#: run without the LAVA lab, and this one checks a refused submission (lavacli
#: prints "Unable to submit" and still exits 0) without it. The real lab
#: refuses on demand too (a device type it does not have:
#: tests/integration/test_lava_server.py::test_a_job_the_server_refuses_is_an_error_not_a_job_id);
#: everything a server does with a job it accepts (submit, the polls of
#: --wait, the record's exports, ingest) is only tested against the real lab
#: (test_server_job_equals_lava_run records lavacli's real command lines);
#: a server that is down is the real lavacli against a loopback port nobody
#: listens on (below).
FAKE_LAVACLI = r'''#!/usr/bin/env python3
"""Stands in for lavacli: records argv; a server that refuses every job
(it prints the refusal and still exits 0, as the real lavacli does)."""
import json, os, sys
d = os.environ["FAKE_LAVA_DIR"]
with open(os.path.join(d, "argv.log"), "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if args[:2] == ["--uri", "https://ci:token@lava.example/RPC2"] or args[:2] == ["--identity", "lab"]:
    args = args[2:]
else:
    print("Unknown identity 'default'"); sys.exit(1)
if args[:2] == ["jobs", "submit"]:
    print("Unable to submit %s: job validation failed" % args[2])
else:
    print("unexpected: %r" % args, file=sys.stderr); sys.exit(2)
'''


def test_lavacli_command_lines():
    assert lavacli_cmd("jobs", "submit", "j.yaml", uri="https://x/RPC2") == \
        ["lavacli", "--uri", "https://x/RPC2", "jobs", "submit", "j.yaml"]
    assert lavacli_cmd("results", "7", "--yaml", identity="lab") == ["lavacli", "--identity", "lab", "results", "7", "--yaml"]


def test_a_submission_the_server_refuses_is_an_error_not_a_job_id(jobs, tmp_path):
    server = tmp_path / "server"
    server.mkdir()
    fake = tmp_path / "lavacli"
    fake.write_text(FAKE_LAVACLI)
    fake.chmod(0o755)
    env = {**os.environ, "RTLAB_LAVACLI": str(fake), "FAKE_LAVA_DIR": str(server)}
    for how in (["-i", "lab"], ["--uri", "https://ci:token@lava.example/RPC2"]):
        res = subprocess.run([sys.executable, "-m", "rtlab.cli", "lava", "submit", str(jobs["rt"]), *how, "--wait"],
                             cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 2 and "Unable to submit" in res.stderr, res.stdout + res.stderr
    calls = [json.loads(line) for line in (server / "argv.log").read_text().splitlines()]
    # refused: nothing waited for, fetched or ingested
    assert calls == [["--identity", "lab", "jobs", "submit", str(jobs["rt"])],
                     ["--uri", "https://ci:token@lava.example/RPC2", "jobs", "submit", str(jobs["rt"])]]


def test_wait_gives_up_on_a_server_that_is_down():
    """The real lavacli against a loopback port nobody listens on (a server
    that is down): five failed polls in a row end the wait with an error
    (exit 2 at the CLI), never a pass and never a hang."""
    import shutil

    from rtlab.core.procutil import free_port
    from rtlab.errors import RtlabError
    from rtlab.lava import dispatch

    assert shutil.which(dispatch.LAVACLI), "lavacli is not installed (env/apt-packages.txt)"
    with pytest.raises(RtlabError, match="did not answer 5 polls in a row.*Connection refused"):
        dispatch.wait("7", uri=f"http://rtlab:token@127.0.0.1:{free_port()}/RPC2", polling=0)


def test_wait_allowance_is_the_jobs_own_timeout_plus_the_queue():
    from rtlab.lava.dispatch import wait_allowance

    assert wait_allowance({"timeouts": {"job": {"minutes": 12}}}) == 12 * 60 + 1800
    assert wait_allowance({"timeouts": {"job": {"hours": 1, "minutes": 1}}}, queue_s=0) == 3660


def test_local_lab_device_template_sets_the_boards_machine():
    """The lab's device-type template pins what the board's env file boots,
    whatever a job's context says (a device dictionary's `set` wins)."""
    from rtlab.lava.boards import load_lava_boards
    from rtlab.lava.lab import device_type_template

    lb = load_lava_boards()["qemu-aarch64"]
    text = device_type_template(lb)
    assert "{% extends 'qemu.jinja2' %}" in text
    assert "{% set arch = 'arm64' %}" in text and "{% set machine = 'virt' %}" in text
    assert "{% set cpu = 'cortex-a57' %}" in text and "{% set no_kvm = True %}" in text
    assert '"-smp 2"' in text and "-initrd" not in text


def test_local_lab_takes_the_twins_and_uboot_boards_as_lava_run_runs_them(tmp_path):
    """`lab up --board`: any board that runs here gets a device of its own
    device type; a twin's or U-Boot board's template is its lava-run
    dictionary, with the TFTP server's address of its --dispatcher file
    written where LAVA substitutes {SERVER_IP} (the lab's worker has no
    per-board dispatcher file); jobs for them carry the board's tag, since
    boards share device types."""
    import jinja2
    import yaml

    from rtlab.errors import RtlabError
    from rtlab.lava.boards import load_lava_boards
    from rtlab.lava.lab import LocalLavaLab, device_type_template

    assert sorted(LocalLavaLab(tmp_path).lab_boards()) == ["qemu-aarch64", "qemu-x86_64"]
    lab = LocalLavaLab(tmp_path, boards=["twin-rk356x", "twin-imx6q"])
    assert {n: lb.device_type for n, lb in lab.lab_boards().items()} == \
        {"twin-rk356x": "qemu-uboot-aarch64", "twin-imx6q": "qemu"}
    with pytest.raises(RtlabError, match="rk3568-rock-3a"):  # a real board needs its lab
        LocalLavaLab(tmp_path, boards=["rk3568-rock-3a"]).lab_boards()
    lb = load_lava_boards()["twin-rk356x"]
    text = device_type_template(lb)
    assert "{SERVER_IP}" in lb.device.read_text() and "{SERVER_IP}" not in text
    rendered = yaml.safe_load(jinja2.Template(text).render(extra_kernel_args="quiet"))  # as the server does
    commands = rendered["actions"]["boot"]["methods"]["u-boot"]["ramdisk"]["commands"]
    assert "setenv serverip 10.0.2.2" in commands  # QEMU's user network: its TFTP server
    assert rendered["commands"]["connect"] == yaml.safe_load(lb.device.read_text())["commands"]["connect"]
