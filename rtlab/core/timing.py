"""Where a job's wall time goes: cheap timing events and their breakdown.

Each part of a job that costs time writes one ``{"event": "phase", "name",
"duration_s"}`` line into the job's ``events.jsonl`` (the board tests through
rtlab.suites.events, the runner for the host's parts); the work of the run
as a whole (images, kernel builds, run.json and the HTML reports) goes into
the run dir's ``timing.jsonl``. Within a suite, ``exit.json`` says how long
the tool ran and how long its raw files took to come home.

:func:`breakdown` adds these up per part for ``bench/bench_spine.py``; the
part that no event accounts for is reported as such, never spread over the others.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from .rundir import EXIT_JSON

PHASE = "phase"
RUN_TIMING_FILE = "timing.jsonl"

#: the parts, in the order a job passes them: name -> what it is
PARTS = {
    "images": "images and kernels ready (cached)",
    "place_wait": "waiting for a rack place (lab queue)",
    "stage": "kernel staging, job spec",
    "lock": "board lock",
    "pytest": "pytest + labgrid start and exit",
    "boot": "boot to a shell (the board's)",
    "kernel_facts": "kernel facts + snapshot commands, one batch",
    "snapshot": "system snapshot (from the batch)",
    "suite_setup": "suite set-up (availability, work dir)",
    "load_start": "load start and health",
    "tool": "on-board tool run (the board's)",
    "fetch": "raw files home",
    "load_stop": "load stop, health and raw files",
    "evidence": "evidence collection",
    "snapshot_after": "counters after the suites",
    "cleanup": "board work dir removed",
    "collect": "collection (parse raw files)",
    "judge": "judging, job.json",
    "finish": "run.json, report.html, vendor.html",
}
#: the board's own time (the overhead ratio's denominator)
OWN = ("boot", "tool")


def phase_event(name: str, seconds: float) -> dict:
    return {"event": PHASE, "name": name, "duration_s": round(seconds, 4)}


def append(path: Path, name: str, seconds: float) -> None:
    """One timing line into an events file (a job's events.jsonl, a run's timing.jsonl)."""
    with open(path, "a") as f:
        f.write(json.dumps({**phase_event(name, seconds), "t": round(time.time(), 3)}) + "\n")


@contextmanager
def timed(path: Optional[Path], name: str) -> Iterator[None]:
    """Time the block into *path* (nothing when path is None); a block that
    raises is timed too."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        if path is not None:
            append(path, name, time.monotonic() - t0)


def _events(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a killed writer
    return out


def job_parts(job_dir: Path) -> dict[str, float]:
    """Seconds per part of one job, from its events.jsonl and exit.json files.
    "pytest" is the pytest process's wall time less what its board tests
    account for themselves: the start-up and exit of pytest and labgrid."""
    parts: dict[str, float] = {}

    def add(name: str, s: float) -> None:
        parts[name] = parts.get(name, 0.0) + float(s)

    board_side = 0.0
    pytest_wall = 0.0
    for ev in _events(job_dir / "events.jsonl"):
        if ev.get("event") == "booted":
            add("boot", ev["duration_s"])
            board_side += ev["duration_s"]
        elif ev.get("event") == PHASE:
            name, s = ev.get("name"), float(ev.get("duration_s") or 0)
            if name == "pytest_process":
                pytest_wall += s
                continue
            add(str(name), s)
            if name not in ("stage", "lock", "collect", "judge"):  # the host's, outside pytest
                board_side += s
    for ex in sorted(job_dir.glob(f"*/{EXIT_JSON}")):
        try:
            e = json.loads(ex.read_text())
        except (OSError, ValueError):
            continue
        for key, name in (("elapsed_s", "tool"), ("fetch_s", "fetch"), ("prep_s", "suite_setup")):
            if e.get(key) is not None:
                add(name, e[key])
                board_side += float(e[key])
    if pytest_wall:
        parts["pytest"] = max(0.0, pytest_wall - board_side)
    return parts


def run_parts(run_dir: Path, job_dirs: list[Path]) -> dict[str, float]:
    """Seconds per part over a whole run (every job, plus the run's own timing.jsonl)."""
    total: dict[str, float] = {}
    for jd in job_dirs:
        for k, v in job_parts(jd).items():
            total[k] = total.get(k, 0.0) + v
    for ev in _events(run_dir / RUN_TIMING_FILE):
        if ev.get("event") == PHASE:
            total[str(ev["name"])] = total.get(str(ev["name"]), 0.0) + float(ev.get("duration_s") or 0)
    return total


def own_seconds(parts: dict[str, float]) -> float:
    return sum(parts.get(k, 0.0) for k in OWN)


def table(parts: dict[str, float], wall: float) -> list[tuple[str, float, float]]:
    """(label, seconds, share of wall) per part in PARTS order, then any part
    not in PARTS, then "not accounted for" (wall less every part)."""
    rows = []
    for name, label in PARTS.items():
        if name in parts:
            rows.append((f"{name}: {label}", parts[name], parts[name] / wall if wall else 0.0))
    for name in sorted(set(parts) - set(PARTS)):
        rows.append((name, parts[name], parts[name] / wall if wall else 0.0))
    rest = wall - sum(parts.values())
    rows.append(("not accounted for", rest, rest / wall if wall else 0.0))
    return rows


def format_table(parts: dict[str, float], wall: float) -> str:
    lines = [f"  {'part':<58} {'s':>7} {'share':>6}"]
    for label, s, share in table(parts, wall):
        own = " *" if label.split(":")[0] in OWN else ""
        lines.append(f"  {label + own:<58} {s:7.2f} {share:6.1%}")
    lines.append(f"  {'campaign wall':<58} {wall:7.2f} {1:6.1%}   (* the boards' own time)")
    return "\n".join(lines)
