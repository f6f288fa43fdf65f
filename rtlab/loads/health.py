"""Did a load really run for the whole measurement? Pure functions over the
raw files a load leaves (no board needed, so unit tests feed them fixtures).

Every board-side load runs in its own session; a sampler on the board
writes one line a second (``samples.txt``)::

    <uptime s> <processes in the session> <CPU ticks of the session> <parts alive> <parts>

CPU ticks are utime+stime+cutime+cstime summed over the session's live
processes (``/proc/<pid>/stat``), so the CPU time of processes that already
exited is still counted, through their parent's cutime/cstime. USER_HZ is
100 on every Linux architecture rtlab boards run. "Parts" are the load's
essential processes (stress-ng's parent, the iperf3 client, the ping, a
hackbench loop...), each checked with ``kill -0``.

The measurement window is bracketed by two synchronous samples (``snap``)
taken over the console right before the tool starts and right after it
ended. Within the window the load must have:

* every part alive at every sample and at the end;
* CPU ticks growing: no stretch longer than ``stall_s`` without a tick;
* (stress-ng loads) never fewer processes than at the start of the window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import yaml

#: clock ticks per second of /proc/<pid>/stat (USER_HZ)
USER_HZ = 100


@dataclass(frozen=True)
class Sample:
    t: float        # board uptime, s
    procs: int      # processes in the load's session
    ticks: int      # CPU ticks of the session (USER_HZ)
    alive: int      # essential parts alive
    parts: int      # essential parts started

    @classmethod
    def parse(cls, line: str) -> Optional["Sample"]:
        f = line.split()
        if len(f) != 5:
            return None
        try:
            return cls(float(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4]))
        except ValueError:
            return None


def parse_samples(text: str) -> list[Sample]:
    """Sample lines; a line cut by a kill mid-write is skipped."""
    return [s for s in (Sample.parse(l) for l in text.splitlines()) if s is not None]


@dataclass
class Snapshot:
    """A synchronous sample taken over the console (``rtlab-load.sh snap``)."""
    sample: Optional[Sample]
    dead: list[str]                        # names of parts not alive
    cpu: dict[str, list[int]]              # /proc/stat "cpuN" -> jiffies fields

    @classmethod
    def parse(cls, lines: list[str]) -> "Snapshot":
        sample, dead, cpu = None, [], {}
        for line in lines:
            line = line.strip()
            if line.startswith("sample "):
                sample = Sample.parse(line[len("sample "):])
            elif line.startswith("dead "):
                dead.append(line.split(None, 1)[1])
            elif re.match(r"^cpu\d*\s", line):
                name, *vals = line.split()
                try:
                    cpu[name] = [int(v) for v in vals]
                except ValueError:
                    pass
        return cls(sample, dead, cpu)


def cpu_busy(before: dict[str, list[int]], after: dict[str, list[int]]) -> dict[str, float]:
    """Busy share per CPU ("cpu0"..., and "cpu" for all) between two /proc/stat
    readings: 1 - (idle + iowait) / total."""
    out = {}
    for name, b in before.items():
        a = after.get(name)
        if not a or len(a) < 5 or len(b) < 5:
            continue
        d = [x - y for x, y in zip(a, b)]
        total = sum(d[:8])  # user nice system idle iowait irq softirq steal
        if total <= 0:
            continue
        out[name] = round(1 - (d[3] + d[4]) / total, 4)
    return out


@dataclass
class Window:
    """What the samples say about one load during the measurement."""
    t0: float
    t1: float
    cpu_s: float                 # CPU time the load used in the window
    share: Optional[float]       # cpu_s / (window × load CPUs)
    max_stall_s: float           # longest stretch without a CPU tick
    min_procs: int
    samples: int
    problems: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"t0": self.t0, "t1": self.t1, "window_s": round(self.t1 - self.t0, 3),
                "cpu_s": round(self.cpu_s, 2),
                "cpu_share": None if self.share is None else round(self.share, 4),
                "max_stall_s": round(self.max_stall_s, 2), "min_procs": self.min_procs,
                "samples": self.samples, "problems": self.problems}


def check_window(samples: list[Sample], first: Snapshot, last: Snapshot, *, ncpus: int,
                 stall_s: float, stable_procs: bool = False) -> Window:
    """Judge the load over [first, last] (the two snapshots around the tool)."""
    problems: list[str] = []
    if first.sample is None or last.sample is None:
        which = "start" if first.sample is None else "end"
        return Window(0.0, 0.0, 0.0, None, 0.0, 0, 0,
                      [f"no sample of the load at the {which} of the measurement"])
    t0, t1 = first.sample.t, last.sample.t
    pts = [first.sample] + [s for s in samples if t0 < s.t < t1] + [last.sample]
    window = max(t1 - t0, 1e-9)
    # alive: every part at every point
    for s in pts:
        if s.procs == 0 or s.alive < s.parts or s.parts == 0:
            why = ("no process of the load left" if s.procs == 0 else
                   f"{s.parts - s.alive} of {s.parts} load processes gone")
            if last.dead:
                why += f" ({', '.join(last.dead)})"
            problems.append(f"died mid-run: {why} {s.t - t0:.1f} s into the "
                            f"{window:.1f} s measurement")
            break
    # progress: the longest stretch over which the CPU ticks did not grow
    max_stall, since = 0.0, pts[0]
    for prev, cur in zip(pts, pts[1:]):
        if cur.ticks > prev.ticks:
            since = cur
        else:
            max_stall = max(max_stall, cur.t - since.t)
    if max_stall > stall_s:
        problems.append(f"no progress for {max_stall:.1f} s (no CPU time used; limit {stall_s:g} s)")
    min_procs = min(s.procs for s in pts)
    if stable_procs and not problems and min_procs < first.sample.procs:
        problems.append(f"{first.sample.procs - min_procs} of its {first.sample.procs} processes "
                        f"exited during the measurement")
    cpu_s = max(0, last.sample.ticks - first.sample.ticks) / USER_HZ
    share = cpu_s / (window * ncpus) if ncpus else None
    return Window(t0, t1, cpu_s, share, max_stall, min_procs, len(pts), problems)


# ---------------------------------------------------------------------------
# the loads' own throughput numbers

def stress_ng_metrics(yaml_text: str) -> dict[str, dict[str, float]]:
    """stress-ng ``--yaml`` (with ``--metrics-brief``): stressor -> numbers."""
    try:
        doc = yaml.safe_load(yaml_text) or {}
    except yaml.YAMLError:
        return {}
    out = {}
    for m in (doc.get("metrics") or []) if isinstance(doc, dict) else []:
        if not isinstance(m, dict) or "stressor" not in m:
            continue
        out[str(m["stressor"])] = {
            "bogo_ops": float(m.get("bogo-ops", 0)),
            "bogo_ops_s": float(m.get("bogo-ops-per-second-real-time", 0)),
            "wall_s": float(m.get("wall-clock-time", 0)),
            "cpu_pct_per_instance": float(m.get("cpu-usage-per-instance", 0)),
        }
    return out


_SNG_BAD = re.compile(r"( fail: | error: |\bunsuccessful run\b|terminated (by|on) signal|"
                      r"out of memory|\bOOM\b)", re.IGNORECASE)


def stress_ng_errors(log: str) -> list[str]:
    """Lines of a stress-ng log that say a stressor did not run properly."""
    return [line.strip() for line in log.splitlines() if _SNG_BAD.search(line)]


_IPERF_INTERVAL = re.compile(
    r"^\[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+([\d.]+)\s+([KMGT]?)Bytes\s+([\d.]+)\s+([KMGT]?)bits/sec"
    r"(?!.*\b(sender|receiver)\b)")


def iperf3_intervals(text: str) -> list[tuple[float, float, float]]:
    """(start s, end s, bytes) of each ``-i`` interval line of an iperf3 client."""
    out = []
    for line in text.splitlines():
        m = _IPERF_INTERVAL.match(line.strip())
        if m and "[SUM]" not in line:
            u = m.group(4)  # iperf3 counts bytes in binary units (KBytes = 1024)
            b = float(m.group(3)) * (1024 ** ("KMGT".index(u) + 1) if u else 1)
            out.append((float(m.group(1)), float(m.group(2)), b))
    return out


def ping_stats(text: str) -> dict[str, float]:
    """busybox/iputils ping summary: transmitted, received, loss."""
    m = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", text)
    if not m:
        return {}
    tx, rx = int(m.group(1)), int(m.group(2))
    return {"transmitted": tx, "received": rx, "loss": round(1 - rx / tx, 4) if tx else 1.0}


_MBW = re.compile(r"^\d+\s+Method:\s+(\w+)\s+Elapsed:\s+([\d.]+)\s+MiB:\s+([\d.]+)\s+Copy:\s+([\d.]+) MiB/s")


def mbw_runs(text: str) -> dict[str, float]:
    """mbw per-run lines (not the AVG line): runs, MiB copied, MiB/s over them."""
    runs, mib, secs = 0, 0.0, 0.0
    for line in text.splitlines():
        m = _MBW.match(line.strip())
        if m:
            runs += 1
            secs += float(m.group(2))
            mib += float(m.group(3))
    return {"runs": runs, "mib": mib, "mib_s": round(mib / secs, 1) if secs > 0 else 0.0}


def hackbench_rounds(text: str) -> dict[str, Any]:
    """The hackbench loop's output: rounds that ran to the end and their
    times (a round cut by the stop prints "Signal 15 caught" and a Time too)."""
    times = []
    for block in re.split(r"^(?=Running in )", text, flags=re.MULTILINE):
        m = re.search(r"^Time:\s*([\d.]+)", block, re.MULTILINE)
        if m and "caught" not in block:
            times.append(float(m.group(1)))
    out: dict[str, Any] = {"rounds": len(times)}
    if times:
        out["round_s_avg"] = round(sum(times) / len(times), 3)
        out["round_s_max"] = max(times)
    return out


_SNG_RATE = re.compile(r"metrc:\s*\[\d+\]\s+(\S+)\s+([\d.]+) MB/sec (read|write) rate")


def stress_ng_rates(log: str) -> dict[str, float]:
    """stress-ng's "miscellaneous metrics" MB/s lines: {"hdd_write_mb_s": 80.7, ...}."""
    return {f"{m.group(1)}_{m.group(3)}_mb_s": float(m.group(2)) for m in _SNG_RATE.finditer(log)}




# ---------------------------------------------------------------------------
# into the result model

def _main_number(name: str, tp: dict) -> dict[str, float]:
    """The one throughput number of each load that the table shows."""
    out: dict[str, float] = {}
    if "stressors" in tp:
        ops = sum(v.get("bogo_ops_s", 0.0) for v in tp["stressors"].values())
        if tp["stressors"]:
            out["bogo_ops_s"] = round(ops, 1)
    if tp.get("hdd_write_mb_s") is not None:
        out["write_mb_s"] = tp["hdd_write_mb_s"]
    if "rounds" in tp:
        out["rounds"] = tp["rounds"]
        if tp.get("round_s_avg") is not None:
            out["round_s"] = tp["round_s_avg"]
    if "mib_s" in tp:
        out["mib_s"] = tp["mib_s"]
    if "tcp_mbit_s" in tp:
        out["tcp_mbit_s"] = tp["tcp_mbit_s"]
        ping = tp.get("ping") or {}
        if ping.get("transmitted") is not None:
            out["ping_tx"] = ping["transmitted"]
    return out


def load_metrics(summaries: list[dict]) -> dict[str, Any]:
    """Flat numeric metrics (``load.<name>.<what>``) of the load summaries
    (``load-<name>.json``) of one suite run, for ``ToolOutput.metrics``."""
    m: dict[str, Any] = {}
    for s in summaries:
        name = s.get("load")
        if not name:
            continue
        w = s.get("window") or {}
        if w.get("cpu_share") is not None:
            m[f"load.{name}.cpu_share"] = w["cpu_share"]
        busy = (s.get("board_busy") or {}).get("cpu")
        if busy is not None:
            m[f"load.{name}.board_busy"] = busy
        for k, v in _main_number(name, s.get("throughput") or {}).items():
            m[f"load.{name}.{k}"] = v
    return m


def _si(x: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def load_cell(load: str, metrics: dict[str, Any]) -> str:
    """One short table cell saying how each load of a measurement ran:
    its share of the load CPUs and its own throughput ("97% 1.2k ops/s")."""
    parts = []
    for name in load.split("+"):
        g = lambda k: metrics.get(f"load.{name}.{k}")  # noqa: E731
        bits = []
        if name == "idle":
            if g("board_busy") is not None:
                bits.append(f"busy {g('board_busy') * 100:.0f}%")
        elif g("cpu_share") is not None:
            bits.append(f"{g('cpu_share') * 100:.0f}%")
        if name == "disk" and g("write_mb_s") is not None:
            bits.append(f"{_si(g('write_mb_s'))}MB/s")
        elif g("bogo_ops_s") is not None:
            bits.append(f"{_si(g('bogo_ops_s'))}op/s")
        if g("rounds") is not None:
            bits.append(f"{g('rounds')} rounds")
        if g("mib_s") is not None:
            bits.append(f"{_si(g('mib_s'))}MiB/s")
        if g("tcp_mbit_s") is not None:
            bits.append(f"{g('tcp_mbit_s'):.0f}Mb/s")
        if bits:
            parts.append((f"{name} " if "+" in load else "") + " ".join(bits))
    return ", ".join(parts) or "-"
