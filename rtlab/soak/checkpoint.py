"""Soaks: long runs measured in consecutive checkpointed segments that
survive the board, the console or rtlab itself going away.

cyclictest writes its histogram and JSON only when it exits (its
``--fifo=PATH`` stream carries the running per-thread min/avg/max lines,
no histogram and no per-block maxima). So a soak runs the tool back to back
in segments of ``checkpoint_s`` seconds; after each one the segment's raw
files come off the board (``segments/NNNN/``) and the merged state of the
whole run so far (per-thread histogram, cycles, min/avg/max, the per-segment
maxima, the time measured and the time planned) is written atomically to
``checkpoint.json`` (write a temporary file, fsync, rename: a reader sees the
old state or the new one, never half of one). The price is a gap between
segments in which nothing is sampled; each gap is measured on the host and
recorded with its segment (``gap_before_s``, an upper bound: it includes the
fetch of the previous segment's files and the start of the next tool).

What survives what:

* the board stops answering / the console is lost: the segment in flight is
  lost, every checkpoint before it stays; the job is INFRA, but its kept
  samples are judged: a breach among them is a FAIL (:func:`judge_soak`);
* rtlab killed (SIGKILL, the CI runner gone): no run.json, no job.json; the
  job directories keep ``job-spec.json`` and the checkpoints, and
  rtlab.run.recover rebuilds the run from them for `rtlab gate`;
* `rtlab run --resume RUN_DIR` (rtlab.run.resume) measures only the segments a
  checkpoint does not hold.

A soak that measured less than planned is never PASS: INFRA "stopped at
HH:MM:SS of HH:MM:SS" with the samples it has.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.model import Histogram, InfraCause, Measurement, ThreadResult, ToolOutput, Verdict
from ..core.rundir import MeasurementDir

CHECKPOINT_FILE = "checkpoint.json"
SEGMENTS_DIR = "segments"
#: what a checkpoint must share with the run that resumes it (the command
#: carries the interval, priority, histogram size and CPUs)
PARAMETER_KEYS = ("planned_s", "segment_s", "segments_planned", "interval_us", "command")
#: ToolOutput.metrics key holding the soak's progress (planned_s, done_s, ...)
SOAK_METRIC = "soak"


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def write_atomic(path: Path, text: str) -> None:
    """*text* to *path* so that a reader never sees part of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _state(d) -> None:
    """checkpoint.json's shape, every number typed and ranged (modelcheck)."""
    from ..core import modelcheck as mc

    d.field("version", mc.integer(1), required=True)
    if d.obj()["version"] != 1:
        raise d.at("version", d.obj()["version"]).error(f"this rtlab reads version 1, got {d.obj()['version']}")
    for k in ("planned_s", "segment_s", "interval_us"):
        d.field(k, mc.number(0, above=True), required=True)
    d.field("segments_planned", mc.integer(1), required=True)
    d.field("command", mc.string, required=True)
    d.field("done_s", mc.number(0), required=True)
    d.field("stopped", mc.string)
    d.field("updated", mc.string)
    d.field("threads", lambda t: t.items(mc.thread), required=True)

    def segment(s) -> None:
        s.field("index", mc.integer(0), required=True)
        s.field("duration_s", mc.number(0), required=True)
        for k in ("elapsed_s", "gap_before_s", "max_us"):
            s.field(k, mc.number(0))
        s.field("cycles", mc.integer(0))
        s.field("threads", lambda t: t.items(mc.obj))
        if s.obj()["index"] >= d.obj()["segments_planned"]:
            raise s.at("index", s.obj()["index"]).error(
                f"segment {s.obj()['index']} of {d.obj()['segments_planned']} planned")
    d.field("segments", lambda ss: ss.items(segment), required=True)
    indexes = [s["index"] for s in d.obj()["segments"]]
    if len(set(indexes)) != len(indexes):
        raise d.at("segments", indexes).error("a segment is recorded twice")


def load_checked_state(path: Path) -> dict:
    """A checkpoint read back for --resume: bounded, inside its directory,
    shaped as :func:`new_state` makes it; an InputError names the file and
    the key (a corrupt checkpoint is refused, never replaced: its segments
    were measured)."""
    from ..core.modelcheck import load_checked
    return load_checked(path, _state, what="checkpoint")


def parameter_changes(state: dict, expected: dict) -> list[str]:
    """How the run a checkpoint was made by differs from *expected* (keys of
    :func:`new_state`): a checkpoint of other parameters is no part of this run."""
    out = []
    for k, v in expected.items():
        if state.get(k) != v:
            was, now = (str(x)[:200] for x in (state.get(k), v))
            out.append(f"{k}: the checkpoint was made with {was!r}, this run has {now!r}")
    return out


def new_state(planned_s: float, segment_s: float, interval_us: float, command: str) -> dict:
    n = max(1, -(-int(planned_s) // int(segment_s)))
    return {"version": 1, "planned_s": planned_s, "segment_s": segment_s, "segments_planned": n,
            "interval_us": interval_us, "command": command, "segments": [], "threads": [],
            "done_s": 0.0, "stopped": None, "updated": None}


def merge_threads(old: list[ThreadResult], new: list[ThreadResult]) -> list[ThreadResult]:
    """Thread by thread (same index): cycles added, min of mins, max of
    maxes, cycle-weighted average, histograms added bucket by bucket."""
    by = {t.thread: t for t in old}
    out = []
    for t in new:
        o = by.pop(t.thread, None)
        if o is None:
            out.append(t)
            continue
        cycles = o.cycles + t.cycles
        avg = (o.avg_us * o.cycles + t.avg_us * t.cycles) / cycles if cycles else 0.0
        hist = None
        if o.histogram is not None and t.histogram is not None:
            counts = dict(o.histogram.counts)
            for k, v in t.histogram.counts.items():
                counts[k] = counts.get(k, 0) + v
            hist = Histogram(counts=counts, bucket_us=t.histogram.bucket_us, size=t.histogram.size,
                             overflows=o.histogram.overflows + t.histogram.overflows)
        ovf = None if o.overflows is None or t.overflows is None else o.overflows + t.overflows
        out.append(ThreadResult(thread=t.thread, cpu=t.cpu, cycles=cycles, min_us=min(o.min_us, t.min_us),
                                avg_us=round(avg, 3), max_us=max(o.max_us, t.max_us), overflows=ovf,
                                histogram=hist))
    return out + list(by.values())


def add_segment(state: dict, index: int, seg: ToolOutput, *, duration_s: float, elapsed_s: float,
                gap_before_s: Optional[float]) -> dict:
    """The state with one more measured segment merged in."""
    old = [ThreadResult.from_json(t) for t in state["threads"]]
    merged = merge_threads(old, seg.threads)
    state["threads"] = [t.to_json(with_histogram=True) for t in merged]
    state["segments"].append({
        "index": index, "duration_s": duration_s, "elapsed_s": round(elapsed_s, 3),
        "gap_before_s": None if gap_before_s is None else round(gap_before_s, 4),
        "cycles": sum(t.cycles for t in seg.threads),
        "max_us": max((t.max_us for t in seg.threads), default=None),
        "threads": [{"thread": t.thread, "cpu": t.cpu, "cycles": t.cycles, "min_us": t.min_us,
                     "avg_us": t.avg_us, "max_us": t.max_us} for t in seg.threads]})
    state["done_s"] = sum(s["duration_s"] for s in state["segments"])
    state["updated"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return state


def save(host_dir: Path, state: dict) -> None:
    write_atomic(Path(host_dir) / CHECKPOINT_FILE, json.dumps(state) + "\n")
    # the run's exit record for the host's collect: the checkpointed segments ran (exit 0)
    write_atomic(MeasurementDir(Path(host_dir)).exit_json, json.dumps({
        "exit_code": 0, "elapsed_s": round(sum(s["elapsed_s"] for s in state["segments"]), 3),
        "segments": len(state["segments"]), "checkpointed": True}) + "\n")


def output_of(state: dict, path: str, tool: str = "cyclictest") -> ToolOutput:
    """The run so far as one ToolOutput; ``metrics["soak"]`` its progress,
    ``metrics["pwcet"]`` the worst-case estimate (rtlab.soak.pwcet) and its
    numbers flat (``pwcet_us``, ``pwcet_lo_us``...) for the store."""
    from . import pwcet

    out = ToolOutput(path=path, tool=tool, threads=[ThreadResult.from_json(t) for t in state["threads"]],
                     return_code=0)
    segs = state["segments"]
    gaps = [s["gap_before_s"] for s in segs if s.get("gap_before_s") is not None]
    out.metrics[SOAK_METRIC] = {
        "planned_s": state["planned_s"], "done_s": state["done_s"], "segment_s": state["segment_s"],
        "segments": len(segs), "segments_planned": state["segments_planned"],
        "stopped": state.get("stopped"), "gap_max_s": max(gaps) if gaps else None,
        "gap_total_s": round(sum(gaps), 3) if gaps else 0.0}
    out.metrics["soak_done_s"] = state["done_s"]
    out.metrics["soak_planned_s"] = state["planned_s"]
    if gaps:
        out.metrics["soak_gap_max_s"] = max(gaps)
    allt = out.combined()
    if allt is not None:
        bm = [s["max_us"] for s in segs if s.get("max_us") is not None]
        block = int(sum(s["cycles"] for s in segs) / len(segs)) if segs else None
        est = pwcet.estimate(histogram=allt.histogram, block_maxima=bm, block_samples=block,
                             interval_us=state.get("interval_us"), observed_max_us=allt.max_us)
        out.metrics["pwcet"] = est.to_json()
        if est.ok:
            out.metrics["pwcet_us"] = round(est.per_sample_us, 3)
            if est.per_sample_ci_us:
                out.metrics["pwcet_lo_us"], out.metrics["pwcet_hi_us"] = (round(v, 3) for v in est.per_sample_ci_us)
            if est.per_hour_us is not None:
                out.metrics["pwcet_hour_us"] = round(est.per_hour_us, 3)
    return out


def incomplete(out: ToolOutput) -> Optional[str]:
    """"stopped at HH:MM:SS of HH:MM:SS" for a soak that measured less than
    planned, None for a complete one or any other output."""
    s = out.metrics.get(SOAK_METRIC)
    if not isinstance(s, dict):
        return None
    if s.get("segments", 0) >= s.get("segments_planned", 0) and s.get("done_s", 0) >= s.get("planned_s", 0):
        return None
    why = f" ({s['stopped']})" if s.get("stopped") else ""
    return (f"stopped at {hms(s.get('done_s', 0))} of {hms(s.get('planned_s', 0))}: "
            f"{s.get('segments', 0)} of {s.get('segments_planned', 0)} checkpointed segments{why}")


def is_soak(out: ToolOutput) -> bool:
    return isinstance(out.metrics.get(SOAK_METRIC), dict)


def judge_soak(m: Measurement, budget, inner: Callable[..., Measurement], **kw: Any) -> Measurement:
    """A checkpointed run's kept samples judged against the budget: a breach
    among them is a FAIL (definitive, however the run ended); otherwise a run
    that is incomplete (or that the lab broke) is INFRA, never PASS."""
    infra = list(m.reasons) if m.verdict == Verdict.INFRA else []
    if not any(t.cycles > 0 for t in m.output.threads):
        # a soak is resumed (`rtlab run --resume`), never measured again whole
        m.set_infra(m.reasons if m.verdict == Verdict.INFRA else ["nothing checkpointed"])
        return m
    m.verdict = None
    inner(m, budget, **kw)
    if m.infra_cause != InfraCause.HOST_STEAL:
        m.infra_cause = None  # only a stolen breach is worth a whole soak again; the rest resume
    stopped = incomplete(m.output)
    if m.verdict == Verdict.FAIL:
        if stopped or infra:
            m.reasons.append(f"run incomplete ({stopped or '; '.join(infra)}): the breach is in the kept samples")
    elif m.verdict in (Verdict.PASS, Verdict.SHOWN) and (stopped or infra):
        m.set_infra(list(dict.fromkeys(([stopped] if stopped else []) + infra)))
    elif m.verdict == Verdict.INFRA and infra:
        # the run broke off as well: a fresh attempt of the same cause would not cure that
        m.set_infra(list(dict.fromkeys(infra + m.reasons)))
    return m


def checkpoint_event(run, state: dict) -> dict:
    """The board test's event for one checkpoint: the runner shows its line
    (elapsed, ETA, samples, current maximum)."""
    segs = state["segments"]
    done, planned = state["done_s"], state["planned_s"]
    wall = sum(s["elapsed_s"] + (s.get("gap_before_s") or 0.0) for s in segs)
    eta = (planned - done) * (wall / done) if done else None
    samples = sum(s["cycles"] for s in segs)
    cur = max((s["max_us"] for s in segs if s.get("max_us") is not None), default=None)
    line = (f"checkpoint {len(segs)}/{state['segments_planned']}: {hms(done)} of {hms(planned)}"
            f", ETA {hms(eta) if eta is not None else '?'}, {samples} samples, max {cur:g} us"
            if cur is not None else f"checkpoint {len(segs)}/{state['segments_planned']}")
    gaps = [s["gap_before_s"] for s in segs if s.get("gap_before_s") is not None]
    # per thread, as merged so far: what the live points (rtlab.store.live) carry
    threads = [{"thread": t.get("thread"), "cpu": t.get("cpu"), "samples": t.get("cycles"),
                "max_us": t.get("max_us")} for t in state.get("threads") or []]
    return {"event": "checkpoint", "id": run.id, "suite": getattr(run, "name", None),
            "load": getattr(run, "load", None), "line": line, "done_s": done, "planned_s": planned,
            "eta_s": None if eta is None else round(eta, 1), "wall_s": round(wall, 3),
            "samples": samples, "max_us": cur, "segments": len(segs),
            "segments_planned": state["segments_planned"], "gap_max_s": max(gaps) if gaps else None,
            "threads": threads}


def full_length(campaign):
    """The campaign at its reports' own length (`rtlab run --full`): every
    suite entry with ``full_duration_s`` runs that long instead of its scaled
    ``duration_s``. A campaign with no such entry is an input error (exit 2),
    never silently the scaled run."""
    import dataclasses

    from ..errors import InputError

    entries, changed = [], 0
    for e in campaign.suites:
        full = e.params.get("full_duration_s")
        if full:
            e = dataclasses.replace(e, params={**e.params, "duration_s": int(full)})
            changed += 1
        entries.append(e)
    if not changed:
        raise InputError(campaign.path, "--full: no suite has full_duration_s (the report's own length)")
    return dataclasses.replace(campaign, suites=entries)


def pwcet_refusal(metrics: dict) -> Optional[str]:
    """"cannot estimate: <reason>" of a soak whose pWCET was refused, else None."""
    est = metrics.get("pwcet")
    if isinstance(est, dict) and (est.get("refused") or est.get("per_sample_us") is None):
        return str(est.get("refused") or "cannot estimate")
    return None


def soak_cells(metrics: dict) -> dict[str, str]:
    """The table's rows of a soak: "pWCET 1e-9" (per sample, its interval;
    "n/a" with the refusal's reason in the report) beside the observed max,
    and "soak" (time measured of time planned, the largest gap)."""
    out: dict[str, str] = {}
    est = metrics.get("pwcet")
    if isinstance(est, dict):
        if est.get("per_sample_us") is not None and not est.get("refused"):
            lo, hi = est.get("per_sample_ci_us") or (None, None)
            out["pWCET 1e-9"] = (f"{est['per_sample_us']:,.0f}"
                                 + (f" ({lo:,.0f}-{hi:,.0f})" if lo is not None else ""))
            if est.get("per_hour_us") is not None:
                hlo, hhi = est.get("per_hour_ci_us") or (None, None)
                out["pWCET 1e-9/h"] = (f"{est['per_hour_us']:,.0f}"
                                       + (f" ({hlo:,.0f}-{hhi:,.0f})" if hlo is not None else ""))
        else:
            out["pWCET 1e-9"] = "n/a"  # the reason follows the table (pwcet_refusals)
    s = metrics.get(SOAK_METRIC)
    if isinstance(s, dict):
        gap = s.get("gap_max_s")
        out["soak"] = (f"{hms(s.get('done_s', 0))}/{hms(s.get('planned_s', 0))}"
                       + (f" gap<={gap:.2f}s" if gap is not None else ""))
    return out
