"""JUnit XML for CI (GitLab `artifacts:reports:junit`) from results on disk.

One <testsuite> per board × variant job of each run; one <testcase> per
measurement (board/variant/suite/load): <failure> for FAIL with the gate's
reasons, <error> for INFRA. A job that produced no measurement gets one
testcase of its own: `build` (<failure>: the commit could not be built into
the variant) or `boot` (<error>: the lab failed, no trustworthy number).
Planned pairs a board's kernels cannot be, and suites a board cannot run
(rtla without the kernel's tracer), are <skipped> with the reason.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable, Optional

from ..core.model import JobResult, Measurement, RunResult, Verdict


def _stats(m: Measurement) -> str:
    c = m.output.combined()
    if c is None:
        return "no samples"
    p = c.percentiles_us.get("99.9")
    return (f"min {c.min_us:g} us, avg {c.avg_us:g} us, max {c.max_us:g} us"
            + (f", p99.9 {p:g} us" if p is not None else "")
            + (f"; budget {m.budget.to_json()}" if m.budget else ""))


def _case(suite_el: ET.Element, classname: str, name: str, time_s: float = 0.0) -> ET.Element:
    return ET.SubElement(suite_el, "testcase", classname=classname, name=name, time=f"{time_s:.3f}")


def job_suite(run: RunResult, job: JobResult) -> ET.Element:
    classname = f"{job.board}.{job.variant}"
    rep = f"/r{job.repeat}" if job.repeat else ""
    classname += f".r{job.repeat}" if job.repeat else ""
    el = ET.Element("testsuite", name=f"{run.run_id}/{job.board}/{job.variant}{rep}",
                    timestamp=run.started, time=f"{job.duration_s:.3f}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if job.build_error:
        tc = _case(el, classname, "build")
        ET.SubElement(tc, "failure", message="kernel build failed", type="build_error").text = job.build_error
        counts["tests"] += 1
        counts["failures"] += 1
    elif job.infra_error or not (job.measurements or job.not_available):
        why = job.infra_error or "no measurement"
        tc = _case(el, classname, "boot", job.duration_s)
        ET.SubElement(tc, "error", message=why.splitlines()[0][:200], type="infra").text = why
        counts["tests"] += 1
        counts["errors"] += 1
    for m in job.measurements:
        k = m.key
        # no time per measurement: rtlab records the job's (the suite's time);
        # an even share of it would be a made-up number
        tc = _case(el, classname, f"{k.suite}@{k.load}")
        counts["tests"] += 1
        reasons = "; ".join(m.reasons)
        if m.verdict == Verdict.FAIL:
            ev = (f"\nevidence: {job.board}/{job.variant}/{m.evidence['dir']}/ (trace.txt, analysis.json): "
                  f"{m.evidence.get('summary') or 'no culprit named'}") if m.evidence else ""
            ET.SubElement(tc, "failure", message=reasons or "over budget", type="budget").text = \
                f"{k.label()}: {reasons}\n{_stats(m)}{ev}"
            counts["failures"] += 1
        elif m.verdict == Verdict.INFRA or m.verdict is None:
            ET.SubElement(tc, "error", message=reasons or "not judged", type="infra").text = \
                f"{k.label()}: {reasons or 'not judged'}"
            counts["errors"] += 1
        elif m.verdict == Verdict.SHOWN:  # measured, judged against nothing: not a pass
            ET.SubElement(tc, "skipped", message=reasons or "shown, not judged")
            counts["skipped"] += 1
        ET.SubElement(tc, "system-out").text = f"{_stats(m)}\nraw: {', '.join(m.raw)}"
    for na in job.not_available:  # the board cannot run the suite (no tracer): not judged
        tc = _case(el, classname, f"{na['suite']}@{na['load']}")
        ET.SubElement(tc, "skipped", message=f"not available: {na['reason']}")
        counts["tests"] += 1
        counts["skipped"] += 1
    for key, n in counts.items():
        el.set(key, str(n))
    return el


def regression_suite(run: RunResult, verdict: dict) -> ET.Element:
    """The regression verdict against the baseline (``compare.json`` that
    ``rtlab compare``/``rtlab gate --baseline`` left in the run dir): one
    testcase per key, <failure> for a regression, <error> where it could not
    be decided, <skipped type="blind"> for a key not gated (it could not see
    what its class asks); the text names the baseline and links the
    comparison report."""
    el = ET.Element("testsuite", name=f"{run.run_id}/regression", timestamp=run.started, time="0")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    where = verdict.get("html")
    base = (verdict.get("baseline") or {}).get("source") or ", ".join((verdict.get("baseline") or {}).get("runs", []))
    for k in verdict.get("keys", []):
        tc = _case(el, "regression", k.get("label", "?"))
        counts["tests"] += 1
        text = f"{k.get('line', '')}\nbaseline: {base}" + (f"\nreport: {where}" if where else "")
        if k.get("outcome") == "regression":
            ET.SubElement(tc, "failure", message=k.get("line", "regression")[:200], type="regression").text = text
            counts["failures"] += 1
        elif k.get("outcome") == "blind":
            # not gated: it passed without seeing what its class asks, so
            # it is no pass either; skipped, saying why and the lab's cure
            ngt = k.get("not_gated")
            why = "; ".join(map(str, ngt)) if isinstance(ngt, list) and ngt else str(k.get("line", "not gated"))
            ET.SubElement(tc, "skipped", message=f"not gated: {why}"[:200], type="blind").text = text
            counts["skipped"] += 1
        elif k.get("outcome") != "no-regression":
            ET.SubElement(tc, "error", message=k.get("line", "undecided")[:200], type="undecided").text = text
            counts["errors"] += 1
        else:
            ET.SubElement(tc, "system-out").text = text
    for p in verdict.get("problems", []):
        tc = _case(el, "regression", "comparison")
        ET.SubElement(tc, "error", message=p[:200], type="undecided").text = f"{p}\nbaseline: {base}"
        counts["tests"] += 1
        counts["errors"] += 1
    for key, n in counts.items():
        el.set(key, str(n))
    return el


def junit_xml(runs: Iterable[RunResult], verdicts: Optional[dict] = None) -> ET.ElementTree:
    """*verdicts*: run id -> its compare.json (the regression verdict), if any."""
    root = ET.Element("testsuites", name="rtlab")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for run in runs:
        if (verdicts or {}).get(run.run_id):
            s = regression_suite(run, verdicts[run.run_id])
            root.append(s)
            for k in totals:
                totals[k] += int(s.get(k, 0))
        for job in run.jobs:
            s = job_suite(run, job)
            root.append(s)
            for k in totals:
                totals[k] += int(s.get(k, 0))
        for na in run.not_available:
            s = ET.SubElement(root, "testsuite", name=f"{run.run_id}/{na['board']}/{na['variant']}",
                              tests="1", failures="0", errors="0", skipped="1", time="0")
            tc = _case(s, f"{na['board']}.{na['variant']}", "available")
            ET.SubElement(tc, "skipped", message=na.get("reason", "not available"))
            totals["tests"] += 1
            totals["skipped"] += 1
    for k, n in totals.items():
        root.set(k, str(n))
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(runs: Iterable[RunResult], path: Path, verdicts: Optional[dict] = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_xml(runs, verdicts).write(path, encoding="utf-8", xml_declaration=True)
    return path
