"""Evidence at the breach: a kernel trace of the moment a budget broke, and
one line naming what delayed the measuring thread.

With evidence armed (campaign ``evidence: true``, ``rtlab run --evidence``;
on by default when ``$CI`` is set, on boards whose kernel rtlab boots: not
on the local board, whose tracefs is the CI runner's own), a suite that can stop at a threshold is
told the budget (:func:`arm_job`):

* cyclictest runs with ``-b <budget max_us> --tracemark`` (rt-tests 2.4
  breaktrace): the first sample over the budget writes ``hit latency
  threshold (X > B)`` into the trace, stops tracing and ends the run.
* rtla timerlat runs with ``-T <thread budget> -i <IRQ budget>`` and ``-t``:
  rtla stops the trace at the first sample over either and saves it
  (Debian's rtla 6.1 has no auto-analysis, so the trace is analysed here).

Before the tool starts, the board's tracefs records the scheduler and
interrupt events (:data:`EVENTS`) into a ring buffer; the events cost a few
hundred nanoseconds each, measured by ``bench/bench_evidence.py``. After the
tool, tracing stops. Only when the tool says it broke (cyclictest's ``#
Break thread:`` line, rtla's saved trace) is the trace fetched into the
suite's ``evidence/`` dir with ``analysis.json``; a run that did not break
writes no evidence.

The analysis (:func:`analyse_sched_trace`) reads the trace on the CPU of the
late thread: the task that was running there while the thread waited (the
``sched_switch`` that finally ran it names it, its priority says why it won)
and the interrupt handlers that ran in that window; the longest of them is
the culprit: "preempted by hog (pid 123, RT prio 95) for 400000 us" or
"blocked by irq/42-eth0 (irq 42) for 180 us".
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..registry import SUITES
from ..parsers.rtla import parse_timerlat_hist
from ..core.fsutil import read_json
from ..core.rundir import MeasurementDir

TRACEFS = "/sys/kernel/tracing"
EVIDENCE_DIR = "evidence"
ANALYSIS_FILE = "analysis.json"
TRACE_FILE = "trace.txt"
#: the events recorded while a suite measures with evidence armed
EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "sched/sched_waking",
          "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit")
#: per-CPU ring buffer (KiB): seconds of events at a 1 kHz wake-up rate
BUFFER_KB = 1024


def armed_by_default(board) -> bool:
    """Evidence is on by default in CI (GitLab sets CI=true), on boards that
    boot the kernel under test. The local board is the runner itself: its
    tracefs belongs to the host (other jobs, the runner's own tracing), so
    arming it is the user's explicit choice (``--evidence``, ``evidence: true``)."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes") and board.kind != "local"


def arms(job, cli: Optional[bool], campaign: Optional[bool]) -> bool:
    """Whether *job* runs armed: the command line, else the campaign, else
    :func:`armed_by_default` for its board."""
    if cli is not None:
        return cli
    if campaign is not None:
        return campaign
    return armed_by_default(job.board)


def thresholds(suite_name: str, suite: str, load: str, lookup) -> dict[str, float]:
    """What to break at for one suite run ({"max_us": ..} for cyclictest,
    {"thread_us": .., "irq_us": ..} for timerlat): the suite's own
    :meth:`rtlab.suites.Suite.evidence_thresholds`; {} when there is no
    budget maximum to break at. *lookup(suite_name, load)* is the budget lookup."""
    return SUITES[suite].evidence_thresholds(suite_name, load, lookup)


def arm_job(job, budgets):
    """The job with every suite run that can break at its budget armed
    (SuiteRun.evidence set from the budgets)."""
    def lookup(name, load):
        return budgets.lookup(job.board.budget_class, job.variant.name, name, load)
    runs = tuple(dataclasses.replace(r, evidence=thresholds(r.name, r.suite, r.load, lookup) or None)
                 for r in job.suites)
    return dataclasses.replace(job, suites=runs)


# ---------------------------------------------------------------- board side

def start_tracing(sh) -> Optional[str]:
    """Record the scheduler and IRQ events on the board; why not, or None."""
    t = TRACEFS
    sh.run(f"[ -e {t}/trace ] || mount -t tracefs nodev {t} 2>/dev/null")
    out, rc = sh.run(f"test -w {t}/tracing_on && test -d {t}/events/sched && echo tracing-ok")
    if "tracing-ok" not in " ".join(out):
        return f"no writable tracefs with scheduler events at {t}"
    cmds = [f"echo 0 > {t}/tracing_on", f"echo nop > {t}/current_tracer", f"echo > {t}/trace",
            f"echo {BUFFER_KB} > {t}/buffer_size_kb"]
    cmds += [f"echo 1 > {t}/events/{e}/enable" for e in EVENTS]
    cmds.append(f"echo 1 > {t}/tracing_on")
    _, rc = sh.run(" && ".join(cmds))
    return None if rc == 0 else "could not enable the trace events"


def stop_tracing(sh) -> None:
    t = TRACEFS
    sh.run(f"echo 0 > {t}/tracing_on; for e in {' '.join(EVENTS)}; do echo 0 > {t}/events/$e/enable; done")


def fetch_trace(sh, host_dir: Path, lines: int = 6000) -> Optional[Path]:
    """Copy the stopped trace of the CPU where it broke (the ``hit latency
    threshold`` mark's) off the board into host_dir/evidence/trace.txt: its
    last *lines* events, enough for the seconds before the breach, small
    enough for a serial console."""
    t = TRACEFS
    out, _ = sh.run(f"grep -m1 'hit latency threshold' {t}/trace")
    m = re.search(r"\[(\d+)\]", " ".join(out))
    src = f"{t}/per_cpu/cpu{int(m[1])}/trace" if m else f"{t}/trace"
    copy = "/tmp/rtlab-evidence-trace.txt"
    sh.run(f"tail -n {int(lines)} {src} > {copy} 2>/dev/null")
    data = sh.fetch(copy, timeout=300)
    sh.run(f"rm -f {copy}")
    if not data:
        return None
    d = host_dir / EVIDENCE_DIR
    d.mkdir(parents=True, exist_ok=True)
    (d / TRACE_FILE).write_bytes(data)
    return d / TRACE_FILE


# ---------------------------------------------------------------- analysis

# "  cyclictest-312   [001] d..2.  123.456789: sched_switch: prev_comm=..."
# the timerlat tracer's own lines carry no event name: "... 131.476767: #5205 context irq timer_latency 8836464 ns"
_LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+"
                   r"(?:(?P<event>\w+):\s?)?(?P<body>.*)$")
_FIELDS = re.compile(r"(\w+)=(\S+)")


@dataclass
class Event:
    ts: float
    cpu: int
    task: str
    pid: int
    event: str
    body: str

    def fields(self) -> dict[str, str]:
        return dict(_FIELDS.findall(self.body))


def parse_trace(text: str) -> list[Event]:
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            event = m["event"] or ("timerlat" if m["body"].startswith("#") else "")
            out.append(Event(float(m["ts"]), int(m["cpu"]), m["task"].strip(), int(m["pid"]), event, m["body"]))
    return out


def _rt_prio(kernel_prio: str) -> Optional[int]:
    """sched_switch's prio (kernel scale) -> RT priority, None for CFS tasks."""
    try:
        p = int(kernel_prio)
    except ValueError:
        return None
    return 99 - p if 0 <= p < 100 else None


def analyse_sched_trace(text: str, latency_us: Optional[float] = None,
                        victim_pid: Optional[int] = None) -> dict[str, Any]:
    """Who delayed the late thread, from a cyclictest breaktrace.

    The late thread is the writer of the ``hit latency threshold`` mark (or
    *victim_pid*); the window is from its last wake-up before the mark to
    the sched_switch that ran it. Returns {"culprit", "kind", "duration_us",
    "summary", "cpu", "victim", ...}; summary is None when the trace does not
    show the window (too short a buffer, no mark)."""
    events = parse_trace(text)
    mark = next((e for e in events if e.event in ("tracing_mark_write", "print")
                 and "hit latency threshold" in e.body), None)
    result: dict[str, Any] = {"events": len(events), "summary": None}
    if mark is not None:
        m = re.search(r"hit latency threshold \((\d+) > (\d+)\)", mark.body)
        if m:
            result["latency_us"], result["threshold_us"] = float(m[1]), float(m[2])
        victim_pid, cpu, end = mark.pid, mark.cpu, mark.ts
    elif victim_pid is None:
        result["why"] = "no 'hit latency threshold' mark in the trace"
        return result
    else:
        last = [e for e in events if e.pid == victim_pid]
        if not last:
            result["why"] = f"no event of pid {victim_pid} in the trace"
            return result
        cpu, end = last[-1].cpu, last[-1].ts
    latency_us = result.get("latency_us", latency_us)
    result.update(cpu=cpu, victim_pid=victim_pid)
    # the switch that finally ran the late thread, and its wake-up before it
    switch_in = None
    for e in reversed(events):
        if e.ts > end or e.cpu != cpu or e.event != "sched_switch":
            continue
        if e.fields().get("next_pid") == str(victim_pid):
            switch_in = e
            break
    if switch_in is None:
        result["why"] = f"the trace does not show pid {victim_pid} being switched in on CPU {cpu}"
        return result
    wake = None
    for e in reversed(events):
        if e.ts > switch_in.ts:
            continue
        if e.event in ("sched_wakeup", "sched_waking") and e.fields().get("pid") == str(victim_pid):
            wake = e
            break
    start = wake.ts if wake is not None else switch_in.ts - (latency_us or 0) / 1e6
    result["victim"] = switch_in.fields().get("next_comm", "?")
    result["window_us"] = round((switch_in.ts - start) * 1e6, 1)
    candidates: list[dict[str, Any]] = []
    # tasks that ran on the CPU in the window: from each switch-in to its switch-out
    running: Optional[tuple[str, str, Optional[int], float]] = None
    for e in events:
        if e.cpu != cpu or e.event != "sched_switch" or e.ts > switch_in.ts:
            continue
        f = e.fields()
        if running is not None and e.ts >= start:
            comm, pid, prio, t0 = running
            dur = (e.ts - max(t0, start)) * 1e6
            if pid != str(victim_pid) and pid != "0" and dur > 0:
                candidates.append({"kind": "task", "name": comm, "pid": int(pid), "rt_prio": prio,
                                   "duration_us": round(dur, 1)})
        running = (f.get("next_comm", "?"), f.get("next_pid", "?"), _rt_prio(f.get("next_prio", "")), e.ts)
    # a task that ran from before the wake-up to the switch-in (the common case)
    prev = switch_in.fields()
    if prev.get("prev_pid") not in (None, "0", str(victim_pid)) and not any(
            c["pid"] == int(prev["prev_pid"]) for c in candidates):
        candidates.append({"kind": "task", "name": prev.get("prev_comm", "?"), "pid": int(prev["prev_pid"]),
                           "rt_prio": _rt_prio(prev.get("prev_prio", "")),
                           "duration_us": result["window_us"]})
    # interrupt handlers on the CPU in the window
    open_irq: dict[str, Event] = {}
    for e in events:
        if e.cpu != cpu or e.ts > switch_in.ts:
            continue
        f = e.fields()
        if e.event == "irq_handler_entry":
            open_irq[f.get("irq", "?")] = e
        elif e.event == "irq_handler_exit" and f.get("irq") in open_irq:
            entry = open_irq.pop(f["irq"])
            if e.ts >= start:
                name = re.search(r"name=(\S+)", entry.body)
                candidates.append({"kind": "irq", "name": name[1] if name else f"irq {f['irq']}",
                                   "irq": int(f["irq"]) if f["irq"].isdigit() else f["irq"],
                                   "duration_us": round((e.ts - max(entry.ts, start)) * 1e6, 1)})
    # one entry per task or IRQ: its stretches in the window added up, longest first
    candidates = _merge(candidates)
    result["candidates"] = candidates[:10]
    if not candidates:
        result["why"] = "nothing else ran on the CPU in the window (the delay is outside the trace: " \
                        "hardware, a hypervisor, or the CPU idle exit)"
        return result
    top = result["candidates"][0]
    result["culprit"] = top
    result["summary"] = _say(top, cpu)
    return result


def write_analysis(host_dir: Path, analysis: dict[str, Any]) -> Path:
    d = host_dir / EVIDENCE_DIR
    d.mkdir(parents=True, exist_ok=True)
    (d / ANALYSIS_FILE).write_text(json.dumps(analysis, indent=2) + "\n")
    return d / ANALYSIS_FILE


def read_analysis(host_dir: Path) -> Optional[dict[str, Any]]:
    try:
        return read_json(host_dir / EVIDENCE_DIR / ANALYSIS_FILE)
    except (OSError, ValueError):
        return None


def _stretches(events: list[Event], cpu: int, start: float, end: float, first: tuple[str, int],
               victim_pid: int) -> list[dict[str, Any]]:
    """What ran on *cpu* from *start* to *end*: task stretches between
    sched_switches (*first* = the task running at *start*) and IRQ handlers."""
    out: list[dict[str, Any]] = []
    comm, pid = first
    prio: Optional[int] = None
    t0 = start
    open_irq: dict[str, Event] = {}
    for e in events:
        if e.cpu != cpu or e.ts < start or e.ts > end:
            continue
        f = e.fields()
        if e.event == "sched_switch":
            if f.get("prev_pid") == str(pid) and f.get("prev_prio"):
                prio = _rt_prio(f["prev_prio"])
            if pid not in (0, victim_pid) and e.ts > t0:
                out.append({"kind": "task", "name": comm, "pid": pid, "rt_prio": prio,
                            "duration_us": round((e.ts - t0) * 1e6, 1)})
            comm, pid, t0 = f.get("next_comm", "?"), int(f.get("next_pid", "0") or 0), e.ts
            prio = _rt_prio(f.get("next_prio", ""))
        elif e.event == "irq_handler_entry":
            open_irq[f.get("irq", "?")] = e
        elif e.event == "irq_handler_exit" and f.get("irq") in open_irq:
            entry = open_irq.pop(f["irq"])
            name = re.search(r"name=(\S+)", entry.body)
            out.append({"kind": "irq", "name": name[1] if name else f"irq {f['irq']}",
                        "irq": int(f["irq"]) if f["irq"].isdigit() else f["irq"],
                        "duration_us": round((e.ts - entry.ts) * 1e6, 1)})
    if pid not in (0, victim_pid) and end > t0:
        out.append({"kind": "task", "name": comm, "pid": pid, "rt_prio": prio,
                    "duration_us": round((end - t0) * 1e6, 1)})
    return out


def _merge(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per task or IRQ, its stretches added up, longest first."""
    merged: dict[tuple, dict[str, Any]] = {}
    for c in candidates:
        k = (c["kind"], c.get("pid", c.get("irq")))
        if k in merged:
            merged[k]["duration_us"] = round(merged[k]["duration_us"] + c["duration_us"], 1)
            merged[k]["stretches"] += 1
            if merged[k].get("rt_prio") is None:
                merged[k]["rt_prio"] = c.get("rt_prio")
        else:
            merged[k] = {**c, "stretches": 1}
    return sorted(merged.values(), key=lambda c: -c["duration_us"])


def _say(top: dict[str, Any], cpu: int) -> str:
    if top["kind"] == "task":
        # a task that is not RT held the CPU without preemption (a kernel
        # section with preemption off: "preempted" in the wide sense)
        prio = f", RT prio {top['rt_prio']}" if top.get("rt_prio") is not None else ", SCHED_OTHER"
        return f"preempted by {top['name']} (pid {top['pid']}{prio}) for {top['duration_us']:.0f} us on CPU {cpu}"
    return f"blocked by {top['name']} (irq {top['irq']}) for {top['duration_us']:.0f} us on CPU {cpu}"


def analyse_timerlat_trace(text: str, run_evidence: dict[str, float],
                           worst: Optional[tuple[str, int, float]] = None) -> dict[str, Any]:
    """Who delayed the timerlat thread (or IRQ), from rtla's saved trace.

    rtla 6.1 prints each sample as ``#<seq> context <irq|thread>
    timer_latency <N> ns``. When the breaching sample is in the trace, it is
    analysed like cyclictest's. The kernel stops tracing as the late thread
    runs, so the breaching thread sample is often not in the trace: then
    *worst* (kind, cpu, latency_us; from rtla's summary) names the CPU, and
    the window is from that CPU's timerlat thread's last wake-up to the end
    of the trace: what ran there meanwhile (the task interrupted by the
    wake-up, each task switched in after it, the IRQ handlers)."""
    events = parse_trace(text)
    late = None
    for e in events:
        m = re.search(r"context\s+(irq|thread)\s+timer_latency\s+(\d+)\s+ns", e.body)
        if not m:
            continue
        kind, ns = m[1], int(m[2])
        limit = run_evidence.get(f"{kind}_us")
        if limit and ns / 1000 >= limit - 1:
            late = (e, kind, ns / 1000)
    if late is not None and late[1] == "thread":
        e, kind, lat = late
        r: dict[str, Any] = analyse_sched_trace(text, latency_us=lat, victim_pid=e.pid)
        r.update(context="thread", latency_us=lat)
        if r.get("summary"):
            r["summary"] = f"timerlat thread {lat:.0f} us: " + r["summary"]
        return r
    if late is not None:
        kind, cpu, lat = "irq", late[0].cpu, late[2]
    elif worst is not None:
        kind, cpu, lat = worst
    else:
        return {"events": len(events), "summary": None,
                "why": "no timerlat sample over the threshold in the trace, and no summary to name the CPU"}
    r = {"events": len(events), "context": kind, "latency_us": lat, "cpu": cpu}
    wakes = [e for e in events if e.cpu == cpu and e.event == "sched_wakeup"
             and e.fields().get("comm") == f"timerlat/{cpu}"]
    on_cpu = [e for e in events if e.cpu == cpu]
    if not on_cpu:
        r.update(summary=None, why=f"the trace has no event on CPU {cpu}")
        return r
    if wakes:
        # the wake-up comes from the timer IRQ: the line's task is the one it interrupted
        start, first = wakes[-1].ts, (wakes[-1].task, wakes[-1].pid)
        victim = int(wakes[-1].fields().get("pid", "0") or 0)
    else:
        # the wake-up is older than the CPU's part of the trace (the ring
        # buffer kept the last events): the thread waited through all of it
        start, first = on_cpu[0].ts, (on_cpu[0].task, on_cpu[0].pid)
        victim = -1
    end = max(x.ts for x in on_cpu)
    switch_in = next((x for x in on_cpu if x.ts >= start and x.event == "sched_switch"
                      and x.fields().get("next_comm") == f"timerlat/{cpu}"), None)
    if switch_in is not None:
        end = switch_in.ts
    cands = _merge(_stretches(events, cpu, start, end, first, victim))
    r.update(victim=f"timerlat/{cpu}", window_us=round((end - start) * 1e6, 1),
             wake_up_in_trace=bool(wakes), candidates=cands[:10])
    if not cands:
        r.update(summary=None, why="nothing else ran on the CPU in the window")
        return r
    r["culprit"] = top = cands[0]
    said = _say(top, cpu)
    if not wakes:  # only the traced part of the wait is known
        said = said.replace(f" for {top['duration_us']:.0f} us", f" for at least {top['duration_us']:.0f} us")
    r["summary"] = f"timerlat {kind} {lat:.0f} us: " + said
    return r


def _timerlat_worst(host_dir: Path, run) -> Optional[tuple[str, int, float]]:
    """(kind, cpu, max_us) of the worst column over its threshold in rtla's summary."""
    try:
        irq, thread = parse_timerlat_hist(MeasurementDir(host_dir).stdout.read_text(errors="replace"),
                                          MeasurementDir(host_dir).stdout)
    except (OSError, InputError):
        return None
    over = [(t.max_us / run.evidence[f"{kind}_us"], kind, t.cpu, t.max_us)
            for kind, out in (("thread", thread), ("irq", irq)) if run.evidence.get(f"{kind}_us")
            for t in out.threads if t.cpu is not None and t.max_us >= run.evidence[f"{kind}_us"] - 1]
    if not over:
        return None
    _, kind, cpu, lat = max(over)
    return kind, cpu, lat


def collect(sh, suite, run, host_dir: Path, traced: bool) -> Optional[dict[str, Any]]:
    """After an armed run: when the tool broke, the trace and its analysis
    into host_dir/evidence/; None (and nothing written) when it did not."""
    if not run.evidence or not suite.breached(host_dir, run):
        return None
    d = host_dir / EVIDENCE_DIR
    d.mkdir(parents=True, exist_ok=True)
    saved = [host_dir / f for f in suite.evidence_outputs(run) if (host_dir / f).is_file()]
    if saved:  # the tool saved its own trace (rtla -t)
        trace = d / TRACE_FILE
        saved[0].replace(trace)
        analysis = analyse_timerlat_trace(trace.read_text(errors="replace"), run.evidence,
                                          worst=_timerlat_worst(host_dir, run))
    elif traced:
        trace = fetch_trace(sh, host_dir)
        analysis = analyse_sched_trace(trace.read_text(errors="replace")) if trace else \
            {"summary": None, "why": "the board's trace buffer was empty"}
    else:
        analysis = {"summary": None, "why": "no kernel trace on this board (tracefs not writable)"}
    analysis["thresholds"] = run.evidence
    write_analysis(host_dir, analysis)
    return analysis
