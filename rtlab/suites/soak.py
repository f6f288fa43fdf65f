"""cyclictest-soak: cyclictest for hours, in checkpointed segments (rtlab.soak.checkpoint).

Same parameters as cyclictest, plus ``checkpoint_s`` (segment length, the
checkpoint interval) and ``full_duration_s`` (the report's own length, run
instead of ``duration_s`` with ``rtlab run --full``). Each segment is one
cyclictest run of ``checkpoint_s`` seconds (the last one shorter); the
board test runs them back to back and writes the merged state after each
(:meth:`CyclictestSoak.run_on_board`); the host reads that state, not the
last segment (:meth:`CyclictestSoak.parse_output`).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Callable, Optional

from ..soak import checkpoint as soak
from ..targets.boards import Board
from ..core.model import ToolOutput
from ..parsers import parse_file
from . import Cyclictest, Int, SuiteRun
from ..core.fsutil import read_json
from ..core.rundir import MeasurementDir

log = logging.getLogger("rtlab.soak.checkpoint")


class CyclictestSoak(Cyclictest):
    """cyclictest in consecutive checkpointed segments; survives a lost board or a killed rtlab."""

    name = "cyclictest-soak"
    segmented_by = None  # it is the segmented form
    defaults = {**Cyclictest.defaults, "duration_s": 600, "checkpoint_s": 60, "full_duration_s": None}
    spec = {**Cyclictest.spec, "checkpoint_s": Int(1, 86400),
            "full_duration_s": Int(1, 7 * 86400, none_ok=True)}

    def outputs(self, run: SuiteRun) -> list[str]:
        return [self.json_file] if self.json_file else []

    def segments(self, run: SuiteRun) -> list[int]:
        """Each segment's length in seconds."""
        total, step = int(run.params["duration_s"]), int(run.params["checkpoint_s"])
        n = -(-total // step)
        return [min(step, total - i * step) for i in range(n)]

    def segment_command(self, run: SuiteRun, seconds: int, board: Optional[Board] = None) -> list[str]:
        seg = SuiteRun(id=run.id, name=run.name, suite=run.suite, load=run.load,
                       params={**run.params, "duration_s": seconds}, cpus=run.cpus, evidence=run.evidence,
                       spike_us=run.spike_us)
        return Cyclictest.command(self, seg, board)

    def checkpoint_command(self, run: SuiteRun, board: Optional[Board] = None) -> str:
        """The command a checkpoint records (one of its parameters, a resume
        must match it): what makes the samples, without the spike recording
        (which of its late samples the host delayed, rtlab.core.hostattr)."""
        return " ".join(self.segment_command(dataclasses.replace(run, spike_us=None), self.segments(run)[0], board))

    def spike_outputs(self, host_dir: Path) -> list[Path]:
        return sorted(MeasurementDir(p).stdout for p in (host_dir / soak.SEGMENTS_DIR).glob("[0-9]*") if p.is_dir())

    def expected_samples(self, run: SuiteRun) -> Optional[int]:
        # completeness is the checkpoint's to say (rtlab.soak.checkpoint.incomplete):
        # a soak cut short is judged on its kept samples, never PASS
        return None

    def run_on_board(self, sh, run: SuiteRun, host_dir: Path, argv: Optional[list[str]] = None, *,
                     board: Optional[Board] = None, timeout_per_s: float = 2.0,
                     on_checkpoint: Optional[Callable[[dict], None]] = None) -> int:
        """Every segment a checkpoint in *host_dir* does not hold yet (a
        resumed run measures only what is missing), each one's raw files
        under ``segments/NNNN/`` and the merged state written atomically
        after it. A lost console keeps every checkpoint before it (the
        failure is recorded in the state as ``stopped``, then raised).
        *argv*, the whole run's command, is not run: each segment has its own."""
        from .board import SuiteFailure, exited, run_tool
        from ..errors import InputError

        host_dir.mkdir(parents=True, exist_ok=True)
        lengths = self.segments(run)
        command = self.checkpoint_command(run, board)
        fresh = soak.new_state(int(run.params["duration_s"]), int(run.params["checkpoint_s"]),
                               float(run.params["interval_us"]), command)
        state = fresh
        if os.path.lexists(host_dir / soak.CHECKPOINT_FILE):
            # what was measured is kept: a checkpoint that cannot be read, or
            # that other parameters made, is refused, never started over
            try:
                state = soak.load_checked_state(host_dir / soak.CHECKPOINT_FILE)
            except InputError as e:
                raise SuiteFailure(str(e)) from None
            changed = soak.parameter_changes(state, {k: fresh[k] for k in soak.PARAMETER_KEYS})
            if changed:
                raise SuiteFailure(f"{host_dir / soak.CHECKPOINT_FILE}: " + "; ".join(changed) + ": refused")
        state["stopped"] = None
        MeasurementDir(host_dir).command.write_text(command + "\n")
        done = {s["index"] for s in state["segments"]}
        t_prev_end: Optional[float] = None
        for i, seconds in enumerate(lengths):
            if i in done:
                continue
            seg_dir = host_dir / soak.SEGMENTS_DIR / f"{i:04d}"
            argv = self.segment_command(run, seconds, board)
            t_call = time.monotonic()
            try:
                rc = run_tool(sh, run.id, argv, seg_dir, self.outputs(run), timeout=seconds * timeout_per_s + 60,
                              expected_s=seconds)
            except SuiteFailure as e:
                state["stopped"] = f"segment {i} lost: {e}"
                soak.save(host_dir, state)
                raise
            exit_info = _exit_info(seg_dir)
            t_start = t_call + exit_info.get("prep_s", 0.0)
            gap = None if t_prev_end is None else max(0.0, t_start - t_prev_end)
            t_prev_end = t_start + exit_info.get("elapsed_s", 0.0)
            if rc != 0:
                state["stopped"] = f"segment {i}: {exited(self.tool, rc)}"
                soak.save(host_dir, state)
                return rc
            seg = parse_file(seg_dir / self.json_file, tool=self.tool)
            soak.add_segment(state, i, seg, duration_s=seconds, elapsed_s=exit_info.get("elapsed_s", seconds),
                             gap_before_s=gap)
            soak.save(host_dir, state)
            if on_checkpoint is not None:
                on_checkpoint(state)
        return 0

    def parse_output(self, host_dir: Path, run: SuiteRun) -> ToolOutput:
        path = host_dir / soak.CHECKPOINT_FILE
        if not os.path.lexists(path):
            from ..errors import InputError
            raise InputError(path, "no checkpoint: nothing measured was kept")
        # typed and ranged as --resume reads it: a type-confused one is an
        # InputError naming the key, never an AttributeError
        return soak.output_of(soak.load_checked_state(path), str(path), self.tool)


def _exit_info(seg_dir: Path) -> dict:
    try:
        return read_json(MeasurementDir(seg_dir).exit_json)
    except (OSError, ValueError):
        return {}

