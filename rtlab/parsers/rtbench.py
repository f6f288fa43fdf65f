"""rtbench JSON: rtlab's own POSIX primitive benchmark (``rtbench/``).

The header is rt-tests shaped (``"cmdline:"``, ``return_code``, ``sysinfo``);
the payload is::

    "benchmarks": {NAME: {"min", "avg", "max", "samples", "discarded",
                          "discard_reasons": {reason: n}, "cpu", "other_cpu",
                          "unit": "ns", "histogram": {idx: count},
                          "bucket_ns", "histogram_size", "overflows"}},
    "skipped": {NAME: reason}

One ThreadResult per benchmark, ``thread`` = position in sorted name order,
``extra.benchmark`` = NAME (plus ``discarded``, ``discard_reasons``,
``other_cpu``, ``iterations`` and rtbench's own exact ``median_us`` /
``p99_us`` when present); latencies converted to µs. ``samples`` are the
kept samples: the histogram plus its overflows must add up to them.
"""
from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..core.model import Histogram, ThreadResult
from ._common import JsonPath, bucket_counts, cpu_or_none

_SCALE = {"ns": 1000.0, "us": 1.0}


def parse_benchmarks(top: JsonPath, path) -> list[ThreadResult]:
    benches = top.sub("benchmarks")
    out = []
    for idx, name in enumerate(sorted(benches.obj)):
        b = benches.sub(name)
        unit = b.string("unit") if b.has("unit") else "ns"
        if unit not in _SCALE:
            raise InputError(path, f"key {b.where}.unit: unknown unit {unit!r} (ns or us)")
        scale = _SCALE[unit]
        samples = b.integer("samples")
        hist = None
        overflows = None
        if b.has("histogram") and b.get("histogram") is not None:
            h = b.sub("histogram")
            counts = bucket_counts(h)
            overflows = b.integer("overflows") if b.has("overflows") else 0
            bucket = b.number("bucket_ns" if unit == "ns" else "bucket_us")
            if bucket <= 0:
                raise InputError(path, f"key {b.where}.bucket_{unit}: must be > 0")
            size = b.opt_integer("histogram_size")
            if size is not None and counts and max(counts) >= size:
                raise InputError(path, f"key {h.where}: bucket {max(counts)} is beyond "
                                       f"histogram_size {size}")
            if sum(counts.values()) + overflows != samples:
                raise InputError(path, f"key {b.where}: histogram ({sum(counts.values())}) plus "
                                       f"overflows ({overflows}) != samples ({samples})")
            hist = Histogram(counts=counts, bucket_us=bucket / scale, size=size,
                             overflows=overflows)
        extra: dict[str, Any] = {"benchmark": name}
        for k in ("discarded", "other_cpu", "iterations"):
            if b.has(k):
                extra[k] = b.integer(k)
        for k in ("median", "p99"):  # rtbench's own, from the exact values
            if b.has(k):
                extra[f"{k}_us"] = b.number(k) / scale
        if b.has("discard_reasons"):
            extra["discard_reasons"] = dict(b.sub("discard_reasons").obj)
        out.append(ThreadResult(
            thread=idx, cpu=cpu_or_none(b.opt_integer("cpu")), cycles=samples,
            min_us=b.number("min") / scale, avg_us=b.number("avg", nan_ok=True) / scale,
            max_us=b.number("max") / scale, overflows=overflows, histogram=hist,
            extra=extra))
    return out
