"""The InfluxDB schema of rtlab: a RunResult as points.

Documented for humans in ``dashboards/SCHEMA.md`` (keep both in step).

Every point of a run has the run's one timestamp (``RunResult.started``):
publishing a run again writes the same series at the same time, which
InfluxDB treats as an overwrite, never a duplicate. Points that must not
overwrite each other (threads, buckets, repeated measurements) differ in
their tags. Tags are bounded: no commit SHA, run id or pipeline id is a tag
(they are string/integer fields); ``kernel_release`` has the ``-g<sha>``
and ``+``/``-dirty`` suffixes of ``CONFIG_LOCALVERSION_AUTO`` removed.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Optional

from ..plan.budgets import Budget
from ..suites import SUITES
from ..core.model import PERCENTILES, JobResult, Measurement, RunResult, ThreadResult
from .lineproto import Point, _escape_key, escape_measurement, timestamp

LATENCY = "latency"
HIST = "latency_hist"
VERDICT = "verdict"
JOB = "job"
EVENTS = "events"
METRICS = "metrics"
#: a soak's checkpoints as they come (rtlab.store.live), stamped when published
SOAK_PROGRESS = "soak_progress"
MEASUREMENTS = (LATENCY, HIST, VERDICT, JOB, EVENTS, METRICS, SOAK_PROGRESS)
#: the run parameters a verdict row keeps (field ``param_<name>``): what a
#: baseline read back from the store needs to be compared as it was made
RUN_PARAMS = ("duration_s", "interval_us")


#: GitLab ``$CI_PIPELINE_SOURCE`` -> pipeline kind tag
_SOURCES = {
    "merge_request_event": "mr", "external_pull_request_event": "mr", "mr": "mr",
    "push": "push", "schedule": "schedule",
    "trigger": "trigger", "pipeline": "trigger", "parent_pipeline": "trigger",
    "api": "trigger", "web": "trigger", "chat": "trigger", "webide": "trigger",
    "local": "local",
}

#: the signal/IPC tools (the "IPC suites" dashboard selects them by tool): Suite.ipc
IPC_TOOLS = tuple(s.tool for s in SUITES.values() if s.ipc)

UNKNOWN = "unknown"


def pct_field(p: str) -> str:
    """Percentile key of the model ("99.9") -> field name ("p999_us")."""
    return "p" + p.replace(".", "") + "_us"


def pipeline_kind(commit: dict[str, Any]) -> str:
    """``mr|push|schedule|trigger|local`` from the run's commit facts.

    Looks at ``pipeline_kind``, then ``pipeline_source``/``source``
    (GitLab's ``CI_PIPELINE_SOURCE`` values); no pipeline at all is ``local``.
    """
    for key in ("pipeline_kind", "pipeline_source", "ci_pipeline_source", "source"):
        v = commit.get(key)
        if v:
            return _SOURCES.get(str(v).strip().lower(), "trigger")
    return "trigger" if commit.get("pipeline_id") else "local"


_LOCALVERSION_SHA = re.compile(r"-g[0-9a-f]{7,40}(?=$|[-+])")


def kernel_release_tag(release: Optional[str]) -> str:
    """``uname -r`` with per-commit parts removed (bounded tag values)."""
    if not release:
        return UNKNOWN
    r = _LOCALVERSION_SHA.sub("", str(release).strip())
    r = re.sub(r"(-dirty|\+)+$", "", r)
    return r or UNKNOWN


def bucket_label(index: int, bucket_us: float) -> str:
    """Lower bound of a bucket in µs, zero-padded so that tag order
    (lexicographic) is numeric order: ``000002`` < ``000010`` < ``000100``."""
    lo = index * bucket_us
    if float(bucket_us).is_integer():
        return f"{int(round(lo)):06d}"
    decimals = min(9, max(1, len(repr(float(bucket_us)).split(".")[1].rstrip("0"))))
    return f"{lo:0{7 + decimals}.{decimals}f}"


def rfc3339(ts: int, precision: str) -> str:
    """A stored timestamp as the RFC 3339 literal InfluxQL compares with."""
    div = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[precision]
    secs, frac = divmod(ts, div)
    base = datetime.fromtimestamp(secs, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        digits = len(str(div)) - 1
        base += "." + f"{frac:0{digits}d}".rstrip("0")
    return base + "Z"


def _num(x: Any) -> Optional[float]:
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _int(x: Any) -> Optional[int]:
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return int(x)
    try:
        return int(str(x).strip())
    except (TypeError, ValueError):
        return None


def _field_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", str(s)).strip("_").lower() or "value"


class _RunContext:
    """What every point of a run shares."""

    def __init__(self, run: RunResult, precision: str, regression: Optional[dict] = None):
        self.run = run
        self.precision = precision
        #: the regression verdict the run carries (its compare.json), per
        #: key label: outcome, detectable effect, limit (regression_fields)
        self.regression = regression_fields(regression)
        self.time = timestamp(run.started, precision)
        c = run.commit or {}
        self.kind = pipeline_kind(c)
        self.common: dict[str, Any] = {"run_id": run.run_id}
        sha = c.get("sha") or c.get("commit")
        if sha:
            self.common["commit"] = str(sha)
        pid = _int(c.get("pipeline_id"))
        if pid is not None:
            self.common["pipeline_id"] = pid

    def kernel_version(self, job: JobResult) -> Optional[str]:
        v = (self.run.commit or {}).get("kernel_version") or job.kernel.get("release")
        return str(v) if v else None


def _dedup(keys: Iterable[tuple]) -> list[Optional[str]]:
    """For a list of identities, the ``rep`` tag each needs (None for the first)."""
    seen: dict[tuple, int] = {}
    out = []
    for k in keys:
        n = seen.get(k, 0) + 1
        seen[k] = n
        out.append(None if n == 1 else str(n))
    return out


def _with_repeat(repeat: int, dup: Optional[str]) -> Optional[str]:
    if not repeat:
        return dup
    return str(repeat) if dup is None else f"{repeat}.{dup}"


def _budget_fields(budget: Optional[Budget]) -> dict[str, Any]:
    if not budget:
        return {}
    out = {"budget_max_us": _num(budget.max_us)}
    for p, v in budget.percentiles_us.items():
        out["budget_" + pct_field(str(p))] = _num(v)
    return out


def _thread_tags(outputs_threads: list[ThreadResult]) -> list[str]:
    ids = [str(t.thread) for t in outputs_threads]
    reps = _dedup((i,) for i in ids)
    return [i if r is None else f"{i}.{r}" for i, r in zip(ids, reps)]


class _Builder:
    """Produces the points of one run; ``fast_hist`` yields the histogram of
    a thread as one list of lines (the bulk of a run; ~10x faster than
    Point objects)."""

    def __init__(self, run: RunResult, precision: str, regression: Optional[dict] = None):
        self.ctx = _RunContext(run, precision, regression)
        self._pct: dict[int, tuple[ThreadResult, dict]] = {}

    def percentiles(self, t: ThreadResult) -> dict[str, Optional[float]]:
        """The model's percentiles (the gate's definition), computed once per
        thread: the latency and the verdict point of a single-thread output
        need the same ones."""
        hit = self._pct.get(id(t))
        if hit is None or hit[0] is not t:
            hit = self._pct[id(t)] = (t, t.percentiles_us)
        return hit[1]

    def items(self, fast_hist: bool) -> Iterator[Any]:
        run = self.ctx.run
        # a campaign's repeats (JobResult.repeat 1..N) are tagged rep=N, so
        # each repeat is its own series; other duplicates get rep=2, 3...
        job_reps = [_with_repeat(j.repeat, r) for j, r in
                    zip(run.jobs, _dedup((j.board, j.variant, j.repeat) for j in run.jobs))]
        meas = [(j, m) for j in run.jobs for m in j.measurements]
        meas_reps = [_with_repeat(j.repeat, r) for (j, _), r in zip(meas, _dedup(
            (m.key.board or j.board, m.key.variant or j.variant, m.key.suite,
             m.key.load, m.output.tool, j.repeat) for j, m in meas))]
        mi = 0
        for job, job_rep in zip(run.jobs, job_reps):
            yield from self._job_points(job, job_rep)
            for m in job.measurements:
                rep = meas_reps[mi]
                mi += 1
                yield from self._measurement_points(job, m, rep, fast_hist)
        yield self._event(run)

    # -- per job -----------------------------------------------------------
    def _job_tags(self, job: JobResult, rep: Optional[str]) -> dict[str, str]:
        t = {"board": job.board or UNKNOWN, "variant": job.variant or UNKNOWN,
             "arch": job.arch or UNKNOWN,
             "kernel_release": kernel_release_tag(job.kernel.get("release")),
             "pipeline": self.ctx.kind}
        if rep:
            t["rep"] = rep
        return t

    def _job_points(self, job: JobResult, rep: Optional[str]) -> Iterator[Point]:
        ctx = self.ctx
        tags = self._job_tags(job, rep)
        verdict = job.verdict.value
        failed = sum(1 for m in job.measurements if m.verdict and m.verdict.value == "fail")
        infra_m = sum(1 for m in job.measurements if m.verdict and m.verdict.value == "infra")
        fields: dict[str, Any] = dict(ctx.common)
        fields.update({
            "infra": 1 if job.infra_error else 0,
            "verdict": verdict,
            "duration_s": _num(job.duration_s) or 0.0,
            "measurements": len(job.measurements),
            "failed": failed,
            "infra_measurements": infra_m,
            "kernel_version": ctx.kernel_version(job),
        })
        if job.infra_error:
            fields["error"] = str(job.infra_error)
        if job.place_wait_s is not None:
            fields["place_wait_s"] = float(job.place_wait_s)
        jt = dict(tags)
        if job.budget_class:
            jt["budget_class"] = job.budget_class
        yield Point(JOB, jt, fields, ctx.time)

        reasons = []
        if job.infra_error:
            reasons.append(str(job.infra_error))
        for m in job.measurements:
            if m.verdict and m.verdict.value != "pass":
                reasons.extend(f"{m.key.suite}/{m.key.load}: {r}" for r in m.reasons)
        vf = dict(ctx.common)
        vf.update(_verdict_ints(verdict))
        vf["verdict"] = verdict
        vf["reason"] = "; ".join(reasons)[:2000]
        yield Point(VERDICT, dict(tags, scope="job"), vf, ctx.time)

    # -- per measurement ---------------------------------------------------
    def _measurement_tags(self, job: JobResult, m: Measurement, rep: Optional[str]) -> dict[str, str]:
        t = {"board": m.key.board or job.board or UNKNOWN,
             "variant": m.key.variant or job.variant or UNKNOWN,
             "arch": job.arch or UNKNOWN,
             "kernel_release": kernel_release_tag(job.kernel.get("release")),
             "load": m.key.load or UNKNOWN, "suite": m.key.suite or UNKNOWN,
             "tool": m.output.tool or UNKNOWN, "pipeline": self.ctx.kind}
        if rep:
            t["rep"] = rep
        return t

    def _measurement_points(self, job: JobResult, m: Measurement, rep: Optional[str],
                            fast_hist: bool) -> Iterator[Any]:
        ctx = self.ctx
        mtags = self._measurement_tags(job, m, rep)
        budget = _budget_fields(m.budget)
        share = _num(m.share_over_budget)
        kv = ctx.kernel_version(job)
        thread_ids = _thread_tags(m.output.threads)
        for t, tid in zip(m.output.threads, thread_ids):
            tags = dict(mtags, thread=tid)
            if t.cpu is not None:
                tags["cpu"] = str(t.cpu)
            fields: dict[str, Any] = dict(ctx.common)
            fields.update({
                "min_us": _num(t.min_us), "avg_us": _num(t.avg_us), "max_us": _num(t.max_us),
                "cycles": _int(t.cycles),
                "overflows": _int(t.overflows if t.overflows is not None
                                  else (t.histogram.overflows if t.histogram else None)),
                "share_over_budget": share, "kernel_version": kv,
            })
            for p, v in self.percentiles(t).items():
                fields[pct_field(p)] = _num(v)
            fields.update(budget)
            for k, v in (t.extra or {}).items():
                if _num(v) is not None:
                    fields["extra_" + _field_name(k)] = _num(v)
            yield Point(LATENCY, tags, fields, ctx.time)
            if t.histogram and t.histogram.counts:
                yield from self._hist(tags, t, fast_hist)

        if m.verdict is not None:
            # all threads as one: what the gate judged
            allt = m.output.combined() if hasattr(m.output, "combined") else m.output.worst()
            vf = dict(ctx.common)
            vf.update(_verdict_ints(m.verdict.value))
            vf["verdict"] = m.verdict.value
            vf["reason"] = "; ".join(m.reasons)[:2000]
            if allt is not None:
                vf["max_us"] = _num(allt.max_us)
                for p, v in self.percentiles(allt).items():
                    vf[pct_field(p)] = _num(v)
            vf["share_over_budget"] = share
            vf.update(budget)
            # what a baseline read back from the store needs (rtlab.verdict.baseline)
            vf["campaign"] = self.ctx.run.campaign or None
            vf["branch"] = str((self.ctx.run.commit or {}).get("branch") or "") or None
            vf["repeat"] = int(job.repeat or 0)
            vf["budget_class"] = job.budget_class or None
            # the host's steal and stalls while the tool ran (rtlab.core.hostnoise)
            noise = m.host_noise or {}
            vf["host_steal_ms"] = _num(sum(float(v) for v in (noise.get("steal_ms") or {}).values()
                                           if _num(v) is not None)) if noise.get("steal_ms") else None
            vf["host_steal_burst_ms"] = _num(noise.get("burst_ms"))
            vf["host_max_gap_ms"] = _num(noise.get("max_gap_ms"))
            if allt is not None:
                vf["cycles"] = _int(allt.cycles)
                vf["bucket_us"] = _num(allt.histogram.bucket_us) if allt.histogram else None
                # the histogram's range and the samples beyond it: a baseline
                # read back rebuilds the histogram (latency_hist) and knows a
                # percentile among the overflows is at least the range
                vf["hist_size"] = _int(allt.histogram.size) if allt.histogram else None
                vf["overflows"] = _int(allt.histogram.overflows) if allt.histogram else None
            # how long and how often the tool sampled, as asked: a baseline read
            # back compares runs by what they were made with, not by how many
            # samples a loaded host let a TCG guest take (rtlab.verdict.compare)
            for name in RUN_PARAMS:
                vf["param_" + name] = _num((m.params or {}).get(name))
            vf.update(_pwcet_fields((m.output.metrics or {}).get("pwcet")))
            # what the key's regression verdict could see (a board getting
            # noisier shows as its detectable effect rising over time)
            vf.update(ctx.regression.get(m.key.label(), {}))
            yield Point(VERDICT, dict(mtags, scope="measurement"), vf, ctx.time)

        metrics = {_field_name(k): _num(v) for k, v in (m.output.metrics or {}).items()
                   if _num(v) is not None}
        if metrics:
            mf = dict(ctx.common)
            mf.update(metrics)
            yield Point(METRICS, dict(mtags), mf, ctx.time)

    def _hist(self, lat_tags: dict[str, str], t: ThreadResult, fast: bool) -> Iterator[Any]:
        tags = {k: lat_tags[k] for k in HIST_TAGS if k in lat_tags}
        h = t.histogram
        if not fast:
            for idx in sorted(h.counts):
                c = h.counts[idx]
                if c:
                    yield Point(HIST, dict(tags, bucket=bucket_label(idx, h.bucket_us)),
                                {"count": int(c)}, self.ctx.time)
            return
        items = sorted(dict(tags, bucket="").items())
        pre, post = [escape_measurement(HIST)], []  # type: list[str], list[str]
        cur = pre
        for k, v in items:
            if k == "bucket":
                pre.append(",bucket=")
                cur = post
            else:
                cur.append(f",{_escape_key(k)}={_escape_key(v)}")
        head, tail = "".join(pre), "".join(post) + " count="
        ts = f"i {self.ctx.time}"
        bu = h.bucket_us
        counts = h.counts
        if float(bu).is_integer():
            b = int(bu)
            yield [f"{head}{idx * b:06d}{tail}{counts[idx]}{ts}" for idx in sorted(counts) if counts[idx]]
        else:
            yield [f"{head}{bucket_label(idx, bu)}{tail}{counts[idx]}{ts}"
                   for idx in sorted(counts) if counts[idx]]

    # -- per run -----------------------------------------------------------
    def _event(self, run: RunResult) -> Point:
        ctx, c = self.ctx, run.commit or {}
        sha = str(c.get("sha") or c.get("commit") or "")
        subject = str(c.get("subject") or c.get("title") or "")
        short = sha[:12]
        verdict = run.verdict.value
        title = " ".join(x for x in (short, subject) if x) or run.run_id
        lines = [f"verdict {verdict}", f"run {run.run_id}"]
        if c.get("branch"):
            lines.append(f"branch {c['branch']}")
        if c.get("pipeline_id"):
            lines.append(f"pipeline {c['pipeline_id']}")
        if c.get("pipeline_url"):
            lines.append(str(c["pipeline_url"]))
        if c.get("kernel_version"):
            lines.append(f"kernel {c['kernel_version']}")
        failed = sum(1 for j in run.jobs if j.verdict.value == "fail")
        infra = sum(1 for j in run.jobs if j.verdict.value == "infra")
        tags = ["rtlab", ctx.kind, verdict]
        fields = dict(ctx.common)
        fields.update({
            "title": title[:200], "text": " | ".join(lines),
            "tags": ",".join(tags), "verdict": verdict, "started": rfc3339(ctx.time, ctx.precision),
            "jobs": len(run.jobs), "failed_jobs": failed, "infra_jobs": infra,
        })
        if c.get("branch"):
            fields["branch"] = str(c["branch"])
        if subject:
            fields["subject"] = subject[:500]
        et = {"pipeline": ctx.kind}
        if run.campaign:
            et["campaign"] = run.campaign
        return Point(EVENTS, et, fields, ctx.time)


#: tags of latency_hist (fewer than latency: the histogram is the bulk of the
#: data, and arch/kernel_release/pipeline would only multiply its series)
HIST_TAGS = ("board", "variant", "load", "suite", "tool", "thread", "cpu", "rep")

_PCT = {pct_field(p): float for p in PERCENTILES}
_BUDGET = {"budget_max_us": float, **{"budget_" + k: float for k in _PCT}}
_RUN = {"run_id": str, "commit": str, "pipeline_id": int}

#: the catalogue: tag keys and field types of every measurement (``*`` in a
#: field name: any suffix). dashboards/SCHEMA.md documents exactly these.
TAGS = {
    LATENCY: ("board", "arch", "variant", "kernel_release", "load", "suite", "tool", "thread",
              "cpu", "pipeline", "rep"),
    HIST: HIST_TAGS + ("bucket",),
    VERDICT: ("scope", "board", "arch", "variant", "kernel_release", "load", "suite", "tool",
              "pipeline", "rep"),
    JOB: ("board", "arch", "variant", "kernel_release", "budget_class", "pipeline", "rep"),
    EVENTS: ("pipeline", "campaign", "kind", "board", "series"),
    METRICS: ("board", "arch", "variant", "kernel_release", "load", "suite", "tool", "pipeline", "rep"),
    SOAK_PROGRESS: ("board", "arch", "variant", "load", "suite", "thread", "pipeline", "rep"),
}
FIELDS: dict[str, dict[str, Any]] = {
    LATENCY: {"min_us": float, "avg_us": float, "max_us": float, **_PCT, "cycles": int,
              "overflows": int, "share_over_budget": float, **_BUDGET, "kernel_version": str,
              **_RUN, "extra_*": float},
    HIST: {"count": int},
    VERDICT: {"verdict": str, "passed": int, "failed": int, "infra": int, "shown": int, "reason": str,
              "max_us": float, **_PCT, "share_over_budget": float, **_BUDGET, **_RUN,
              "campaign": str, "branch": str, "repeat": int, "budget_class": str, "cycles": int,
              "bucket_us": float, "hist_size": int, "overflows": int,
              "param_duration_s": float, "param_interval_us": float,
              "host_steal_ms": float, "host_steal_burst_ms": float, "host_max_gap_ms": float,
              "pwcet_us": float, "pwcet_lo_us": float, "pwcet_hi_us": float, "pwcet_hour_us": float,
              "pwcet_hour_lo_us": float, "pwcet_hour_hi_us": float, "pwcet_method": str, "pwcet_refused": str,
              "regression": str, "detectable": float, "detectable_limit": float},
    JOB: {"infra": int, "error": str, "verdict": str, "duration_s": float, "measurements": int,
          "failed": int, "infra_measurements": int, "kernel_version": str, "place_wait_s": float, **_RUN},
    EVENTS: {"title": str, "text": str, "tags": str, "verdict": str, "started": str, "jobs": int,
             "failed_jobs": int, "infra_jobs": int, "branch": str, "subject": str,
             "status": str, "effect_pct": float, "confidence": float, "last_good": str, **_RUN},
    METRICS: {"*": float, **_RUN},
    SOAK_PROGRESS: {"elapsed_s": float, "planned_s": float, "eta_s": float, "wall_s": float,
                    "done_ratio": float, "samples": int, "max_us": float, "segments": int,
                    "segments_planned": int, "gap_max_s": float, "cpu": int, **_RUN},
}


def field_type(measurement: str, name: str):
    """The type a field of a measurement always has, None if not in the schema."""
    fields = FIELDS.get(measurement, {})
    if name in fields:
        return fields[name]
    for pattern, t in fields.items():
        if pattern.endswith("*") and name.startswith(pattern[:-1]):
            return t
    return None


def _pwcet_fields(est: Any) -> dict[str, Any]:
    """A soak's worst case, estimated (rtlab.soak.pwcet), beside the observed
    ``max_us``: the levels at 1e-9 per sample and per hour with their
    interval, or ``pwcet_refused`` ("cannot estimate: <reason>")."""
    if not isinstance(est, dict):
        return {}
    out: dict[str, Any] = {"pwcet_method": str(est.get("method") or "") or None}
    if est.get("refused") or est.get("per_sample_us") is None:
        out["pwcet_refused"] = str(est.get("refused") or "cannot estimate")[:500]
        return out
    lo, hi = (est.get("per_sample_ci_us") or (None, None))[:2]
    hlo, hhi = (est.get("per_hour_ci_us") or (None, None))[:2]
    out.update({"pwcet_us": _num(est.get("per_sample_us")), "pwcet_lo_us": _num(lo), "pwcet_hi_us": _num(hi),
                "pwcet_hour_us": _num(est.get("per_hour_us")), "pwcet_hour_lo_us": _num(hlo),
                "pwcet_hour_hi_us": _num(hhi)})
    return out


def _verdict_ints(v: str) -> dict[str, int]:
    # "shown" (measured, judged against nothing) is counted on its own: never passed
    return {"passed": int(v == "pass"), "failed": int(v == "fail"), "infra": int(v == "infra"),
            "shown": int(v == "shown")}


def regression_fields(comparison: Optional[dict]) -> dict[str, dict[str, Any]]:
    """Per key label, the verdict point's regression fields from a run's
    compare.json (checked by rtlab.core.modelcheck.comparison): the key's
    outcome, its detectable effect (ratio - 1, the largest of its gating
    statistics') and its class's limit; a key without a detectable effect
    (undecided before any look) keeps only its outcome."""
    out: dict[str, dict[str, Any]] = {}
    for k in (comparison or {}).get("keys") or []:
        label, outcome = k.get("label"), k.get("outcome")
        if not isinstance(label, str) or not isinstance(outcome, str):
            continue
        out[label] = {"regression": outcome[:40], "detectable": _num(k.get("detectable")),
                      "detectable_limit": _num(k.get("limit"))}
    return out


def points_for_run(run: RunResult, precision: str = "s", regression: Optional[dict] = None) -> list[Point]:
    """Every point of a run as :class:`Point` objects (for inspection/tests);
    *regression*: the run's compare.json, where it has one."""
    return list(_Builder(run, precision, regression).items(fast_hist=False))


def chunks_for_run(run: RunResult, precision: str = "s", regression: Optional[dict] = None
                   ) -> Iterator[list[str]]:
    """Every point of a run as line protocol, in lists (one per histogram,
    the other points in between grouped): what is batched and written;
    *regression*: the run's compare.json, where it has one."""
    small: list[str] = []
    for item in _Builder(run, precision, regression).items(fast_hist=True):
        if isinstance(item, list):
            if small:
                yield small
                small = []
            yield item
        else:
            line = item.to_line()
            if line:
                small.append(line)
    if small:
        yield small


def lines_for_run(run: RunResult, precision: str = "s") -> Iterator[str]:
    """Every point of a run as one line of line protocol each."""
    for chunk in chunks_for_run(run, precision):
        yield from chunk


def checkpoint_points(ev: dict[str, Any], time: int, pipeline: str = "local") -> list[Point]:
    """One soak checkpoint (rtlab.soak.checkpoint.checkpoint_event plus the
    job's run_id/board/arch/variant/repeat) as ``soak_progress`` points at
    *time*: the soak so far (``thread=all``: elapsed, planned, ETA, samples,
    current max, segments) and one per measuring thread (samples, max).
    A point per checkpoint: the series grows as the soak runs."""
    tags = {"board": str(ev.get("board") or UNKNOWN), "arch": str(ev.get("arch") or UNKNOWN),
            "variant": str(ev.get("variant") or UNKNOWN), "load": str(ev.get("load") or UNKNOWN),
            "suite": str(ev.get("suite") or str(ev.get("id", "")).split("@")[0] or UNKNOWN),
            "pipeline": pipeline}
    if ev.get("repeat"):
        tags["rep"] = f"r{int(ev['repeat'])}"
    common: dict[str, Any] = {"run_id": str(ev["run_id"])} if ev.get("run_id") else {}
    done, planned = _num(ev.get("done_s")), _num(ev.get("planned_s"))
    progress = {"elapsed_s": done, "planned_s": planned}
    allf = dict(common, **progress, eta_s=_num(ev.get("eta_s")), wall_s=_num(ev.get("wall_s")),
                done_ratio=(done / planned) if done is not None and planned else None,
                samples=_int(ev.get("samples")), max_us=_num(ev.get("max_us")),
                segments=_int(ev.get("segments")), segments_planned=_int(ev.get("segments_planned")),
                gap_max_s=_num(ev.get("gap_max_s")))
    out = [Point(SOAK_PROGRESS, dict(tags, thread="all"), allf, time)]
    for t in ev.get("threads") or []:
        if not isinstance(t, dict) or _int(t.get("thread")) is None:
            continue
        out.append(Point(SOAK_PROGRESS, dict(tags, thread=str(_int(t["thread"]))),
                         dict(common, **progress, samples=_int(t.get("samples")), max_us=_num(t.get("max_us")),
                              cpu=_int(t.get("cpu"))), time))
    return out
