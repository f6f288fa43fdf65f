"""rt-tests text output (stdout), as rt-tests 2.4 ... 2.10 print it.

cyclictest / signaltest / cyclicdeadline summary lines::

    T: 0 ( 1234) P:90 I:1000 C:   1000 Min:     14 Act:   16 Avg:   19 Max:      96

(signaltest has no ``I:``, cyclicdeadline no ``P:``). Without ``-q`` the
same lines are redrawn every 100 ms with terminal escapes; the last one of
each thread is taken, and it is a snapshot that may be a few samples short
of the end of the run (the JSON of the same run is exact).

cyclictest histogram output (``-h N``, stdout or ``--histfile``)::

    # Histogram
    000000 000000\t000000          one row per bucket, one count per thread
    ...                             (+ a sum column with -H)
    # Total: 000000999 000000999    2.4-2.6 only
    # Min Latencies: 00014 00014
    # Avg Latencies: 00020 00021    integer, truncated
    # Max Latencies: 00050 00044
    # Histogram Overflows: 00001 00000
    # Histogram Overflow at cycle number:
    # Thread 0: 00183               at most N cycle numbers, then "# K others"
    # Thread 1:

rt-tests >= 2.7 omits the rows where every thread is zero and the
``# Total:`` line; both layouts are accepted and give the same result.

**Cycles without T: lines** (``-q -h`` prints none): a thread's cycles are
the samples in its histogram rows plus its ``# Histogram Overflows:``
count, since every sample lands in exactly one bucket or overflows.
``# Total:`` (when present) is the rows' sum per thread and is checked
against it, which catches a histogram with rows missing.

**Histogram size**: with every row printed (2.4-2.6: rows 0..N-1 and
``# Total:``) it is exact; with zero rows omitted it is unknown and the
highest printed row + 1 is used, a lower bound, so that ``covers()`` never
claims a range the file does not prove.

**Units**: ``-N`` prints nanoseconds, and nothing in a histogram says so.
The T: lines do (``Act:``/``Avg:`` are 8 wide with -N, 5 without); a
histogram without T: lines is taken as µs unless the caller says
``nsecs=True``.

**Precision**: text averages are integers: truncated by cyclictest and
signaltest, rounded by the IPC tools; JSON has two decimals.
"""
from __future__ import annotations

import os
import re
from typing import Any, Optional

from ..errors import InputError
from ..core.model import Histogram, ThreadResult, ToolOutput
from ..registry import SUITES
from ._common import float_field, int_field, strip_ansi, us
from .registry import layout_reader
from .rtjson import oslat_histogram

# ---------------------------------------------------------------------------
# which tool wrote this text

_IPC_HEAD = re.compile(r"^#\d+:\s*ID")
_IPC_STAT = re.compile(r"^#\d+\s*->\s*#\d+")


def _marker(suite) -> Optional[re.Pattern]:
    return re.compile(suite.text_marker) if suite.text_marker else None


def detect(lines: list[str], path) -> str:
    """The tool that printed *lines*, as the suites describe their tools'
    text (Suite.text_marker: a line only it prints; Suite.t_line_shape: the
    fields of its ``T:`` summary lines; rtlab.registry.SUITES)."""
    markers = [(s, m) for s in SUITES.values() if (m := _marker(s)) is not None]
    has_t = None
    for line in lines:
        s = line.strip()
        # two suites may run one tool (cyclictest and its checkpointed soak):
        # what is detected is the tool
        found = list({suite.tool: suite for suite, m in markers if m.match(s)}.values())
        if found:
            return found[0].tool if len(found) == 1 else _same_text(found, lines, path)
        if has_t is None and s.startswith("T:"):
            has_t = s
    if has_t is not None:
        names = set(re.findall(r"([A-Za-z]+):", has_t.split(")", 1)[-1]))
        tools = {suite.tool for suite in SUITES.values()
                 if suite.t_line_shape is not None and suite.t_line_shape(names)}
        if len(tools) == 1:
            return tools.pop()
    raise InputError(path, "no rt-tests output recognised: no JSON object, no 'T:' summary "
                           "lines, and no line any suite's tool prints ("
                           + ", ".join(sorted({s.tool for s, _ in markers})) + ")")


def _same_text(suites: list, lines: list[str], path) -> str:
    """Tools whose text is alike (the IPC tools): one whose text claims it
    (pmqtest's "TO n,"), else the ones no line refuses, then the file name
    (e.g. ``svsematest.txt``), else --tool."""
    for suite in suites:
        if suite.text_claim and any(re.search(suite.text_claim, ln) for ln in lines):
            return suite.tool
    left = [x for x in suites if not (x.text_refuse and any(re.search(x.text_refuse, ln) for ln in lines))]
    base = os.path.basename(str(path)).lower()
    named = [x.tool for x in left if x.tool in base]
    if len(named) == 1:
        return named[0]
    raise InputError(path, f"output of {', '.join(x.tool for x in left)}: the text does not say which "
                           f"and neither does the file name; force it with --tool")


def parse(text: str, path, tool: Optional[str], nsecs: Optional[bool] = None) -> ToolOutput:
    lines = [strip_ansi(line) for line in text.splitlines()]
    tool = tool or detect(lines, path)
    read_layout = layout_reader(tool, "text", LAYOUTS, path, f"{tool} writes JSON only; this file is not JSON")
    out = ToolOutput(path=str(path), tool=tool)
    read_layout(out, lines, path, nsecs)
    return out


# ---------------------------------------------------------------------------
# cyclictest, signaltest, cyclicdeadline

_T_HEAD = re.compile(r"^T:\s*(\S+)\s*\(\s*([^)]*?)\s*\)(.*)$")
#: cyclictest --spike: a sample over the trigger, its thread, latency and
#: wake-up time (µs of the thread's clock, CLOCK_MONOTONIC), printed at the end
_SPIKE = re.compile(r"^T:\s*(\d+) Spike:\s*(-?\d+): TS:\s*(\d+)$")
_SPIKES_TOTAL = re.compile(r"^spikes = (\d+)$")


def spikes(text: str) -> tuple[list[tuple[int, int, int]], int]:
    """cyclictest's ``--spike`` records in its stdout: ((thread, latency,
    wake-up time in µs) of every recorded spike, how many it counted). It
    counts every spike but records only ``--spike-nodes`` of them."""
    found: list[tuple[int, int, int]] = []
    total = 0
    for line in text.splitlines():
        s = line.strip()
        m = _SPIKE.match(s)
        if m:
            found.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
            continue
        m = _SPIKES_TOTAL.match(s)
        if m:
            total = int(m.group(1))
    return found, max(total, len(found))
_T_FIELD = re.compile(r"([A-Za-z]+):(\s*\S*)")
_REQUIRED_T = ("C", "Min", "Act", "Avg", "Max")


def _t_line(line: str, n: int, path) -> dict[str, Any]:
    m = _T_HEAD.match(line.strip())
    if not m:
        raise InputError(path, f"line {n}: malformed 'T:' summary line")
    fields = {"thread": int_field(path, n, "T", m.group(1))}
    raw = dict(_T_FIELD.findall(m.group(3)))
    for name in _REQUIRED_T:
        if name not in raw:
            raise InputError(path, f"line {n}: 'T:' line has no '{name}:' field (cut short?)")
    for name, value in raw.items():
        fields[name] = int_field(path, n, name, value)
    # -N widens Act/Avg from %5ld to %8ld: the only sign of ns in the text
    fields["_wide"] = len(raw["Act"].rstrip()) >= 8 or len(raw["Avg"].rstrip()) >= 8
    fields["_line"] = n
    return fields


def _cyclic(lines: list[str], path, tool: str, nsecs: Optional[bool], histogram: bool) -> list[ThreadResult]:
    tl: dict[int, dict[str, Any]] = {}
    hist = None
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("T:") and not _SPIKE.match(s):
            f = _t_line(s, i + 1, path)
            tl[f["thread"]] = f  # the live display redraws: last one wins
        elif s == "# Histogram" and histogram:
            if hist is not None:
                raise InputError(path, f"line {i + 1}: a second '# Histogram' (one run per file)")
            hist, i = _histogram_block(lines, i, path)
            continue
        i += 1
    ns = nsecs if nsecs is not None else any(f["_wide"] for f in tl.values())
    if hist is not None:
        return _from_histogram(hist, tl, ns, path)
    if not tl:
        raise InputError(path, f"no {tool} summary: no 'T:' lines and no '# Histogram'")
    out = []
    for idx in sorted(tl):
        f = tl[idx]
        extra = {}
        if "P" in f:
            extra["priority"] = f["P"]
        if "I" in f:
            extra["interval_us"] = f["I"]
        if "SMI" in f:
            extra["smi"] = f["SMI"]
        out.append(ThreadResult(
            thread=idx, cpu=None, cycles=f["C"], min_us=us(f["Min"], ns),
            avg_us=us(f["Avg"], ns), max_us=us(f["Max"], ns), extra=extra))
    return out


_SUMMARY = {
    "# Total:": "total", "# Min Latencies:": "min", "# Avg Latencies:": "avg",
    "# Max Latencies:": "max", "# Histogram Overflows:": "overflows", "# SMIs:": "smi",
}


def _histogram_block(lines: list[str], start: int, path):
    """Parse from the '# Histogram' line; return (block, index after it)."""
    rows: list[tuple[int, list[int]]] = []
    ncols = None
    i = start + 1
    while i < len(lines):
        s = lines[i].strip()
        if not s or s.startswith("#"):
            break
        toks = s.split()
        n = i + 1
        for t in toks:
            if not t.isdigit():
                raise InputError(path, f"line {n}: histogram row: {t!r} is not a count")
        if len(toks) < 2:
            raise InputError(path, f"line {n}: histogram row has no count (cut short?)")
        if ncols is None:
            ncols = len(toks) - 1
        elif len(toks) - 1 != ncols:
            raise InputError(path, f"line {n}: histogram row has {len(toks) - 1} counts, "
                                   f"the rows above have {ncols} (cut short?)")
        bucket = int(toks[0])
        if rows and bucket <= rows[-1][0]:
            raise InputError(path, f"line {n}: histogram bucket {bucket} after {rows[-1][0]}")
        rows.append((bucket, [int(t) for t in toks[1:]]))
        i += 1
    block: dict[str, Any] = {"rows": rows, "ncols": ncols, "start": start + 1, "lines": {},
                             "oflow": {}, "end": i}
    in_oflow = False
    while i < len(lines):
        s = lines[i].strip()
        n = i + 1
        if not s:
            if "overflows" in block["lines"]:
                break  # the blank line print_hist ends with
            i += 1
            continue
        if not s.startswith("#"):
            break  # not ours (merged stderr, next tool): the checks below judge
        key = next((k for k in _SUMMARY if s.startswith(k)), None)
        if key:
            vals = s[len(key):].split()
            block["lines"][_SUMMARY[key]] = (n, [int_field(path, n, key.strip("# :"), v) for v in vals])
        elif s.startswith("# Histogram Overflow at cycle number:"):
            in_oflow = True
        elif in_oflow and re.match(r"^# Thread \d+:", s):
            head, _, rest = s.partition(":")
            th = int(head.split()[-1])
            listed, _, others = rest.partition("#")
            cycles = [int_field(path, n, f"Thread {th}", v) for v in listed.split()]
            extra = 0
            if others.strip():
                m = re.fullmatch(r"\s*(\d+)\s+others\s*", others)
                if not m:
                    raise InputError(path, f"line {n}: expected '# N others', got {others.strip()!r}")
                extra = int(m.group(1))
            block["oflow"][th] = (n, cycles, extra)
        elif s.startswith(("# Thread Ids:", "# Break thread:", "# Break value:")):
            pass
        else:
            break  # something after the histogram (another tool's output?)
        block["end"] = n
        i += 1
    return block, i


def _from_histogram(b: dict[str, Any], tl: dict[int, dict[str, Any]], ns: bool,
                    path) -> list[ThreadResult]:
    start = b["start"]
    where = f"histogram starting at line {start}"
    for key, label in (("min", "# Min Latencies:"), ("avg", "# Avg Latencies:"),
                       ("max", "# Max Latencies:"), ("overflows", "# Histogram Overflows:")):
        if key not in b["lines"]:
            raise InputError(path, f"{where}: no '{label}' line; the histogram stops at line "
                                   f"{b['end']} (output cut short?)")
    nthreads = len(b["lines"]["min"][1])
    if nthreads == 0:
        raise InputError(path, f"line {b['lines']['min'][0]}: '# Min Latencies:' has no value")
    for key in ("avg", "max", "overflows", "total"):
        if key in b["lines"]:
            n, vals = b["lines"][key]
            if len(vals) not in (nthreads, nthreads + 1):
                raise InputError(path, f"line {n}: {len(vals)} values for {nthreads} threads")
    rows, ncols = b["rows"], b["ncols"]
    if ncols is not None and ncols not in (nthreads, nthreads + 1):
        raise InputError(path, f"{where}: rows have {ncols} counts for {nthreads} threads")
    if ncols == nthreads + 1:  # -H: a sum column
        for bucket, c in rows:
            if sum(c[:nthreads]) != c[nthreads]:
                raise InputError(path, f"{where}: bucket {bucket}: the sum column is not the sum")
    sums = [sum(c[j] for _, c in rows) for j in range(nthreads)]
    complete = ("total" in b["lines"] and bool(rows)
                and [r[0] for r in rows] == list(range(len(rows))))
    if "total" in b["lines"]:
        n, tot = b["lines"]["total"]
        for j in range(nthreads):
            if tot[j] != sums[j]:
                raise InputError(path, f"line {n}: '# Total:' of thread {j} is {tot[j]} but its "
                                       f"rows add up to {sums[j]} (rows missing?)")
    if complete:
        size = len(rows)
    else:  # zero rows omitted (>= 2.7): the highest row proves a lower bound
        size = rows[-1][0] + 1 if rows else 0
    oflow = b["lines"]["overflows"][1]
    out = []
    for j in range(nthreads):
        if j not in b["oflow"]:
            raise InputError(path, f"{where}: no '# Thread {j}:' overflow line (output cut short?)")
        n, listed, others = b["oflow"][j]
        if len(listed) + others != oflow[j]:
            raise InputError(path, f"line {n}: {len(listed) + others} overflow cycle numbers for "
                                   f"{oflow[j]} overflows (cut short?)")
        counts = {bucket: c[j] for bucket, c in rows if c[j]}
        h = Histogram(counts=counts, bucket_us=0.001 if ns else 1.0, size=size,
                      overflows=oflow[j])
        extra: dict[str, Any] = {"overflow_cycles": listed}
        if others:
            extra["overflow_cycles_not_listed"] = others
        if "smi" in b["lines"]:
            extra["smi"] = b["lines"]["smi"][1][j]
        t = tl.get(j)
        if t is not None:
            if "P" in t:
                extra["priority"] = t["P"]
            if "I" in t:
                extra["interval_us"] = t["I"]
        out.append(ThreadResult(
            thread=j, cpu=None, cycles=h.total,
            min_us=us(b["lines"]["min"][1][j], ns), avg_us=us(b["lines"]["avg"][1][j], ns),
            max_us=us(b["lines"]["max"][1][j], ns), overflows=oflow[j], histogram=h,
            extra=extra))
    return out


# ---------------------------------------------------------------------------
# sigwaittest, svsematest, ptsematest, pmqtest

_HEAD_FIELD = re.compile(r"^(ID|P|CPU|I|TO|Cycles)\s*(.*)$")


def _ipc(lines: list[str], path, tool: str) -> list[ThreadResult]:
    heads: dict[int, dict[str, Any]] = {}
    stats: dict[int, dict[str, int]] = {}
    for i, line in enumerate(lines):
        s, n = line.strip(), i + 1
        if _IPC_HEAD.match(s):
            halves = s.split(";")
            if len(halves) != 2:
                raise InputError(path, f"line {n}: expected '#S: ...; #R: ...' (cut short?)")
            parts = []
            for half in halves:
                num, _, rest = half.strip().partition(":")
                fields = {"#": int_field(path, n, "#", num.lstrip("#"))}
                for p in rest.split(","):
                    m = _HEAD_FIELD.match(p.strip())
                    if not m:
                        raise InputError(path, f"line {n}: unexpected field {p.strip()!r}")
                    fields[m.group(1)] = int_field(path, n, m.group(1), m.group(2))
                parts.append(fields)
            snd, rcv = parts
            if "Cycles" not in rcv:
                raise InputError(path, f"line {n}: no 'Cycles' field (cut short?)")
            heads[snd["#"] // 2] = {"s": snd, "r": rcv, "line": n}
        elif _IPC_STAT.match(s):
            items = [p.strip() for p in s.split(",")]
            m = re.match(r"^#(\d+)\s*->\s*#(\d+)$", items[0])
            if not m:
                raise InputError(path, f"line {n}: malformed '#R -> #S' line")
            fields = {}
            for p in items[1:]:
                name, _, value = p.partition(" ")
                fields[name] = int_field(path, n, name, value)
            for name in ("Min", "Cur", "Avg", "Max"):
                if name not in fields:
                    raise InputError(path, f"line {n}: no '{name}' field (cut short?)")
            stats[int(m.group(2)) // 2] = fields
    if not heads and not stats:
        raise InputError(path, f"no {tool} summary ('#0: ID..' and '#1 -> #0, Min ..' lines)")
    out = []
    for pair in sorted(set(heads) | set(stats)):
        if pair not in heads:
            raise InputError(path, f"pair #{2 * pair}/#{2 * pair + 1}: no '#{2 * pair}: ID..' line")
        if pair not in stats:
            raise InputError(path, f"line {heads[pair]['line']}: pair has no "
                                   f"'#{2 * pair + 1} -> #{2 * pair}, Min ..' line (cut short?)")
        h, st = heads[pair], stats[pair]
        extra: dict[str, Any] = {
            "sender_cpu": _cpu(h["s"].get("CPU")), "sender_priority": h["s"].get("P"),
            "receiver_priority": h["r"].get("P"), "interval_us": h["s"].get("I"),
        }
        if "TO" in h["r"]:
            extra["timeoutcount"] = h["r"]["TO"]
        out.append(ThreadResult(
            thread=pair, cpu=_cpu(h["r"].get("CPU")), cycles=h["r"]["Cycles"],
            min_us=float(st["Min"]), avg_us=float(st["Avg"]), max_us=float(st["Max"]),
            extra=extra))
    return out


def _cpu(c: Optional[int]) -> Optional[int]:
    return None if c is None or c < 0 else c


# ---------------------------------------------------------------------------
# hackbench, pi_stress

_HB_MODE = re.compile(r"^Running in (\w+) mode with (\d+) groups using (\d+) file descriptors "
                      r"each \(== (\d+) tasks\)")
_HB_MSG = re.compile(r"^Each sender will pass (\d+) messages of (\d+) bytes")


def _hackbench(lines: list[str], path) -> dict[str, Any]:
    m: dict[str, Any] = {}
    for i, line in enumerate(lines):
        s, n = line.strip(), i + 1
        if s.startswith("Time:"):
            if "time_s" in m:
                raise InputError(path, f"line {n}: a second 'Time:' line (one run per file)")
            m["time_s"] = float_field(path, n, "Time", s[5:])
        elif _HB_MODE.match(s):
            g = _HB_MODE.match(s).groups()
            m.update(mode=g[0], groups=int(g[1]), fds=int(g[2]), tasks=int(g[3]))
        elif _HB_MSG.match(s):
            g = _HB_MSG.match(s).groups()
            m.update(loops=int(g[0]), datasize=int(g[1]))
    if "time_s" not in m:
        raise InputError(path, "no hackbench 'Time:' line (the run did not finish?)")
    return m


def _pi_stress(lines: list[str], path) -> dict[str, Any]:
    m: dict[str, Any] = {}
    for i, line in enumerate(lines):
        s, n = line.strip().split("\r")[-1], i + 1
        if s.startswith("Total inversion performed:"):
            m["inversions"] = int_field(path, n, "Total inversion performed", s.split(":", 1)[1])
        elif s.startswith("Test Duration:"):
            d = re.fullmatch(r"Test Duration:\s*(\d+) days, (\d+) hours, (\d+) minutes, "
                             r"(\d+) seconds", s)
            if not d:
                raise InputError(path, f"line {n}: malformed 'Test Duration:' line")
            dd, hh, mm, ss = (int(x) for x in d.groups())
            m["duration_s"] = ((dd * 24 + hh) * 60 + mm) * 60 + ss
    if "inversions" not in m:
        raise InputError(path, "no pi_stress 'Total inversion performed:' line")
    return m


# ---------------------------------------------------------------------------
# rt-migrate-test

def _rt_migrate(lines: list[str], path):
    runs = ntasks = 0
    tasks: dict[int, dict[str, Any]] = {}
    cur = None
    metrics: dict[str, Any] = {}
    in_iter = False
    for i, line in enumerate(lines):
        s, n = line.strip(), i + 1
        if s.startswith("Iter:"):
            in_iter = True
            ntasks = len(s[5:].split())
        elif in_iter and re.match(r"^\d+:", s):
            num, _, rest = s.partition(":")
            vals = rest.split()
            if len(vals) != ntasks:
                raise InputError(path, f"line {n}: {len(vals)} values for {ntasks} tasks")
            for v in vals:
                int_field(path, n, f"iteration {num}", v)
            runs += 1
        elif (m := re.match(r"^Task (\d+) \(prio (-?\d+)\)", s)):
            in_iter = False
            cur = {"priority": int(m.group(2)), "line": n}
            tasks[int(m.group(1))] = cur
        elif cur is not None and (m := re.match(r"^(Max|Min|Tot|Avg):\s*(.*?)\s*us$", s)):
            cur[m.group(1)] = int_field(path, n, m.group(1), m.group(2))
        elif s in ("Passed!", "Failed!"):
            metrics["check"] = s[:-1].lower()
    if not tasks:
        raise InputError(path, "no rt-migrate-test summary ('Task N (prio P)' blocks)")
    if runs == 0:
        raise InputError(path, "no rt-migrate-test iteration rows after 'Iter:'")
    if sorted(tasks) != list(range(ntasks)):
        raise InputError(path, f"'Iter:' names {ntasks} tasks but 'Task N' blocks were found for "
                               f"{sorted(tasks)} (output cut short?)")
    out = []
    for idx in sorted(tasks):
        t = tasks[idx]
        for k in ("Max", "Min", "Tot", "Avg"):
            if k not in t:
                raise InputError(path, f"line {t['line']}: task {idx} has no '{k}:' line (cut short?)")
        out.append(ThreadResult(
            thread=idx, cpu=None, cycles=runs, min_us=float(t["Min"]), avg_us=float(t["Avg"]),
            max_us=float(t["Max"]), extra={"priority": t["priority"], "total_us": t["Tot"]}))
    return out, metrics


# ---------------------------------------------------------------------------
# oslat

_OS_LINE = re.compile(r"^\s*([^:\t]+?):\t(.*)$")
_SUFFIX = re.compile(r"\s*\((?:us|sec|Mhz|including overflows)\)\s*$")


def _oslat(lines: list[str], path) -> list[ThreadResult]:
    fields: dict[str, tuple[int, list[str]]] = {}
    buckets: list[tuple[int, list[str], int]] = []
    last_label = None
    for i, line in enumerate(lines):
        m = _OS_LINE.match(line)
        if not m:
            continue
        label, rest, n = m.group(1).strip(), m.group(2), i + 1
        over = "(including overflows)" in rest
        vals = _SUFFIX.sub("", rest).split()
        b = re.fullmatch(r"(\d+) \(us\)", label)
        if b:
            buckets.append((int(b.group(1)), vals, n))
            if over:
                last_label = int(b.group(1))
        else:
            fields[label] = (n, vals)
    for need in ("Core", "Minimum", "Average", "Maximum"):
        if need not in fields:
            raise InputError(path, f"no oslat '{need}:' line (output cut short?)")
    ncore = len(fields["Core"][1])
    for label, (n, vals) in fields.items():
        if label in ("Core", "Counter Freq", "Minimum", "Average", "Maximum", "Max-Min",
                     "Duration") and len(vals) != ncore:
            raise InputError(path, f"line {n}: {len(vals)} values for {ncore} cores")
    for _, vals, n in buckets:
        if len(vals) != ncore:
            raise InputError(path, f"line {n}: {len(vals)} values for {ncore} cores (cut short?)")
    out = []
    for j in range(ncore):
        def num(label, conv=int_field):
            n, vals = fields[label]
            return conv(path, n, label, vals[j])
        labels = {}
        for label, vals, n in buckets:
            c = int_field(path, n, f"{label:03d} (us)", vals[j])
            if c:
                labels[label] = c
        mx = num("Maximum")
        h = oslat_histogram(labels, mx, last_label)
        extra: dict[str, Any] = {}
        if "Counter Freq" in fields:
            extra["freq_mhz"] = num("Counter Freq")
        if "Duration" in fields:
            extra["duration_s"] = num("Duration", float_field)
        out.append(ThreadResult(
            thread=j, cpu=num("Core"), cycles=h.total, min_us=float(num("Minimum")),
            avg_us=num("Average", float_field), max_us=float(mx), overflows=h.overflows,
            histogram=h, extra=extra))
    return out


#: the text layouts a suite may name (Suite.text_layout): each fills the ToolOutput
LAYOUTS = {
    "summary": lambda out, lines, path, ns: setattr(out, "threads", _cyclic(lines, path, out.tool, ns, False)),
    "summary_histogram": lambda out, lines, path, ns: setattr(out, "threads",
                                                              _cyclic(lines, path, out.tool, ns, True)),
    "ipc": lambda out, lines, path, ns: setattr(out, "threads", _ipc(lines, path, out.tool)),
    "time": lambda out, lines, path, ns: setattr(out, "metrics", _hackbench(lines, path)),
    "inversions": lambda out, lines, path, ns: setattr(out, "metrics", _pi_stress(lines, path)),
    "priority_order": lambda out, lines, path, ns: _set_both(out, _rt_migrate(lines, path)),
    "frequency": lambda out, lines, path, ns: setattr(out, "threads", _oslat(lines, path)),
}


def _set_both(out: ToolOutput, threads_metrics) -> None:
    out.threads, out.metrics = threads_metrics



def summary_maxima(text: str, path, nsecs: bool = False) -> Optional[list[float]]:
    """The per-thread maxima (µs, thread order) of the summary that closes
    cyclictest's -h histogram, read as the histogram layout reads it
    (_histogram_block: every row and value checked; -H's sum column
    dropped); None where the text has no histogram. The summary is printed
    once every thread has ended, the JSON before: rtlab.suites.Cyclictest
    folds these in."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "# Histogram"), None)
    if start is None:
        return None
    block, _ = _histogram_block(lines, start, path)
    if "max" not in block["lines"] or "min" not in block["lines"]:
        raise InputError(path, f"histogram starting at line {start + 1}: no '# Max Latencies:' line "
                               f"(output cut short?)")
    nthreads = len(block["lines"]["min"][1])
    return [us(v, nsecs) for v in block["lines"]["max"][1][:nthreads]]
