"""rtla's histogram mode (``rtla timerlat hist``, ``rtla osnoise hist``, 6.1)
into the result model.

The text rtla prints (header, index rows, summary), one column per CPU and
kind: ``IRQ-NNN`` and ``Thr-NNN`` for timerlat, ``CPU-NNN`` for osnoise::

    # RTLA timerlat histogram
    # Time unit is microseconds (us)
    # Duration:   0 00:00:05
    Index   IRQ-000   Thr-000   IRQ-001   Thr-001
    0          2411       397      2601       430
    100         186      1819       256      2393
    ...
    over:        12        17        11        15
    count:     2974      2974      3245      3245
    min:         19        51        35        63
    avg:        729       856       588       720
    max:     148079    148304    109461    110064

The index is the bucket's lower bound (bucket number × bucket size, in the
time unit); only non-zero rows are printed. ``over`` counts samples beyond
the last bucket; ``count`` is every sample (rows + over, checked); min, avg
and max are rtla's own exact numbers (avg rounded down by rtla). The bucket
size and number of buckets are the command's ``-b`` and ``-E`` (given by the
suite; without them the bucket is the gcd of the indexes and the range is
unknown). A run a threshold stopped (``-T``/``-i``) ends with ``rtla timerlat
hit stop tracing`` and, with ``-t``, ``Saving trace to <file>``: read into
``metrics`` (``stopped``, ``trace_saved_as``). One :class:`ThreadResult` per column with samples; its ``cpu`` is
the column's CPU. Errors name the file and the line.
"""
from __future__ import annotations

import math
import re
from typing import Optional

from ..errors import InputError
from ..core.model import Histogram, ThreadResult, ToolOutput
from ._common import us

_HEADER = re.compile(r"^# RTLA (timerlat|osnoise) histogram\s*$")
_UNIT = re.compile(r"^# Time unit is (microseconds \(us\)|nanoseconds \(ns\))\s*$")
_DURATION = re.compile(r"^# Duration:\s+(\d+)\s+(\d+):(\d\d):(\d\d)\s*$")
_COLUMN = re.compile(r"^(IRQ|Thr|CPU)-(\d+)$")
_SUMMARY = ("over:", "count:", "min:", "avg:", "max:")
#: what rtla prints after the summary when a threshold (-T/-i/-a) stopped it
_STOPPED = re.compile(r"^rtla (timerlat|osnoise) hit stop tracing$")
_SAVING = re.compile(r"^\s*Saving trace to (\S+)$")
#: column kind -> measurement it belongs to
KINDS = {"IRQ": "irq", "Thr": "thread", "CPU": "noise"}


def _int(path, lineno: int, what: str, tok: str) -> Optional[int]:
    if tok == "-":  # rtla's "no sample" mark in some versions
        return None
    if not re.fullmatch(r"\d+", tok):
        raise InputError(path, f"line {lineno}: {what} is not a count: {tok!r}")
    return int(tok)


def parse_hist(text: str, path, *, bucket: Optional[int] = None, entries: Optional[int] = None,
               tracer: Optional[str] = None, kinds: Optional[set[str]] = None
               ) -> tuple[str, dict[str, ToolOutput]]:
    """(tracer, {kind: ToolOutput}) of one ``rtla <tracer> hist`` output; kinds
    are "irq" and "thread" (timerlat) or "noise" (osnoise). *tracer* and
    *kinds* (column kinds): what the caller expects (an error naming the file otherwise)."""
    tool = None
    ns = None
    duration_s = None
    columns: list[tuple[str, int]] = []
    rows: dict[int, list[int]] = {}
    summary: dict[str, list[Optional[int]]] = {}
    index_line = None
    stopped, saved = False, None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("#"):
            if (m := _HEADER.match(line)):
                tool = m.group(1)
            elif (m := _UNIT.match(line)):
                ns = m.group(1).startswith("nano")
            elif (m := _DURATION.match(line)):
                d, h, mi, s = (int(x) for x in m.groups())
                duration_s = ((d * 24 + h) * 60 + mi) * 60 + s
            continue  # other comments (rtla prints none in 6.1) are not data
        if summary and (m := _STOPPED.match(line.strip())):
            stopped = True
            continue
        if stopped and (m := _SAVING.match(line)):
            saved = m.group(1)
            continue
        toks = line.split()
        if toks[0] == "Index":
            if index_line is not None:
                raise InputError(path, f"line {lineno}: a second Index line (first at line {index_line})")
            index_line = lineno
            for t in toks[1:]:
                m = _COLUMN.match(t)
                if not m:
                    raise InputError(path, f"line {lineno}: unknown column {t!r} (IRQ-N, Thr-N or CPU-N)")
                columns.append((m.group(1), int(m.group(2))))
            continue
        if index_line is None:
            raise InputError(path, f"line {lineno}: data before the Index line: {line.strip()[:60]!r}")
        if len(toks) != len(columns) + 1:
            raise InputError(path, f"line {lineno}: {len(toks) - 1} values for {len(columns)} columns")
        if toks[0] in _SUMMARY:
            name = toks[0][:-1]
            if name in summary:
                raise InputError(path, f"line {lineno}: a second {toks[0]} line")
            summary[name] = [_int(path, lineno, f"{name} of {k}-{c:03d}", t)
                             for (k, c), t in zip(columns, toks[1:])]
            continue
        if summary:
            raise InputError(path, f"line {lineno}: a histogram row after the summary")
        idx = _int(path, lineno, "index", toks[0])
        if idx in rows:
            raise InputError(path, f"line {lineno}: index {idx} twice")
        vals = [_int(path, lineno, f"count of {k}-{c:03d}", t) for (k, c), t in zip(columns, toks[1:])]
        if any(v is None for v in vals):
            raise InputError(path, f"line {lineno}: a histogram count is '-'")
        rows[idx] = vals
    if tool is None:
        raise InputError(path, "no '# RTLA timerlat|osnoise histogram' header: not rtla hist output")
    if ns is None:
        raise InputError(path, "no '# Time unit is ...' line")
    if index_line is None:
        raise InputError(path, "no Index line (rtla ran with --no-index, or printed nothing)")
    missing = [s for s in _SUMMARY if s[:-1] not in summary]
    if missing:
        raise InputError(path, f"summary lines missing: {' '.join(missing)} (rtla ran with --no-summary?)")
    if bucket is None:
        bucket = math.gcd(*rows) if any(rows) else 1
    for idx in rows:
        if idx % bucket:
            raise InputError(path, f"index {idx} is not a multiple of the bucket size {bucket}")
    if tracer is not None and tool != tracer:
        raise InputError(path, f"expected rtla {tracer} hist output, got {tool}")
    bad = {k for k, _ in columns} - (kinds if kinds is not None else set(KINDS))
    if bad:
        raise InputError(path, f"{tool} output with {'/'.join(sorted(bad))} columns")

    outs: dict[str, ToolOutput] = {}
    for i, (kind, cpu) in enumerate(columns):
        name = KINDS[kind]
        metrics: dict = {"duration_s": duration_s} if duration_s is not None else {}
        if stopped:  # a threshold stopped the run early (evidence armed)
            metrics.update(stopped=1, **({"trace_saved_as": saved} if saved else {}))
        out = outs.setdefault(name, ToolOutput(path=str(path), tool=tool, return_code=0, metrics=metrics))
        count, over = summary["count"][i], summary["over"][i]
        label = f"{kind}-{cpu:03d}"
        if count is None or over is None:
            raise InputError(path, f"column {label}: count or over is '-'")
        counts = {idx // bucket: r[i] for idx, r in rows.items() if r[i]}
        recorded = sum(counts.values())
        if recorded + over != count:
            raise InputError(path, f"column {label}: rows ({recorded}) + over ({over}) != count ({count})")
        if count == 0:
            out.metrics.setdefault("cpus_without_samples", []).append(cpu)
            continue
        lo, avg, hi = summary["min"][i], summary["avg"][i], summary["max"][i]
        if lo is None or avg is None or hi is None or not lo <= avg <= hi:
            raise InputError(path, f"column {label}: min {lo} / avg {avg} / max {hi} are inconsistent")
        if entries is not None and counts and max(counts) >= entries:
            raise InputError(path, f"column {label}: a row at bucket {max(counts)} beyond -E {entries}")
        out.threads.append(ThreadResult(
            thread=len(out.threads), cpu=cpu, cycles=count,
            min_us=us(lo, ns), avg_us=us(avg, ns), max_us=us(hi, ns), overflows=over,
            histogram=Histogram(counts=counts, bucket_us=us(bucket, ns), size=entries, overflows=over)))
    for name, out in outs.items():
        if not out.threads:
            raise InputError(path, f"no {name} samples on any CPU")
    return tool, outs


def parse_timerlat_hist(text: str, path, *, bucket: Optional[int] = None,
                        entries: Optional[int] = None) -> tuple[ToolOutput, ToolOutput]:
    """(IRQ latency, thread latency) of ``rtla timerlat hist``."""
    tool, outs = parse_hist(text, path, bucket=bucket, entries=entries, tracer="timerlat",
                            kinds={"IRQ", "Thr"})
    if set(outs) != {"irq", "thread"}:
        raise InputError(path, f"expected rtla timerlat hist output with IRQ and Thr columns, got {tool} "
                               f"({', '.join(sorted(outs))})")
    return outs["irq"], outs["thread"]


def parse_osnoise_hist(text: str, path, *, bucket: Optional[int] = None,
                       entries: Optional[int] = None) -> ToolOutput:
    """Noise samples per CPU of ``rtla osnoise hist``."""
    _, outs = parse_hist(text, path, bucket=bucket, entries=entries, tracer="osnoise", kinds={"CPU"})
    return outs["noise"]
