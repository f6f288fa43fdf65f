"""`rtlab run --resume RUN_DIR` continues only what it can vouch for (#40): a
checkpoint made with other parameters, a corrupt or type-confused one, a run
still measuring, a budgets.yaml linked out, an unbounded job.json or run.json
are refused before anything boots (exit 2, the file and key named), and what
was measured stays as it was. `rtlab gate` and `rtlab report` of the broken-off
run refuse a corrupt or type-confused checkpoint the same way (issue 47: a
string `segments` ended in "internal error: AttributeError")."""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import rtlab, rtlab_inproc

PARAMS = {"interval_us": 1000, "duration_s": 30, "checkpoint_s": 5, "histogram_us": 2000, "priority": 90}


def campaign_text(params: dict) -> str:
    return ("name: soak-resume\nbudgets: budgets.yaml\nboards: [local]\nsuites:\n"
            f"  - name: cyclictest-soak\n    loads: [idle]\n    params: {json.dumps(params)}\n")


def state_for(tmp_path: Path, params: dict) -> dict:
    """The checkpoint a run of *params* writes after two segments (its own code makes it)."""
    from rtlab.plan.campaign import load_campaign
    from rtlab.soak import checkpoint as soak
    from rtlab.suites import SUITES

    c = tmp_path / "other" / "campaign.yaml"
    c.parent.mkdir(parents=True, exist_ok=True)
    (c.parent / "budgets.yaml").write_text(BUDGETS)
    c.write_text(campaign_text(params))
    (job,) = load_campaign(c).jobs()
    (run,) = job.suites
    suite = SUITES[run.suite]
    lengths = suite.segments(run)
    st = soak.new_state(int(run.params["duration_s"]), int(run.params["checkpoint_s"]),
                        float(run.params["interval_us"]), " ".join(suite.segment_command(run, lengths[0], job.board)))
    for i in range(2):
        st["segments"].append({"index": i, "duration_s": lengths[i], "elapsed_s": lengths[i], "gap_before_s": None,
                               "cycles": 100, "max_us": 40, "threads": []})
    st["threads"] = [{"thread": 0, "cpu": 0, "cycles": 200, "min_us": 2, "avg_us": 3, "max_us": 40, "overflows": 0,
                      "histogram": {"bucket_us": 1, "size": 2000, "overflows": 0, "counts": {"3": 199, "40": 1}}}]
    st["done_s"] = sum(lengths[:2])
    return st


BUDGETS = "budgets:\n  local: {'*': {'*': {'*': {max_us: 10000000}}}}\n"


def broken_off_run(tmp_path: Path, state, spec: bool = False) -> Path:
    """A run directory as a killed `rtlab run` of PARAMS leaves it: campaign
    and budgets kept, two segments and the checkpoint *state*; with *spec*
    the job spec and the soak's exit record too (what `rtlab gate` and
    `rtlab report` rebuild a killed run from: rtlab.run.recover)."""
    d = tmp_path / "results" / "20261128T000000Z"
    m = d / "local" / "host" / "cyclictest-soak@idle"
    for i in range(2):
        (m / "segments" / f"{i:04d}").mkdir(parents=True)
        (m / "segments" / f"{i:04d}" / "cyclictest.json").write_text(f'{{"segment": {i}}}\n')
    (d / "campaign.yaml").write_text(campaign_text(PARAMS))
    (d / "budgets.yaml").write_text(BUDGETS)
    (d / "local" / "host" / "events.jsonl").write_text('{"event": "measuring"}\n')
    (m / "checkpoint.json").write_text(state if isinstance(state, str) else json.dumps(state))
    if spec:
        from rtlab.plan.campaign import load_campaign
        from rtlab.run.results import JobSpec
        (job,) = load_campaign(d / "campaign.yaml", budgets=d / "budgets.yaml").jobs()
        JobSpec(job_dir=d / "local" / "host", board=job.board, variant=job.variant, boot_args="",
                suites=list(job.suites)).write()
        (m / "exit.json").write_text(json.dumps({"exit_code": 0, "elapsed_s": 10, "segments": 2,
                                                 "checkpointed": True}) + "\n")
    return d


def digests(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*")) if not p.is_symlink() and p.name != "run-started.json"}


def resume(d: Path, **env):
    return rtlab("run", "--resume", d, "--no-publish", timeout=300, env=env)


def refused(res, d: Path, before: dict, *words: str) -> None:
    err = res.stderr.strip()
    assert res.returncode == 2, res.stdout + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "internal error" not in err, err
    assert all(w in err for w in words), err
    assert digests(d) == before  # every segment, the checkpoint and events.jsonl as they were
    assert not (d / "run.json").exists()


OTHER = {"interval": {"interval_us": 500}, "priority": {"priority": 80}, "histogram": {"histogram_us": 400},
         "segment length": {"checkpoint_s": 6}, "planned length": {"duration_s": 40}}


@pytest.mark.parametrize("change", OTHER.values(), ids=OTHER.keys())
def test_a_checkpoint_made_with_other_parameters_is_refused(tmp_path, change):
    d = broken_off_run(tmp_path, state_for(tmp_path, {**PARAMS, **change}))
    before = digests(d)
    refused(resume(d), d, before, "checkpoint.json", "--resume", "the checkpoint was made with", "refused")


def test_the_checkpoint_of_these_parameters_is_accepted_by_the_same_check(tmp_path):
    """The refusals above are the parameters', not the file's: the check
    passes this run's own checkpoint."""
    from rtlab.plan.campaign import load_campaign
    from rtlab.run.resume import _check_checkpoints

    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS))
    (job,) = load_campaign(d / "campaign.yaml", budgets=d / "budgets.yaml").jobs()
    _check_checkpoints(d / "local" / "host", job)


CORRUPT = {
    "truncated": ('{"version": 1, "planned_s": 30, "segm', "invalid JSON"),
    "segments a string": ({"segments": "abc"}, "segments: must be a list"),
    "a thread's cycles a string": ({"threads": [{"thread": 0, "cycles": "x", "min_us": 1, "avg_us": 1,
                                                 "max_us": 1}]}, "threads[0].cycles: must be an integer"),
    "a segment past the plan": ({"segments": [{"index": 99, "duration_s": 5}]}, "segments[0].index"),
    "a segment twice": ({"segments": [{"index": 0, "duration_s": 5}, {"index": 0, "duration_s": 5}]},
                        "recorded twice"),
    "a list, not an object": ("[1, 2]", "must be an object"),
    "negative max in a thread": ({"threads": [{"thread": 0, "cpu": 0, "cycles": 10, "min_us": 1, "avg_us": 1,
                                               "max_us": -1}]}, "threads[0].max_us"),
}


@pytest.mark.parametrize("change,why", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_or_type_confused_checkpoint_is_refused_and_kept(tmp_path, change, why):
    state = change if isinstance(change, str) else {**state_for(tmp_path, PARAMS), **change}
    d = broken_off_run(tmp_path, state)
    before = digests(d)
    refused(resume(d), d, before, "checkpoint.json", why)


@pytest.mark.parametrize("command", ["gate", "report"])
@pytest.mark.parametrize("change,why", [CORRUPT[k] for k in ("segments a string", "a thread's cycles a string",
                                                             "a list, not an object", "truncated")],
                         ids=["segments a string", "cycles a string", "a list", "truncated"])
def test_gate_and_report_refuse_a_corrupt_checkpoint_as_resume_does(tmp_path, capsys, command, change, why):
    state = change if isinstance(change, str) else {**state_for(tmp_path, PARAMS), **change}
    d = broken_off_run(tmp_path, state, spec=True)
    before = digests(d)
    rc, err = rtlab_inproc(command, d, capsys=capsys)
    err = err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "internal error" not in err and "Traceback" not in err, err
    assert "checkpoint.json" in err and why in err, err
    assert digests(d) == before and not (d / "run.json").exists()


@pytest.mark.parametrize("command", ["gate", "report"])
def test_gate_and_report_still_judge_a_sound_checkpoint(tmp_path, capsys, command):
    """The refusals above are the checkpoint's: the same broken-off run with
    this run's own checkpoint is judged (incomplete: never PASS)."""
    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS), spec=True)
    rc, err = rtlab_inproc(command, d, capsys=capsys)
    out = capsys.readouterr().out
    assert rc == (2 if command == "gate" else 0), err
    assert "PASS" not in out.split("verdict")[-1] and "internal error" not in err, out + err


def test_a_run_still_measuring_is_not_resumed(tmp_path):
    from rtlab.core.procutil import process_start
    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS))
    live = subprocess.Popen(["sleep", "300"])
    try:
        (d / "run-started.json").write_text(json.dumps({"run_id": d.name, "campaign": "soak-resume", "pid": live.pid,
                                                        "pid_start": process_start(live.pid),
                                                        "started": "2026-11-28T00:00:00Z"}))
        before = digests(d)
        refused(resume(d), d, before, "run-started.json", "still measuring", str(live.pid))
        assert (d / "local" / "host" / "events.jsonl").is_file()
    finally:
        live.kill()
        live.wait()


def test_budgets_yaml_linked_out_of_the_run_is_not_followed(tmp_path):
    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS))
    loose = tmp_path / "elsewhere.yaml"
    loose.write_text(BUDGETS)
    (d / "budgets.yaml").unlink()
    (d / "budgets.yaml").symlink_to(loose)
    before = digests(d)
    refused(resume(d), d, before, "budgets.yaml", "leads outside")


@pytest.mark.parametrize("name", ["job.json", "run.json"])
def test_job_and_run_json_are_read_bounded(tmp_path, name):
    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS))
    where = d / "local" / "host" if name == "job.json" else d
    (where / name).write_bytes(b" " * (2 * 1024 * 1024))
    before = digests(d)
    res = resume(d, RTLAB_INPUT_MAX_MB="1")
    err = res.stderr.strip()
    assert res.returncode == 2 and name in err and "over the limit" in err, err
    assert digests(d) == before


def test_job_json_a_device_is_refused_unread(tmp_path):
    d = broken_off_run(tmp_path, state_for(tmp_path, PARAMS))
    os.mkfifo(d / "local" / "host" / "job.json")
    res = resume(d)
    err = res.stderr.strip()
    assert res.returncode == 2 and "job.json" in err and "not a regular file" in err, err
