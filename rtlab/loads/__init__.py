"""Loads: what else the board does while a suite measures.

A load is started before the measurement and stopped after it, and must prove
it really ran for the whole measurement: a load that died mid-run makes the
result an infra error, never a pass measured on an idle board.

    with LOADS["stress+network"].running(board_shell, host_dir, suite_run, board):
        ...measure...

The mechanics (board-side sampler, measurement window, stop) are in
:mod:`rtlab.loads.base`, the checks in :mod:`rtlab.loads.health`, the named
loads and how they scale in :mod:`rtlab.loads.catalog`.
"""
from __future__ import annotations

from . import catalog  # noqa: F401  the named loads register themselves on import
from .base import LOADS, BoardLoad, Composite, Load, LoadDied, LoadEnv, LoadRegistry

__all__ = ["BoardLoad", "Composite", "LOADS", "Load", "LoadDied", "LoadEnv", "LoadRegistry"]
