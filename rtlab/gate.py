"""The gate: measurements against budgets, verdicts, exit codes.

Only measurements that the lab produced cleanly are judged. Anything the lab
broke (no output, crashed tool, dead load) is INFRA and stays INFRA: it is
never turned into a latency verdict, and a latency verdict never into INFRA.
"""
from __future__ import annotations

from .budgets import Budget, Budgets
from .model import PERCENTILES, Measurement, RunResult, Verdict
from .suites import METRICS, Suite


def judge(m: Measurement, budget: Budget | None) -> Measurement:
    if m.verdict == Verdict.INFRA:  # set by the runner: the lab failed here
        return m
    out = m.output
    m.reasons = []
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
            m.verdict = Verdict.PASS
            m.reasons.append(f"{out.tool} measures {key}, not latency: shown, not budgeted")
            return m
        m.verdict = Verdict.INFRA
        m.reasons.append(f"{out.tool} produced no measurements")
        return m
    m.budget = budget
    if budget is None:
        m.verdict = Verdict.PASS
        m.reasons.append("no budget for this board class, variant, suite and load")
        return m
    allt = out.combined()
    failed = False
    if budget.max_us is not None:
        m.share_over_budget = allt.share_at_or_above(budget.max_us)
        if allt.max_us >= budget.max_us:
            failed = True
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
                m.reasons.append(f"p{p} beyond the histogram range (>= {top:g} us) >= budget {limit:g} us")
            else:
                m.verdict = Verdict.INFRA
                m.reasons.append(f"p{p} unknowable: histogram range {top:g} us is below the budget {limit:g} us")
                return m
        elif value >= limit:
            failed = True
            m.reasons.append(f"p{p} {value:g} us >= budget {limit:g} us")
    m.verdict = Verdict.FAIL if failed else Verdict.PASS
    return m


def judge_run(run: RunResult, budgets: Budgets) -> RunResult:
    for job in run.jobs:
        for m in job.measurements:
            k = m.key
            judge(m, budgets.lookup(job.budget_class, k.variant, k.suite, k.load))
    return run


assert set(PERCENTILES) >= {"99.9"}  # the table's column
