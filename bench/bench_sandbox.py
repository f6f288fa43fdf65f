"""The build sandbox's cost: a kernel build confined against the same build
run as rtlab itself, warm (every object from the compiler cache) and cold
(an empty compiler cache).

Builds the pinned linux-source for aarch64 (the `preempt` variant's
fragments) as a tree from outside (the compiler cache read-only, as a
merge request's build has it) into a fresh build cache per run, alternating
confined and unconfined, and prints per mode the wall and CPU seconds
(make and the compilers: build.json's make_cpu_seconds) and the ratios
confined / unconfined. The unconfined builds run the same command lines
without bwrap (a patch of this process only: the shipped CLI has no way to
switch the sandbox off). Take it on a quiet machine; CPU seconds stay
comparable on a loaded one.

    .venv/bin/python bench/bench_sandbox.py [--runs 2] [--cold-runs 1] [--arch aarch64]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtlab.kernel import build_kernel, ensure_source, with_base  # noqa: E402
from rtlab.kernel import sandbox as sb  # noqa: E402
from rtlab.targets.variants import load_variants  # noqa: E402


@contextmanager
def unconfined():
    """The build's commands as rtlab ran them before the sandbox: its own
    user, its whole file system and environment (this process only)."""
    orig = sb.BuildSandbox.argv

    def plain(self, cmd, cwd=None):
        return ["env", *[f"{k}={v}" for k, v in {**os.environ, **sb.BASE_ENV, **self.env}.items()], *cmd]
    sb.BuildSandbox.argv = plain  # type: ignore[method-assign]
    try:
        yield
    finally:
        sb.BuildSandbox.argv = orig  # type: ignore[method-assign]


def one(tree: Path, arch: str, frags: list[str], ccache: Path, confined: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as d:
        t0 = time.monotonic()
        if confined:
            bk = build_kernel(tree, arch, frags, cache_dir=Path(d), ccache_dir=ccache, progress=None)
        else:
            with unconfined():
                bk = build_kernel(tree, arch, frags, cache_dir=Path(d), ccache_dir=ccache, progress=None)
        return time.monotonic() - t0, float(bk.build_json.get("make_cpu_seconds") or 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="warm builds per mode (default 2)")
    ap.add_argument("--cold-runs", type=int, default=1, help="cold builds per mode (default 1; ~10 min each)")
    ap.add_argument("--arch", default="aarch64")
    a = ap.parse_args()
    tree = ensure_source(progress=None).path
    frags = with_base(a.arch, list(load_variants()["preempt"].fragments_for(a.arch)))
    shared = Path(os.environ.get("CCACHE_DIR") or Path(tempfile.gettempdir()) / "bench-sandbox-ccache")
    # warm the shared cache once, as the lab's own source does (trusted)
    build_kernel(tree, a.arch, frags, cache_dir=Path(tempfile.mkdtemp(prefix="bench-sandbox-warm-")),
                 ccache_dir=shared, progress=None, trusted=True)
    for kind, runs in (("warm", a.runs), ("cold", a.cold_runs)):
        res: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for i in range(runs):
            for confined in (i % 2 == 0, i % 2 != 0):  # alternate which mode goes first
                cc = shared if kind == "warm" else Path(tempfile.mkdtemp(prefix="bench-sandbox-empty-"))
                res[confined].append(one(tree, a.arch, frags, cc, confined))
        for what, idx in (("wall", 0), ("cpu", 1)):
            c = statistics.median(r[idx] for r in res[True])
            u = statistics.median(r[idx] for r in res[False])
            print(f"{kind} {what}: confined {c:.1f} s, unconfined {u:.1f} s, ratio {c / u if u else float('nan'):.3f}"
                  f" ({runs} run{'s' * (runs != 1)} each)")


if __name__ == "__main__":
    main()
