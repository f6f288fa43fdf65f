"""Baselines from the store: the last K runs of a branch, or a pinned set.

What a baseline needs is stored with every judged run (``verdict`` points,
scope ``measurement``; dashboards/SCHEMA.md): per repeat and key the
run-level statistics (``p50_us`` ... ``max_us``), ``cycles``, ``bucket_us``,
``hist_size``, ``overflows``, and the run's ``run_id``, ``commit``,
``branch``, ``campaign``; the histograms (``latency_hist``, same time and
``rep``) come back too, so a comparison report overlays both sides. Read back
here into the comparison's :class:`~rtlab.verdict.compare.Side`: for every key of
the candidate, the last K runs of the same board × variant × suite × load
and campaign on the branch (never the candidate's own runs).

A pin (``rtlab baseline pin NAME --branch B --last K --campaign C``) stores
the run ids chosen now (measurement ``baseline_pin``); ``--pin NAME`` then
compares against exactly those runs, so a drifting or noisy history cannot
move the reference (LKFT's lesson). Every verdict names the baseline it
used (``Comparison.baseline_source``, compare.json).

A store that is down or refuses the query raises: the caller exits 2
(cannot decide), never passes silently.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

from .compare import Replicate, Side
from ..errors import RtlabError
from ..core.model import Histogram, MeasurementKey, RunResult
from ..store.base import StoreError, rows
from ..store.lineproto import Point, timestamp
from ..store.schema import HIST, RUN_PARAMS, VERDICT, pct_field
from .stats import RUN_STATISTICS, censored_at

PIN = "baseline_pin"
#: how many summary rows one key's query may return (K runs × repeats)
ROW_LIMIT = 5000


class BaselineUnavailable(RtlabError):
    """The store cannot give a baseline (down, refused, nothing there)."""


def _q(s: str) -> str:
    """An InfluxQL string literal (single quotes; backslash and quote escaped)."""
    return "'" + str(s).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _field_of(stat: str) -> str:
    return "max_us" if stat == "max" else pct_field(stat[1:])


def _query(store, q: str) -> list[dict]:
    try:
        return rows(store.query(q))
    except StoreError as e:
        raise BaselineUnavailable(f"store: {e}") from None


def keys_of(runs: Iterable[RunResult]) -> tuple[set[MeasurementKey], set[str]]:
    keys, campaigns = set(), set()
    for r in runs:
        campaigns.add(r.campaign)
        for m in r.measurements():
            keys.add(m.key)
    return keys, campaigns


def _replicate(row: dict, histogram: Optional[Histogram] = None) -> Replicate:
    values = {s: (float(row[_field_of(s)]) if row.get(_field_of(s)) is not None else None)
              for s in RUN_STATISTICS}
    # a percentile the run's histogram could not hold (stored as missing) is
    # at least the histogram's range, where the range is known
    size, bucket = row.get("hist_size"), row.get("bucket_us")
    censored = censored_at(values, float(size) * float(bucket) if size and bucket and row.get("cycles") else None)
    # run parameters the store keeps: the histogram's range, duration and
    # interval (runs published before these were kept: their samples per
    # run stand in, rtlab.verdict.compare.parameter_differences)
    params: dict[str, Any] = {"histogram range us": float(size) * float(bucket)} if size and bucket else {}
    for name in RUN_PARAMS:
        v = row.get("param_" + name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            params[name] = int(v) if float(v).is_integer() else float(v)
    return Replicate(run_id=str(row.get("run_id") or "?"), repeat=int(row.get("repeat") or 0),
                     campaign=str(row.get("campaign") or ""), budget_class=str(row.get("budget_class") or ""),
                     values=values, bucket_us=bucket, histogram=histogram,
                     commit=str(row.get("commit") or ""), censored=censored, params=params,
                     cycles=int(row.get("cycles") or 0))


def _histograms(store, key: MeasurementKey, chosen: list[dict]) -> dict[tuple[str, str], Histogram]:
    """The chosen runs' histograms from ``latency_hist``: (time, rep) ->
    the threads' buckets added (as the verdict's combined thread is), with
    the range and overflow count of the verdict row. One query per key over
    the chosen runs' time span; a run without histogram points gets none."""
    want = {(str(r.get("time")), str(r.get("rep") or "")): r for r in chosen
            if r.get("bucket_us") and r.get("verdict") != "infra"}
    if not want:
        return {}
    times = sorted(t for t, _ in want)
    q = (f'SELECT "count" FROM "{HIST}" WHERE "board" = {_q(key.board)} AND "variant" = {_q(key.variant)} '
         f'AND "suite" = {_q(key.suite)} AND "load" = {_q(key.load)} '
         f'AND time >= {_q(times[0])} AND time <= {_q(times[-1])} GROUP BY "bucket", "rep"')
    counts: dict[tuple[str, str], dict[int, int]] = {}
    for r in _query(store, q):
        k = (str(r.get("time")), str(r.get("rep") or ""))
        if k not in want or r.get("count") is None:
            continue
        idx = int(round(float(r["bucket"]) / float(want[k]["bucket_us"])))
        c = counts.setdefault(k, {})
        c[idx] = c.get(idx, 0) + int(r["count"])
    out = {}
    for k, c in counts.items():
        row = want[k]
        size = row.get("hist_size")
        out[k] = Histogram(counts=c, bucket_us=float(row["bucket_us"]), size=int(size) if size else None,
                           overflows=int(row.get("overflows") or 0))
    return out


def read_baseline(store, keys: Iterable[MeasurementKey], campaign: str, branch: str, last: int,
                  exclude_runs: Iterable[str] = (), pinned: Optional[dict[str, list[str]]] = None) -> Side:
    """The baseline side for these keys: per key the last `last` runs of
    `campaign` on `branch` (or, with `pinned`, label -> run ids, exactly those)."""
    exclude = set(exclude_runs)
    where = "pinned runs " if pinned is not None else f"last {last} runs of "
    side = Side(source=f"store: {where}branch {branch}, campaign {campaign}")
    for key in sorted(keys, key=lambda k: k.label()):
        q = (f'SELECT * FROM "{VERDICT}" WHERE "scope" = \'measurement\' AND "board" = {_q(key.board)} '
             f'AND "variant" = {_q(key.variant)} AND "suite" = {_q(key.suite)} AND "load" = {_q(key.load)} '
             f'AND "campaign" = {_q(campaign)} AND "branch" = {_q(branch)} ORDER BY time DESC LIMIT {ROW_LIMIT}')
        found = [r for r in _query(store, q) if r.get("run_id") not in exclude]
        if pinned is not None:
            want = set(pinned.get(key.label(), []))
            chosen = [r for r in found if r.get("run_id") in want]
        else:
            order: list[str] = []
            for r in found:  # newest first
                if r.get("run_id") not in order:
                    order.append(r.get("run_id"))
            keep = set(order[:last])
            chosen = [r for r in found if r.get("run_id") in keep]
        hists = _histograms(store, key, chosen)
        for r in chosen:
            rid = str(r.get("run_id"))
            if rid not in side.campaign_of:
                side.runs.append(rid)
                side.campaign_of[rid] = str(r.get("campaign") or campaign)
            if r.get("verdict") == "infra":
                side.dropped.setdefault(key, []).append(f"{rid}: infra ({r.get('reason') or ''})")
                continue
            side.keys.setdefault(key, []).append(
                _replicate(r, hists.get((str(r.get("time")), str(r.get("rep") or "")))))
    return side


def baseline_keys(store, campaign: str, branch: str, pinned: Optional[dict[str, list[str]]] = None
                  ) -> set[MeasurementKey]:
    """The keys the baseline has: a pin's, or those of the branch's latest
    run of the campaign (a key the candidate no longer measures is then
    compared, and undecided, instead of vanishing)."""
    if pinned is not None:
        out = set()
        for label in pinned:
            parts = label.split("/")
            if len(parts) == 4:
                out.add(MeasurementKey(*parts))
        return out
    q = (f'SELECT * FROM "{VERDICT}" WHERE "scope" = \'measurement\' AND "campaign" = {_q(campaign)} '
         f'AND "branch" = {_q(branch)} ORDER BY time DESC LIMIT {ROW_LIMIT}')
    found = _query(store, q)
    if not found:
        return set()
    latest = found[0].get("run_id")
    return {MeasurementKey(str(r.get("board")), str(r.get("variant")), str(r.get("suite")), str(r.get("load")))
            for r in found if r.get("run_id") == latest and r.get("board")}


def pin(store, name: str, keys: Iterable[MeasurementKey], campaign: str, branch: str, last: int,
        regression: Optional[dict] = None, policy_source: str = "") -> dict:
    """Choose the baseline now (last K runs per key) and store the choice."""
    side = read_baseline(store, keys, campaign, branch, last)
    chosen = {k.label(): sorted({r.run_id for r in reps}) for k, reps in side.keys.items()}
    if not chosen:
        raise BaselineUnavailable(f"no runs of campaign {campaign} on branch {branch} to pin")
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    doc = {"name": name, "campaign": campaign, "branch": branch, "last": last, "pinned_at": now,
           "runs": chosen, "regression": regression, "policy_source": policy_source}
    point = Point(PIN, {"name": name}, {"pin": json.dumps(doc), "campaign": campaign, "branch": branch},
                  timestamp(now, getattr(store, "precision", "s")))
    try:
        store.write([point.to_line()])
    except StoreError as e:
        raise BaselineUnavailable(f"store: {e}") from None
    return doc


def read_pin(store, name: str) -> dict:
    found = _query(store, f'SELECT * FROM "{PIN}" WHERE "name" = {_q(name)} ORDER BY time DESC LIMIT 1')
    if not found:
        raise BaselineUnavailable(f"no baseline pinned as {name!r} (rtlab baseline pin {name} ...)")
    try:
        return json.loads(found[0]["pin"])
    except (KeyError, TypeError, ValueError):
        raise BaselineUnavailable(f"baseline pin {name!r}: unreadable") from None


def open_store():
    """The configured store (env/store.yaml); a comparison never starts a
    local influxd of its own: no store configured is no baseline."""
    from ..store.config import StoreConfig
    from ..store.influx import store_from_config

    cfg = StoreConfig.load()
    if not cfg.configured:
        raise BaselineUnavailable("no store configured (RTLAB_INFLUX_URL or store.yaml): no baseline")
    store = store_from_config(cfg)
    try:
        store.ping()
    except StoreError as e:
        raise BaselineUnavailable(f"store {cfg.describe()}: {e}") from None
    return store
