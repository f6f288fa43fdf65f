"""A latency history in a real influxd, for `rtlab regressions` and the
regressions dashboard: a real cyclictest output of this machine with a
seeded run-to-run spread, published by the production code as one run per
commit (two repeats each), with a
regression injected at a known commit by scaling the latencies of the runs
from that commit on (every histogram bucket, min/avg/max: the shape of the
real output kept, only slower). A second board has both a nightly pinned
reference kernel (campaign `reference`, two runs a night) that drifts
and commit runs that jump in the same window: lab drift.

    local         commits c00..c13, x3 from c07 on           -> active regression, c06..c07
    rk3568-lab    reference nightly x2 from night 5 on and
                  commits x2 from the same day               -> lab drift suspected
"""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
from datetime import datetime, timedelta, timezone
from pathlib import Path

from rtlab.core.model import Histogram, JobResult, Measurement, MeasurementKey, RunResult, ThreadResult, ToolOutput
from rtlab.parsers import parse_file
import rtlab.suites  # noqa: F401  the suites register their tools' parsers (rtlab.parsers.registry)

GOOD_COMMITS, BAD_COMMITS = 7, 7
STEP = 3


def real_outputs(tmp: Path, n: int = 4) -> list[ToolOutput]:
    """n real cyclictest runs of this machine (1 s each, concurrently)."""
    assert shutil.which("cyclictest"), "rt-tests not installed (env/apt-packages.txt)"
    procs = []
    for i in range(n):
        out = tmp / f"cyclictest-{i}.json"
        procs.append((out, subprocess.Popen(["cyclictest", "-q", "-D", "1", "-i", "500", "-h", "20000",
                                             f"--json={out}"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True)))
    outs = []
    for out, p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.exists(), err
        outs.append(parse_file(str(out)))
    return outs


def scaled(out: ToolOutput, k: float) -> ToolOutput:
    """The same output, every latency k times (histogram buckets included,
    samples of buckets that land on one bucket added up)."""
    o = ToolOutput.from_json(out.to_json(with_histogram=True))
    threads = []
    for t in o.threads:
        h = t.histogram
        hist = None
        if h is not None:
            counts: dict[int, int] = {}
            for i, c in h.counts.items():
                j = int(round(i * k))
                counts[j] = counts.get(j, 0) + c
            hist = Histogram(counts=counts, bucket_us=h.bucket_us,
                             size=(int(round(h.size * k)) if h.size else None), overflows=h.overflows)
        threads.append(ThreadResult(t.thread, t.cpu, t.cycles, t.min_us * k, t.avg_us * k, t.max_us * k,
                                    t.overflows, hist, dict(t.extra)))
    o.threads = threads
    return o


def _run(run_id: str, started: datetime, board: str, sha: str, out: ToolOutput, campaign: str) -> RunResult:
    from rtlab.plan.budgets import Budget
    from rtlab.judge.gate import judge

    job = JobResult(board=board, variant="rt", arch="x86_64", budget_class="local",
                    kernel={"release": "6.12.0-rt5"}, duration_s=3.0)
    m = Measurement(MeasurementKey(board, "rt", "cyclictest", "idle"), out, raw=["cyclictest.json"])
    judge(m, Budget(max_us=1e6))
    job.measurements.append(m)
    return RunResult(run_id=run_id, started=started.strftime("%Y-%m-%dT%H:%M:%SZ"), campaign=campaign,
                     commit={"sha": sha, "subject": f"commit {sha[:3]}", "branch": "rt/next",
                             "pipeline_source": "schedule" if campaign == "reference" else "push"},
                     jobs=[job])


def history_runs(outputs: list[ToolOutput], now: datetime, scale: float = 1.0) -> dict[str, list[RunResult]]:
    """The runs of both boards, and the commit shas, by role; the history
    spans 10 days (times `scale`) up to `now`."""
    runs: list[RunResult] = []
    t0 = now - timedelta(days=10) * scale

    def at(**kw) -> datetime:
        return (t0 + timedelta(**kw) * scale).replace(microsecond=0)

    n = GOOD_COMMITS + BAD_COMMITS
    shas = [f"c{i:02d}" + "0" * 37 + f"{i:01x}"[-1] for i in range(n)]
    # One real output (the median p99 of this machine's runs) with a seeded
    # run-to-run spread of -20..+25 %: the shape is this machine's, the noise
    # the same every time. Cycling the raw outputs made the test the host's:
    # under load their p99 spread 10x (41-506 us measured), enough to hide
    # or misplace the x2 steps now and then (one CI failure in ~6).
    base = sorted(outputs, key=lambda o: o.combined().percentiles_us.get("99") or 0)[len(outputs) // 2]
    rng = np.random.default_rng(20261123)

    def run_of(k: float) -> ToolOutput:
        return scaled(base, k * float(rng.uniform(0.8, 1.25)))

    for i, sha in enumerate(shas):
        for rep in range(2):
            t = at(hours=12 * i, minutes=10 * rep)
            runs.append(_run(f"hist-local-{i}-{rep}", t, "local", sha,
                             run_of(STEP if i >= GOOD_COMMITS else 1), "push"))
    # the lab board: nightly reference (pinned kernel) and commits, both
    # slower from day 5 on (the lab changed, not the kernel)
    for night in range(10):
        for rep in range(2):
            runs.append(_run(f"hist-ref-{night}-{rep}", at(days=night, hours=2, minutes=10 * rep),
                             "rk3568-lab", "f" * 40, run_of(2 if night >= 5 else 1), "reference"))
    for i in range(20):
        t = at(hours=12 * i, minutes=30)
        runs.append(_run(f"hist-lab-{i}", t, "rk3568-lab", f"d{i:02d}" + "0" * 37,
                         run_of(2 if t >= at(days=5) else 1), "push"))
    return {"runs": runs, "shas": shas}


def seeded_store(tmp_path_factory, name: str, budget_of=None):
    """A LocalInfluxd of its own (a free loopback port) with the history
    published into database *name*; *budget_of(outputs)* the Budget every
    measurement is judged against (default: publish_history's). Returns
    (server, store facts: url, db, client, shas, state, tmp, budget); stop the server."""
    from rtlab.store import InfluxV1, LocalInfluxd

    state = tmp_path_factory.mktemp("rtlab-state")
    srv = LocalInfluxd(state)
    srv.start()
    client = InfluxV1(srv.url, name)
    client.create_database()
    tmp = tmp_path_factory.mktemp("hist")
    outputs = real_outputs(tmp)
    budget = budget_of(outputs) if budget_of else None
    h = publish_history(outputs, srv.url, name, tmp, budget=budget)
    return srv, {"url": srv.url, "db": name, "client": client, "shas": h["shas"], "state": state, "tmp": tmp,
                 "budget": budget}


def publish_history(outputs: list[ToolOutput], url: str, database: str, tmp: Path, scale: float = 1.0,
                    budget=None) -> dict:
    """Publish the history with `rtlab publish`'s code; returns the shas.
    *budget* (rtlab.core.model.Budget): every measurement judged against it
    instead of the default's far-away 1 s max (a budget line on the plots)."""
    from rtlab.judge.gate import judge
    from rtlab.store import StoreConfig, publish_run

    h = history_runs(outputs, datetime.now(timezone.utc).replace(microsecond=0), scale)
    if budget is not None:
        for run in h["runs"]:
            for m in run.measurements():
                judge(m, budget)
    cfg = StoreConfig(url=url, database=database, spool_dir=str(tmp / "spool")).normalized()
    verdicts = regression_verdicts(h["runs"])
    for run in h["runs"]:
        d = tmp / "results" / run.run_id
        d.mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(json.dumps(run.to_json()))
        if run.run_id in verdicts:  # what `rtlab run --repeat-until-decided` leaves beside it
            (d / "compare.json").write_text(json.dumps(verdicts[run.run_id]))
        rep = publish_run(d, progress=lambda s: None, config=cfg)
        assert rep.ok, rep.errors
    h["verdicts"] = verdicts
    return h


#: the local board's commits are judged against their 3 predecessors (6
#: runs, 3 sessions) by the regression verdict, 2 runs each at one look
VERDICT_POLICY_LOOKS = (2,)


def regression_verdicts(runs: list[RunResult]) -> dict[str, dict]:
    """Run id -> the compare.json of its commit's regression verdict (the
    production comparison), for the local board's commits from the fourth
    on: what the store's ``detectable`` field and the dashboards' panel of
    what the verdict can see are drawn from."""
    from rtlab.plan.policy import Policy
    from rtlab.verdict.compare import compare_runs

    import dataclasses

    def one_range(r: RunResult) -> RunResult:
        """The run with its histograms' range the history's widest: scaled()
        scales the range with the latencies, which would make every pair of
        runs differently made (a run parameter) for the verdict."""
        c = RunResult.from_json(r.to_json())
        for m in c.measurements():
            for t in m.output.threads:
                if t.histogram is not None:
                    t.histogram = dataclasses.replace(t.histogram, size=widest)
        return c
    widest = max((t.histogram.size or 0) for r in runs for m in r.measurements() for t in m.output.threads
                 if t.histogram is not None)
    local = [one_range(r) for r in runs if r.jobs[0].board == "local"]
    by_sha: dict[str, list[RunResult]] = {}
    for r in local:
        by_sha.setdefault(r.commit["sha"], []).append(r)
    shas = list(by_sha)
    policy = Policy(min_runs=2, looks=VERDICT_POLICY_LOOKS, source="regression_history")
    out = {}
    for i in range(3, len(shas)):
        base = [r for sha in shas[i - 3:i] for r in by_sha[sha]]
        doc = compare_runs(base, by_sha[shas[i]], policy).to_json()
        for r in by_sha[shas[i]]:
            out[r.run_id] = doc
    return out
