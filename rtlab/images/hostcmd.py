"""Host tools (apt, dpkg-deb) run for image building; failures as ImageError."""
from __future__ import annotations

import subprocess
from typing import Any, Sequence

from .errors import ImageError


def _run(cmd: Sequence[str], what: str, ok: Sequence[int] = (0,), **kw: Any) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise ImageError(f"{what}: {cmd[0]} is not installed (see env/apt-packages.txt)") from None
    if res.returncode not in ok:
        err = (res.stderr or res.stdout).strip().splitlines()
        raise ImageError(f"{what}: {' '.join(cmd[:3])} ... failed: {' / '.join(err[-4:])}")
    return res
