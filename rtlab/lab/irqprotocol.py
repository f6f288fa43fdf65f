"""The interrupt-response probe's wire protocol (rtlab's own, version 1).

An external probe times a board's interrupt response from outside: it
raises a stimulus line (the board's external-interrupt pin), the board
answers on a response line (a GPIO its handler or responder toggles), and
the probe times stimulus edge -> response edge with its own counter. The
host (rtlab's :class:`rtlab.lab.irqprobe.IrqProbeDriver`) only arms it and
collects the result, so nothing on the host is in the timed path.

Transport: any byte stream: TCP (a probe with Ethernet, or its USB serial
port behind ``ser2net`` in raw mode) or a serial line (115200 8N1, USB CDC).
Messages are ASCII lines ending in ``\\n`` (a ``\\r`` before it is ignored),
at most :data:`MAX_LINE` bytes. Small enough for a microcontroller:

    host -> probe   HELLO
    probe -> host   PROBE <name> v1 resolution_ns=<int> max_samples=<int> max_buckets=<int> [emulated=1]

    host -> probe   ARM <period_us> <pulse_us> <samples> <timeout_s> <bucket_ns> <buckets>
    probe -> host   ARMED                      (or: ERROR <text>)
                    ... the probe waits for the responder's READY edge (one
                    toggle of the response line), then sends <samples>
                    stimuli, one every <period_us>, each held <pulse_us>.
                    A response is the first edge on the response line after
                    a stimulus and before the next one; none: a MISSED one.
    probe -> host   PROGRESS sent=<n> missed=<n>          (about once a second)
    probe -> host   RESULT sent=<n> answered=<n> missed=<n> min_ns=<n> avg_ns=<n>
                           max_ns=<n> bucket_ns=<n> overflows=<n> ready=<0|1> timed_out=<0|1>
    probe -> host   HIST <bucket> <count>    (every non-empty bucket, ascending)
    probe -> host   END

    host -> probe   ABORT                    (stop now; RESULT as far as it got)

Invariants the host checks (a reply that breaks one is malformed, INFRA):
``sent == answered + missed``; the histogram's counts plus ``overflows``
(answers beyond ``buckets * bucket_ns``) add up to ``answered``;
``min_ns <= avg_ns <= max_ns`` when anything was answered; every bucket
below ``buckets``. ``timeout_s`` bounds the whole run (ready wait included):
a probe that hits it stops and says ``timed_out=1``. The probe sends a line
at least every second while armed, so silence means it is gone.

A reference probe: a Raspberry Pi Pico (RP2040, 125 MHz): a PIO state
machine drives the stimulus pin and captures the response edge against a
free-running 125 MHz counter (resolution 8 ns); core 1 fills the histogram
(1,000 buckets x uint32 = 4 kB of its 264 kB); core 0 runs the protocol on
USB CDC (TinyUSB, pico-sdk), or on TCP with a WIZnet W5500 (W5500-EVB-Pico).
Firmware needs: pico-sdk, one PIO program (~10 instructions), a line parser
for three commands. labgrid/README.md shows the wiring.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

VERSION = "v1"
MAX_LINE = 200
#: the TCP port latmon (EVL's probe) uses; rtlab's default for network probes
DEFAULT_PORT = 2306


class ProbeError(Exception):
    """The probe could not give a trustworthy result (gone, silent,
    malformed, refused): an infrastructure error, never a latency verdict."""


@dataclass(frozen=True)
class ProbeInfo:
    """What a probe says about itself (its PROBE line)."""

    name: str
    resolution_ns: int
    max_samples: int
    max_buckets: int
    emulated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "resolution_ns": self.resolution_ns, "max_samples": self.max_samples,
                "max_buckets": self.max_buckets, "emulated": self.emulated}


@dataclass(frozen=True)
class ArmRequest:
    """One measurement: what ARM carries."""

    period_us: int
    pulse_us: int
    samples: int
    timeout_s: int
    bucket_ns: int = 1000
    buckets: int = 1000

    def __post_init__(self) -> None:
        for name, lo, hi in (("period_us", 10, 10_000_000), ("pulse_us", 1, 10_000_000),
                             ("samples", 1, 4_000_000_000), ("timeout_s", 1, 7 * 86400),
                             ("bucket_ns", 1, 1_000_000_000), ("buckets", 1, 1_000_000)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ValueError(f"{name}: {v!r} is not an integer in [{lo}, {hi}]")
        if self.pulse_us >= self.period_us:
            raise ValueError(f"pulse_us ({self.pulse_us}) must be shorter than period_us ({self.period_us})")

    def line(self) -> str:
        return (f"ARM {self.period_us} {self.pulse_us} {self.samples} {self.timeout_s} "
                f"{self.bucket_ns} {self.buckets}")

    @classmethod
    def parse(cls, line: str) -> "ArmRequest":
        words = line.split()
        if len(words) != 7 or words[0] != "ARM" or not all(w.isdigit() for w in words[1:]):
            raise ValueError(f"ARM wants 6 unsigned integers, got {line!r}")
        return cls(*(int(w) for w in words[1:]))


@dataclass
class ProbeResult:
    """A finished measurement, as the probe reported it."""

    sent: int
    answered: int
    missed: int
    min_ns: int
    avg_ns: int
    max_ns: int
    bucket_ns: int
    overflows: int
    ready: bool
    timed_out: bool
    counts: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "answered": self.answered, "missed": self.missed,
                "min_ns": self.min_ns, "avg_ns": self.avg_ns, "max_ns": self.max_ns,
                "bucket_ns": self.bucket_ns, "overflows": self.overflows, "ready": self.ready,
                "timed_out": self.timed_out, "counts": {str(k): v for k, v in sorted(self.counts.items())}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ProbeResult":
        return cls(**{k: d[k] for k in ("sent", "answered", "missed", "min_ns", "avg_ns", "max_ns",
                                         "bucket_ns", "overflows", "ready", "timed_out")},
                   counts={int(k): int(v) for k, v in d["counts"].items()})

    def problems(self, arm: "ArmRequest") -> list[str]:
        """Why this result contradicts itself or what was armed (none: [])."""
        problems: list[str] = []
        if self.sent != self.answered + self.missed:
            problems.append(f"sent ({self.sent}) != answered ({self.answered}) + missed ({self.missed})")
        if sum(self.counts.values()) + self.overflows != self.answered:
            problems.append(f"histogram ({sum(self.counts.values())}) + overflows ({self.overflows}) "
                            f"!= answered ({self.answered})")
        if self.bucket_ns != arm.bucket_ns:
            problems.append(f"bucket_ns {self.bucket_ns}, armed {arm.bucket_ns}")
        if self.sent > arm.samples:
            problems.append(f"sent {self.sent} stimuli, armed {arm.samples}")
        if self.answered and not self.min_ns <= self.avg_ns <= self.max_ns:
            problems.append(f"min/avg/max out of order ({self.min_ns}/{self.avg_ns}/{self.max_ns} ns)")
        if self.overflows and self.max_ns < arm.buckets * self.bucket_ns:  # an overflow is an answer past the range
            problems.append(f"{self.overflows} overflows past {arm.buckets * self.bucket_ns} ns, "
                            f"but max_ns {self.max_ns} lies within it")
        if self.answered and self.counts:
            lo, hi = min(self.counts), max(self.counts)
            if not lo * self.bucket_ns <= self.min_ns < (lo + 1) * self.bucket_ns:
                problems.append(f"min_ns {self.min_ns} is not in the lowest bucket {lo}")
            if not self.overflows and not hi * self.bucket_ns <= self.max_ns < (hi + 1) * self.bucket_ns:
                problems.append(f"max_ns {self.max_ns} is not in the highest bucket {hi}")
        if any(b >= arm.buckets or b < 0 or c < 0 for b, c in self.counts.items()):
            problems.append(f"a histogram bucket is beyond the {arm.buckets} buckets armed or negative")
        return problems

    def result_line(self) -> str:
        return (f"RESULT sent={self.sent} answered={self.answered} missed={self.missed} "
                f"min_ns={self.min_ns} avg_ns={self.avg_ns} max_ns={self.max_ns} "
                f"bucket_ns={self.bucket_ns} overflows={self.overflows} "
                f"ready={int(self.ready)} timed_out={int(self.timed_out)}")

    def lines(self) -> list[str]:
        """RESULT, HIST..., END: what a probe sends at the end of a run."""
        return [self.result_line(), *(f"HIST {k} {v}" for k, v in sorted(self.counts.items())), "END"]


_KV = re.compile(r"^([a-z_]+)=(\d+)$")
_INFO_KEYS = ("resolution_ns", "max_samples", "max_buckets")
_RESULT_KEYS = ("sent", "answered", "missed", "min_ns", "avg_ns", "max_ns", "bucket_ns", "overflows",
                "ready", "timed_out")


def key_values(words: Iterable[str], line: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in words:
        m = _KV.match(w)
        if not m:
            raise ProbeError(f"malformed reply {line!r}: {w!r} is not key=<unsigned integer>")
        out[m.group(1)] = int(m.group(2))
    return out


def parse_info(line: str) -> ProbeInfo:
    words = line.split()
    if len(words) < 3 or words[0] != "PROBE":
        raise ProbeError(f"malformed reply to HELLO: {line!r} (expected 'PROBE <name> {VERSION} ...')")
    if words[2] != VERSION:
        raise ProbeError(f"probe {words[1]!r} speaks protocol {words[2]!r}, rtlab speaks {VERSION}")
    kv = key_values(words[3:], line)
    missing = [k for k in _INFO_KEYS if k not in kv]
    if missing:
        raise ProbeError(f"malformed reply to HELLO: {line!r} lacks {', '.join(missing)}")
    if kv["resolution_ns"] == 0:
        raise ProbeError(f"malformed reply to HELLO: {line!r}: resolution_ns must be > 0")
    return ProbeInfo(name=words[1], resolution_ns=kv["resolution_ns"], max_samples=kv["max_samples"],
                     max_buckets=kv["max_buckets"], emulated=bool(kv.get("emulated", 0)))


def parse_result(line: str, hist_lines: list[str], arm: ArmRequest) -> ProbeResult:
    """The RESULT line and its HIST lines, checked against each other and
    against what was armed; ProbeError names what is wrong."""
    words = line.split()
    if not words or words[0] != "RESULT":
        raise ProbeError(f"malformed result: expected RESULT, got {line!r}")
    kv = key_values(words[1:], line)
    missing = [k for k in _RESULT_KEYS if k not in kv]
    if missing:
        raise ProbeError(f"malformed result {line!r}: lacks {', '.join(missing)}")
    counts: dict[int, int] = {}
    for h in hist_lines:
        hw = h.split()
        if len(hw) != 3 or hw[0] != "HIST" or not hw[1].isdigit() or not hw[2].isdigit():
            raise ProbeError(f"malformed histogram line {h!r} (expected 'HIST <bucket> <count>')")
        b, c = int(hw[1]), int(hw[2])
        if b >= arm.buckets:
            raise ProbeError(f"histogram bucket {b} is beyond the {arm.buckets} buckets armed")
        if b in counts:
            raise ProbeError(f"histogram bucket {b} reported twice")
        if c:
            counts[b] = c
    r = ProbeResult(sent=kv["sent"], answered=kv["answered"], missed=kv["missed"], min_ns=kv["min_ns"],
                    avg_ns=kv["avg_ns"], max_ns=kv["max_ns"], bucket_ns=kv["bucket_ns"],
                    overflows=kv["overflows"], ready=bool(kv["ready"]), timed_out=bool(kv["timed_out"]),
                    counts=counts)
    problems = r.problems(arm)
    if problems:
        raise ProbeError("inconsistent result from the probe: " + "; ".join(problems))
    return r


class Accumulator:
    """A probe's running numbers (the twin's; a firmware keeps the same)."""

    def __init__(self, arm: ArmRequest):
        self.arm = arm
        self.sent = self.answered = self.missed = self.overflows = 0
        self.sum_ns = 0
        self.min_ns: Optional[int] = None
        self.max_ns = 0
        self.counts: dict[int, int] = {}

    def answer(self, latency_ns: int) -> None:
        self.sent += 1
        self.answered += 1
        self.sum_ns += latency_ns
        self.min_ns = latency_ns if self.min_ns is None else min(self.min_ns, latency_ns)
        self.max_ns = max(self.max_ns, latency_ns)
        b = latency_ns // self.arm.bucket_ns
        if b >= self.arm.buckets:
            self.overflows += 1
        else:
            self.counts[b] = self.counts.get(b, 0) + 1

    def miss(self) -> None:
        self.sent += 1
        self.missed += 1

    def result(self, ready: bool, timed_out: bool) -> ProbeResult:
        avg = math.floor(self.sum_ns / self.answered) if self.answered else 0
        return ProbeResult(sent=self.sent, answered=self.answered, missed=self.missed,
                           min_ns=self.min_ns or 0, avg_ns=max(self.min_ns or 0, min(avg, self.max_ns)),
                           max_ns=self.max_ns, bucket_ns=self.arm.bucket_ns, overflows=self.overflows,
                           ready=ready, timed_out=timed_out, counts=dict(self.counts))
