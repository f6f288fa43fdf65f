"""git in a kernel tree: reads never take the index lock; the generated commit's identity."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from .errors import KernelError


#: identity of the generated source commit and of the kernel's build banner
GIT_IDENT = {"GIT_AUTHOR_NAME": "rtlab", "GIT_AUTHOR_EMAIL": "rtlab@localhost",
             "GIT_COMMITTER_NAME": "rtlab", "GIT_COMMITTER_EMAIL": "rtlab@localhost"}


def _git(tree: Path, *args: str, check: bool = True, env: Optional[Mapping[str, str]] = None,
         text: bool = True) -> subprocess.CompletedProcess:
    # GIT_OPTIONAL_LOCKS=0: reading the state (diff, describe --dirty) never
    # takes index.lock, so concurrent builds of one tree do not trip on it
    res = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=text,
                         env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", **(env or {})})
    if check and res.returncode != 0:
        err = res.stderr if text else res.stderr.decode(errors="replace")
        raise KernelError(f"git {' '.join(args)} in {tree}: {err.strip()}")
    return res
