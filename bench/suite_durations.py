#!/usr/bin/env python3
"""The test suite's time per test file, slowest first: what each file costs
`make test`, so the next addition sees its price (docs/testing.md).

    .venv/bin/python bench/suite_durations.py                # make test's last run
    .venv/bin/python bench/suite_durations.py --top 25 results/pytest/*.xml
    .venv/bin/python bench/suite_durations.py ci.log         # pytest output with --durations=0

Reads the JUnit XML each phase of `make test` writes (results/pytest/<phase>.xml:
a test's time there is its setup, call and teardown, so a module or session
fixture is paid by the first test that asks for it), or pytest's text output
with `--durations=0`. Per phase: its wall time, the tests' summed time (above
the wall time when tests ran side by side: the parallel phase) and the load
average at its start and end (results/pytest/<phase>.load, written by make
test: the times mean little on a loaded machine)."""
from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "results" / "pytest"
#: one line of `pytest --durations=0`: "12.34s call     tests/x/test_y.py::test_z[p]"
DURATION_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S+?\.py)::")


@dataclass
class Phase:
    name: str
    wall_s: float = 0.0
    tests: int = 0
    load: str = ""
    #: test file -> [seconds, tests]
    files: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0]))

    @property
    def summed_s(self) -> float:
        return sum(s for s, _ in self.files.values())


def file_of(case: ET.Element) -> str:
    """A <testcase>'s test file (xunit1 names it; xunit2 only by its dotted
    classname, of which the longest prefix that is a file is the module)."""
    if case.get("file"):
        return case.get("file")
    parts = (case.get("classname") or "").split(".")
    for n in range(len(parts), 0, -1):
        rel = Path(*parts[:n]).with_suffix(".py")
        if (ROOT / rel).exists():
            return str(rel)
    return ".".join(parts) or "?"


def read_junit(path: Path) -> Phase:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    phase = Phase(path.stem)
    for suite in suites:
        phase.wall_s += float(suite.get("time") or 0)
        for case in suite.iter("testcase"):
            if case.find("skipped") is not None and not float(case.get("time") or 0):
                continue
            entry = phase.files[file_of(case)]
            entry[0] += float(case.get("time") or 0)
            entry[1] += 1
            phase.tests += 1
    load = path.with_suffix(".load")
    if load.exists():
        phase.load = " -> ".join(" ".join(line.split()[:3]) for line in load.read_text().splitlines()[:2])
    return phase


def read_durations_log(path: Path) -> Phase:
    """pytest's text output with --durations=0 (each test's setup, call and
    teardown on lines of their own; a CI log holds several phases' lines)."""
    phase = Phase(path.name)
    seen: set[str] = set()
    for line in path.read_text(errors="replace").splitlines():
        m = DURATION_LINE.match(line)
        if not m:
            continue
        entry = phase.files[m.group(3)]
        entry[0] += float(m.group(1))
        test = line.split()[-1]
        if test not in seen:
            seen.add(test)
            entry[1] += 1
            phase.tests += 1
    # each pytest run's summary line: "==== 930 passed, 2 deselected in 231.40s (0:03:51) ===="
    wall = re.findall(r"^=+ .*\bin (\d+(?:\.\d+)?)s\b", path.read_text(errors="replace"), re.M)
    phase.wall_s = sum(float(w) for w in wall) if wall else phase.summed_s
    return phase


def report(phases: list[Phase], top: int) -> str:
    out = []
    for p in phases:
        load = f", load {p.load}" if p.load else ""
        out.append(f"phase {p.name}: {p.tests} tests, wall {p.wall_s:.0f} s, tests' summed time "
                   f"{p.summed_s:.0f} s{load}")
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for p in phases:
        for f, (s, n) in p.files.items():
            total[f][0] += s
            total[f][1] += n
    rows = sorted(total.items(), key=lambda kv: -kv[1][0])
    summed = sum(s for s, _ in total.values()) or 1.0
    out.append(f"total: wall {sum(p.wall_s for p in phases):.0f} s; per file (seconds, tests, share of summed):")
    for f, (s, n) in rows[:top]:
        out.append(f"  {s:8.1f} {int(n):5d} {100 * s / summed:5.1f}%  {f}")
    if len(rows) > top:
        rest = rows[top:]
        out.append(f"  {sum(s for _, (s, _) in rest):8.1f} {int(sum(n for _, (_, n) in rest)):5d} "
                   f"{100 * sum(s for _, (s, _) in rest) / summed:5.1f}%  ({len(rest)} more files)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", type=Path,
                    help="JUnit XML files or pytest --durations=0 logs (default: results/pytest/*.xml)")
    ap.add_argument("--top", type=int, default=1000, help="files listed (the rest summed on one line)")
    args = ap.parse_args(argv)
    inputs = args.inputs or sorted(DEFAULT_DIR.glob("*.xml"), key=lambda p: p.stat().st_mtime)
    if not inputs:
        print(f"no JUnit XML in {DEFAULT_DIR}: run make test first", file=sys.stderr)
        return 2
    phases = []
    for path in inputs:
        try:
            phases.append(read_junit(path) if path.suffix == ".xml" else read_durations_log(path))
        except (OSError, ET.ParseError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
    print(report(phases, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
