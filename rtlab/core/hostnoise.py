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

With a board on this host (the local board, a QEMU board), the per-CPU
stall witness watches too (rtlab.core.stallwitness): ``stall`` in
host-noise.json (its summary) and the timeline of the host's stalls in
``host-stalls.json``, with ``board_clock``, how the board's clock maps onto
the host's. Which late samples those stalls explain, by time and on their
CPU, is rtlab.core.hostattr's to say; the gate (rtlab.judge.gate) turns a
breach into INFRA only when the samples the host delayed are the whole of
it. The steal read here is for people (report, store): a share of the
window stolen says nothing about which samples it delayed, and steal on a
VM rises with the guest's own CPU use.

The runner measures a measurement whose breach the host explains again
(rtlab.run.runner, :data:`RETRIES`).
"""
from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Optional
from .fsutil import read_json

HOST_NOISE_FILE = "host-noise.json"
PROC_STAT = "/proc/stat"
#: seconds between /proc/stat readings
SAMPLE_S = 0.05
#: the steal of one CPU is summed over windows this long for the burst
BURST_WINDOW_S = 0.25
#: the budget file's default (host_noise.steal_infra_ms): the shortest stall
#: of the host that excuses a breached max of a tool that gives no sample
#: times (the stall must also explain it: max - stall under the budget)
DEFAULT_STEAL_INFRA_MS = 20.0
#: how often the runner runs a job again whose breach the host stole (then it stays INFRA)
RETRIES = 2
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
        # tests point PROC_STAT at a file of its format, in their own process
        # (monkeypatch): nothing a run is given (its environment) can
        self.stat_path = stat_path or PROC_STAT
        self.period_s = period_s
        self.summary = NoiseSummary()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[str] = None

    def _read(self) -> None:
        from .stallwitness import STAT_MAX_BYTES
        try:
            if not self.stat_path.startswith("/proc/") and not stat.S_ISREG(os.stat(self.stat_path).st_mode):
                raise OSError("not a regular file")  # a FIFO would block, a device never end
            fd = os.open(self.stat_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                text = os.read(fd, STAT_MAX_BYTES).decode(errors="replace")
            finally:
                os.close(fd)
            self.summary.add(time.monotonic(), parse_steal(text))
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
    """``with watching(host_dir) as w:`` the tool's run, host-noise.json after it.

    *witness*: the board runs on this host (the local board, a QEMU board),
    so a stall of the host delays it: the per-CPU samplers of
    rtlab.core.stallwitness watch too (``stall`` in host-noise.json, the
    timeline in host-stalls.json, their scratch files in *host_dir*).
    *rt_load*: the load runs real-time threads that can starve them all: the
    whole-machine reading is then not trusted. ``w.board_clock`` (set by the
    caller before the end, rtlab.core.hostattr.BoardClock): how the board's
    clock maps onto the host's: the host's own by default, none for a
    *guest* (a QEMU board) whose clock could not be anchored."""

    def __init__(self, host_dir: Path, witness: bool = False, rt_load: bool = False, guest: bool = False):
        self.path = Path(host_dir) / HOST_NOISE_FILE
        self.monitor = Monitor()
        self.rt_load = rt_load
        self.guest = guest
        self.witnesses = None
        self.board_clock = None
        if witness:
            from .stallwitness import Witnesses
            self.witnesses = Witnesses(scratch=Path(host_dir))

    def __enter__(self) -> "watching":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.witnesses is not None:
            self.witnesses.start()
        self.monitor.start()
        return self

    def __exit__(self, *exc) -> None:
        from . import hostattr
        out = self.monitor.stop()
        if self.witnesses is not None:
            stall, timeline = self.witnesses.stop()
            if self.rt_load:
                stall = {**stall, "trusted": False,
                         "why_not": "the load runs real-time threads of its own, which can stop every sampler"}
            stalls = hostattr.HostStalls.from_timeline(timeline, stall.get("trusted") is True,
                                                       float(out.get("tick_ms") or 10.0))
            stall["steal_gap_ms"] = {c: round(max((b - a for a, b in iv), default=0.0) * 1000, 1)
                                     for c, iv in stalls.steal.items()}
            out["stall"] = stall
            clock = self.board_clock if self.board_clock is not None or self.guest else hostattr.BoardClock()
            out["board_clock"] = clock.to_json() if clock is not None else None
            hostattr.write_timeline(self.path.parent, timeline)
        self.path.write_text(json.dumps(out, indent=1) + "\n")


def load(host_dir: Path) -> Optional[dict[str, Any]]:
    """host-noise.json of a suite run, None when it has none (LAVA, older runs) or it is unreadable."""
    try:
        d = read_json(Path(host_dir) / HOST_NOISE_FILE)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


#: the reason's first words for a breach steal on the samples' own CPU explains
STOLE = "host stole"
#: the reason's first words for a breach a stall of every CPU at once explains
STALLED = "host stalled"
