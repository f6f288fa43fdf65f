"""The gate: measurements against budgets, verdicts, exit codes.

Only measurements that the lab produced cleanly are judged. Anything the lab
broke (no output, crashed tool, dead load) is INFRA and stays INFRA: it is
never turned into a latency verdict, and a latency verdict never into INFRA.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

from ..plan.budgets import Budget, Budgets
from ..core.hostnoise import DEFAULT_STEAL_INFRA_MS, STALLED, STOLE
from ..core.model import PERCENTILES, InfraCause, Measurement, RunResult, ThreadResult, ToolOutput, Verdict
from ..soak.checkpoint import is_soak, judge_soak
from ..suites import METRICS, Suite

#: a run whose threads took fewer samples than this share of duration ÷
#: interval was cut short (a killed tool, a lost console): INFRA, never judged
MIN_SAMPLE_SHARE = 0.9


def late_periods_upper_bound(t, interval_us: Optional[float]) -> int:
    """Periods a thread can have lost to its own late wake-ups, at most:
    cyclictest skips every period that passed while it waited (a thread held
    off its CPU for 400 ms at a 1 ms interval takes 400 fewer samples).
    From the histogram (each sample's bucket) and, for samples beyond it,
    the maximum: an upper bound, so that missing samples a latency could
    explain are never called a run cut short (a latency failure is never
    INFRA)."""
    if not interval_us or interval_us <= 0:
        return 0
    h = t.histogram
    if h is None or not h.counts:
        return int(t.cycles * (t.max_us // interval_us)) if t.max_us else 0
    lost = sum(c * int((i * h.bucket_us) // interval_us) for i, c in h.counts.items())
    over = h.overflows or t.overflows or 0
    return lost + int(over * (t.max_us // interval_us)) if t.max_us else lost


def sample_problems(out: ToolOutput, expected: Optional[int], interval_us: Optional[float] = None,
                    elapsed_s: Optional[float] = None, duration_s: Optional[float] = None) -> list[str]:
    """Why the samples of a latency output cannot be judged: a thread with
    no cycles at all, or (where the suite knows how many a full run takes)
    fewer than MIN_SAMPLE_SHARE of them, more missing than its latencies
    can explain (*interval_us*: the tool's period), from a tool that did not
    run its whole duration (*elapsed_s* of *duration_s*, where known: an
    overloaded emulated board that ran its full time but missed periods,
    cyclictest taking 56 % of its loops under TCG, measured latency)."""
    problems = []
    ran_full = elapsed_s is not None and bool(duration_s) and elapsed_s >= MIN_SAMPLE_SHARE * duration_s
    for t in out.threads:
        where = f"thread {t.thread}" + (f" (cpu {t.cpu})" if t.cpu is not None else "")
        if t.cycles <= 0:
            problems.append(f"{out.tool} {where} recorded 0 cycles")
        elif (expected and t.cycles + late_periods_upper_bound(t, interval_us) < MIN_SAMPLE_SHARE * expected
              and not ran_full):
            took = f" in {elapsed_s:g} s of {duration_s:g} s" if elapsed_s is not None and duration_s else ""
            problems.append(f"{out.tool} {where} cut short: {t.cycles} of {expected} samples{took} "
                            f"(< {MIN_SAMPLE_SHARE:.0%} of duration / interval)")
    return problems


def self_checked(out: ToolOutput) -> bool:
    """The tool ran a check of its own and it passed (pi_stress: no
    deadlocked inversion group; rt-migrate-test -c: priority order kept):
    its suite's parser sets ``metrics["failed"] = 0`` then, and a
    ToolFailure when it failed. Only that makes an unbudgeted measurement
    a PASS: without it nothing was judged (SHOWN)."""
    return out.failure is None and out.metrics.get("failed") == 0


def judge(m: Measurement, budget: Budget | None, *, unbudgeted: bool = False,
          where: str = "", steal_infra_ms: float = DEFAULT_STEAL_INFRA_MS) -> Measurement:
    """*m* against *budget* (:func:`judge_samples`); a checkpointed soak's kept
    samples are judged even when the run broke off, and an incomplete soak
    never passes (rtlab.soak.checkpoint.judge_soak)."""
    if is_soak(m.output):
        return judge_soak(m, budget, judge_samples, unbudgeted=unbudgeted, where=where,
                          steal_infra_ms=steal_infra_ms)
    return judge_samples(m, budget, unbudgeted=unbudgeted, where=where, steal_infra_ms=steal_infra_ms)


def judge_samples(m: Measurement, budget: Budget | None, *, unbudgeted: bool = False,
                  where: str = "", steal_infra_ms: float = DEFAULT_STEAL_INFRA_MS) -> Measurement:
    """*unbudgeted*: the budget file says this suite has no budget on purpose
    (SHOWN: measured, judged against nothing, never a pass, unless the tool's
    own check passed); without that, a measurement with no budget is an error
    naming the key (*where*: the budget file), never a pass.
    Breaches that stalls of the host explain, by the late samples' own
    times on their own CPU (:func:`host_explained`), are INFRA, neither
    PASS nor FAIL."""
    if m.verdict == Verdict.INFRA:  # set by the runner: the lab failed here
        return m
    out = m.output
    m.reasons = []
    m.infra_cause = None
    if out.failure is not None:  # the tool's own verdict on the kernel (pi_stress deadlock)
        m.verdict = Verdict.FAIL
        m.reasons.append(out.failure.message)
        return m
    if out.return_code not in (None, 0):
        m.verdict = Verdict.INFRA
        m.reasons.append(f"{out.tool} returned {out.return_code}")
        return m
    if not out.threads:
        suite = Suite.for_tool(out.tool)
        key = suite.metric if suite is not None and suite.result_kind == METRICS else None
        if key is not None and key in out.metrics:  # a whole-run number, not latencies
            if self_checked(out):
                m.verdict = Verdict.PASS
                m.reasons.append(f"{out.tool}'s own check passed; {key} shown, not budgeted")
            else:
                m.verdict = Verdict.SHOWN
                m.reasons.append(f"{out.tool} measures {key}, not latency: shown, not judged")
            return m
        m.verdict = Verdict.INFRA
        m.reasons.append(f"{out.tool} produced no measurements")
        return m
    empty = sample_problems(out, None)  # without an expected count: threads with no sample at all
    if empty:
        m.set_infra(empty, InfraCause.NO_SAMPLES)
        return m
    bad = [t.thread for t in out.threads if not all(math.isfinite(x) for x in (t.min_us, t.avg_us, t.max_us))]
    if bad:  # NaN >= budget is false: a NaN maximum would pass every budget
        m.verdict = Verdict.INFRA
        m.reasons.append(f"{out.tool} thread {bad[0]}: latency is not a finite number, nothing judged")
        return m
    m.budget = budget
    if budget is None:
        if unbudgeted and self_checked(out):
            m.verdict = Verdict.PASS
            m.reasons.append(f"{out.tool}'s own check passed; latencies unbudgeted by "
                             f"{where or 'the budget file'}: shown, not judged")
        elif unbudgeted:
            m.verdict = Verdict.SHOWN
            m.reasons.append(f"unbudgeted by {where or 'the budget file'}: shown, not judged")
        else:
            m.verdict = Verdict.INFRA
            m.reasons.append(f"no budget for {m.key.label()} in {where or 'the budget file'}: "
                             "add one, or list the suite under unbudgeted:")
        return m
    allt = out.combined()
    failed = max_breached = False
    pct_breached: list[str] = []  # the percentiles over their budget
    if budget.max_us is not None:
        m.share_over_budget = allt.share_at_or_above(budget.max_us)
        if allt.max_us >= budget.max_us:
            failed = max_breached = True
            worst = out.worst()
            m.reasons.append(f"max {allt.max_us:g} us >= budget {budget.max_us:g} us "
                             f"(thread {worst.thread}, cpu {worst.cpu})")
    for p, limit in sorted(budget.percentiles_us.items(), key=lambda kv: float(kv[0])):
        value = allt.percentiles_us.get(p)
        if value is None:
            h = allt.histogram
            if h is None:
                m.verdict = Verdict.INFRA
                m.reasons.append(f"budget limits p{p} but {out.tool} recorded no histogram")
                return m
            top = (h.size or 0) * h.bucket_us
            if top >= limit:  # p lies beyond the range, so above the limit
                failed = True
                pct_breached.append(p)
                m.reasons.append(f"p{p} beyond the histogram range (>= {top:g} us) >= budget {limit:g} us")
            else:
                m.verdict = Verdict.INFRA
                m.reasons.append(f"p{p} unknowable: histogram range {top:g} us is below the budget {limit:g} us")
                return m
        elif value >= limit:
            failed = True
            pct_breached.append(p)
            m.reasons.append(f"p{p} {value:g} us >= budget {limit:g} us")
    if failed and (m.host_delays is not None or m.host_noise):
        # the host's doing, not the kernel's: measured again (rtlab.run.runner), never a verdict
        explained = host_explained(m, allt, budget, max_breached, pct_breached, steal_infra_ms)
        if explained is not None:
            why, cause = explained
            m.set_infra([why, f"(breaches not judged: {'; '.join(m.reasons)})"], cause)
            return m
    m.verdict = Verdict.FAIL if failed else Verdict.PASS
    if failed and m.evidence:  # what the trace at the breach says delayed the thread
        summary = m.evidence.get("summary") or \
            ("no culprit named" + (f": {m.evidence['why']}" if m.evidence.get("why") else ""))
        m.reasons.append(f"evidence: {summary} (trace: {m.evidence['dir']})")
    return m


def _samples_at_or_above(allt: ThreadResult, m: Measurement, threshold_us: float) -> Optional[int]:
    """Samples of the measurement at or over a threshold: from the histogram
    where it covers the threshold, else from the recorded late samples where
    every one over their trigger was recorded; None where neither knows."""
    if allt.max_us < threshold_us:
        return 0
    h = allt.histogram
    if h is not None and h.covers(threshold_us):
        return h.count_at_or_above(threshold_us)
    return m.host_delays.at_or_above(threshold_us) if m.host_delays is not None else None


def host_explained(m: Measurement, allt: ThreadResult, budget: Budget, max_breached: bool,
                   pct_breached: list[str], steal_infra_ms: float) -> Optional[tuple[str, InfraCause]]:
    """The INFRA reason and cause when stalls of the host explain every
    breach of *m*, else None (the breach is the kernel's).

    With the samples' own times (``m.host_delays``, rtlab.core.hostattr):
    each breached threshold's samples at or over it, less those a stall of
    the host on their own CPU brings under it, no longer break it (a max:
    none left; a percentile p: no more than (100 - p) % of the samples).
    Steal elsewhere, or a share of the window stolen, excuses nothing.

    Without them (a tool that gives no sample times, an older run): only a
    breached max, by the longest stall on the worst thread's CPU (a stall of
    every CPU at once, or that CPU's own steal; a QEMU guest's: only every
    CPU at once), at least *steal_infra_ms* long, that explains it (the max
    less the stall is under the budget) with no more samples over the budget
    than the stalls' share of the window can have delayed."""
    thresholds: list[tuple[str, float, Optional[str]]] = []
    if max_breached and budget.max_us is not None:
        thresholds.append(("max", budget.max_us, None))
    thresholds += [(f"p{p}", budget.percentiles_us[p], p) for p in pct_breached]
    hd = m.host_delays
    if hd is not None:
        parts, kinds = [], set()
        for label, limit, p in thresholds:
            over = _samples_at_or_above(allt, m, limit)
            if over is None:
                return None
            n, k = hd.excused(limit)
            if p is None:
                ok = n >= over
            else:
                total = allt.histogram.total if allt.histogram is not None else allt.cycles
                rank = max(1, math.ceil(Fraction(str(p)) * total / 100))
                ok = over - n <= total - rank  # the sample of p's rank falls under the limit
            if not ok or n == 0:
                return None
            kinds |= k
            parts.append(f"{label}: {n} of the {over} samples at or over {limit:g} us")
        steal = "steal" in kinds
        where = ("their own CPU's steal" + (" or every CPU stopped at once" if "machine" in kinds else "")
                 if steal else "every CPU stopped at once")
        return (f"{STOLE if steal else STALLED} ({where}) over the late samples: {'; '.join(parts)} fell inside "
                f"the host's stalls on their CPU, and without those delays no budget breaks: a stall of the "
                f"machine, not a latency of the kernel",
                InfraCause.HOST_STEAL if steal else InfraCause.HOST_STALL)
    if pct_breached or not max_breached or budget.max_us is None:
        return None
    noise = m.host_noise or {}
    stall = noise.get("stall")
    if not isinstance(stall, dict):
        return None
    try:
        machine = float(stall.get("stall_ms") or 0) if stall.get("trusted") is True else 0.0
        clock = noise.get("board_clock") if isinstance(noise.get("board_clock"), dict) else {}
        worst = m.output.worst()
        own = (stall.get("steal_gap_ms") or {}).get(f"cpu{worst.cpu}") \
            if worst is not None and worst.cpu is not None and not clock.get("guest") else None
        steal_ms = float(own or 0)
        window = float(noise.get("window_s") or 0)
    except (TypeError, ValueError, AttributeError):
        return None
    best = max(machine, steal_ms)
    if best < steal_infra_ms or allt.max_us - best * 1000 >= budget.max_us:
        return None
    if m.share_over_budget is not None and window > 0 and m.share_over_budget > best / (window * 1000) + 0.001:
        return None
    steal = steal_ms > machine
    what = f"{best:g} ms on cpu{worst.cpu} (its own steal)" if steal else f"{best:g} ms on every CPU at once"
    return (f"{STOLE if steal else STALLED} {what} during the measurement, enough to explain its max "
            f"({allt.max_us:g} us): a stall of the machine, not a latency of the kernel",
            InfraCause.HOST_STEAL if steal else InfraCause.HOST_STALL)


def judge_run(run: RunResult, budgets: Budgets) -> RunResult:
    for job in run.jobs:
        for m in job.measurements:
            k = m.key
            judge(m, budgets.lookup(job.budget_class, k.variant, k.suite, k.load),
                  unbudgeted=budgets.unbudgeted(job.budget_class, k.suite),
                  where=f"{budgets.path.name} (budget class {job.budget_class or '?'})",
                  steal_infra_ms=getattr(budgets, "steal_infra_ms", DEFAULT_STEAL_INFRA_MS))
    return run


assert set(PERCENTILES) >= {"99.9"}  # the table's column


def killed_run(run_dir) -> Optional[RunResult]:
    """A run directory its runner never finished (run-started.json, no
    run.json: the runner was killed, or still runs): INFRA "run killed",
    listing the raw files that reached the disk. None for a finished run."""
    import json
    from pathlib import Path

    from ..core.rundir import RUN_STARTED, RunDir
    from ..core.model import JobResult
    from ..core.procutil import process_start
    d = Path(run_dir)
    if not d.is_dir() or RunDir(d).run_json.exists() or not RunDir(d).run_started.is_file():
        return None
    try:
        started = json.loads((d / RUN_STARTED).read_text(errors="replace")[:65536])
        if not isinstance(started, dict):
            started = {}
    except ValueError:
        started = {}
    pid = started.get("pid")
    running = isinstance(pid, int) and pid > 0 and started.get("pid_start") is not None \
        and process_start(pid) == started.get("pid_start")
    # what the tools and the job wrote, shallowest first (the job's own logs
    # before a load's many files); not scratch (dot files: the stall witness's)
    files = [str(f) for f in sorted((p.relative_to(d) for p in d.rglob("*") if p.is_file() and not p.is_symlink()
                                     and p.name != RUN_STARTED),
                                    key=lambda f: (len(f.parts), str(f)))
             if not any(part.startswith(".") for part in f.parts)]
    shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    why = (f"run not finished: its runner (pid {pid}) still runs" if running else
           f"run killed: no run.json (started {started.get('started', '?')} by pid {pid or '?'})")
    why += f"; raw files kept: {shown}" if files else "; no raw files reached the disk"
    run_id = started.get("run_id") if isinstance(started.get("run_id"), str) else d.name
    campaign = started.get("campaign") if isinstance(started.get("campaign"), str) else "?"
    return RunResult(run_id=run_id, started=str(started.get("started", "")), campaign=campaign,
                     jobs=[JobResult(board="-", variant="-", arch="-", budget_class="-", infra_error=why)])
