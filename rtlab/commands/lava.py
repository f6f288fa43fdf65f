"""`rtlab lava ...`: the same boards, variants and suites as LAVA jobs.

    rtlab lava render  [--campaign F] [--out DIR]     campaign -> LAVA job definitions (validated)
    rtlab lava validate JOB...  [--pipeline]           LAVA's schema (and lava-run --validate)
    rtlab lava run     JOB|DIR... [--out DIR]          Debian's lava-run here, then ingest + gate
    rtlab lava submit  JOB|DIR... [--wait]             to a LAVA server (lavacli)
    rtlab lava fetch   ID...                           a server's job -> a record directory
    rtlab lava ingest  RECORD...                       LAVA results -> results/<run_id>/run.json
    rtlab lava lab     up|down|status                  a LAVA lab here: PostgreSQL, lava-server, lava-worker

`run`, `fetch --ingest` and `ingest` print the comparison table and exit like
`rtlab gate`: 0 all within budget, 1 a budget broke, 2 infra (incomplete
job, failed boot, missing declared measurements) or bad input.
"""
from __future__ import annotations

import functools
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Optional

import yaml

from .. import ROOT
from ..plan.campaign import load_campaign
from ..errors import InputError, RtlabError
from ..lava import dispatch
from ..lava.dispatch import record_name, run_job, validate_pipeline
from ..lava.ingest import ingest_records, load_record
from ..lava.boards import load_lava_boards
from ..lava.lab import DEVICE_TYPE, LocalLavaLab
from ..lava.render import dump_job, load_job, render_campaign
from ..lava.schema import validate_files
from ..core.model import EXIT_CODE
from ..report.table import comparison_table
from ..run.results import new_run_id
from ..run.runner import Progress
from .run import commit_from_env

RESULTS = "results"


def register(sub):
    p = sub.add_parser("lava", help="render, run (lava-run), submit, fetch and ingest LAVA jobs",
                       description=__doc__.split("\n\n")[0])
    lsub = p.add_subparsers(dest="lava_command", required=True, metavar="SUBCOMMAND")

    r = lsub.add_parser("render", help="write one LAVA job per board x variant x suite x load")
    r.add_argument("--campaign", "-c", help="campaign file or preset (default: campaigns/default.yaml)")
    r.add_argument("--board", "-b", action="append",
                   help="jobs for this board instead of the campaign's `boards:` (repeatable; any board of "
                        "lava/boards.yaml, lab boards too)")
    r.add_argument("--variant", "-V", action="append",
                   help="jobs for this variant instead of the campaign's `variants:` (repeatable)")
    r.add_argument("--out", type=Path, help="output directory (default: results/lava-jobs/<campaign>)")
    r.add_argument("--artifacts-url", metavar="URL",
                   help="base URL the lab serves the artifacts directory from (default: file:// paths of the "
                        "image cache, which only a worker on this machine's disk can read)")
    r.add_argument("--artifacts-dir", type=Path, metavar="DIR",
                   help="with --artifacts-url: the directory that URL serves, where the jobs' kernels and images "
                        "are linked, named by content (default: <out>/artifacts)")
    r.add_argument("--no-lab-boards", action="store_true", help="only the campaign's boards (no lava/boards.yaml lab boards)")
    r.add_argument("--no-validate", action="store_true", help="skip LAVA's schema check (needs Debian's lava-common)")
    r.add_argument("--commit", default=None,
                   help="the kernel commit the jobs measure, in their names and metadata (default: $RTLAB_KERNEL_SHA)")
    r.add_argument("--kernel-tree", type=Path, metavar="PATH",
                   help="the jobs boot kernels built from this tree (the commit under test; rtlab's kernel "
                        "cache) instead of Debian's; a variant that does not build is judged FAIL at ingest")
    r.set_defaults(func=render)

    v = lsub.add_parser("validate", help="check job files against LAVA's own schema (lava-common)")
    v.add_argument("jobs", nargs="+", type=Path, metavar="JOB|DIR", help="job files, or a `lava render` directory")
    v.add_argument("--pipeline", action="store_true",
                   help="also build the pipeline with lava-run --validate and the board's device dictionary (root)")
    v.set_defaults(func=validate)

    u = lsub.add_parser("run", help="run jobs with Debian's lava-run on this machine, then ingest and gate")
    u.add_argument("jobs", nargs="+", type=Path, metavar="JOB|DIR", help="job files, or a `lava render` directory")
    u.add_argument("--board", "-b", action="append", help="only jobs of this board (repeatable)")
    u.add_argument("--variant", "-V", action="append", help="only jobs of this variant (repeatable)")
    u.add_argument("--device", type=Path, help="device dictionary (default: the board's, lava/devices/)")
    u.add_argument("--out", type=Path, help="record directories (default: results/lava-runs/<time>)")
    u.add_argument("--results", type=Path, help="results root for the ingested run (default: results/)")
    u.add_argument("--budgets", type=Path,
                   help="budget file (default: the job spec's when it is one of the lab's budgets/, "
                        "else budgets/default.yaml)")
    u.add_argument("--no-ingest", action="store_true", help="only run; ingest later with rtlab lava ingest")
    u.add_argument("--lab-boards", action="store_true",
                   help="also run jobs of lab boards (needs their lab: serial server, PDU, TFTP)")
    u.add_argument("--verbose", "-v", action="store_true", help="show the board console")
    u.set_defaults(func=run)

    s = lsub.add_parser("submit", help="submit jobs to a LAVA server (lavacli)")
    s.add_argument("jobs", nargs="+", type=Path, metavar="JOB|DIR", help="job files, or a `lava render` directory")
    _server_args(s)
    s.add_argument("--wait", action="store_true", help="wait for the jobs, fetch and ingest them")
    s.add_argument("--out", type=Path, help="record directories for --wait (default: results/lava-fetch)")
    s.add_argument("--results", type=Path, help="results root (default: results/)")
    s.add_argument("--budgets", type=Path,
                   help="with --wait: budget file (default: the job spec's when it is one of the lab's "
                        "budgets/, else budgets/default.yaml)")
    s.set_defaults(func=submit)

    f = lsub.add_parser("fetch", help="fetch finished jobs from a LAVA server into record directories")
    f.add_argument("job_ids", nargs="+", metavar="ID", help="LAVA job ids on the server")
    _server_args(f)
    f.add_argument("--out", type=Path, help="where records go (default: results/lava-fetch)")
    f.add_argument("--ingest", action="store_true", help="ingest the records and gate")
    f.add_argument("--results", type=Path, help="results root (default: results/)")
    f.add_argument("--budgets", type=Path,
                   help="with --ingest: budget file (default: the job spec's when it is one of the lab's "
                        "budgets/, else budgets/default.yaml)")
    f.set_defaults(func=fetch)

    i = lsub.add_parser("ingest", help="turn LAVA records into an rtlab results directory, report and gate")
    i.add_argument("records", nargs="+", type=Path, metavar="RECORD",
                   help="record directories (job.yaml + lava-run.log / log.yaml / results.yaml), or a tree of them")
    i.add_argument("--results", type=Path, help="results root (default: results/)")
    i.add_argument("--run-id", help="name of the run directory (default: <time>-lava)")
    i.add_argument("--budgets", type=Path,
                   help="budget file (default: the job spec's when it is one of the lab's budgets/, "
                        "else budgets/default.yaml)")
    i.set_defaults(func=ingest)

    lab = lsub.add_parser("lab", help="a LAVA lab on this machine (PostgreSQL, lava-server, lava-worker; loopback)")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, metavar="ACTION")
    for name, func, text in (("up", lab_up, "start it (idempotent): server, scheduler, worker, devices, health checks"),
                             ("down", lab_down, "stop every process of the lab"),
                             ("status", lab_status, "its processes and its devices' health")):
        sp = lab_sub.add_parser(name, help=text)
        sp.add_argument("--dir", type=Path, help="lab directory (default: $RTLAB_LAVA_LAB_DIR, else "
                                                 "/var/lib/rtlab/lava-lab/<hash of this checkout>-lab)")
        sp.set_defaults(func=func)
        if name == "up":
            sp.add_argument("--board", "-b", action="append",
                            help="this board gets a device (repeatable; any board of lava/boards.yaml that "
                                 "runs here: twins, U-Boot boards; default: every QEMU board)")
            sp.add_argument("--no-health-checks", action="store_true",
                            help="no health check jobs (devices stay Unknown until their first job)")
        if name == "status":
            sp.add_argument("--json", action="store_true", help="print the status as one JSON object")


def _server_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--identity", "-i", help="lavacli identity (~/.config/lavacli.yaml)")
    g.add_argument("--uri", help="LAVA server RPC2 URI (https://user:token@host/RPC2)")
    g.add_argument("--local-lab", action="store_true",
                   help="the LAVA lab on this machine (`rtlab lava lab up`; its --dir from $RTLAB_LAVA_LAB_DIR)")
    p.add_argument("--timeout", type=int, default=0, metavar="S",
                   help="--wait: give up on a job after S s (default: its own job timeout + 30 min in the queue)")


def _server(args) -> tuple[Optional[str], Optional[str]]:
    """(identity, uri) for lavacli."""
    if getattr(args, "local_lab", False):
        st = LocalLavaLab().read_state()
        if not st.token or not st.running("gunicorn"):
            raise RtlabError("the local LAVA lab is not up: `rtlab lava lab up`")
        return None, st.uri
    return args.identity, args.uri


def _numbered(progress, prefix: str, msg: str) -> None:
    progress(f"{prefix} {msg}")


def _progress():
    return Progress()


def _build_failures(paths, boards=None, variants=None) -> list[dict]:
    """The board/variant pairs of rendered directories (index.json) whose
    kernel did not build from the commit under test: no job, a FAIL to ingest."""
    out = []
    for p in map(Path, paths):
        index = p / "index.json"
        if p.is_dir() and index.is_file():
            out += [b for b in json.loads(index.read_text()).get("build_failed", [])
                    if (not boards or b["board"]["name"] in boards)
                    and (not variants or b["variant"]["name"] in variants)]
    return out


def _job_files(paths, boards=None, variants=None) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            index = p / "index.json"
            if index.is_file():
                entries = json.loads(index.read_text())["jobs"]
                files += [p / e["file"] for e in entries]
            else:
                files += sorted(q for q in p.rglob("*.yaml") if q.name != "index.yaml")
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(p, "no such job file or directory")
    if boards or variants:
        keep = []
        for f in files:
            _, spec = load_job(f)
            if boards and spec["board"]["name"] not in boards:
                continue
            if variants and spec["variant"]["name"] not in variants:
                continue
            keep.append(f)
        files = keep
    return files


def _finish(run, run_dir) -> int:
    print()
    print(comparison_table(run))
    print(f"\nresults: {run_dir}")
    return EXIT_CODE[run.verdict]


def render(args) -> int:
    progress = _progress()
    if args.artifacts_dir is not None and not args.artifacts_url:
        raise InputError("--artifacts-dir", "only with --artifacts-url (the URL that serves it)")
    if args.artifacts_url and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", args.artifacts_url):
        raise InputError("--artifacts-url", f"{args.artifacts_url!r} is not an http:// or https:// URL "
                                            "(a LAVA worker fetches the jobs' images from it)")
    campaign = load_campaign(args.campaign, variants=args.variant)
    out = args.out or Path(RESULTS) / "lava-jobs" / campaign.name
    commit = args.commit if args.commit is not None else commit_from_env().get("sha", "")
    if args.kernel_tree is not None and not commit:
        from ..kernel.tree import tree_state

        commit = tree_state(args.kernel_tree).commit or ""
    index = render_campaign(campaign, out, boards=args.board, lab_boards=not args.no_lab_boards,
                            artifacts_url=args.artifacts_url, artifacts_dir=args.artifacts_dir,
                            progress=progress, commit=commit,
                            kernel_tree=args.kernel_tree)
    for n in index["not_available"]:
        progress(f"  not available: {n['board']}/{n['variant']}: {n['reason']}")
    for s in index["skipped_boards"]:
        progress(f"  skipped board {s['board']}: {s['reason']}")
    for s in index["not_rendered"]:
        progress(f"  not rendered: {s['board']}/{s['variant']}/{s['suite']}: {s['reason']}")
    for b in index["build_failed"]:
        progress(f"  kernel did not build: {b['board']['name']}/{b['variant']['name']}: {b['error']}")
    if args.no_validate or not index["jobs"]:
        return 0
    results, version = validate_files([out / j["file"] for j in index["jobs"]])
    bad = {k: e for k, e in results.items() if e}
    progress(f"LAVA schema (lava-common {version}, strict): {len(results) - len(bad)}/{len(results)} jobs valid")
    for f, e in bad.items():
        print(f"  INVALID {f}: {e}")
    print(f"jobs: {out} (index.json)")
    return 2 if bad else 0


def validate(args) -> int:
    files = _job_files(args.jobs)
    results, version = validate_files(files)
    status = 0
    for f, e in results.items():
        print(f"{'ok     ' if not e else 'INVALID'} {f}" + (f": {e}" if e else ""))
        status = status or (2 if e else 0)
    print(f"LAVA schema: lava-common {version}, strict")
    if args.pipeline:
        for job_file in files:
            with tempfile.TemporaryDirectory(prefix="rtlab-lava-validate-") as tmp:
                ok, tail = validate_pipeline(job_file, workdir=Path(tmp))
            print(f"{'pipeline ok' if ok else 'PIPELINE INVALID'} {job_file}" + ("" if ok else f"\n{tail}"))
            status = status or (0 if ok else 2)
    return status


def run(args) -> int:
    progress = _progress()
    files = _job_files(args.jobs, args.board, args.variant)
    selected = []
    for f in files:
        _, spec = load_job(f)
        runs_here = spec["lava"].get("runs_here", spec["lava"]["boot"] == "qemu")
        if not runs_here and not args.lab_boards and args.device is None:
            progress(f"skip {record_name(spec)}: lab board {spec['lava']['board']} "
                     f"(needs its lab: rtlab lava submit, or --lab-boards / --device)")
            continue
        selected.append((f, spec))
    failed = _build_failures(args.jobs, args.board, args.variant)
    if not selected and not failed:
        print("rtlab lava run: no jobs to run", file=sys.stderr)
        return 2
    out = args.out or Path(RESULTS) / "lava-runs" / new_run_id()
    progress(f"lava run: {len(selected)} job(s) -> {out}")
    records = []
    for i, (f, spec) in enumerate(selected, 1):
        outcome = run_job(f, out / record_name(spec), device=args.device, verbose=args.verbose,
                          progress=functools.partial(_numbered, progress, f"[{i}/{len(selected)}]"))
        records.append(outcome.record)
    if args.no_ingest:
        print(f"records: {out}")
        return 0
    run_res, run_dir = ingest_records([load_record(r) for r in records], args.results or Path(RESULTS),
                                      budgets_file=args.budgets, commit=commit_from_env(), build_failed=failed,
                                      progress=progress)
    return _finish(run_res, run_dir)


def _records(paths) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if (p / "job.yaml").is_file():
            found.append(p)
        elif p.is_dir():
            sub = sorted(q.parent for q in p.rglob("job.yaml"))
            if not sub:
                raise InputError(p, "no LAVA record (job.yaml) here nor below")
            found += sub
        else:
            raise InputError(p, "no such record directory")
    return found


def ingest(args) -> int:
    progress = _progress()
    records = [load_record(r) for r in _records(args.records)]
    run_res, run_dir = ingest_records(records, args.results or Path(RESULTS), run_id=args.run_id,
                                      budgets_file=args.budgets, commit=commit_from_env(), progress=progress)
    return _finish(run_res, run_dir)


def submit(args) -> int:
    progress = _progress()
    identity, uri = _server(args)
    files = _job_files(args.jobs)
    # variants whose kernel did not build have no job: judged with the rest
    failed = _build_failures(args.jobs)
    if not files and not failed:
        raise InputError(" ".join(map(str, args.jobs)), "no LAVA jobs to submit")
    ids = dispatch.submit(files, identity=identity, uri=uri) if files else {}
    for f, jid in ids.items():
        print(f"{jid}\t{f}")
    if not args.wait:
        # nothing to wait for, but a variant that did not build is a FAIL now
        for b in failed:
            print(f"FAIL {b['board']['name']}/{b['variant']['name']}: {b['error']}")
        return 1 if failed else 0
    for f, jid in ids.items():
        definition, _ = load_job(Path(f))
        dispatch.wait(jid, identity=identity, uri=uri, timeout_s=args.timeout or dispatch.wait_allowance(definition),
                      progress=progress)
    return _fetch(args, list(ids.values()), ingest=True, build_failed=failed)


def fetch(args) -> int:
    return _fetch(args, args.job_ids, ingest=args.ingest)


def _fetch(args, job_ids, *, ingest: bool, build_failed=()) -> int:
    """Each job's record from the server; with *ingest*, the one results path
    (with *build_failed*: variants whose kernel did not build, FAIL)."""
    progress = _progress()
    identity, uri = _server(args)
    out = args.out or Path(RESULTS) / "lava-fetch"
    records = []
    for jid in job_ids:
        rec = dispatch.fetch(jid, out / f"job-{jid}", identity=identity, uri=uri)
        progress(f"LAVA job {jid} -> {rec}")
        records.append(rec)
    if not ingest:
        return 0
    run_res, run_dir = ingest_records([load_record(r) for r in records], args.results or Path(RESULTS),
                                      budgets_file=args.budgets, commit=commit_from_env(),
                                      build_failed=build_failed, progress=progress)
    return _finish(run_res, run_dir)


def lab_up(args) -> int:
    progress = _progress()
    lab = LocalLavaLab(args.dir, boards=args.board)
    st = lab.up(progress)
    if not args.no_health_checks:
        progress("lava lab: health checks (a boot job per board: rt kernel, kernel facts, 1 s cyclictest)")
        # this call's boards (the checks of earlier `up --board` calls stand)
        lab.write_health_checks(st, render_health_checks(lab.dir / "health-job", sorted(lab.lab_boards()),
                                                         progress))
    lava_boards = load_lava_boards()
    for dev, board in sorted(st.devices.items()):
        dtype = lava_boards[board].device_type if board in lava_boards else DEVICE_TYPE
        progress(f"  device {dev} (device type {dtype}, tag {board})")
    print(f"LAVA lab up: {st.url} (lavacli --uri: see `rtlab lava lab status --json`; "
          f"rtlab lava submit --local-lab)")
    return 0


def lab_down(args) -> int:
    stopped = LocalLavaLab(args.dir).down()
    print(f"LAVA lab down: stopped {', '.join(stopped) if stopped else 'nothing (it was not running)'}")
    return 0


def lab_status(args) -> int:
    lab = LocalLavaLab(args.dir)
    info = lab.status()
    if args.json:
        st = lab.read_state()
        if st.token and all(info["services"].values()):
            info["uri"] = st.uri
        print(json.dumps(info, indent=2))
    else:
        for s, up in info["services"].items():
            print(f"{s:10} {'running' if up else 'stopped'}")
        for d, v in sorted(info.get("devices", {}).items()):
            print(f"device {d}: {v['state']}, health {v['health']} (board {v['board']})")
        if "devices_error" in info:
            print(f"devices: {info['devices_error']}")
    return 0 if all(info["services"].values()) else 3


def render_health_checks(out: Path, boards: list[str], progress) -> dict[str, Path]:
    """Each board's health check: its rt kernel booted, the kernel facts
    checked, cyclictest for 1 s (rendered like any rtlab job)."""
    campaign_file = out / "campaign.yaml"
    out.mkdir(parents=True, exist_ok=True)
    # a campaign names rtlab boards; LAVA-only boards (lava/boards.yaml lab:)
    # come from render's `boards`, which also narrows the campaign's to these
    lava_boards = load_lava_boards()
    named = sorted(b for b in boards if not lava_boards[b].lab) or \
        [next(n for n, lb in lava_boards.items() if not lb.lab)]
    campaign_file.write_text(json.dumps({
        "name": "lava-health", "budgets": str(ROOT / "budgets" / "default.yaml"), "boards": named,
        "variants": ["rt"],
        "suites": [{"name": "cyclictest", "params": {"interval_us": 1000, "duration_s": 1, "histogram_us": 2000},
                    "overrides": {"qemu-tcg": {"histogram_us": 50000}}}]}))
    campaign = load_campaign(campaign_file)
    index = render_campaign(campaign, out / "jobs", boards=sorted(boards), progress=progress)
    found = {e["board"]: out / "jobs" / e["file"] for e in index["jobs"]}
    for job in found.values():
        _relax_timeouts(job)
    missing = sorted(set(boards) - set(found))
    if missing:
        raise RtlabError(f"LAVA lab: no health check job for {', '.join(missing)} "
                         f"({index['not_available'] or index['not_rendered']})")
    return found


#: a health check's timeouts, times the job's own: a check that fails takes
#: the device offline, so it must fail on a broken board, not on a busy host
#: (measured: under load average ~38 on 2 cores a TCG boot job overran its
#: 6 min test timeout and LAVA marked a sound device Bad)
HEALTH_TIMEOUT_FACTOR = 4


def _relax_timeouts(job_file: Path) -> None:
    definition = yaml.safe_load(job_file.read_text())

    def scale(t: dict) -> dict:
        return {k: int(v) * HEALTH_TIMEOUT_FACTOR for k, v in t.items()}

    definition["timeouts"]["job"] = scale(definition["timeouts"]["job"])
    for action in definition["actions"]:
        for body in action.values():
            if isinstance(body, dict) and "timeout" in body:
                body["timeout"] = scale(body["timeout"])
    job_file.write_text(dump_job(definition))
