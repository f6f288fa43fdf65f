"""Benchmark: publish histogram points to a local influxd, end to end.

    .venv/bin/python bench/bench_publish.py [--points 1000000] [--batch-size 5000]

Builds synthetic runs (RunResult objects as `rtlab run` would, each with
THREADS threads of BUCKETS non-empty histogram buckets, one hour apart),
starts Debian's influxd on loopback in a temporary state directory (or uses
--url), and times what ``rtlab publish`` does for them: line protocol
generation, batching, HTTP /write, server ingestion. Prints points per second
and the ratio to the 100,000 points/s target, checks the server holds every
point, and stops the server. A benchmark, not a test: nothing is asserted
beyond "every point arrived".
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtlab.core.model import (Histogram, JobResult, Measurement, MeasurementKey, RunResult,  # noqa: E402
                         ThreadResult, ToolOutput, Verdict)
from rtlab.store import InfluxV1, LocalInfluxd, Session, StoreConfig, rows  # noqa: E402
from rtlab.store.schema import chunks_for_run  # noqa: E402

TARGET = 100_000  # points per second


def make_run(i: int, started: datetime, threads: int, buckets: int) -> RunResult:
    """One run: `threads` cyclictest threads spread over boards, variants, loads."""
    jobs: dict[tuple, JobResult] = {}
    for t in range(threads):
        board, variant, load = f"board{t % 5}", ("rt", "generic")[(t // 5) % 2], ("idle", "hackbench")[(t // 10) % 2]
        job = jobs.setdefault((board, variant), JobResult(board, variant, "arm64", "bench",
                                                          {"release": "6.6.30-rt30"}))
        counts = {b: 1 + (b * 7919 + i) % 1000 for b in range(buckets)}
        th = ThreadResult(t % 4, t % 4, sum(counts.values()), 1.0, 50.0, float(buckets - 1), 0,
                          Histogram(counts, 1.0, buckets, 0))
        key = MeasurementKey(board, variant, f"cyclictest-{t // 20}", load)
        ms = [m for m in job.measurements if m.key == key]
        if ms:
            ms[0].output.threads.append(th)
        else:
            job.measurements.append(Measurement(key, ToolOutput("bench.json", "cyclictest", [th]),
                                                verdict=Verdict.PASS, budget={"max_us": 1e6}))
    return RunResult(f"bench-{i:05d}", started.strftime("%Y-%m-%dT%H:%M:%SZ"), "bench",
                     {"sha": f"{i:040x}", "subject": f"bench commit {i}", "pipeline_source": "schedule"},
                     list(jobs.values()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000, help="histogram points to publish")
    ap.add_argument("--threads", type=int, default=10, help="threads per run")
    ap.add_argument("--buckets", type=int, default=1000, help="non-empty buckets per thread")
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--url", help="an existing InfluxDB 1.x instead of a temporary local influxd")
    args = ap.parse_args(argv)

    per_run = args.threads * args.buckets
    n_runs = max(1, -(-args.points // per_run))
    start = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0) - timedelta(hours=n_runs)
    t0 = time.perf_counter()
    runs = [make_run(i, start + timedelta(hours=i), args.threads, args.buckets) for i in range(n_runs)]
    hist_points = n_runs * per_run
    print(f"{n_runs} runs x {args.threads} threads x {args.buckets} buckets = {hist_points:,} histogram "
          f"points (built in {time.perf_counter() - t0:.1f}s)")

    t0 = time.perf_counter()
    n_lines = sum(len(c) for r in runs for c in chunks_for_run(r))
    gen_s = time.perf_counter() - t0
    print(f"line protocol alone: {n_lines:,} points in {gen_s:.2f}s = {n_lines / gen_s:,.0f} points/s")

    tmp = None
    srv = None
    try:
        if args.url:
            url = args.url
        else:
            tmp = tempfile.mkdtemp(prefix="rtlab-bench-")
            srv = LocalInfluxd(Path(tmp), database="").start()
            url = srv.url
        db = f"bench_{os.getpid()}"
        cfg = StoreConfig(url=url, database=db, batch_size=args.batch_size,
                          spool_dir=str(Path(tmp or tempfile.gettempdir()) / "bench-spool")).normalized()
        sess = Session(cfg, progress=lambda s: None)
        written = 0
        t0 = time.perf_counter()
        for r in runs:
            rep = sess.publish(r, replay=False)
            if rep.spooled or rep.errors:
                print(f"run {r.run_id}: {rep.spooled} points spooled: {rep.errors}")
                return 1
            written += rep.written
        pub_s = time.perf_counter() - t0
        rate = written / pub_s
        print(f"published: {written:,} points ({hist_points:,} histogram) in {pub_s:.2f}s, "
              f"batches of {args.batch_size}")
        print(f"throughput: {rate:,.0f} points/s = {rate / TARGET:.2f} x the {TARGET:,}/s target")
        client = InfluxV1(url, db)
        n = rows(client.query('SELECT count("count") FROM "latency_hist"'))[0]["count"]
        print(f"server holds {n:,} histogram points" + (" (all)" if n == hist_points else " (MISSING SOME)"))
        client.query(f'DROP DATABASE "{db}"')
        return 0 if n == hist_points else 1
    finally:
        if srv is not None:
            srv.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
