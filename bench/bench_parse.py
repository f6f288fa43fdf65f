"""Memory of `rtlab parse` on a large rt-tests JSON: peak RSS / file size.

Writes a cyclictest --json file of about 40 MB (many threads, every
histogram bucket non-zero: the worst shape, 13 bytes of JSON per bucket),
runs `rtlab parse` on it in a child process and prints the child's peak
RSS, the baseline (the same command on a tiny file) and the ratios. The
target is a few times the file size; files above the parse limit
(RTLAB_PARSE_MAX_MB) are refused with exit 2 instead.

    .venv/bin/python bench/bench_parse.py [--mb 40]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_cyclictest_json(path: Path, target_bytes: int, buckets: int = 100_000) -> int:
    """A cyclictest -h <buckets> JSON of about target_bytes; returns its size."""
    head = ('{\n  "file_version": 1,\n  "cmdline:": "cyclictest -m -p 90 -i 1000 -q -h %d -t T '
            '--json=x.json",\n  "rt_test_version:": "2.40",\n  "return_code": 0,\n'
            '  "num_threads": T,\n  "resolution_in_ns": 0,\n  "thread": {\n' % buckets)
    body_one = ",\n".join(f'        "{i}": {i % 7 + 1}' for i in range(buckets))
    per_thread = len(body_one) + 200
    n = max(1, target_bytes // per_thread)
    with open(path, "w") as f:
        f.write(head.replace("-t T", f"-t {n}").replace('"num_threads": T', f'"num_threads": {n}'))
        for t in range(n):
            cycles = sum(i % 7 + 1 for i in range(buckets))
            f.write(f'    "{t}": {{\n      "histogram": {{\n{body_one}\n      }},\n'
                    f'      "cycles": {cycles},\n      "min": 0,\n      "max": {buckets - 1},\n'
                    f'      "avg": 50.0,\n      "cpu": {t},\n      "node": 0\n    }}'
                    + (",\n" if t < n - 1 else "\n"))
        f.write("  }\n}\n")
    return path.stat().st_size


def peak_rss_kb(args: list[str]) -> tuple[int, int, float]:
    """(peak RSS in kB, exit code, seconds) of `rtlab <args>` in a fresh child."""
    t0 = time.monotonic()
    code = (f"import resource, subprocess, sys\n"
            f"p = subprocess.run({[sys.executable, '-m', 'rtlab.cli', *args]!r}, stdout=subprocess.DEVNULL)\n"
            f"print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    kb, rc = out.stdout.split()
    return int(kb), int(rc), time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=40.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        big = Path(d) / "big.json"
        size = write_cyclictest_json(big, int(a.mb * 1024 * 1024))
        small = ROOT / "tests" / "fixtures" / "rt-tests-2.4" / "cyclictest-h30.json"
        base_kb, _, _ = peak_rss_kb(["parse", str(small)])
        kb, rc, secs = peak_rss_kb(["parse", str(big)])
        mb = size / 1024 / 1024
        print(f"file              {mb:8.1f} MB")
        print(f"exit code         {rc:8d}")
        print(f"baseline RSS      {base_kb / 1024:8.1f} MB (rtlab parse of a 4 kB file)")
        print(f"peak RSS          {kb / 1024:8.1f} MB in {secs:.1f} s")
        print(f"peak / file       {kb / 1024 / mb:8.2f}")
        print(f"(peak-base)/file  {(kb - base_kb) / 1024 / mb:8.2f}")


if __name__ == "__main__":
    main()
