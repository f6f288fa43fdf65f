"""`rtlab regressions`: change points over every series of the store.

Reads the run-level statistics the store holds per run (the ``verdict``
points of scope ``measurement``: all threads of a measurement combined, what
the gate judged: p99, p99.9, share over budget; one point per run and
repeat), splits them into series (board × variant × suite × load ×
statistic) and finds the changes (:mod:`rtlab.verdict.changepoint`).

The runs of the pinned reference kernel (campaign ``reference``, the nightly
schedule: ``campaigns/reference.yaml``) form each board's reference series:
a change there is the lab drifting, and a commit's change on that board in
the same window is reported "lab drift suspected", not blamed on the commit.

Results go to the ``events`` measurement as Grafana annotations (tag ``kind``
= ``regression`` or ``drift``, plus ``board`` and ``series``), replacing
the annotations of the previous analysis of the same window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from .changepoint import (
    METRICS, Change, Drift, Observation, SeriesKey, find_changes, find_drift, mark_lab_drift,
)
from ..core.config import shown
from ..errors import InputError
from ..store.base import rows
from ..store.lineproto import Point
from ..store.schema import EVENTS, VERDICT

REFERENCE_CAMPAIGN = "reference"
_SINCE = re.compile(r"^([1-9][0-9]{0,4})([hdw])$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_PRECISION = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def parse_since(text: str) -> str:
    """``30d`` / ``12h`` / ``2w``: an InfluxQL duration literal, checked."""
    if not _SINCE.match(str(text)):
        raise InputError("--since", f"{shown(text)} is not a duration like 30d, 12h or 2w")
    return str(text)


def check_name(what: str, value: Optional[str]) -> Optional[str]:
    if value is not None and not _NAME.match(value):
        raise InputError(what, f"{shown(value)} is not a board/campaign name (letters, digits, . _ + -)")
    return value


def _lit(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class History:
    commits: dict[SeriesKey, list[Observation]] = field(default_factory=dict)
    reference: dict[SeriesKey, list[Observation]] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return len({o.run_id for obs in (*self.commits.values(), *self.reference.values()) for o in obs})


def read_history(store, board: Optional[str] = None, since: str = "30d",
                 reference_campaign: str = REFERENCE_CAMPAIGN, variant: Optional[str] = None,
                 suite: Optional[str] = None, load: Optional[str] = None) -> History:
    """Every run-level value of the window, split into commit and reference series."""
    since = parse_since(since)
    where = ['"scope" = \'measurement\'', f"time > now() - {since}"]
    for tag, v in (("board", board), ("variant", variant), ("suite", suite), ("load", load)):
        if v is not None:
            where.append(f'"{tag}" = {_lit(check_name("--" + tag, v))}')
    fields = ", ".join(f'"{m}"' for m in METRICS)
    q = (f'SELECT {fields}, "commit", "run_id" FROM "{VERDICT}" WHERE {" AND ".join(where)} '
         'GROUP BY "board", "variant", "suite", "load"')
    ref_runs = {r.get("run_id") for r in rows(store.query(
        f'SELECT "run_id" FROM "{EVENTS}" WHERE "campaign" = {_lit(reference_campaign)} '
        f"AND time > now() - {since}", epoch="s"))}
    h = History()
    for r in rows(store.query(q, epoch="s")):
        run_id = str(r.get("run_id") or "")
        commit = str(r.get("commit") or "") or f"run:{run_id}"
        target = h.reference if run_id in ref_runs else h.commits
        for m in METRICS:
            v = r.get(m)
            if v is None:
                continue
            key = SeriesKey(r.get("board") or "unknown", r.get("variant") or "unknown",
                            r.get("suite") or "unknown", r.get("load") or "unknown", m)
            target.setdefault(key, []).append(Observation(float(r["time"]), commit, run_id, float(v)))
    return h


@dataclass
class Analysis:
    changes: list[Change]
    drifts: list[Drift]
    series: int
    runs: int

    @property
    def active(self) -> list[Change]:
        """Regressions still there and blamed on a commit (not on the lab)."""
        return [c for c in self.changes if c.direction == "regression" and c.status == "active"
                and not c.lab_drift]

    def to_json(self) -> dict[str, Any]:
        return {"series": self.series, "runs": self.runs,
                "drifting_boards": sorted({d.board for d in self.drifts}),
                "drifts": [d.change.to_json() | {"window": list(d.window)} for d in self.drifts],
                "changes": [c.to_json() for c in self.changes],
                "active_regressions": len(self.active)}

    def lines(self) -> list[str]:
        out = [f"{self.series} series, {self.runs} runs"]
        out += [d.line() for d in self.drifts]
        out += [c.line() for c in self.changes]
        if not self.changes:
            out.append("no change found")
        return out


def analyse(history: History, **kw) -> Analysis:
    drifts = find_drift(history.reference, **kw)
    changes: list[Change] = []
    for key, obs in sorted(history.commits.items()):
        changes.extend(find_changes(key, obs, **kw))
    mark_lab_drift(changes, drifts)
    changes.sort(key=lambda c: (c.first_bad_time, str(c.key)))
    return Analysis(changes, drifts, len(history.commits) + len(history.reference), history.runs)


# ------------------------------------------------------------------ annotations
def _series_tag(key: SeriesKey) -> str:
    return f"{key.variant}/{key.suite}/{key.load}/{key.metric}"


def annotation_points(analysis: Analysis, precision: str = "s") -> list[Point]:
    """One annotation per change (at the first bad commit's run) and per drift."""
    mult = _PRECISION[precision]
    pts = []
    for c in analysis.changes:
        state = "lab-drift" if c.lab_drift else c.status
        pts.append(Point(EVENTS, {"kind": "regression", "board": c.key.board, "series": _series_tag(c.key)}, {
            "title": f"{c.direction} {c.effect:+.0%} {c.key}",
            "text": c.line(), "tags": f"rtlab,{c.direction},{state}",
            "status": state, "effect_pct": round(100.0 * c.effect, 2) if c.effect != float("inf") else None,
            "confidence": round(c.confidence, 6), "last_good": c.last_good, "commit": c.first_bad,
        }, int(c.first_bad_time) * mult))
    for d in analysis.drifts:
        c = d.change
        pts.append(Point(EVENTS, {"kind": "drift", "board": d.board, "series": _series_tag(c.key)}, {
            "title": f"lab drift {c.effect:+.0%} {c.key}", "text": d.line(),
            "tags": "rtlab,lab-drift", "status": "drifting",
            "effect_pct": round(100.0 * c.effect, 2) if c.effect != float("inf") else None,
            "confidence": round(c.confidence, 6), "last_good": c.last_good, "run_id": c.first_bad,
        }, int(c.first_bad_time) * mult))
    return pts


def write_annotations(store, analysis: Analysis, since: str, board: Optional[str] = None) -> int:
    """Replace the window's regression/drift annotations with this analysis'."""
    where = f"time > now() - {parse_since(since)}"
    if board:
        where += f' AND "board" = {_lit(check_name("--board", board))}'
    for kind in ("regression", "drift"):
        store.query(f'DELETE FROM "{EVENTS}" WHERE "kind" = \'{kind}\' AND {where}')
    lines = [ln for ln in (p.to_line() for p in annotation_points(analysis, store.precision)) if ln]
    return store.write(lines) if lines else 0
