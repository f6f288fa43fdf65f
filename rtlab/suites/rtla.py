"""rtla (Real-Time Linux Analysis, Debian's ``rtla`` 6.1): the kernel's own
latency tracers, driven from user space.

* ``timerlat``: ``rtla timerlat hist``. A per-CPU kernel timer fires every
  period; the tracer records how late its IRQ handler ran (IRQ latency) and
  how late the per-CPU timerlat thread woke after it (thread latency). The two
  are separate measurements in the model: suite ``<name>-irq`` and
  ``<name>-thread`` (budgets, store and table key them so).
* ``osnoise``: ``rtla osnoise hist``. A per-CPU thread spins for ``runtime``
  of every ``period`` and records every interruption (IRQ, softirq, NMI,
  another thread, the hardware) as a noise sample: its histogram per CPU.

Both need the tracer in the running kernel (CONFIG_TIMERLAT_TRACER,
CONFIG_OSNOISE_TRACER: Debian's rt kernels have them, the generic ones and
many vendor kernels do not). Before running, the board's
``available_tracers`` (tracefs) is read: without the tracer the suite is
"not available" with the reason (``not_available.json`` in its raw dir),
which is neither a pass nor a failure.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..targets.boards import Board
from ..core.config import format_cpulist
from ..core.model import ToolOutput
from ..parsers import read_text
from ..parsers.rtla import parse_osnoise_hist, parse_timerlat_hist
from . import DURATION_S, PRIORITY, Int, ParamError, Suite, SuiteRun, _load_metrics, widened
from ..core.rundir import MeasurementDir

TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
#: rtla timerlat's saved trace when evidence is armed and a threshold hit
TIMERLAT_TRACE = "timerlat_trace.txt"


def tracer_missing(sh, tracer: str) -> Optional[str]:
    """Why *tracer* cannot run on the board behind *sh*, or None if it can."""
    if sh.read("/proc/filesystems", "").find("tracefs") < 0:
        return f"the kernel has no tracefs (CONFIG_FTRACE off), so no {tracer} tracer"
    # rtla (libtracefs) mounts tracefs itself when it is not; do the same to look
    sh.run(f"[ -e {TRACEFS[0]}/available_tracers ] || mount -t tracefs nodev {TRACEFS[0]} 2>/dev/null")
    for d in TRACEFS:
        text = sh.read(f"{d}/available_tracers")
        if text is not None:
            tracers = text.split()
            if tracer in tracers:
                out, _ = sh.run("command -v rtla >/dev/null 2>&1 && echo rtla-present")
                return None if "rtla-present" in " ".join(out) else "rtla is not installed on the board"
            return (f"the kernel has no {tracer} tracer (CONFIG_{tracer.upper()}_TRACER): "
                    f"{d}/available_tracers lists {' '.join(tracers) or 'nothing'}")
    return f"tracefs could not be mounted on {TRACEFS[0]}"


class _Rtla(Suite):
    tracer: str = ""
    #: the file rtla's stdout is parsed from
    json_file = None

    def outputs(self, run: SuiteRun) -> list[str]:
        return []

    def hist(self, text: str, path: str, bucket: Optional[int] = None,
             entries: Optional[int] = None) -> dict[str, ToolOutput]:
        """rtla's histogram text by part (bucket and range: the command's
        -b and -E; unknown for a file parsed alone)."""
        raise NotImplementedError

    def parse_raw_file(self, path: Path) -> dict[str, ToolOutput]:
        return self.hist(read_text(path), str(path))

    def unavailable(self, sh) -> Optional[str]:
        return tracer_missing(sh, self.tracer)

    def board_check(self) -> str:
        t = TRACEFS[0]
        return (f"{{ [ -e {t}/available_tracers ] || mount -t tracefs nodev {t} 2>/dev/null; }}; "
                f"if grep -qw {self.tracer} {t}/available_tracers 2>/dev/null; then true; "
                f"else echo \"the kernel has no {self.tracer} tracer (CONFIG_{self.tracer.upper()}_TRACER): "
                f"{t}/available_tracers lists $(cat {t}/available_tracers 2>/dev/null)\"; false; fi")

    def duration_s(self, run: SuiteRun) -> float:
        # rtla sets the tracer up and reads the histogram back after -d; armed,
        # it may also save a trace of every CPU's buffer (seconds under TCG,
        # longer with an RT hog on the CPUs it reads from)
        return float(run.params["duration_s"]) + 5 + (60 if run.evidence else 0)


class _RtlaHist(_Rtla):
    """An rtla hist tool: its histogram holds ``entries`` buckets of ``bucket_us``."""

    range_params = ("entries",)

    def histogram_range_us(self, params: dict[str, Any]) -> Optional[float]:
        return float(params["entries"]) * float(params["bucket_us"])

    def with_histogram_range(self, params: dict[str, Any], range_us: float) -> dict[str, Any]:
        return {**params, "entries": widened("entries", params["entries"], range_us, float(params["bucket_us"]))}


class Timerlat(_RtlaHist):
    """rtla timerlat hist: IRQ and thread wake-up latency of a kernel timer, per CPU."""

    name = "timerlat"
    tool = "timerlat"
    parts = ("irq", "thread")
    raw_header = "# RTLA timerlat histogram"
    tracer = "timerlat"
    defaults = {
        "period_us": 1000,
        "duration_s": 10,
        "priority": 95,     # SCHED_FIFO priority of the timerlat threads (-P f:N)
        "bucket_us": 1,     # histogram bucket width (-b)
        "entries": 1000,    # histogram buckets (-E); beyond: "over"
    }

    spec = {"period_us": Int(10, 1_000_000), "duration_s": DURATION_S, "priority": PRIORITY,
            "bucket_us": Int(1, 1_000_000), "entries": Int(10, 1_000_000)}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        return ["rtla", "timerlat", "hist", "-d", f"{p['duration_s']}s", "-c", format_cpulist(run.cpus),
                "-p", str(p["period_us"]), "-P", f"f:{p['priority']}", "-b", str(p["bucket_us"]),
                "-E", str(p["entries"]), *self._stop_at(run)]

    def _stop_at(self, run: SuiteRun) -> list[str]:
        """Evidence armed: stop and save the trace (with the scheduler and IRQ
        events) at the first sample over a budget (rtla -T/-i stop at a
        latency greater than the argument: one below the budget)."""
        ev = run.evidence or {}
        args = []
        if ev.get("thread_us"):
            args += ["-T", str(max(1, int(ev["thread_us"]) - 1))]
        if ev.get("irq_us"):
            args += ["-i", str(max(1, int(ev["irq_us"]) - 1))]
        if not args:
            return []
        events = [a for e in ("sched:sched_switch", "sched:sched_wakeup", "irq:irq_handler_entry",
                              "irq:irq_handler_exit") for a in ("-e", e)]
        # "-t=FILE", not "--trace=FILE": rtla 6.1 drops the first character of
        # the optional argument ("&optarg[1]", written for "-t=FILE"); the
        # long form saved "imerlat_trace.txt" here
        return [*args, *events, f"-t={TIMERLAT_TRACE}"]

    def evidence_outputs(self, run: SuiteRun) -> list[str]:
        return [TIMERLAT_TRACE] if run.evidence else []

    def evidence_thresholds(self, name: str, load: str, lookup) -> dict[str, float]:
        # -T / -i: stop at the first thread / IRQ latency over its budget's maximum
        out = {}
        for kind in ("thread", "irq"):
            b = lookup(f"{name}-{kind}", load)
            if b is not None and b.max_us is not None:
                out[f"{kind}_us"] = float(b.max_us)
        return out

    def breached(self, host_dir: Path, run: SuiteRun) -> bool:
        # rtla saves the trace only when a threshold stopped it
        return bool(run.evidence) and (host_dir / TIMERLAT_TRACE).is_file()

    def hist(self, text: str, path: str, bucket: Optional[int] = None,
             entries: Optional[int] = None) -> dict[str, ToolOutput]:
        return dict(zip(self.parts, parse_timerlat_hist(text, path, bucket=bucket, entries=entries)))

    def parse_outputs(self, job_dir: Path, run: SuiteRun) -> dict[str, ToolOutput]:
        host_dir = job_dir / run.id
        text = MeasurementDir(host_dir).stdout.read_text(errors="replace")
        outs = self.hist(text, str(MeasurementDir(host_dir).stdout), bucket=int(run.params["bucket_us"]),
                         entries=int(run.params["entries"]))
        load = _load_metrics(host_dir)
        for out in outs.values():
            out.metrics.update(load)
        return outs


class Osnoise(_RtlaHist):
    """rtla osnoise hist: noise samples (interruptions of a spinning thread), per CPU."""

    name = "osnoise"
    tool = "osnoise"
    raw_header = "# RTLA osnoise histogram"
    tracer = "osnoise"
    defaults = {
        "period_us": 1000000,
        "runtime_us": 900000,  # spin 90% of each period; the console keeps 10%
        "duration_s": 10,
        "priority": 0,         # 0: the osnoise threads stay SCHED_OTHER; N: SCHED_FIFO N
        "threshold_us": 1,     # the smallest delta counted as noise (-T)
        "bucket_us": 1,
        "entries": 1000,
    }

    spec = {"period_us": Int(100, 10_000_000), "runtime_us": Int(100, 10_000_000), "duration_s": DURATION_S,
            "priority": Int(0, 99), "threshold_us": Int(1, 1_000_000), "bucket_us": Int(1, 1_000_000),
            "entries": Int(10, 1_000_000)}

    def params(self, given: dict) -> dict:
        p = super().params(given)
        if p["runtime_us"] > p["period_us"]:
            raise ParamError(f"runtime_us ({p['runtime_us']}) must not exceed period_us ({p['period_us']})")
        return p

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        prio = ["-P", f"f:{p['priority']}"] if p["priority"] else []
        return ["rtla", "osnoise", "hist", "-d", f"{p['duration_s']}s", "-c", format_cpulist(run.cpus),
                "-p", str(p["period_us"]), "-r", str(p["runtime_us"]), "-T", str(p["threshold_us"]),
                *prio, "-b", str(p["bucket_us"]), "-E", str(p["entries"])]

    def hist(self, text: str, path: str, bucket: Optional[int] = None,
             entries: Optional[int] = None) -> dict[str, ToolOutput]:
        return {"": parse_osnoise_hist(text, path, bucket=bucket, entries=entries)}

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        return self.hist(MeasurementDir(host_dir).stdout.read_text(errors="replace"),
                         str(MeasurementDir(host_dir).stdout), bucket=int(run.params["bucket_us"]),
                         entries=int(run.params["entries"]))[""]
