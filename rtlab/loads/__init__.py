"""Loads: what else the board does while a suite measures.

A load is started before the measurement and stopped after it, and must prove
it really ran for the whole measurement: a load that died mid-run makes the
result an infra error, never a pass measured on an idle board.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import ClassVar, Iterator


class LoadDied(Exception):
    """The load did not run for the whole measurement: infra."""


class Load:
    name: ClassVar[str]
    description: ClassVar[str] = ""

    @contextlib.contextmanager
    def running(self, sh, host_dir: Path, run) -> Iterator[None]:
        yield


class Idle(Load):
    name = "idle"
    description = "no load: the board does nothing but measure"


LOADS: dict[str, Load] = {l.name: l for l in (Idle(),)}
