"""Host noise during each measurement: hypervisor steal and host stalls.

The machine that runs the board tests (the CI runner; for the local board,
the board itself) is often a virtual machine. When the hypervisor gives its
vCPU to someone else, every thread on that vCPU stops, cyclictest's included,
and the stop shows up as a latency that no kernel change caused (measured
here: ``max 20498 us >= budget 20000 us`` on an unchanged kernel while other
work loaded the host; /proc/stat steal grows ~15 s an hour on this VM).

While a tool runs, a :class:`Monitor` thread on the host samples
``/proc/stat`` every :data:`SAMPLE_S` (the ``steal`` column per CPU: time
the hypervisor ran something else while this vCPU wanted to run) and its own
oversleep on CLOCK_MONOTONIC (a gap: the host process did not run). Written
beside the raw outputs as ``host-noise.json`` before anything is judged::

    {"window_s": 10.2, "samples": 201, "tick_ms": 10,
     "steal_ms": {"cpu0": 30, "cpu1": 0},     # stolen during the measurement, per CPU
     "burst_ms": 20, "burst_cpu": "cpu0",     # most stolen from one CPU within BURST_WINDOW_S
     "max_gap_ms": 23.1}                      # the monitor's longest oversleep

How a stall of the machine is told from a latency of its kernel (the local
board: the host IS the board): a kernel latency (a preempt-off section, an
interrupt storm, a lock) delays cyclictest and the monitor alike, but the
vCPU keeps running, so ``steal`` stays put. Only the hypervisor taking the
vCPU away raises ``steal``. The gap alone cannot tell the two apart on the
local board (it is recorded for people); steal can, so only steal decides.

The gate (rtlab.judge.gate.judge) makes a breached ``max`` INFRA ("host stole N
ms"), never PASS and never FAIL, when one CPU lost at least the budget file's
``host_noise: steal_infra_ms`` (default :data:`DEFAULT_STEAL_INFRA_MS`)
within :data:`BURST_WINDOW_S` during the measurement, and the steal explains
the breach (the max minus the most that can have been stolen is under the
budget): a 400 ms latency is never blamed on 20 ms of steal. A breached
percentile p is the host's when the CPUs were stolen from for at least the
(100 - p) % of the window the breach needs (a wake-up due while its vCPU is
stolen is late; measured here under load average 23: 190 ms of 5.2 s per CPU,
3.6 %, and p99 395 us against 300 us). Every breach of the measurement must
be explained, else it is FAIL. The runner runs a job whose breach was stolen
again (rtlab.run.runner, :data:`RETRIES`).

``steal`` counts in USER_HZ ticks (10 ms here), so one reading is exact to a
tick: the default threshold is two ticks within a quarter second, which the
steady steal of this VM (~2 ms/s per CPU) cannot reach; a single burst that
long can.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Optional
from .fsutil import read_json

HOST_NOISE_FILE = "host-noise.json"
PROC_STAT = "/proc/stat"
#: another file in /proc/stat's format instead (tests: steal cannot be made on demand)
STAT_ENV = "RTLAB_HOST_STAT"
#: seconds between /proc/stat readings
SAMPLE_S = 0.05
#: the steal of one CPU is summed over windows this long for the burst
BURST_WINDOW_S = 0.25
#: the gate's default: a breach is the host's when one CPU lost this much within BURST_WINDOW_S
DEFAULT_STEAL_INFRA_MS = 20.0
#: how often the runner runs a job again whose breach the host stole (then it stays INFRA)
RETRIES = 2
#: the reason's first words: what the runner looks for to retry
STOLE = "host stole"
#: /proc/stat cpu line: user nice system idle iowait irq softirq steal ...
STEAL_COLUMN = 7


def tick_ms() -> float:
    try:
        return 1000.0 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 10.0


def parse_steal(text: str) -> dict[str, int]:
    """Steal ticks per CPU ("cpu0", ...; the "cpu" total left out) of a /proc/stat text."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name != "cpu"):
            continue
        vals = rest.split()
        if len(vals) > STEAL_COLUMN and vals[STEAL_COLUMN].isdigit():
            out[name] = int(vals[STEAL_COLUMN])
    return out


class NoiseSummary:
    """What the readings say, kept as they come: a soak reads /proc/stat every
    SAMPLE_S for hours, so no reading is kept but the first, the last and
    those within BURST_WINDOW_S of the newest (memory stays flat; it grew
    ~4.5 kB a second while every reading was kept)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: Optional[tuple[float, dict[str, int]]] = None
        self.last: Optional[tuple[float, dict[str, int]]] = None
        self.recent: deque[tuple[float, dict[str, int]]] = deque()  # the readings the next window may start at
        self.max_gap_ms = 0.0
        self.best = 0
        self.best_cpu: Optional[str] = None

    def add_gap(self, ms: float) -> None:
        self.max_gap_ms = max(self.max_gap_ms, ms)

    def add(self, t: float, steal: dict[str, int]) -> None:
        """One reading (monotonic s, steal ticks per CPU), oldest first. Each
        reading ends a window of at most BURST_WINDOW_S; two readings further
        apart than the window, when the host stalled the monitor itself,
        still count as one window."""
        if self.first is None:
            self.first = (t, steal)
        while len(self.recent) >= 2 and self.recent[0][0] < t - BURST_WINDOW_S:
            self.recent.popleft()
        start = self.recent[0][1] if self.recent else steal
        for cpu in self.first[1]:  # the CPUs of the first reading (a tie: the CPU that got there first)
            d = steal.get(cpu, 0) - start.get(cpu, 0)
            if d > self.best:
                self.best, self.best_cpu = d, cpu
        self.recent.append((t, steal))
        self.last = (t, steal)
        self.count += 1

    def result(self, tick: float = 10.0) -> dict[str, Any]:
        out: dict[str, Any] = {"window_s": 0.0, "samples": self.count, "tick_ms": tick, "steal_ms": {},
                               "burst_ms": 0.0, "burst_cpu": None, "max_gap_ms": round(self.max_gap_ms, 1)}
        if self.count < 2 or self.first is None or self.last is None:
            return out
        (t0, first), (t1, last) = self.first, self.last
        out["window_s"] = round(t1 - t0, 3)
        out["steal_ms"] = {c: round((last.get(c, v) - v) * tick, 1) for c, v in sorted(first.items())}
        out["burst_ms"], out["burst_cpu"] = round(self.best * tick, 1), self.best_cpu
        return out


def summarise(samples: list[tuple[float, dict[str, int]]], gaps_ms: list[float],
              tick: float = 10.0) -> dict[str, Any]:
    """What the readings say: *samples* are (monotonic s, steal ticks per
    CPU), oldest first; *gaps_ms* the monitor's oversleeps."""
    acc = NoiseSummary()
    for t, steal in samples:
        acc.add(t, steal)
    for g in gaps_ms:
        acc.add_gap(g)
    return acc.result(tick)


class Monitor:
    """Samples host steal and stalls on a thread of its own while a tool runs."""

    def __init__(self, stat_path: Optional[str] = None, period_s: float = SAMPLE_S):
        self.stat_path = stat_path or os.environ.get(STAT_ENV) or PROC_STAT
        self.period_s = period_s
        self.summary = NoiseSummary()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[str] = None

    def _read(self) -> None:
        try:
            with open(self.stat_path) as f:
                self.summary.add(time.monotonic(), parse_steal(f.read()))
        except OSError as e:  # a host without /proc/stat: said, never a verdict
            self.error = f"{self.stat_path}: {e}"

    def _loop(self) -> None:
        while True:
            t = time.monotonic()
            if self._stop.wait(self.period_s):
                return
            self.summary.add_gap(max(0.0, (time.monotonic() - t - self.period_s) * 1000))
            self._read()

    def start(self) -> "Monitor":
        self._read()
        self._thread = threading.Thread(target=self._loop, name="rtlab-hostnoise", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._read()
        out = self.summary.result(tick_ms())
        out["source"] = f"host {self.stat_path}, every {self.period_s:g} s"
        if self.error:
            out["error"] = self.error
        return out


class watching:
    """``with watching(host_dir):`` the tool's run, host-noise.json after it.

    *witness*: the board runs on this host (the local board, a QEMU board),
    so a stall of the whole machine delays it: the per-CPU samplers of
    rtlab.core.stallwitness watch too (``stall`` in host-noise.json).
    *rt_load*: the load runs real-time threads that can starve them: the
    witness is then recorded as not trusted."""

    def __init__(self, host_dir: Path, witness: bool = False, rt_load: bool = False):
        self.path = Path(host_dir) / HOST_NOISE_FILE
        self.monitor = Monitor()
        self.rt_load = rt_load
        self.witnesses = None
        if witness:
            from .stallwitness import Witnesses
            self.witnesses = Witnesses()

    def __enter__(self) -> Monitor:
        if self.witnesses is not None:
            self.witnesses.start()
        return self.monitor.start()

    def __exit__(self, *exc) -> None:
        from .stallwitness import injected
        out = self.monitor.stop()
        if self.witnesses is not None:
            stall = self.witnesses.stop()
            stall = injected() or stall
            if self.rt_load:
                stall = {**stall, "trusted": False,
                         "why_not": "the load runs real-time threads of its own, which can stop every sampler"}
            out["stall"] = stall
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(out, indent=1) + "\n")


def load(host_dir: Path) -> Optional[dict[str, Any]]:
    """host-noise.json of a suite run, None when it has none (LAVA, older runs) or it is unreadable."""
    try:
        d = read_json(Path(host_dir) / HOST_NOISE_FILE)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def stolen_share(noise: dict[str, Any]) -> float:
    """The share of the window the hypervisor held the host's CPUs (their mean)."""
    steal = [float(v) for v in (noise.get("steal_ms") or {}).values()]
    window_ms = float(noise.get("window_s") or 0) * 1000
    return sum(steal) / len(steal) / window_ms if steal and window_ms > 0 else 0.0


def stolen_breach(noise: Optional[dict[str, Any]], threshold_ms: float, *,
                  max_us: Optional[float] = None, budget_max_us: Optional[float] = None,
                  share_over: Optional[float] = None,
                  percentiles: tuple[str, ...] = (),
                  late: Optional[dict[str, Optional[float]]] = None) -> Optional[str]:
    """The INFRA reason when the host's steal explains every breach, else None.

    A periodic wake-up is late by a stall only when it falls due inside it:
    a stall of S ms makes at most S / interval samples late, so the steal
    can have delayed at most the most stolen CPU's share of the window (a
    tick more than read) of the samples. A breach is the host's only when
    the samples left after taking that many away no longer break it.

    A breached max (*max_us* over *budget_max_us*): one CPU lost at least
    *threshold_ms* within BURST_WINDOW_S, the max minus the most that can
    have been stolen there is under the budget, and no more of the samples
    reached the budget (*share_over*) than the steal can have delayed (a
    max budget most samples break is the kernel's whatever the host
    stole). A breached percentile p (in *percentiles*): the CPUs were
    stolen from for at least the (100 - p) % of the window the breach
    needs above the budget, and the samples at or over p's budget (*late*
    [p], where known) less those the steal can have delayed are fewer than
    (100 - p) %: a thread of the kernel's own delaying 13 % of the wake-ups
    breaks a p99 budget whatever 2 % of steal did."""
    if not noise or (max_us is None and not percentiles):
        return None
    try:
        burst, tick = float(noise.get("burst_ms") or 0), float(noise.get("tick_ms") or 10)
        share = stolen_share(noise)
        window = float(noise.get("window_s") or 0)
    except (TypeError, ValueError):
        return None
    total = max((float(v) for v in (noise.get("steal_ms") or {}).values()), default=0.0)
    most = (total + tick) / (window * 1000) if window > 0 else 1.0  # of the samples, delayed at most
    why = []
    if max_us is not None and budget_max_us is not None:
        # the most that can have been stolen in that window: a tick more than read
        if burst < threshold_ms or max_us - (burst + tick) * 1000 >= budget_max_us:
            return None
        if share_over is not None and share_over > most:
            return None
        why.append(f"{STOLE} {burst:g} ms from {noise.get('burst_cpu') or 'a CPU'} within {BURST_WINDOW_S:g} s")
    for p in percentiles:
        need = (100 - float(p)) / 100
        if share < need:
            return None
        over = (late or {}).get(p)
        if over is not None and over - most >= need:
            return None
        why.append(f"{STOLE} {share:.1%} of the CPUs' time ({total:g} ms of {window:g} s on the most stolen), "
                   f"p{p} needs {need:.1%} of the samples late")
    return ("; ".join(dict.fromkeys(why)) + " during the measurement: a stall of the machine "
            "(hypervisor steal), not a latency of the kernel")


#: the reason's first words for a whole-machine stall the witness saw
STALLED = "host stalled"


def stalled_breach(noise: Optional[dict[str, Any]], threshold_ms: float, *, max_us: float,
                   budget_max_us: float, share_over: Optional[float] = None) -> Optional[str]:
    """The INFRA reason when a breached max is a stall of the whole machine
    that steal does not show (rtlab.core.stallwitness): every CPU's sampler
    stopped at once for at least *threshold_ms*, the stall explains the
    breach (the max minus the stall is under the budget), and no more
    samples reached the budget (*share_over*) than the stall can have
    delayed. None where the witness is absent, not trusted (a real-time
    load, no SCHED_FIFO) or does not explain it: the breach is the kernel's."""
    stall = (noise or {}).get("stall")
    if not isinstance(stall, dict) or stall.get("trusted") is not True:
        return None
    try:
        ms = float(stall.get("stall_ms") or 0)
        window = float((noise or {}).get("window_s") or 0)
    except (TypeError, ValueError):
        return None
    if ms < threshold_ms or max_us - ms * 1000 >= budget_max_us:
        return None
    if share_over is not None and window > 0 and share_over > ms / (window * 1000) + 0.001:
        return None
    return (f"{STALLED} {ms:g} ms on every CPU at once ({stall.get('witness') or 'per-CPU samplers'}) during "
            f"the measurement, with no steal to show for it: a stall of the machine, not a latency of the kernel")
