"""make steps of one build, each in the build's sandbox: one log, progress
from its last line, ccache counters."""
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
from .sandbox import BASE_ENV, BuildSandbox


#: seconds between "last line of make" progress lines
TAIL_EVERY_S = 10.0
#: the most of a step's standard output read back (`make -s kernelrelease`):
#: the tree's code writes it
CAPTURE_MAX = 64 * 1024


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
    """Runs make steps of one build in its sandbox, all output appended to one log.

    *ccache_dir*: the shared compiler cache, written only when *ccache_writes*
    (the lab's own source: rtlab.kernel.sandbox says why); *statslog*, the
    build's ccache stats log, lies in its output directory (the sandbox's one
    writable place)."""

    def __init__(self, tree: Path, obj: Path, karch: Arch, log: Path, say: Progress, label: str,
                 nice: int, ccache_dir: Path, statslog: Path, timestamp: int, *,
                 ccache_writes: bool = False, readable: tuple[Path, ...] = ()):
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
        env = {"KBUILD_BUILD_USER": "rtlab", "KBUILD_BUILD_HOST": "rtlab",
               "CCACHE_DIR": str(ccache_dir), "CCACHE_STATSLOG": str(statslog),
               "CCACHE_TEMPDIR": "/tmp/ccache", "CCACHE_MAXSIZE": os.environ.get("CCACHE_MAXSIZE", "5G")}
        if timestamp:
            env["KBUILD_BUILD_TIMESTAMP"] = (dt.datetime.fromtimestamp(timestamp, dt.timezone.utc)
                                             .strftime("%a %b %e %H:%M:%S UTC %Y"))
        if not ccache_writes:
            env["CCACHE_READONLY"] = "true"
        shared = (ccache_dir,) if ccache and ccache_dir.is_dir() else ()
        self.sandbox = BuildSandbox(tree, obj, readable=readable + (() if ccache_writes else shared),
                                    writable=shared if ccache_writes else (), env=env)
        #: the sandbox's own process (bwrap) gets no more of rtlab's environment than its contents do
        self.env = dict(BASE_ENV)

    def __call__(self, *targets: str, jobs: int = 1, tail: bool = False, capture: bool = False,
                 extra_env: Optional[Mapping[str, str]] = None, cmd: Optional[list[str]] = None) -> str:
        if cmd is None:
            cmd = ["make", "-C", str(self.tree), *self.vars, f"-j{jobs}", *targets]
        shown = cmd
        inner = self.sandbox if not extra_env else BuildSandbox(
            self.sandbox.tree, self.sandbox.out, self.sandbox.readable, self.sandbox.writable,
            {**self.sandbox.env, **extra_env})
        cmd = ["nice", "-n", str(self.nice), *inner.argv(cmd, cwd=self.obj)]
        with open(self.log, "ab") as logf:
            logf.write(("\n$ " + " ".join(shown) + "\n").encode())
            logf.flush()
            if capture:
                with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, env=self.env,
                                      cwd=str(self.obj)) as res:
                    assert res.stdout is not None
                    out = res.stdout.read(CAPTURE_MAX + 1)
                    if len(out) > CAPTURE_MAX:
                        res.kill()
                        res.wait()
                        raise KernelError(f"{self.label}: `{' '.join(shown)}` wrote more than {CAPTURE_MAX} "
                                          f"bytes where a line was expected")
                    rc = res.wait()
                if rc != 0:
                    raise self.failure(shown, rc)
                return out.decode(errors="replace")
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=self.env, cwd=str(self.obj))
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
            raise self.failure(shown, proc.returncode)
        return ""

    def failure(self, cmd: list[str], rc: int) -> KernelError:
        what = " ".join(c for c in cmd if not c.startswith(("O=", "CC=", "HOSTCC=", "CROSS_COMPILE=")))
        return KernelError(f"{self.label}: `{what}` failed (exit {rc}); last lines:\n"
                           f"{_tail(self.log)}\n  full log: {self.log}")
