"""Which late samples a stall of the host explains: by time, on their CPU.

A breach is the host's only where the late samples fall inside the host's
stalls on their own CPU; a share of the window stolen somewhere says nothing
about which samples it delayed. Steal on a VM rises with the guest's own CPU
use (measured here: 2-3 % quiet, 3.6-5.5 % under a SCHED_FIFO spin on every
CPU), so a kernel that burns CPU raises the steal that would excuse it if
steal were read as a share. Read by time, it excuses only what it delayed.

The two timelines, each on the host's CLOCK_MONOTONIC:

- the host's stalls (``host-stalls.json``, rtlab.core.stallwitness): per CPU
  the gaps of a SCHED_FIFO 1 sampler pinned to it, each with the steal that
  CPU's counter gained across it. A stall of the host on CPU c is a gap on
  every CPU at once (``machine``: the VM paused; trusted only where the
  samplers run SCHED_FIFO and no load of real-time threads could stop them
  all) or a gap on c that c's own steal covers (``steal``: at least the
  gap's length less a tick of /proc/stat's 10 ms counting, and one tick);
- the samples' own times: cyclictest ``--spike`` records each sample over a
  trigger with its wake-up time (µs of CLOCK_MONOTONIC); less its latency,
  its due time. On the local board that clock is the host's own. A QEMU
  board's guest clock is anchored to the host's over the console before and
  after the tool (``board_clock`` in host-noise.json), within half the
  fastest round trip, and its vCPUs run on any of the host's CPUs: only a
  stall of every host CPU at once is theirs.

A recorded sample (due d, woken w, on CPU c) is delayed by the host for as
long as the host's stalls on c cover [d, w] (widened by the clock's
uncertainty, never more than the latency): :class:`rtlab.core.model.HostDelays`.
The gate (rtlab.judge.gate) takes a breach as the host's only when, those
parts taken off, no threshold is broken any more.
"""
from __future__ import annotations

import bisect
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from .fsutil import read_json
from .model import DelayedSample, HostDelays
from .stallwitness import every_cpu, merge

#: the host's stalls while a tool ran, beside host-noise.json
TIMELINE_FILE = "host-stalls.json"
#: the largest timeline read back (per CPU stallwitness.KEEP gaps)
TIMELINE_MAX_BYTES = 16 * 1024 * 1024
#: a gap is its CPU's steal when the steal gained across it is at least its
#: length less one tick and this much (the sampler's 1 ms sleep, accounting)
STEAL_SLACK_MS = 2.0
#: the most spikes cyclictest keeps per run (its --spike-nodes): memory on
#: the board and the stdout fetched stay bounded whatever the kernel does
MAX_SPIKES = 100_000
#: the fewest kept, whatever the run's length
MIN_SPIKES = 1_000
#: the share of a run's samples kept as spikes
SPIKE_SHARE = 0.05


def spike_nodes(samples: int) -> int:
    """cyclictest's --spike-nodes for a run of *samples* (all threads):
    SPIKE_SHARE of them, within MIN_SPIKES and MAX_SPIKES."""
    return max(MIN_SPIKES, min(MAX_SPIKES, int(samples * SPIKE_SHARE)))


def steal_covers(gap_ms: float, ticks: float, tick_ms: float) -> bool:
    """Whether a CPU's steal gained across a gap of its sampler covers the
    gap: at least one tick, and no less than the gap less a tick and
    STEAL_SLACK_MS (steal counts in whole ticks: 30 ms stolen shows as 2 to
    4 of them)."""
    return ticks >= 1 and ticks * tick_ms >= gap_ms - tick_ms - STEAL_SLACK_MS


def _overlap(iv: list[tuple[float, float]], starts: list[float], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by the sorted, disjoint intervals *iv*."""
    if hi <= lo or not iv:
        return 0.0
    i = max(0, bisect.bisect_right(starts, lo) - 1)
    got = 0.0
    while i < len(iv) and iv[i][0] < hi:
        a, b = iv[i]
        got += max(0.0, min(b, hi) - max(a, lo))
        i += 1
    return got


@dataclass
class Stalls:
    """Sorted, disjoint stall intervals of one CPU (or of every CPU), with
    the part that is a stall of the whole machine."""

    all: list[tuple[float, float]]
    machine: list[tuple[float, float]]

    def __post_init__(self) -> None:
        self._all_starts = [a for a, _ in self.all]
        self._machine_starts = [a for a, _ in self.machine]

    def cover(self, lo: float, hi: float) -> tuple[float, float]:
        """(seconds of [lo, hi] any stall covers, seconds a machine stall covers)."""
        return _overlap(self.all, self._all_starts, lo, hi), _overlap(self.machine, self._machine_starts, lo, hi)


@dataclass
class HostStalls:
    """The host's stalls during one measurement (see the module doc)."""

    #: every CPU's sampler stopped at once (only where the witness is trusted)
    machine: list[tuple[float, float]] = field(default_factory=list)
    #: per CPU ("cpu0"): its sampler's gaps its own steal covers
    steal: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: why the whole-machine reading is not used, if it is not
    why_not: Optional[str] = None

    @classmethod
    def from_timeline(cls, d: dict[str, Any], trusted: bool, tick_ms: float,
                      why_not: Optional[str] = None) -> "HostStalls":
        cpus = d.get("cpus") or {}
        gaps = {str(c): [(float(a), float(b), float(s)) for a, b, s in g] for c, g in cpus.items()}
        steal = {c: merge((a, b) for a, b, s in g if steal_covers((b - a) * 1000, s, tick_ms))
                 for c, g in gaps.items()}
        machine = every_cpu({c: [(a, b) for a, b, _ in g] for c, g in gaps.items()}) if trusted else []
        return cls(machine=machine, steal=steal, why_not=None if trusted else why_not)

    def on(self, cpu: Optional[int]) -> Stalls:
        """The stalls that stop CPU *cpu* of the host; None: a CPU not known
        (a QEMU vCPU, which runs on any of them): only what stopped all."""
        if cpu is None:
            every = every_cpu(self.steal) if self.steal else []
            return Stalls(merge(self.machine + every), self.machine)
        return Stalls(merge(self.machine + self.steal.get(f"cpu{cpu}", [])), self.machine)

    def longest_ms(self, cpu: Optional[int]) -> tuple[float, str]:
        """The longest stall on *cpu* (None: of every CPU at once), ms, and its kind."""
        st = self.on(cpu)
        best, kind = 0.0, "machine"
        for a, b in st.all:
            if (b - a) * 1000 > best:
                best = (b - a) * 1000
                kind = "machine" if st.cover(a, b)[1] >= (b - a) - 1e-9 else "steal"
        return round(best, 1), kind

    def total_ms(self, cpu: Optional[int]) -> float:
        return round(sum(b - a for a, b in self.on(cpu).all) * 1000, 1)


@dataclass(frozen=True)
class BoardClock:
    """How the board's CLOCK_MONOTONIC maps onto the host's: host = board -
    offset_s, to within uncertainty_s. *guest*: the board's CPUs are vCPUs
    of a machine emulated on this host (QEMU), not CPUs of the host."""

    offset_s: float = 0.0
    uncertainty_s: float = 0.0
    guest: bool = False
    how: str = "the local board: this host's own CLOCK_MONOTONIC"

    @classmethod
    def from_json(cls, d: Optional[dict[str, Any]]) -> Optional["BoardClock"]:
        if not isinstance(d, dict):
            return None
        try:
            return cls(offset_s=float(d.get("offset_s") or 0.0), uncertainty_s=float(d.get("uncertainty_s") or 0.0),
                       guest=bool(d.get("guest")), how=str(d.get("how") or ""))
        except (TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        return {"offset_s": self.offset_s, "uncertainty_s": self.uncertainty_s, "guest": self.guest,
                "how": self.how}


def anchored(anchors: Sequence[tuple[float, float, float]], resolution_s: float) -> Optional[BoardClock]:
    """A guest's clock from console round trips: each (host time mid-trip,
    board time read, half the round trip), the board's reading to
    *resolution_s*. The offset of the tightest anchor; its uncertainty is
    its half trip, the reading's resolution, and how far the anchors
    disagree (the guest's clock drifts against the host's)."""
    if not anchors:
        return None
    offsets = [board - host for host, board, _ in anchors]
    best = min(range(len(anchors)), key=lambda i: anchors[i][2])
    spread = max(offsets) - min(offsets)
    u = anchors[best][2] + resolution_s + spread
    return BoardClock(offset_s=round(offsets[best], 6), uncertainty_s=round(u, 6), guest=True,
                      how=f"a QEMU guest's clock, anchored over the console to within {u * 1000:.0f} ms")


#: a guest's /proc/uptime counts in hundredths of a second
UPTIME_RESOLUTION_S = 0.01


def clock_anchor(sh) -> Optional[tuple[float, float, float]]:
    """One console round trip reading the board's uptime (CLOCK_BOOTTIME:
    its CLOCK_MONOTONIC on a machine that never suspends), read by the
    shell itself (no process started): (the host's CLOCK_MONOTONIC mid-trip,
    the board's reading, half the trip), or None where it cannot be read."""
    t0 = time.monotonic()
    try:
        text = sh.read("/proc/uptime")
    except Exception:  # noqa: BLE001 - a console that fails here fails the tool's run next, said there
        return None
    t1 = time.monotonic()
    try:
        board = float((text or "").split()[0])
    except (IndexError, ValueError):
        return None
    return (t0 + t1) / 2, board, (t1 - t0) / 2


def load_timeline(host_dir: Path) -> Optional[dict[str, Any]]:
    try:
        d = read_json(Path(host_dir) / TIMELINE_FILE, TIMELINE_MAX_BYTES)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def write_timeline(host_dir: Path, timeline: dict[str, Any]) -> None:
    Path(host_dir).mkdir(parents=True, exist_ok=True)
    (Path(host_dir) / TIMELINE_FILE).write_text(json.dumps(timeline) + "\n")


def stalls_of(noise: Optional[dict[str, Any]], timeline: Optional[dict[str, Any]]) -> Optional[HostStalls]:
    """The host's stalls of one measurement from its host-noise.json and
    host-stalls.json; None where the witness did not watch (a board not on
    this host, LAVA, older runs)."""
    stall = (noise or {}).get("stall")
    if not isinstance(timeline, dict) or not isinstance(stall, dict):
        return None
    try:
        tick = float((noise or {}).get("tick_ms") or 10.0)
        return HostStalls.from_timeline(timeline, stall.get("trusted") is True, tick,
                                        why_not=str(stall.get("why_not") or "") or None)
    except (TypeError, ValueError):
        return None


class Placer:
    """Late samples held against the host's stalls, a batch at a time (a
    soak's segments one by one: memory stays that of one segment's samples);
    :meth:`result` the measurement's HostDelays."""

    def __init__(self, from_us: float, thread_cpu: dict[int, Optional[int]], stalls: HostStalls, clock: BoardClock,
                 range_us: Optional[float] = None):
        self.out = HostDelays(from_us=from_us, recorded=0, total=0, range_us=range_us, clock=clock.how)
        self.thread_cpu, self.stalls, self.clock = thread_cpu, stalls, clock
        self.per_cpu: dict[Optional[int], Stalls] = {}
        self.beyond: list[float] = []
        self.beyond_seen = 0

    def add(self, spikes: Sequence[tuple[int, int, int]], total: int) -> None:
        """One run's recorded spikes (thread, latency µs, wake-up µs on the
        board's clock) and how many it counted."""
        out, u, range_us = self.out, self.clock.uncertainty_s, self.out.range_us
        out.recorded += len(spikes)
        out.total += max(total, len(spikes))
        for thread, lat, wake in spikes:
            if range_us is not None and lat >= range_us:
                self.beyond_seen += 1
                self.beyond.append(float(lat))
                if len(self.beyond) > 2 * MAX_SPIKES:  # the largest kept
                    self.beyond = sorted(self.beyond)[-MAX_SPIKES:]
            if lat <= 0:
                continue
            cpu = None if self.clock.guest else self.thread_cpu.get(thread)
            st = self.per_cpu.get(cpu)
            if st is None:
                st = self.per_cpu[cpu] = self.stalls.on(cpu)
            w = wake / 1e6 - self.clock.offset_s
            d = w - lat / 1e6
            covered, by_machine = st.cover(d - u, w + u)
            host_us = min(float(lat), round(covered * 1e6, 1))
            if host_us > 0:
                kind = "machine" if by_machine >= covered - 1e-9 else "steal"
                out.delayed.append(DelayedSample(thread, float(lat), host_us, kind))

    def result(self) -> HostDelays:
        self.out.beyond_us = sorted(self.beyond)[-MAX_SPIKES:]
        self.out.beyond_dropped = self.beyond_seen - len(self.out.beyond_us)
        return self.out


def delays(spikes: Sequence[tuple[int, int, int]], total: int, from_us: float,
           thread_cpu: dict[int, Optional[int]], stalls: HostStalls, clock: BoardClock,
           range_us: Optional[float] = None) -> HostDelays:
    """Every recorded spike (thread, latency µs, wake-up µs on the board's
    clock) of one run held against the host's stalls on its thread's CPU."""
    placer = Placer(from_us, thread_cpu, stalls, clock, range_us)
    placer.add(spikes, total)
    return placer.result()
