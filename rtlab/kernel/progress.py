"""Progress lines of long kernel work, and durations as people read them."""
from __future__ import annotations

from typing import Any, Callable


Progress = Callable[[str], Any]


def _quiet(_: str) -> None:
    pass


def _fmt_s(s: float) -> str:
    m, s = divmod(int(round(s)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"
