"""Benchmark: where the wall time of `rtlab bisect` goes.

    .venv/bin/python bench/bench_bisect.py [--commits 8] [--bug-at 4] [--repeat 2]
                                           [--baseline-repeat 5] [--duration 2] [--report DIR]

Builds the test history (tests/integration/kernel_project.py: N one-file
commits on Debian's linux-source-6.12, one of them the 400 ms
non-preemptible kthread) in a temporary clone and bisects it on
qemu-aarch64 × preempt with cyclictest/idle, as `make test` does, through
rtlab.verdict.bisect's API (the store check of the CLI is skipped: the bench has no
history to check). Prints the wall time split into

    build    `rtlab kernel build` of each measured commit (ccache; cached by commit)
    boot     the board's job time outside the tool (QEMU boot, labgrid, console)
    measure  the tool's own duration (cyclictest -D)
    other    git bisect, comparisons, result files, process start-up

each in seconds and as a share of the wall time, plus per measured commit
and per run. A benchmark, not a test: nothing is asserted. On a machine
shared with other work the boot and build shares grow with the load.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from kernel_project import make_bisect_history  # noqa: E402
from rtlab.verdict.bisect import Settings, check_inputs, report_text, run_bisect  # noqa: E402
from rtlab.plan.campaign import DEFAULT_CAMPAIGN  # noqa: E402
from rtlab.kernel import ensure_source  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=8)
    ap.add_argument("--bug-at", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline-repeat", type=int, default=5)
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--report", type=Path, help="keep the report here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        h = make_bisect_history(ensure_source(progress=None).path, Path(tmp) / "linux", a.commits, a.bug_at)
        work = a.report or Path(tmp) / "report"
        s = Settings(tree=str(Path(tmp) / "linux"), good=h["base"], bad=h["commits"][-1], board="qemu-aarch64",
                     variant="preempt", suite="cyclictest", load="idle", repeat=a.repeat,
                     baseline_repeat=a.baseline_repeat, campaign=str(DEFAULT_CAMPAIGN), work=str(work),
                     duration_s=a.duration)
        rep = run_bisect(s, check_inputs(s))
        Path(work).mkdir(parents=True, exist_ok=True)
        (Path(work) / "report.json").write_text(json.dumps(rep, indent=1))
        print(report_text(rep))
        print()
        wall = rep["wall_s"]
        t = rep["timing"]
        measured = 1 + len(rep.get("steps", [])) + len(rep.get("confirm", {}))
        runs = a.baseline_repeat + sum(len(x["attempts"]) * a.repeat
                                       for x in [*rep.get("steps", []), *rep.get("confirm", {}).values()])
        print(f"bisect of {rep['commits']} commits: first bad {str(rep.get('first_bad'))[:12]} "
              f"(planted {h['bug'][:12]}: {'right' if rep.get('first_bad') == h['bug'] else 'WRONG'}), "
              f"{rep['measured_steps']} steps (at most {rep['max_steps']}), {measured} commits measured, {runs} runs")
        print(f"{'part':8} {'seconds':>8} {'share':>6} {'per commit':>11} {'per run':>8}")
        for k in ("build", "boot", "measure", "other"):
            print(f"{k:8} {t[k]:8.0f} {t[k] / wall:6.0%} {t[k] / measured:11.1f} {t[k] / runs:8.1f}")
        print(f"{'wall':8} {wall:8.0f} {1:6.0%} {wall / measured:11.1f} {wall / runs:8.1f}")
        print(f"boot/measure ratio {t['boot'] / max(t['measure'], 1e-9):.1f}; "
              f"build/(boot+measure) {t['build'] / max(t['boot'] + t['measure'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
