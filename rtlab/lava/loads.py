"""The LAVA form of rtlab's loads: the same load scripts and the same health
check, run unattended by the suite's LAVA test definition instead of driven
over the console by the host.

labgrid path (:class:`rtlab.loads.BoardLoad`): the host probes the board,
writes ``cmd.sh`` and the helper, launches them, polls until the load is
going, snapshots the load before and after the tool, stops it and fetches
its raw files. LAVA path: the same steps as shell in the definition, around
the tool's step:

* ``rtlab-lava-load.sh start``: launch ``cmd.sh`` and the helper's sampler
  (both ``setsid``), wait until every part is alive and burning CPU and the
  load's own ready condition holds, settle, snapshot (``first.txt``); a load
  that does not get going writes ``start-failed``. A ``load-<name>-start``
  test case says which.
* ``rtlab-lava-load.sh end``: snapshot (``last.txt``), stop with the load's
  signals; then every raw file comes back as an ``rtlab_emit`` block named
  ``load-<name>-<file>``, byte-exact, as the tool's outputs do.

`rtlab lava ingest` then runs :func:`check_load` — the labgrid path's
``health.check_window`` and the load's own ``throughput`` check — and a load
that did not start, died, stalled or failed its rounds makes the measurement
INFRA, never a latency measured on a quiet board.

What cannot be the same: a LAVA job is rendered before the board runs, so
the load's scaling comes from the board description, not a probe. CPUs from
the board (``cpus``, ``isolate_cpu`` with an ``-iso`` variant); memory and
/tmp space only for QEMU boards, from the machine's ``-m`` (MemAvailable
~85 % of it and /tmp ~45 %: what the labgrid probe reads on these images).
Loads whose commands depend on memory (stress, memory, disk) are therefore
not rendered for boards without a memory figure, and loads with a host side
(network: the iperf3 server) are not rendered at all: a LAVA job has no host
side. Both are listed, with the reason, in the render's ``not_rendered``.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ..targets.boards import Board
from ..loads import LOADS, BoardLoad, Load, LoadEnv, health
from ..loads.base import CONSOLE_NICE, HELPER, HELPER_PATH, LOAD_DIR_FILES, LOADS_ROOT, load_cpus
from ..suites import SUITES, SuiteRun

#: the LAVA start/end steps of a load (shell; dash and busybox ash)
SCRIPT_PATH = f"{LOADS_ROOT}/rtlab-lava-load.sh"
SCRIPT = (Path(__file__).parent / "rtlab-lava-load.sh").read_text()
#: files of the load directory that come back besides the load's own
STEP_FILES = (*LOAD_DIR_FILES, "start-failed", "first.txt", "last.txt", "stop.txt")
#: what a QEMU board's MemAvailable and /tmp space are, as shares of its -m
QEMU_MEM_AVAIL_SHARE = 0.85
QEMU_TMP_SHARE = 0.45

# LAVA rewrites run steps that contain these; nothing here may
for _text in (SCRIPT, HELPER):
    assert "--shell" not in _text and "--cmd" not in _text


def start_case(load: Load) -> str:
    return f"load-{load.name}-start"


@dataclass(frozen=True)
class LavaLoadPart:
    """One board load of a suite run, as rendered."""
    load: BoardLoad
    env: LoadEnv

    @property
    def dir(self) -> str:
        return self.load.dir(self.env)

    def files(self) -> tuple[str, ...]:
        return (*STEP_FILES, *self.load.raw_files(self.env))

    def to_json(self) -> dict[str, Any]:
        """What ingest needs to rebuild the env (in the job's spec)."""
        e = self.env
        return {"name": self.load.name, "cpus": e.cpus, "online": e.online, "isolated": e.isolated,
                "mem_total_kb": e.mem_total_kb, "mem_avail_kb": e.mem_avail_kb,
                "tmp_avail_kb": e.tmp_avail_kb, "opts": e.opts, "settings": self.load.settings(e),
                "dir": self.dir,
                "estimated": ["mem_avail_kb", "tmp_avail_kb"] if self.load.scales_with_memory else []}


def board_memory_kb(lava_board) -> int:
    """The board's RAM in kB when the description says (QEMU's -m), else 0."""
    q = getattr(lava_board, "qemu", None)
    return q.memory_mb * 1024 if lava_board.boot == "qemu" and q is not None else 0


def plan(lava_board, variant, run) -> Union[list[LavaLoadPart], str]:
    """The board loads of *run* on *lava_board*, scaled as rendered, or why
    the load has no LAVA form there. Idle: no parts."""
    load = LOADS.get(run.load)
    if load is None:
        return f"unknown load {run.load!r}"
    board = lava_board.board
    online = list(range(int(board.cpus)))
    isolated = [board.isolate_cpu] if variant.isolated and board.isolate_cpu is not None else []
    params = run.params or {}
    all_opts = params.get("load_opts") or {}
    mem_kb = board_memory_kb(lava_board)
    parts: list[LavaLoadPart] = []
    for part in load.parts():
        if not isinstance(part, BoardLoad):
            continue  # idle: nothing runs
        if part.host_side:
            return (f"load {part.name} has a host side ({type(part).__name__}.host_start), which a "
                    f"LAVA job does not have")
        if part.scales_with_memory and not mem_kb:
            return (f"load {part.name} scales with the board's memory, which the LAVA board "
                    f"{lava_board.name} does not describe (QEMU boards do: -m)")
        try:
            cpus = load_cpus(params.get("load_cpus", "auto"), online, isolated)
        except Exception as e:  # noqa: BLE001 - LoadDied: CPUs not on the board
            return str(e)
        suite = SUITES.get(run.suite)
        env = LoadEnv(sh=None, host_dir=Path("."), run=run, board=board, online=online,
                      duration_s=suite.duration_s(run) if suite is not None else None,
                      isolated=isolated, cpus=cpus, mem_total_kb=mem_kb,
                      mem_avail_kb=int(mem_kb * QEMU_MEM_AVAIL_SHARE), tmp_avail_kb=int(mem_kb * QEMU_TMP_SHARE),
                      opts={**part.options, **all_opts.get(part.name, {})})
        parts.append(LavaLoadPart(part, env))
    return parts


def _heredoc(path: str, text: str) -> str:
    """A run step that writes *text* to *path* on the board (no expansion)."""
    tag = "RTLAB_LOAD_EOF"
    assert tag not in text
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {shlex.quote(path)} <<'{tag}'\n{body}{tag}"


def start_steps(parts: list[LavaLoadPart]) -> list[str]:
    if not parts:
        return []
    steps = [f"mkdir -p {LOADS_ROOT}", _heredoc(HELPER_PATH, HELPER), _heredoc(SCRIPT_PATH, SCRIPT)]
    for p in parts:
        d, env, load = p.dir, p.env, p.load
        steps += [f"rm -rf {d} && mkdir -p {d}", _heredoc(f"{d}/cmd.sh", load.script(env)),
                  _heredoc(f"{d}/ready.sh", load.ready(env, d) + "\n")]
        die = env.opts.get("die_after_s")
        args = [d, str(len(load.commands(env))), f"{load.ready_timeout_s:g}",
                f"{float(env.opts.get('settle_s') or 0):g}", env.cpulist, HELPER_PATH,
                f"{float(die):g}" if die else ""]
        steps.append(f"sh {SCRIPT_PATH} start {' '.join(shlex.quote(a) for a in args)} "
                     f"&& lava-test-case {start_case(load)} --result pass "
                     f"|| lava-test-case {start_case(load)} --result fail")
    # as the labgrid path does while a load runs (rtlab.loads.base.Load.running)
    steps.append(f"renice -n {CONSOLE_NICE} -p $$ > /dev/null 2>&1")
    return steps


def stop_steps(parts: list[LavaLoadPart], run_id: str) -> list[str]:
    if not parts:
        return []
    steps = ["renice -n 0 -p $$ > /dev/null 2>&1"]
    for p in reversed(parts):
        steps.append(f"sh {SCRIPT_PATH} end {shlex.quote(p.dir)} {HELPER_PATH} "
                     f"{shlex.quote(p.load.stop_signals)}")
        steps += [f"rtlab_emit {shlex.quote(run_id)} {shlex.quote(f'load-{p.load.name}-{f}')} "
                  f"{shlex.quote(f'{p.dir}/{f}')}" for f in p.files()]
        steps.append(f"rm -rf {shlex.quote(p.dir)}")
    return steps


def cases(parts: list[LavaLoadPart]) -> list[str]:
    return [start_case(p.load) for p in parts]


def check_load(spec_part: dict, suite_dir: Path, run: SuiteRun, board: Board) -> list[str]:
    """The labgrid path's check (BoardLoad.judge) on the files a LAVA job
    sent back; writes ``load-<name>.json`` beside them, returns the problems (INFRA)."""
    load = LOADS[spec_part["name"]]
    assert isinstance(load, BoardLoad), load  # a spec part is one board load (lava_parts)
    env = LoadEnv(sh=None, host_dir=suite_dir, run=run, board=board, online=spec_part["online"],
                  isolated=spec_part["isolated"], cpus=spec_part["cpus"],
                  mem_total_kb=spec_part["mem_total_kb"], mem_avail_kb=spec_part["mem_avail_kb"],
                  tmp_avail_kb=spec_part["tmp_avail_kb"], opts=dict(spec_part["opts"]))
    prefix = f"load-{load.name}-"
    files = {p.name[len(prefix):]: p.read_bytes() for p in suite_dir.glob(prefix + "*") if p.is_file()}
    snap = lambda name: (health.Snapshot.parse(files[name].decode(errors="replace").splitlines())  # noqa: E731
                         if name in files else None)
    started = "start-failed" not in files
    problems = [] if started else [" ".join(files["start-failed"].decode(errors="replace").split())]
    estimated = spec_part.get("estimated")
    return load.judge(env, files, snap("first.txt"), snap("last.txt"), measured=started,
                      settings=spec_part.get("settings", {}), problems=problems,
                      extra={"driver": "lava", "scaled_from": "board description" + (
                          f" (estimated: {', '.join(estimated)})" if estimated else "")})
