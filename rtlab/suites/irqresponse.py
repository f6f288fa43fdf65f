"""irq-response: interrupt response latency measured from outside the board
(the RK3568 report's first table): an external probe (rtlab.lab.irqprobe)
raises a stimulus the board takes as an interrupt, the board answers, the
probe times stimulus -> answer with its own clock.

Two sides, both raw files of the run:

* host: the probe, armed through the target's ``IrqProbeDriver`` before the
  responder starts (:meth:`IrqResponse.host_side`); it waits for the
  responder's ready byte, measures, and its result lands in ``probe.json``
  (info, what was armed, the result or why there is none).
* board: ``rtbench respond`` on the tty the stimulus arrives on, the
  measured CPU, SCHED_FIFO ``priority``, memory locked; ``path: user``
  (the responder answers) or ``kernel`` (the tty's echo answers:
  the kernel's own path, no custom module). With ``gpio`` (the report's
  wiring: edges on an input line, a toggled output line) the user path
  only: the kernel has no GPIO-to-GPIO answer without a custom module. Its ``irq-response.json`` says
  which path was measured, on which device, and how many it answered.

Into the model: one ThreadResult, ``cycles`` = stimuli sent; the probe's
histogram (``bucket_ns`` buckets, ``histogram_us`` of range); a **missed
response** (no answer within the period) is a sample whose latency is at
least the period: it is counted among the histogram's overflows (so every
share >= threshold includes it) and the maximum is at least the period,
never dropped. ``extra``: missed, answered, path, device, probe name,
resolution_ns, emulated. A probe that is absent is "not available" with
the reason; a probe that fails (silent, malformed, cut short) is INFRA.

Where no probe is wired (the target has no IrqProbe/NetworkIrqProbe), the
suite is not available there. Not under LAVA: the probe is driven from the
labgrid host.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Iterator, Optional

from ..targets.boards import Board
from ..errors import InputError, SuiteFailure
from ..lab.irqprotocol import ArmRequest, ProbeError, ProbeResult
from ..core.model import Histogram, ThreadResult, ToolOutput
from ..core.params import Text
from . import PRIORITY, Int, ParamError, Suite, SuiteRun, widened
from .rtbench import rtbench_binary
from ..core.fsutil import read_json
from ..core.rundir import MeasurementDir

log = logging.getLogger("rtlab.irqresponse")

#: what the host writes: the probe's side of the run
PROBE_FILE = "probe.json"

#: the tty of QEMU's PCI 16550 (1b36:0002), the twin's probe UART: "auto"
FIND_TTY_SH = ('for t in /sys/bus/pci/devices/*/tty/*; do d=${t%/tty/*}; '
               '[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1b36:0x0002 ] && { echo "/dev/${t##*/}"; exit 0; }; '
               'done; exit 1')
#: runs the responder on "$1" (auto: FIND_TTY_SH); the rest are its arguments
RESPOND_SH = ('tty=$1; shift; if [ "$tty" = auto ]; then tty=$(' + FIND_TTY_SH + ') || '
              '{ echo "no QEMU pci-serial tty on this board" >&2; exit 3; }; fi; exec "$@" --tty "$tty"')


class IrqResponse(Suite):
    """External probe -> board interrupt -> answer, timed by the probe."""

    name = "irq-response"
    tool = "irq-response"
    json_file = "irq-response.json"
    parser = None  # two raw files, one on each side: read by parse_output
    defaults = {
        "period_us": 1000,    # the report: a 1 kHz square wave
        "pulse_us": 100,      # stimulus held this long
        "samples": 10000,     # the report: 50,000,000 per kernel (14 h at 1 kHz)
        "histogram_us": 1000,  # probe histogram range; later answers count as overflows
        "bucket_ns": 1000,    # histogram bucket
        "priority": 99,       # the responder's SCHED_FIFO priority
        "path": "user",       # user: rtbench responds; kernel: the tty's echo responds
        "tty": "auto",        # the stimulus tty (auto: QEMU's pci-serial, the twin's)
        # GPIO wiring instead (the report's): "/dev/gpiochipN:IN:OUT", stimulus
        # edges on line IN, the answer a toggle of line OUT (user path only)
        "gpio": "",
        # (tests) the responder answers nothing for pause_ms after pause_after answers
        "pause_after": 0,
        "pause_ms": 0,
    }
    spec = {"period_us": Int(10, 1_000_000), "pulse_us": Int(1, 1_000_000), "samples": Int(1, 100_000_000),
            "histogram_us": Int(1, 1_000_000), "bucket_ns": Int(1, 1_000_000), "priority": PRIORITY,
            "path": Text(r"user|kernel", "user or kernel"),
            "tty": Text(r"auto|/dev/[A-Za-z0-9._/-]+", "auto or a /dev path"),
            "gpio": Text(r"(/dev/gpiochip[0-9]+:[0-9]+:[0-9]+)?", "/dev/gpiochipN:IN:OUT or empty"),
            "pause_after": Int(0, 100_000_000), "pause_ms": Int(0, 60_000)}

    range_params = ("histogram_us",)

    def histogram_range_us(self, params: dict[str, Any]) -> Optional[float]:
        return float(params["histogram_us"])

    def with_histogram_range(self, params: dict[str, Any], range_us: float) -> dict[str, Any]:
        return {**params, "histogram_us": widened("histogram_us", params["histogram_us"], range_us, 1.0)}

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        p = super().params(given)
        if p["gpio"] and p["path"] == "kernel":
            raise ParamError("path: kernel needs a tty (no kernel path on GPIO lines without a custom module)")
        return p

    # --- what runs where ---------------------------------------------------
    def arm(self, run: SuiteRun) -> ArmRequest:
        p = run.params
        buckets = max(1, int(p["histogram_us"]) * 1000 // int(p["bucket_ns"]))
        return ArmRequest(period_us=int(p["period_us"]), pulse_us=min(int(p["pulse_us"]), int(p["period_us"]) - 1),
                          samples=int(p["samples"]), timeout_s=int(self.duration_s(run)) + 30,
                          bucket_ns=int(p["bucket_ns"]), buckets=buckets)

    def duration_s(self, run: SuiteRun) -> float:
        p = run.params
        # the stimuli, the responder's set-up and its idle end (3 s), and a
        # twin's stimuli slipping on a loaded host (up to 2x)
        return 2 * int(p["samples"]) * int(p["period_us"]) / 1e6 + 15

    def expected_samples(self, run: SuiteRun) -> Optional[int]:
        return int(run.params["samples"])

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        args = [_rtbench(board), "respond", "-p", str(p["priority"]), "-n", str(p["samples"]),
                "-D", str(int(self.duration_s(run))), "--idle-s", "3", f"--json={self.json_file}"]
        if run.cpus:
            args += ["-a", str(run.cpus[-1])]
        if p["path"] == "kernel":
            args.append("--kernel-echo")
        if p["pause_after"] and p["pause_ms"]:
            args += ["--pause-after", str(p["pause_after"]), "--pause-ms", str(p["pause_ms"])]
        if p["gpio"]:
            return [*args[:2], "--gpio", str(p["gpio"]), *args[2:]]
        return ["sh", "-c", RESPOND_SH, "irq-respond", str(p["tty"]), *args]

    def board_check(self) -> str:
        return ("echo 'irq-response: the probe is driven from the labgrid host, not under LAVA'; false")

    def unavailable(self, sh) -> Optional[str]:
        out, rc = sh.run("rtbench respond --help >/dev/null 2>&1 && echo respond-ok")
        if "respond-ok" not in " ".join(out):
            return "rtbench on the board has no `respond` (an image built before it)"
        return None

    def host_unavailable(self, target, run: SuiteRun) -> Optional[str]:
        try:
            drv = target.get_driver("IrqProbeDriver", activate=False)
        except Exception:  # noqa: BLE001 - labgrid's NoDriverFoundError: the env does not wire one
            return ("no IrqProbeDriver in this board's environment (no interrupt-response probe wired: "
                    "labgrid/README.md, 'Interrupt-response probe')")
        return drv.missing()

    @contextlib.contextmanager
    def host_side(self, target, run: SuiteRun, host_dir: Path) -> Iterator[None]:
        """Arm the probe, let the board run the responder (the body), then
        collect the probe's result into probe.json. A probe failure is a
        SuiteFailure (INFRA) naming its reason; the body's own failure wins."""
        host_dir.mkdir(parents=True, exist_ok=True)
        drv = target.get_driver("IrqProbeDriver")
        arm = self.arm(run)
        record: dict[str, Any] = {"where": drv.where(), "arm": dataclasses.asdict(arm)}
        try:
            probe = drv.start(arm)
        except ProbeError as e:
            _write(host_dir, {**record, "error": str(e)})
            raise SuiteFailure(f"irq probe: {e}") from None
        record["probe"] = probe.info.to_json()
        try:
            yield
        except BaseException:
            probe.abort()
            _write(host_dir, {**record, "error": "the responder's run failed; probe aborted"})
            raise
        rc = _exit_code(host_dir)
        if rc != 0:  # the responder did not run (no tty, no rtbench respond): its exit says why
            probe.abort()
            with contextlib.suppress(ProbeError):
                probe.wait(timeout=10)
            _write(host_dir, {**record, "error": f"the responder exited with {rc}; probe aborted"})
            return
        try:
            result = probe.wait(timeout=60)
        except ProbeError as e:
            _write(host_dir, {**record, "error": str(e)})
            raise SuiteFailure(f"irq probe: {e}") from None
        _write(host_dir, {**record, "result": result.to_json()})

    # --- raw files -> model -------------------------------------------------
    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        path = host_dir / PROBE_FILE
        try:
            doc = read_json(path)
        except (OSError, ValueError) as e:
            raise InputError(path, f"cannot read the probe's record: {e}") from None
        if "result" not in doc:
            raise InputError(path, f"no probe result: {doc.get('error', 'none recorded')}")
        resp_path = host_dir / self.json_file
        try:
            resp = read_json(resp_path)["responder"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(resp_path, f"cannot read the responder's record: {e}") from None
        return probe_output(doc, resp, str(path), cpu=run.cpus[-1] if run.cpus else None)

    def result_cell(self, out: ToolOutput) -> Optional[str]:
        t = out.threads[0] if out.threads else None
        if t is None:
            return super().result_cell(out)
        note = f"{t.extra.get('missed', 0)} missed, {t.extra.get('path')} path"
        return note + (", emulated" if t.extra.get("emulated") else "")


def _rtbench(board: Optional[Board]) -> str:
    if board is not None and board.kind == "local":
        return str(rtbench_binary(board.arch))
    return "rtbench"


def _exit_code(host_dir: Path) -> Optional[int]:
    try:
        return int(read_json(MeasurementDir(host_dir).exit_json)["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(host_dir: Path, doc: dict) -> None:
    (host_dir / PROBE_FILE).write_text(json.dumps(doc, indent=1) + "\n")


def probe_output(doc: dict, resp: dict, path: str, cpu: Optional[int] = None) -> ToolOutput:
    """The probe's record (probe.json) and the responder's into the model."""
    try:
        r = ProbeResult.from_json(doc["result"])
        info, arm = doc["probe"], doc["arm"]
        armed = ArmRequest(**arm)
        period_us = float(armed.period_us)
        size = armed.buckets
        values = (r.sent, r.answered, r.missed, r.min_ns, r.avg_ns, r.max_ns, r.bucket_ns, r.overflows,
                  *r.counts.values())
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            raise ValueError("result: every count and time must be an integer >= 0")
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(path, f"malformed probe record: {e}") from None
    problems = r.problems(armed)
    if problems:  # a record that contradicts itself is no measurement (answered=5 max_ns=0 overflows=5)
        raise InputError(path, "result: inconsistent probe record: " + "; ".join(problems))
    bucket_us = r.bucket_ns / 1000.0
    # a missed answer came later than the period, if at all: an overflow
    # (beyond any histogram range the probe keeps), at least the period
    hist = Histogram(counts=dict(r.counts), bucket_us=bucket_us, size=size, overflows=r.overflows + r.missed)
    max_us = r.max_ns / 1000.0
    if r.missed:
        max_us = max(max_us, period_us)
    t = ThreadResult(thread=0, cpu=cpu, cycles=r.sent, min_us=r.min_ns / 1000.0 if r.answered else max_us,
                     avg_us=r.avg_ns / 1000.0 if r.answered else max_us, max_us=max_us,
                     overflows=r.overflows + r.missed, histogram=hist,
                     extra={"missed": r.missed, "answered": r.answered, "path": resp.get("path"),
                            "device": resp.get("device"), "probe": info.get("name"),
                            "resolution_ns": info.get("resolution_ns"), "emulated": bool(info.get("emulated")),
                            "period_us": period_us, "responder_answered": resp.get("answered")})
    return ToolOutput(path=path, tool="irq-response", threads=[t], return_code=0,
                      metrics={"missed": r.missed, "resolution_ns": info.get("resolution_ns"),
                               "emulated": int(bool(info.get("emulated")))})
