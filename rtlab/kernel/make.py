"""make steps of one build: one log, progress from its last line, ccache counters."""
from __future__ import annotations

import datetime as dt
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path
from typing import Mapping, Optional

from ..targets.arch import Arch
from .errors import KernelError
from .progress import Progress, _fmt_s


#: seconds between "last line of make" progress lines
TAIL_EVERY_S = 10.0


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [l for l in f.read().decode(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _tail(log: Path, n: int = 15) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + l for l in lines[-n:])


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _ccache_counts(statslog: Path) -> dict[str, int]:
    """Hits and misses of this build's source compiles, from ccache's per-build
    stats log ("# <input>" then its counters); Kbuild's compiler probes
    (input /dev/null or none) are left out."""
    counts = {"hits": 0, "misses": 0}
    try:
        lines = statslog.read_text(errors="replace").splitlines()
    except OSError:
        return counts
    source = False
    for l in lines:
        if l.startswith("#"):
            name = l[1:].strip()
            source = name.endswith((".c", ".S")) and name != "/dev/null"
        elif source and l in ("direct_cache_hit", "preprocessed_cache_hit"):
            counts["hits"] += 1
        elif source and l == "cache_miss":
            counts["misses"] += 1
    return counts


class _Make:
    """Runs make steps of one build, all output appended to one log."""

    def __init__(self, tree: Path, obj: Path, karch: Arch, log: Path, say: Progress, label: str,
                 nice: int, ccache_dir: Path, statslog: Path, timestamp: int):
        self.tree, self.obj, self.log, self.say, self.label = tree, obj, log, say, label
        self.nice = nice
        cross = karch.cross_prefix()
        self.cc = f"{cross}gcc"
        ccache = shutil.which("ccache")
        self.vars = [f"O={obj}", f"ARCH={karch.kernel_arch}"]
        if cross:
            self.vars.append(f"CROSS_COMPILE={cross}")
        if ccache:
            self.vars += [f"CC=ccache {self.cc}", "HOSTCC=ccache gcc"]
        self.ccache = bool(ccache)
        self.env = {**os.environ,
                    "KBUILD_BUILD_USER": "rtlab", "KBUILD_BUILD_HOST": "rtlab",
                    "KBUILD_BUILD_TIMESTAMP": dt.datetime.fromtimestamp(timestamp, dt.timezone.utc)
                    .strftime("%a %b %e %H:%M:%S UTC %Y") if timestamp else "",
                    "CCACHE_DIR": str(ccache_dir), "CCACHE_STATSLOG": str(statslog),
                    "LC_ALL": "C"}
        if "CCACHE_MAXSIZE" not in os.environ:
            self.env["CCACHE_MAXSIZE"] = "5G"
        if not timestamp:
            del self.env["KBUILD_BUILD_TIMESTAMP"]

    def __call__(self, *targets: str, jobs: int = 1, tail: bool = False, capture: bool = False,
                 extra_env: Optional[Mapping[str, str]] = None, cmd: Optional[list[str]] = None) -> str:
        if cmd is None:
            cmd = ["make", "-C", str(self.tree), *self.vars, f"-j{jobs}", *targets]
        cmd = ["nice", "-n", str(self.nice), *cmd]
        env = {**self.env, **(extra_env or {})}
        with open(self.log, "ab") as logf:
            logf.write(("\n$ " + " ".join(cmd) + "\n").encode())
            logf.flush()
            if capture:
                res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=logf, env=env, cwd=str(self.obj))
                if res.returncode != 0:
                    raise self.failure(cmd, res.returncode)
                return res.stdout.decode(errors="replace")
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=str(self.obj))
            next_tail = t0 + TAIL_EVERY_S
            try:
                while True:
                    try:
                        proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if tail and time.monotonic() >= next_tail:
                        next_tail += TAIL_EVERY_S
                        self.say(f"{self.label}:   [{_fmt_s(time.monotonic() - t0)}] {_last_line(self.log)}")
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
        if proc.returncode != 0:
            raise self.failure(cmd, proc.returncode)
        return ""

    def failure(self, cmd: list[str], rc: int) -> KernelError:
        what = " ".join(c for c in cmd if not c.startswith(("O=", "CC=", "HOSTCC=", "CROSS_COMPILE=")))
        return KernelError(f"{self.label}: `{what}` failed (exit {rc}); last lines:\n"
                           f"{_tail(self.log)}\n  full log: {self.log}")
