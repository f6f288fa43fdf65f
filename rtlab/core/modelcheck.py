"""Results read back from disk, checked against the model before use.

run.json, job.json and compare.json come from a results directory, which may
be a CI artifact anyone could have edited: ``max_us: NaN`` must not pass the
gate (NaN >= budget is false), a negative histogram count must not shift a
percentile, ``cycles: "abc"`` must not become a TypeError. Every value the
model's ``from_json`` reads is checked here for type and range first; a bad
one is an InputError naming the file and the dotted key (exit 2). Unknown
keys are left alone (newer rtlab versions may add some).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Optional

from .config import shown
from ..errors import InputError
from .fsutil import read_bounded, result_max_bytes
from .model import InfraCause, Verdict

VERDICTS = tuple(v.value for v in Verdict)
INFRA_CAUSES = tuple(c.value for c in InfraCause)


class Doc:
    """A value of a JSON document with its file and dotted key."""

    def __init__(self, path, value: Any, key: str = ""):
        self.path = path
        self.value = value
        self.key = key

    def error(self, what: str) -> InputError:
        return InputError(self.path, f"{self.key or '<top>'}: {what}")

    def at(self, name, value: Any) -> "Doc":
        part = f"[{name}]" if isinstance(name, int) else f".{name}"
        return Doc(self.path, value, (self.key + part).lstrip("."))

    def obj(self) -> dict:
        if not isinstance(self.value, dict):
            raise self.error(f"must be an object, got {_type(self.value)}")
        return self.value

    def field(self, name: str, check: Callable[["Doc"], Any], *, required: bool = False,
              nullable: bool = True) -> None:
        d = self.obj()
        if name not in d:
            if required:
                raise self.error(f"missing required key '{name}'")
            return
        child = self.at(name, d[name])
        if d[name] is None:
            if nullable and not required:
                return
            raise child.error("must not be null")
        check(child)

    def items(self, check: Callable[["Doc"], Any]) -> None:
        if not isinstance(self.value, list):
            raise self.error(f"must be a list, got {_type(self.value)}")
        for i, v in enumerate(self.value):
            check(self.at(i, v))


def _type(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


def string(d: Doc) -> None:
    if not isinstance(d.value, str):
        raise d.error(f"must be a string, got {_type(d.value)}")


def obj(d: Doc) -> None:
    d.obj()


def str_list(d: Doc) -> None:
    d.items(string)


def number(minimum: Optional[float] = None, maximum: Optional[float] = None, *,
           above: bool = False) -> Callable[[Doc], None]:
    def check(d: Doc) -> None:
        v = d.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise d.error(f"must be a number, got {_type(v)}")
        if not math.isfinite(v):
            raise d.error(f"must be a finite number, got {v!r}")
        if minimum is not None and (v <= minimum if above else v < minimum):
            raise d.error(f"must be {'>' if above else '>='} {minimum:g}, got {v!r}")
        if maximum is not None and v > maximum:
            raise d.error(f"must be <= {maximum:g}, got {v!r}")
    return check


def integer(minimum: Optional[int] = None) -> Callable[[Doc], None]:
    def check(d: Doc) -> None:
        v = d.value
        if isinstance(v, bool) or not isinstance(v, int):
            raise d.error(f"must be an integer, got {_type(v)}"
                          + (f" {v!r}" if isinstance(v, float) and math.isfinite(v) else ""))
        if minimum is not None and v < minimum:
            raise d.error(f"must be >= {minimum}, got {v}")
    return check


def finite_tree(d: Doc) -> None:
    """Free-form data (metrics, extra, sysinfo): any JSON, numbers finite."""
    v = d.value
    if isinstance(v, float) and not math.isfinite(v):
        raise d.error(f"must be a finite number, got {v!r}")
    if isinstance(v, dict):
        for k, x in v.items():
            finite_tree(d.at(k, x))
    elif isinstance(v, list):
        d.items(finite_tree)


def verdict(d: Doc) -> None:
    if d.value not in VERDICTS:
        raise d.error(f"must be one of {', '.join(VERDICTS)}, got {shown(d.value)}")


def histogram(d: Doc) -> None:
    d.field("counts", _counts, required=True)
    d.field("bucket_us", number(0, above=True))
    d.field("size", integer(0))
    d.field("overflows", integer(0))


def _counts(d: Doc) -> None:
    for k, v in d.obj().items():
        if not (isinstance(k, str) and k.isdigit()):
            raise d.error(f"bucket {shown(k)} is not a bucket index (digits)")
        integer(0)(d.at(k, v))


def thread(d: Doc) -> None:
    d.field("thread", integer(), required=True)
    d.field("cpu", integer(-1))
    d.field("cycles", integer(0), required=True)
    for k in ("min_us", "avg_us", "max_us"):
        d.field(k, number(), required=True)
    d.field("overflows", integer(0))
    d.field("histogram", histogram)
    d.field("extra", finite_tree)
    t = d.obj()
    h = t.get("histogram") or {}
    problem = thread_contradiction(t["cycles"], t["min_us"], t["avg_us"], t["max_us"],
                                   {int(k): v for k, v in h.get("counts", {}).items()} if h else None,
                                   h.get("bucket_us", 1.0), h.get("size"), h.get("overflows", 0))
    if problem is not None:
        raise d.at(*problem[:2]).error(problem[2])


#: how far a tool's rounded average may lie outside [min, max] (integer output)
AVG_ROUNDING_US = 1.0


def thread_contradiction(cycles: int, min_us: float, avg_us: float, max_us: float,
                         counts: Optional[dict[int, int]], bucket_us: float = 1.0,
                         size: Optional[int] = None, overflows: int = 0) -> Optional[tuple[str, Any, str]]:
    """Why one thread's numbers cannot all be true, as (key, value, why), or
    None: a latency is >= 0, min <= avg <= max (avg within its rounding), a
    histogram bucket lies within the declared size, the histogram holds no
    more samples than the cycles and some when there were cycles, and
    samples past the range (overflows) mean a maximum past it."""
    if cycles <= 0:  # nothing recorded: the tool's placeholders (min -1), judged as "recorded 0 cycles"
        return None
    for k, v in (("min_us", min_us), ("avg_us", avg_us), ("max_us", max_us)):
        if v < 0:
            return k, v, f"a latency cannot be negative, got {v!r}"
    if min_us > max_us:
        return "min_us", min_us, f"min {min_us!r} is above max {max_us!r}"
    if not min_us - AVG_ROUNDING_US <= avg_us <= max_us + AVG_ROUNDING_US:
        return "avg_us", avg_us, f"avg {avg_us!r} lies outside min {min_us!r} .. max {max_us!r}"
    if counts is None:
        return None
    if size is not None:
        beyond = [i for i in counts if i >= size]
        if beyond:
            return "histogram.counts", beyond[0], f"bucket {beyond[0]} is beyond the histogram's size {size}"
    total = sum(counts.values()) + overflows
    if total > cycles:
        return "histogram.counts", total, f"{total} samples (overflows included) in {cycles} cycles"
    if total == 0:
        return "histogram.counts", 0, f"no sample at all in {cycles} cycles"
    if overflows and size is not None and max_us < size * bucket_us:
        return "max_us", max_us, (f"{overflows} overflows past the range of {size * bucket_us:g} us, "
                                  f"but max {max_us!r} lies within it")
    return None


def output(d: Doc) -> None:
    d.field("path", string, required=True)
    d.field("tool", string, required=True)
    d.field("threads", lambda t: t.items(thread), required=True)
    d.field("return_code", integer())
    d.field("sysinfo", obj)
    d.field("metrics", _metrics)
    d.field("failure", string)


def _metrics(d: Doc) -> None:
    d.obj()
    finite_tree(d)


def _key(d: Doc) -> None:
    for n in ("board", "variant", "suite"):
        d.field(n, string, required=True)
    d.field("load", string)


def budget(d: Doc) -> None:
    d.field("max_us", number(0, above=True))
    d.field("percentiles_us", lambda p: [number(0, above=True)(p.at(k, v)) for k, v in p.obj().items()])
    d.field("source", string)


def measurement(d: Doc) -> None:
    d.field("key", _key, required=True)
    d.field("output", output, required=True)
    d.field("raw", str_list)
    d.field("verdict", verdict)
    d.field("reasons", str_list)
    d.field("budget", budget)
    d.field("share_over_budget", number(0, 1))
    d.field("evidence", obj)
    d.field("infra_cause", _infra_cause)
    d.field("host_delays", host_delays)


#: the kinds of host stall a delayed sample names (rtlab.core.hostattr)
STALL_KINDS = ("machine", "steal")


def host_delays(d: Doc) -> None:
    d.field("from_us", number(0), required=True)
    d.field("recorded", integer(0), required=True)
    d.field("total", integer(0), required=True)
    d.field("clock", string)
    d.field("range_us", number(0))
    d.field("beyond_us", lambda x: x.items(number(0)))
    d.field("beyond_dropped", integer(0))
    d.field("delayed", lambda x: x.items(_delayed))
    v = d.obj()
    if v["recorded"] > v["total"]:
        raise d.at("recorded", v["recorded"]).error(f"more samples recorded than counted ({v['total']})")


def _delayed(d: Doc) -> None:
    v = d.value
    if not isinstance(v, list) or len(v) != 4:
        raise d.error("must be [thread, latency_us, host_us, kind]")
    integer(0)(d.at(0, v[0]))
    number(0)(d.at(1, v[1]))
    number(0)(d.at(2, v[2]))
    if v[2] > v[1]:
        raise d.at(2, v[2]).error(f"the host's part is more than the latency ({v[1]!r})")
    if v[3] not in STALL_KINDS:
        raise d.at(3, v[3]).error(f"must be one of {', '.join(STALL_KINDS)}, got {shown(v[3])}")


def _infra_cause(d: Doc) -> None:
    if d.value not in INFRA_CAUSES:
        raise d.error(f"must be one of {', '.join(INFRA_CAUSES)}, got {shown(d.value)}")


def job(d: Doc) -> None:
    d.field("board", string, required=True)
    d.field("variant", string, required=True)
    for k in ("arch", "budget_class", "infra_error", "build_error"):
        d.field(k, string)
    d.field("kernel", obj)
    d.field("measurements", lambda m: m.items(measurement))
    d.field("duration_s", number(0))
    d.field("repeat", integer(0))
    d.field("not_available", lambda n: n.items(obj))
    for k in ("retries", "host_noise_retries"):  # the report lists and links each attempt
        d.field(k, lambda r: r.items(retry))
    d.field("verdict", verdict)


def retry(d: Doc) -> None:
    d.field("dir", string, required=True)
    d.field("reasons", str_list)
    d.field("measured_again", str_list)
    d.field("causes", lambda c: c.items(_infra_cause))


def run(d: Doc) -> None:
    d.field("run_id", string, required=True)
    d.field("started", string, required=True)
    d.field("campaign", string)
    d.field("commit", obj)
    d.field("jobs", lambda j: j.items(job))
    d.field("not_available", lambda n: n.items(obj))
    d.field("verdict", verdict)


def comparison(d: Doc) -> None:
    """compare.json: what the run report shows of it, and what the store
    keeps per key (label, outcome, detectable effect, limit)."""
    d.field("outcome", string)
    d.field("html", string)
    d.field("baseline", lambda b: b.field("source", string))

    def key(e: Doc) -> None:
        for name in ("line", "label", "outcome"):
            e.field(name, string)
        for name in ("detectable", "limit"):
            e.field(name, number(0))
    d.field("keys", lambda k: k.items(key))


def load_checked(path, check: Callable[[Doc], None], *, root=None, what: str = "result") -> Any:
    """A JSON document read bounded (fsutil.read_bounded: no symlink out of
    *root*, regular files only) and checked by *check*."""
    data = read_bounded(path, result_max_bytes(), root=root)
    try:
        doc = json.loads(data)  # NaN/Infinity parse, then number() refuses them naming the key
    except RecursionError:
        raise InputError(path, "invalid JSON: nested too deep") from None
    except ValueError as e:
        raise InputError(path, f"invalid JSON: {e}") from None
    del data
    try:
        check(Doc(Path(path), doc))
    except InputError as e:
        raise InputError(path, f"not a valid {what}: {e.what}") from None
    return doc


def load_comparison(run_dir: Path) -> Optional[dict]:
    """A run's compare.json (rtlab compare / gate --baseline), checked; None
    when the run has none."""
    path = Path(run_dir) / "compare.json"
    if not path.exists() and not path.is_symlink():
        return None
    return load_checked(path, comparison, what="comparison")
