"""rt-tests 2.x ``--json=FILE`` output, and rtbench's JSON.

Common header (identical 2.4-2.10, written by ``rt_write_json()``):
``file_version``, ``"cmdline:"`` and ``"rt_test_version:"`` (the colon is
part of the key), ``start_time``, ``end_time``, ``return_code``, ``sysinfo``.
The tool is told by the program name in ``"cmdline:"``; without a cmdline,
by the shape of the payload.

Things rt-tests gets wrong that this module repairs or works around:

* the cmdline is written with ``%s``, unescaped: an argument containing
  ``"`` or ``\\`` makes the file invalid JSON. The ``"cmdline:"`` line is
  re-escaped and the document decoded again.
* ``avg`` is ``sum / cycles`` printed with ``%.2f``: a thread with no
  sample writes ``-nan`` (or ``nan``), which is not JSON; it is read as NaN.
* cyclictest 2.4 writes ``"histogram": {}`` even without ``-h``; 2.7+ leaves
  the key out. Whether there is a histogram is decided by ``-h``/``-H`` in
  the cmdline, not by the key.
* The histogram holds in-range samples only; the overflow count is not in
  the file and is ``cycles - sum(histogram)``.
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from ..errors import InputError
from ..core.model import Histogram, ThreadResult, ToolOutput
from ._common import (
    DEFAULT_MAX_ENTRIES, Buckets, JsonPath, Opt, atoi, bucket_counts,
    cpu_or_none, last, limit,
    parse_optstring, program, scan_options, us,
)
from ..registry import SUITES
from .registry import known_tools, layout_reader
from .rtbench import parse_benchmarks

# ---------------------------------------------------------------------------
# decoding

# a bare nan/inf where a value belongs: after '"key":', before ',' '}' or ']'
_NAN = re.compile(r'("\s*:\s*)-?nan(?=\s*[,}\]])', re.IGNORECASE)
_INF = re.compile(r'("\s*:\s*)(-?)inf(?:inity)?(?=\s*[,}\]])', re.IGNORECASE)
_CMDLINE = re.compile(r'^(\s*"cmdline:?"\s*:\s*")(.*)(",?\s*)$', re.MULTILINE)


class _TooBig(Exception):
    pass


def _pairs_hook(max_entries: int):
    """Objects from the decoder's pairs: histograms (every key digits, every
    value a non-negative int) straight into Buckets, the rest into dicts;
    stops once the document holds more than max_entries members."""
    seen = [0]

    def hook(pairs):
        seen[0] += len(pairs)
        if seen[0] > max_entries:
            raise _TooBig(seen[0])
        if pairs and all(type(v) is int and v >= 0 and k.isdigit() and k.isascii() for k, v in pairs):
            return Buckets((int(k), v) for k, v in pairs if v)
        return dict(pairs)
    return hook


def _decode(text: str, path):
    max_entries = limit("RTLAB_PARSE_MAX_ENTRIES", DEFAULT_MAX_ENTRIES)
    try:
        return json.loads(text, object_pairs_hook=_pairs_hook(max_entries))
    except _TooBig:
        raise InputError(path, f"more than {max_entries:,} JSON members (histogram buckets): over the "
                               f"parse limit, refused before memory runs out (RTLAB_PARSE_MAX_ENTRIES)") from None


def load(text: str, path) -> dict[str, Any]:
    """Decode an rt-tests/rtbench JSON document, repairing known defects."""
    fixed = _NAN.sub(r"\1NaN", text)
    fixed = _INF.sub(lambda m: m.group(1) + ("-" if m.group(2) else "") + "Infinity", fixed)
    try:
        doc = _decode(fixed, path)
    except json.JSONDecodeError as first:
        repaired = _CMDLINE.sub(lambda m: m.group(1) + json.dumps(m.group(2))[1:-1] + m.group(3), fixed)
        try:
            doc = _decode(repaired, path) if repaired != fixed else None
        except json.JSONDecodeError:
            doc = None
        if doc is None:
            raise InputError(path, _decode_error(first, fixed)) from None
    if not isinstance(doc, dict):
        raise InputError(path, f"JSON document is a {type(doc).__name__}, expected an object")
    return doc


def _decode_error(e: json.JSONDecodeError, text: str) -> str:
    where = f"line {e.lineno} column {e.colno}"
    if _unfinished(text):
        end = text.rstrip()
        return (f"truncated JSON: the document stops at line {end.count(chr(10)) + 1} inside "
                f"an unfinished object or string (decoder: {e.msg}, {where})")
    return f"invalid JSON at {where}: {e.msg}"


def _unfinished(text: str) -> bool:
    """True when the text ends inside a string or with brackets left open."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_str or depth > 0


# ---------------------------------------------------------------------------
# which tool

def detect(doc: dict[str, Any], path) -> str:
    """The tool that wrote ``doc``: program of ``"cmdline:"``, else the shape."""
    cmd = _cmdline(doc)
    if cmd:
        prog = program(cmd)
        if prog in known_tools():
            return prog
        raise InputError(path, f"key 'cmdline:': unknown tool {prog!r} "
                               f"(known: {', '.join(known_tools())}; force one with --tool)")
    # no cmdline: the payload's shape, as each suite describes its tool's
    # (Suite.json_shape; rtlab.registry.SUITES)
    threads = doc.get("thread")
    first = next(iter(threads.values()), None) if isinstance(threads, dict) and threads else None
    first = first if isinstance(first, dict) else None
    found = sorted({s.tool for s in SUITES.values() if s.json_shape is not None and s.json_shape(doc, first)})
    if len(found) == 1:
        return found[0]
    if found:
        raise InputError(path, f"results without 'cmdline:': {', '.join(found)} write the same JSON; "
                               f"force it with --tool")
    raise InputError(path, "key 'cmdline:' missing and the payload matches no known tool")


def _cmdline(doc: dict[str, Any]) -> str:
    for k in ("cmdline:", "cmdline"):
        v = doc.get(k)
        if isinstance(v, str):
            return v
    return ""


# ---------------------------------------------------------------------------
# entry point

def parse(doc: dict[str, Any], path, tool: Optional[str]) -> ToolOutput:
    tool = tool or detect(doc, path)
    read_layout = layout_reader(tool, "json", LAYOUTS, path,
                                f"{tool} has no JSON output (its suite names no rt-tests JSON layout)")
    top = JsonPath(path, doc)
    out = ToolOutput(path=str(path), tool=tool)
    if top.has("return_code"):
        out.return_code = top.integer("return_code")
    if top.has("sysinfo"):
        out.sysinfo = dict(top.sub("sysinfo").obj)
    version = doc.get("rt_test_version:", doc.get("rt_test_version"))
    if isinstance(version, str):
        out.sysinfo.setdefault("rt_test_version", version)
    read_layout(out, top, doc, _cmdline(doc), path)
    return out


def _benchmarks(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = parse_benchmarks(top, path)
    skipped = doc.get("skipped")
    if skipped:
        if not isinstance(skipped, dict):
            raise InputError(path, "key skipped: expected an object {name: reason}")
        out.metrics["skipped"] = dict(skipped)


def _inversions(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.metrics["inversions"] = top.integer("inversion")


def _histogram_threads(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = [_cyclictest(t, idx, cmd, top) for idx, t in _threads(top, path)]


def _plain_threads(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    ns = bool(top.opt_integer("resolution_in_ns") or 0)
    out.threads = [_plain(t, idx, ns) for idx, t in _threads(top, path)]


def _ipc_pairs(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = [_ipc(t, idx, timeouts=False) for idx, t in _threads(top, path)]


def _ipc_pairs_timeouts(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = [_ipc(t, idx, timeouts=True) for idx, t in _threads(top, path)]


def _priority_order(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = _rt_migrate(_threads(top, path), cmd, path)


def _frequency(out: ToolOutput, top: JsonPath, doc: dict, cmd: str, path) -> None:
    out.threads = [_oslat(t, idx, cmd) for idx, t in _threads(top, path)]


def _threads(top: JsonPath, path) -> list[tuple[int, JsonPath]]:
    """``thread`` entries as (index, JsonPath), checked against num_threads."""
    th = top.sub("thread")
    out = []
    for k, t in th.items():
        if not re.fullmatch(r"\d+", k):
            raise InputError(path, f"key thread.{k}: thread index is not an integer")
        out.append((int(k), t))
    out.sort(key=lambda x: x[0])
    if top.has("num_threads"):
        n = top.integer("num_threads")
        if n != len(out):
            raise InputError(path, f"key num_threads: says {n}, but 'thread' has {len(out)} entries")
    return out


# ---------------------------------------------------------------------------
# cyclictest

#: cyclictest getopt strings: 2.4 plus what later versions added
_CT_SHORT = parse_optstring("a::A::b:c:d:D:F:h:H:i:l:MNo:p:mqrRsSt::uvx")
_CT_LONG = {
    **{n: Opt.REQUIRED for n in (
        "breaktrace", "clock", "distance", "duration", "latency", "fifo", "histogram",
        "histofall", "histfile", "interval", "json", "loops", "mainaffinity", "oscope",
        "priority", "spike", "spike-nodes", "policy", "deepest-idle-state")},
    **{n: Opt.OPTIONAL for n in ("affinity", "aligned", "secaligned", "threads")},
    **{n: Opt.NONE for n in (
        "default-system", "laptop", "mlockall", "refresh_on_max", "nsecs", "quiet",
        "priospread", "relative", "resolution", "system", "smi", "smp", "tracemark",
        "unbuffered", "verbose", "dbg_cyclictest", "help", "posix_timers")},
}
HIST_MAX = 1000000  # cyclictest clamps -h to this


def cyclictest_histogram_size(cmdline: str) -> int:
    """Buckets of ``-h/--histogram/-H/--histofall`` in a cmdline; 0 = none."""
    opts = scan_options(cmdline, _CT_SHORT, _CT_LONG)
    found, value = last(opts, "h", "H", "histogram", "histofall")
    if not found:
        return 0
    return min(max(atoi(value), 0), HIST_MAX)


def _cyclictest(t: JsonPath, idx: int, cmd: str, top: JsonPath) -> ThreadResult:
    ns = bool(top.opt_integer("resolution_in_ns") or 0)
    cycles = t.integer("cycles")
    size = cyclictest_histogram_size(cmd) if cmd else 0
    hist_obj = t.sub("histogram").obj if t.has("histogram") else {}
    hist = None
    overflows = None
    if size or hist_obj:
        counts = _counts(t, "histogram")
        recorded = sum(counts.values())
        overflows = cycles - recorded
        if overflows < 0:
            raise InputError(t.path, f"key {t.where}.histogram: holds {recorded} samples, "
                                     f"more than cycles ({cycles})")
        if size and counts and max(counts) >= size:
            raise InputError(t.path, f"key {t.where}.histogram: bucket {max(counts)} is beyond "
                                     f"the -h {size} of the cmdline")
        hist = Histogram(counts=counts, bucket_us=0.001 if ns else 1.0,
                         size=size or None, overflows=overflows)
    extra: dict[str, Any] = {}
    if t.has("node"):
        extra["node"] = t.integer("node")
    return ThreadResult(
        thread=idx, cpu=cpu_or_none(t.opt_integer("cpu")), cycles=cycles,
        min_us=us(t.number("min"), ns), avg_us=us(t.number("avg", nan_ok=True), ns),
        max_us=us(t.number("max"), ns), overflows=overflows, histogram=hist, extra=extra)


def _counts(t: JsonPath, key: str) -> dict[int, int]:
    return bucket_counts(t.sub(key))


# ---------------------------------------------------------------------------
# signaltest, cyclicdeadline: cycles/min/max/avg per thread, no histogram

def _plain(t: JsonPath, idx: int, ns: bool) -> ThreadResult:
    return ThreadResult(
        thread=idx, cpu=cpu_or_none(t.opt_integer("cpu")), cycles=t.integer("cycles"),
        min_us=us(t.number("min"), ns), avg_us=us(t.number("avg", nan_ok=True), ns),
        max_us=us(t.number("max"), ns))


# ---------------------------------------------------------------------------
# sigwaittest, svsematest, ptsematest, pmqtest: one result per receiver

def _ipc(t: JsonPath, idx: int, timeouts: bool) -> ThreadResult:
    s, r = t.sub("sender"), t.sub("receiver")
    extra: dict[str, Any] = {
        "sender_cpu": cpu_or_none(s.opt_integer("cpu")),
        "sender_priority": s.opt_integer("priority"),
        "receiver_priority": r.opt_integer("priority"),
        "interval_us": s.opt_integer("interval"),
    }
    if timeouts or r.has("timeoutcount"):  # pmqtest's layout has it (ipc_timeouts)
        extra["timeoutcount"] = r.integer("timeoutcount")
    return ThreadResult(
        thread=idx, cpu=cpu_or_none(r.opt_integer("cpu")), cycles=s.integer("samples"),
        min_us=float(r.number("min")), avg_us=float(r.number("avg", nan_ok=True)),
        max_us=float(r.number("max")), extra=extra)


# ---------------------------------------------------------------------------
# rt-migrate-test

_RTM_SHORT = parse_optstring("cD:ehl:m:p:qr:s:")
_RTM_LONG = {**{n: Opt.REQUIRED for n in ("duration", "loops", "maxerr", "prio", "run-time",
                                          "sleep-time", "json")},
             **{n: Opt.NONE for n in ("check", "equal", "help", "quiet")}}
RTM_DEFAULT_LOOPS = 50


def _rt_migrate(threads, cmd: str, path) -> list[ThreadResult]:
    """rt-migrate-test JSON has no run count: it is recovered.

    Per task, ``total`` = floor(sum_ns / 1000) and ``avg`` = total // runs
    (integer µs), so runs lies in (total/(avg+1), total/avg]. The runs asked
    for (``-l``, default 50) are taken when they fit every task; a run cut
    short (``-D``, Ctrl-C, ``-c`` failing) is found as the one count that
    fits every task. If several fit, the largest is taken and
    ``extra.cycles_estimated`` says so.
    """
    opts = scan_options(cmd, _RTM_SHORT, _RTM_LONG) if cmd else []
    found, value = last(opts, "l", "loops")
    asked = atoi(value) if found else RTM_DEFAULT_LOOPS
    rows = []
    for idx, t in threads:
        rows.append((idx, t, t.integer("total"), t.integer("avg")))
    lo, hi = 1, asked if asked > 0 else 10**9
    for _, _, total, avg in rows:
        if avg > 0:
            lo = max(lo, total // (avg + 1) + 1)
            hi = min(hi, total // avg)
    if lo > hi:
        raise InputError(path, "keys thread.N.total/avg: no run count fits every task "
                               "(total // runs must equal avg)")
    estimated = False
    if asked > 0 and lo <= asked <= hi:
        runs = asked
    else:
        runs = hi
        estimated = lo != hi
    out = []
    for idx, t, total, avg in rows:
        extra: dict[str, Any] = {"priority": t.opt_integer("prio"), "total_us": total}
        if estimated:
            extra["cycles_estimated"] = True
        out.append(ThreadResult(
            thread=idx, cpu=None, cycles=runs, min_us=float(t.number("min")),
            avg_us=float(avg), max_us=float(t.number("max")), extra=extra))
    return out


# ---------------------------------------------------------------------------
# oslat

_OS_SHORT = parse_optstring("b:Bc:C:D:f:m:qsT:vw:z")
_OS_LONG = {**{n: Opt.REQUIRED for n in ("bucket-size", "cpu-list", "cpu-main-thread", "duration",
                                         "rtprio", "workload-mem", "trace-threshold", "workload",
                                         "json")},
            **{n: Opt.NONE for n in ("bias", "quiet", "single-preheat", "version", "zero-omit",
                                     "help")}}
OSLAT_DEFAULT_BUCKETS = 32


def oslat_histogram(labels: dict[int, int], max_us: float,
                    last_label: Optional[int]) -> Histogram:
    """An oslat histogram in rtlab's terms.

    oslat reports every latency as ``floor(µs) + 1`` ("001 (us)" holds
    samples below 1 µs); rtlab keeps oslat's own labels as bucket indexes so
    that percentiles agree with oslat's min/avg/max. The last bucket (label
    ``L = bias + bucket_size``, printed "including overflows") mixes samples
    of its own µs with every larger one, so it is always counted as
    overflows and the histogram size is ``L``: percentiles landing there are
    unknowable, and every thread of a run gets the same layout.

    ``last_label`` is ``L`` when known (text: the "including overflows"
    row; JSON: ``-b``, default 32, without ``-B``). Otherwise ``L`` is only
    known when the thread's max lies above the highest label (the max sample
    then went into the last bucket); if not, there were no overflows and the
    size stays unknown.
    """
    counts = dict(labels)
    top = max(counts) if counts else None
    if last_label is None and top is not None and max_us > top:
        last_label = top
    if last_label is None:
        return Histogram(counts=counts, bucket_us=1.0, size=None, overflows=0)
    overflows = sum(c for k, c in counts.items() if k >= last_label)
    counts = {k: c for k, c in counts.items() if k < last_label}
    return Histogram(counts=counts, bucket_us=1.0, size=last_label, overflows=overflows)


def _oslat(t: JsonPath, idx: int, cmd: str) -> ThreadResult:
    opts = scan_options(cmd, _OS_SHORT, _OS_LONG) if cmd else []
    bias, _ = last(opts, "B", "bias")
    found, value = last(opts, "b", "bucket-size")
    buckets = atoi(value) if found else OSLAT_DEFAULT_BUCKETS
    last_label = None if bias or not cmd else buckets
    hist = oslat_histogram(_counts(t, "histogram"), t.number("max"), last_label)
    return ThreadResult(
        thread=idx, cpu=cpu_or_none(t.opt_integer("cpu")), cycles=hist.total,
        min_us=float(t.number("min")), avg_us=float(t.number("avg", nan_ok=True)),
        max_us=float(t.number("max")), overflows=hist.overflows, histogram=hist,
        extra={"freq_mhz": t.opt_integer("freq"), "duration_s": t.number("duration")})


#: the rt-tests JSON layouts a suite may name (Suite.json_layout): each fills
#: the ToolOutput from the document
LAYOUTS = {
    "histogram": _histogram_threads,      # per-thread summary + histogram (cyclictest)
    "plain": _plain_threads,              # per-thread summary, no histogram
    "ipc": _ipc_pairs,                    # sender/receiver pairs, one result per receiver
    "ipc_timeouts": _ipc_pairs_timeouts,  # the same, with the receivers' timeout counts
    "priority_order": _priority_order,    # RT tasks that must run by priority
    "frequency": _frequency,              # busy-loop latency histograms per CPU
    "benchmarks": _benchmarks,            # rtbench: one result per primitive
    "inversions": _inversions,            # a whole-run count, no latencies
}
