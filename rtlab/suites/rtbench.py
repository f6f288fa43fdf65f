"""rtbench: rtlab's own POSIX primitive benchmarks (``rtbench/``), JSON like
rt-tests, one result (ThreadResult) per benchmark in the model.

The binary reaches the boards two ways:

* QEMU boards: in the initramfs, through an image overlay
  (:func:`image_overlays`): ``.cache/overlays/rtbench-<arch>/usr/bin/rtbench``,
  a copy of ``rtbench/build/<arch>/rtbench`` (``make rtbench`` builds x86_64
  natively, aarch64 and armhf statically). The runner passes the overlays to
  ``ensure_images(arch, overlays=...)``; the image cache key covers them.
* the local board: ``rtbench/build/<arch>/rtbench`` by absolute path.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from .. import ROOT, parsers
from ..targets.arch import get_or_none
from ..targets.boards import Board
from ..core.params import Text
from . import PRIORITY, Args, Int, Num, Suite, SuiteRun

BUILD_DIR = ROOT / "rtbench" / "build"
OVERLAY_DIR = ROOT / ".cache" / "overlays"


def rtbench_binary(arch: str) -> Path:
    a = get_or_none(arch)
    return BUILD_DIR / (a.rtbench_arch if a else arch) / "rtbench"


def image_overlays(arch: str) -> list[Path]:
    """Overlay trees for the board image of *arch*: ``usr/bin/rtbench`` when
    rtbench is built for it (else none: the rtbench suite then fails as infra
    on that board, "rtbench: not found")."""
    src = rtbench_binary(arch)
    if not src.is_file():
        return []
    root = OVERLAY_DIR / f"rtbench-{arch}"
    dst = root / "usr" / "bin" / "rtbench"
    if not dst.is_file() or dst.read_bytes() != src.read_bytes():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        shutil.copyfile(src, tmp)
        tmp.chmod(0o755)
        tmp.replace(dst)
    return [root]


class Rtbench(Suite):
    name = "rtbench"
    tool = "rtbench"
    json_file = "rtbench.json"
    parser = staticmethod(parsers.rtbench_json)
    json_layout = "benchmarks"  # JSON only: no text layout
    json_shape = staticmethod(lambda doc, t: "benchmarks" in doc)
    per_operation = True        # each "thread" is another primitive
    interval_option = False     # no -i
    defaults = {
        "loops": 1000,        # -l: samples per benchmark
        "cap_s": 0.2,         # -D: cap on each benchmark's sampling time
        "priority": 80,       # -p
        "benchmarks": "",     # -t: comma list ("" = all of them)
        "other_cpu": "auto",  # -b: CPU of the cross-CPU posters (auto: rtbench's choice)
        "extra_args": [],
    }
    spec = {"loops": Int(1, 10_000_000), "cap_s": Num(hi=60.0), "priority": PRIORITY,
            "benchmarks": Text(r"[A-Za-z0-9_.-]*(,[A-Za-z0-9_.-]+)*", "a comma list of benchmark names"),
            "other_cpu": Int(0, 4095, words=("auto",), none_ok=True), "extra_args": Args()}
    #: benchmarks in rtbench (rtbench --list), for the time estimate
    COUNT = 30

    def duration_s(self, run: SuiteRun) -> float:
        p = run.params
        n = len([b for b in str(p["benchmarks"]).split(",") if b]) or self.COUNT
        # each: warm-up + capped sampling + 10 ms rests; TCG is slow to set up threads
        return n * (float(p["cap_s"]) * 1.5 + 0.3) + 10

    def binary(self, board: Optional[Board]) -> str:
        if board is not None and board.kind == "local":
            return str(rtbench_binary(board.arch))
        return "rtbench"

    def command(self, run: SuiteRun, board: Optional[Board] = None) -> list[str]:
        p = run.params
        cpu = run.cpus[-1] if run.cpus else None
        args = [self.binary(board), "-q", "-l", str(p["loops"]), "-D", str(p["cap_s"]),
                "-p", str(p["priority"])]
        if cpu is not None:
            args += ["-a", str(cpu)]
        if p["other_cpu"] not in (None, "auto"):
            args += ["-b", str(int(p["other_cpu"]))]
        if p["benchmarks"]:
            args += ["-t", p["benchmarks"]]
        args.append(f"--json={self.json_file}")
        return [*args, *p["extra_args"]]
