"""The rt-tests programme besides cyclictest: signal and IPC wake-up latency,
priority inheritance, SCHED_DEADLINE, RT task migration, and hackbench as a
measurement. Every tool writes ``--json`` where it has it; the parsers
(:mod:`rtlab.parsers`) read it into the model.

Placement on the measured CPUs (``SuiteRun.cpus``, named explicitly):

* signaltest: ``-a<cpulist>`` (threads round-robin over the list).
* sigwaittest, svsematest, ptsematest, pmqtest: one sender/receiver pair per
  measured CPU, both threads of a pair on that CPU: ``-a -t N`` when the
  CPUs are 0..N-1 (pair i on CPU i), ``-a<cpu>`` for one CPU (these tools
  take one CPU number, not a list; the attached form because ``-a 0`` would
  read as "no CPU"), ``taskset -c`` for any other set.
* pi_stress has no CPU option: it puts its admin thread on the first CPU it
  may use and one inversion group per CPU after it (CPUs 1..n-1 by default;
  on a 2-CPU isolation variant that is the isolated CPU 1).
* cyclicdeadline runs on every CPU of the root domain: given a CPU subset it
  builds cgroup-v1 cpusets and moves every task of the machine into them,
  which it must never do to this machine used as a board. SCHED_DEADLINE
  tasks cannot run on an isolated CPU (it is outside the root domain).
* rt-migrate-test is about migrating between CPUs: every CPU, no pinning.
* hackbench (the measurement) is pinned with ``taskset -c`` to the measured CPUs.

Verdicts beyond latency budgets:

* pi_stress: a deadlocked inversion group (its watchdog: "WATCHDOG triggered:
  group N is deadlocked!", after which pi_stress kills itself) or an error
  reported by a test thread is a **kernel result**: priority inheritance
  failed. The output carries a ToolFailure (and ``metrics.failed = 1`` for
  the store) and the gate judges it FAIL, never INFRA. pi_stress failing before its threads ran (no
  permission, no memory) stays INFRA.
* rt-migrate-test with ``check: true`` (``-c``): "Failed!" (a lower-priority
  task ran before a higher one) is judged FAIL the same way.
* hackbench's time is a metric (``time_s``: mean over ``runs``, and min/max),
  shown in the table, not budgeted.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Optional

from ..targets.boards import Board
from ..core.config import format_cpulist
from ..core.model import ToolFailure, ToolOutput
from ..parsers import parse_file, rt_tests
from . import DURATION_S, INTERVAL_US, METRICS, PRIORITY, Args, Bool, Int, Suite, SuiteRun
from ..core.fsutil import read_json
from ..core.rundir import MeasurementDir

#: svsematest makes its SysV IPC keys with ftok() on its own path, taken from
#: $_ (which only bash sets) or argv[0]: this fixed script gives it the full
#: path in both; the tool's arguments follow as the script's own ("$@"), so
#: nothing from the campaign is ever read by this shell as code
SVSEMATEST_SH = 't=$(command -v svsematest) || exit 127; _=$t "$t" "$@"'


def ipc_placement(cpus: tuple[int, ...], pairs) -> tuple[list[str], list[str]]:
    """(prefix, options) putting one pair per CPU, for the IPC tools."""
    n = int(pairs) if pairs not in (None, "auto") else max(1, len(cpus))
    if len(cpus) == 1:
        return [], [f"-a{cpus[0]}", "-t", str(n)]
    if cpus and tuple(cpus) == tuple(range(len(cpus))):
        return [], ["-a", "-t", str(n)]
    return ["taskset", "-c", format_cpulist(cpus)], ["-t", str(n)]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _exit_code(host_dir: Path) -> Optional[int]:
    try:
        return int(read_json(MeasurementDir(host_dir).exit_json)["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Signaltest(Suite):
    """signaltest: latency of a signal passed round a ring of RT threads."""

    name = "signaltest"
    tool = "signaltest"
    json_file = "signaltest.json"
    parser = staticmethod(rt_tests)
    ipc = True
    json_layout = "plain"
    text_layout = "summary"
    json_shape = staticmethod(lambda doc, t: t is not None and "cpu" in t
                              and not {"node", "sender", "freq", "total"} & set(t))
    t_line_shape = staticmethod(lambda names: "P" in names and "I" not in names)
    interval_option = False  # its -i is a loop count, not an interval
    defaults = {"duration_s": 10, "priority": 90, "threads": 2, "extra_args": []}
    spec = {"duration_s": DURATION_S, "priority": PRIORITY, "threads": Int(1, 1024), "extra_args": Args()}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        return ["signaltest", "-q", "-m", "-p", str(p["priority"]), "-D", str(p["duration_s"]),
                "-t", str(max(2, int(p["threads"]))), f"-a{format_cpulist(run.cpus)}",
                f"--json={self.json_file}", *p["extra_args"]]


class _Ipc(Suite):
    """sender/receiver pairs; one result per receiver (pair) in the model."""

    parser = staticmethod(rt_tests)
    ipc = True
    pairs = True
    json_layout = "ipc"
    text_layout = "ipc"
    # sigwaittest, svsematest and ptsematest write the same JSON and text:
    # only cmdline:, the file name or --tool tells them apart
    json_shape = staticmethod(lambda doc, t: t is not None and "sender" in t and "receiver" in t
                              and "timeoutcount" not in (t.get("receiver") or {}))
    text_marker = r"^#\d+:\s*ID|^#\d+\s*->\s*#\d+"
    #: its text says it (pmqtest: "TO n," in the pair lines), else None
    text_claim: ClassVar[Optional[str]] = None
    text_refuse: ClassVar[Optional[str]] = r",\s*TO\s*\d+,"

    defaults = {"duration_s": 10, "priority": 90, "interval_us": 1000, "distance_us": 500,
                "pairs": "auto", "extra_args": []}
    spec = {"duration_s": DURATION_S, "priority": PRIORITY, "interval_us": INTERVAL_US,
            "distance_us": Int(0, 10_000_000), "pairs": Int(1, 1024, words=("auto",)),
            "extra_args": Args()}

    @property
    def json_file(self) -> str:  # type: ignore[override]
        return f"{self.tool}.json"

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        prefix, place = ipc_placement(run.cpus, p["pairs"])
        # taskset pins the shell, whose children inherit the affinity
        tool = ["sh", "-c", SVSEMATEST_SH, "svsematest"] if self.tool == "svsematest" else [self.tool]
        return [*prefix, *tool, "-q", "-p", str(p["priority"]), "-i", str(p["interval_us"]),
                "-d", str(p["distance_us"]), "-D", str(p["duration_s"]), *place,
                f"--json={self.json_file}", *p["extra_args"]]


class Sigwaittest(_Ipc):
    name = tool = "sigwaittest"
    # The receiver thread blocks SIGUSR2 only when it first runs; the sender,
    # started 10 ms later, signals it at once. A receiver not scheduled by
    # then (a loaded board) dies of SIGUSR2's default action and takes the
    # process along (rt-tests src/sigwaittest/sigwaittest.c, semathread()).
    # Seen on the local board under the irq load: exit 140 after 1.9 s.
    # SIGUSR2 is 12 on every architecture rtlab boots (x86, arm, arm64).
    start_race_exits = {128 + 12: "killed by SIGUSR2 before its receiver thread blocked it "
                                  "(sigwaittest's start-up race on a loaded board)"}


class Svsematest(_Ipc):
    name = tool = "svsematest"


class Ptsematest(_Ipc):
    name = tool = "ptsematest"


class Pmqtest(_Ipc):
    name = tool = "pmqtest"
    json_layout = "ipc_timeouts"
    json_shape = staticmethod(lambda doc, t: t is not None and "sender" in t and "receiver" in t
                              and "timeoutcount" in (t.get("receiver") or {}))
    text_claim = r",\s*TO\s*\d+,"
    text_refuse = None


_PI_DEADLOCK = re.compile(r"WATCHDOG triggered: group \d+ is deadlocked|deadlock", re.IGNORECASE)
_PI_THREAD_ERROR = re.compile(r"^\s*(low|med|high)_priority\[\d+\]: (?!.*not bound).*$", re.MULTILINE)


class PiStress(Suite):
    """pi_stress: priority-inheritance inversion groups; a deadlock is a FAIL."""

    name = "pi_stress"
    tool = "pi_stress"
    json_file = "pi_stress.json"
    parser = staticmethod(rt_tests)
    json_layout = text_layout = "inversions"
    json_shape = staticmethod(lambda doc, t: "inversion" in doc)
    text_marker = r"^Total inversion performed:"
    result_kind = METRICS
    metric, metric_unit = "inversions", "inv"
    defaults = {"duration_s": 10, "groups": "auto", "extra_args": []}
    spec = {"duration_s": DURATION_S, "groups": Int(1, 1024, words=("auto",), none_ok=True),
            "extra_args": Args()}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        groups = [] if p["groups"] in (None, "auto") else ["-g", str(int(p["groups"]))]
        return ["pi_stress", "-q", "-m", "-D", str(p["duration_s"]), *groups,
                f"--json={self.json_file}", *p["extra_args"]]

    @staticmethod
    def failure(host_dir: Path) -> Optional[str]:
        """What pi_stress said when priority inheritance failed, else None."""
        text = _read(MeasurementDir(host_dir).stderr) + "\n" + _read(MeasurementDir(host_dir).stdout)
        m = _PI_DEADLOCK.search(text)
        if m:
            line = next((l.strip() for l in text.splitlines() if m.group(0) in l), m.group(0))
            return f"priority inheritance failed: {line}"
        m = _PI_THREAD_ERROR.search(text)
        if m:
            return f"priority inheritance failed: a test thread reported: {m.group(0).strip()}"
        return None

    def accepts_exit(self, rc: int, host_dir: Path) -> bool:
        return rc == 0 or self.failure(host_dir) is not None

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        rc = _exit_code(host_dir)
        why = self.failure(host_dir) if rc not in (None, 0) else None
        if why is None:
            out = super().parse_output(host_dir, run)
            out.metrics["failed"] = 0
            return out
        out = ToolOutput(path=str(MeasurementDir(host_dir).stderr), tool=self.tool, return_code=rc,
                         metrics={"failed": 1}, failure=ToolFailure(why))
        m = re.search(r"Total inversion performed:\s*(\d+)", _read(MeasurementDir(host_dir).stdout))
        if m:
            out.metrics["inversions"] = int(m.group(1))
        return out


class Hackbench(Suite):
    """hackbench as a measurement: seconds for a fixed amount of messaging."""

    name = "hackbench"
    tool = "hackbench"
    json_file = None
    parser = staticmethod(rt_tests)
    text_layout = "time"  # no JSON: it prints "Time: S"
    text_marker = r"^Time:\s|^Running in \w+ mode with \d+ groups using \d+ file descriptors"
    result_kind = METRICS
    metric, metric_unit = "time_s", "s"
    defaults = {
        # Linaro's test-definitions invocation (-s 100 -l 100 -g 10 -f 20)
        "groups": 10, "fds": 20, "loops": 100, "datasize": 100,
        "runs": 3,          # separate runs: time_s is their mean
        "threads": False,   # -T (threads) instead of -P (processes)
        "pipe": False,      # -p: pipes instead of sockets
        "duration_s": 120,  # time allowed for all runs (console timeout, progress)
    }
    spec = {"groups": Int(1, 1000), "fds": Int(1, 1000), "loops": Int(1, 10_000_000),
            "datasize": Int(1, 1 << 20), "runs": Int(1, 100), "threads": Bool(), "pipe": Bool(),
            "duration_s": DURATION_S}

    def _files(self, run: SuiteRun) -> list[str]:
        return [f"hackbench-{i}.txt" for i in range(1, int(run.params["runs"]) + 1)]

    def outputs(self, run: SuiteRun) -> list[str]:
        return self._files(run)

    #: runs "$@" (hackbench) $1 times, each into hackbench-<i>.txt; fixed text,
    #: the values are its arguments. niceness 0: the console shell runs at -20
    #: while a load runs (rtlab.loads.base), and hackbench is SCHED_OTHER like the load
    LOOP_SH = ('renice 0 -p $$ > /dev/null 2>&1; n=$1; shift; i=1; '
               'while [ "$i" -le "$n" ]; do "$@" > "hackbench-$i.txt" 2>&1 || exit $?; i=$((i + 1)); done')

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        mode = ["-T"] if p["threads"] else ["-P"]
        pipe = ["-p"] if p["pipe"] else []
        hb = ["taskset", "-c", format_cpulist(run.cpus), "hackbench", *mode, *pipe,
              "-g", str(p["groups"]), "-f", str(p["fds"]), "-l", str(p["loops"]), "-s", str(p["datasize"])]
        return ["sh", "-c", self.LOOP_SH, "hackbench-runs", str(int(p["runs"])), *hb]

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        runs = [parse_file(host_dir / f, tool="hackbench") for f in self._files(run)]
        times = [r.metrics["time_s"] for r in runs]
        out = ToolOutput(path=str(host_dir / self._files(run)[0]), tool=self.tool, return_code=0)
        out.metrics.update({k: v for k, v in runs[0].metrics.items() if k != "time_s"})
        out.metrics.update(time_s=round(sum(times) / len(times), 4), time_min_s=min(times),
                           time_max_s=max(times), runs=len(times))
        return out


class Cyclicdeadline(Suite):
    """cyclicdeadline: wake-up latency of SCHED_DEADLINE tasks (EDF)."""

    name = "cyclicdeadline"
    tool = "cyclicdeadline"
    json_file = "cyclicdeadline.json"
    parser = staticmethod(rt_tests)
    json_layout = "plain"
    text_layout = "summary"
    json_shape = staticmethod(lambda doc, t: t is not None and "resolution_in_ns" in doc
                              and not {"node", "cpu", "sender", "freq", "total"} & set(t))
    t_line_shape = staticmethod(lambda names: "I" in names and "P" not in names)
    defaults = {
        # Linaro uses 1000 us, whose runtime needs the HRTICK sched feature;
        # 10 ms works on any kernel (runtime 6 ms)
        "interval_us": 10000, "step_us": 500, "threads": 1, "duration_s": 10, "extra_args": [],
    }
    spec = {"interval_us": INTERVAL_US, "step_us": Int(1, 10_000_000), "threads": Int(1, 1024),
            "duration_s": DURATION_S, "extra_args": Args()}

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        return ["cyclicdeadline", "-q", "-i", str(p["interval_us"]), "-s", str(p["step_us"]),
                "-t", str(p["threads"]), "-D", str(p["duration_s"]), f"--json={self.json_file}",
                *p["extra_args"]]


class RtMigrateTest(Suite):
    """rt-migrate-test: RT tasks (one more than CPUs) must run by priority."""

    name = "rt-migrate-test"
    tool = "rt-migrate-test"
    json_file = "rt-migrate-test.json"
    parser = staticmethod(rt_tests)
    json_layout = text_layout = "priority_order"
    json_shape = staticmethod(lambda doc, t: t is not None and "total" in t and "prio" in t)
    text_marker = r"^Iter:|^Task \d+ \(prio"
    defaults = {
        # -l, not -D: rt-migrate-test exits 1 when -D ends the run, success or not
        "loops": 25,
        "priority": 80,     # base priority; tasks take the next ones, main above them
        "check": False,     # -c: "Failed!" (priority order broken) is judged FAIL
        "extra_args": [],
    }
    # tasks take the priorities above the base one, main above them
    spec = {"loops": Int(1, 100_000), "priority": Int(1, 90), "check": Bool(), "extra_args": Args()}

    def duration_s(self, run: SuiteRun) -> float:
        # a loop: 2 x 100 ms sleep + 20 ms busy, per task in turn on a short CPU
        return 0.3 * int(run.params["loops"]) + 5

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        check = ["-c"] if p["check"] else []
        return ["rt-migrate-test", "-q", "-p", str(p["priority"]), "-l", str(p["loops"]), *check,
                f"--json={self.json_file}", *p["extra_args"]]

    def accepts_exit(self, rc: int, host_dir: Path) -> bool:
        return rc == 0 or "Failed!" in _read(MeasurementDir(host_dir).stdout)

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        out = super().parse_output(host_dir, run)
        if "Failed!" in _read(MeasurementDir(host_dir).stdout):
            out.return_code = _exit_code(host_dir)
            out.metrics["failed"] = 1
            out.failure = ToolFailure("rt-migrate-test -c: a lower-priority task ran "
                                      "while a higher-priority one waited (Failed!)")
        elif run.params.get("check"):
            out.metrics["failed"] = 0
        return out

    def result_cell(self, out: ToolOutput) -> Optional[str]:
        if out.failure is None and out.metrics.get("failed") == 0:
            return "order ok"  # -c checked the priority order
        return super().result_cell(out)
