"""Benchmark: time from kernel commit to verdict, as the GitLab pipeline
spends it, for one board × 4 variants (none, voluntary, preempt, rt).

    .venv/bin/python bench/bench_pipeline.py [--board qemu-x86_64] [--tree PATH | --prebuilt]
                                             [--new-commit] [--duration 3] [--no-publish]

Does what the pipeline's stages do, in one process, and splits the time:

  build    `rtlab kernel build` of each variant from the tree (the build
           stage); cached builds answer in seconds, so the cold build time
           recorded in each build.json (build_seconds) is shown beside it
  boot     per job, events.jsonl: booting -> booted (QEMU start to shell)
  test     per job, events.jsonl: the suites (cyclictest and the raw copy back)
  other    per job: the rest of the job (boot checks, labgrid, parsing)
  publish  `rtlab publish` of the run (a local influxd is started if needed)

Prints seconds, shares of the total and the ratio of a cold build to the
rest. --prebuilt uses Debian's kernels (no build stage). --new-commit
measures what CI pays for a typical kernel commit: a clone of the tree at a
fixed path (the runner's work tree, $RTLAB_CACHE/bench/linux) gets a new
commit changing one file that every configuration compiles
(kernel/time/timer.c), so the build stage is ccache-warm but not cached.
A benchmark, not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ["none", "voluntary", "preempt", "rt"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="qemu-x86_64")
    ap.add_argument("--tree", type=Path, help="kernel git tree (default: the pinned linux-source-6.12)")
    ap.add_argument("--prebuilt", action="store_true", help="Debian's prebuilt kernels: no build stage")
    ap.add_argument("--new-commit", action="store_true",
                    help="build a fresh one-file commit in a clone (what CI builds per commit)")
    ap.add_argument("--duration", type=int, default=3, help="cyclictest seconds (default 3)")
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()

    from rtlab import kernel as K
    from rtlab.plan.campaign import load_campaign
    from rtlab.run.runner import Progress, run_campaign
    from rtlab.targets.variants import load_variants

    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    camp = tmp / "campaign.yaml"
    camp.write_text(textwrap.dedent(f"""
        name: bench-pipeline
        budgets: {ROOT / 'budgets' / 'default.yaml'}
        boards: [{args.board}]
        variants: [{', '.join(VARIANTS)}]
        suites:
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: {args.duration}, priority: 90, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
    """))
    campaign = load_campaign(str(camp))
    arch = campaign.jobs()[0].board.arch
    quiet = lambda _msg: None  # noqa: E731

    t_start = time.monotonic()
    build_rows = []
    tree = None
    if not args.prebuilt:
        tree = args.tree or K.ensure_source(progress=quiet).path
        if args.new_commit:
            tree = new_commit(tree)
        variants = load_variants()
        for v in VARIANTS:
            t = time.monotonic()
            bk = K.build_kernel(tree, arch, K.with_base(arch, list(variants[v].fragments), args.board),
                                progress=quiet)
            cc = bk.build_json.get("ccache") or {}
            build_rows.append((v, time.monotonic() - t, bk.cached, bk.build_json.get("build_seconds", 0.0),
                               f"{cc.get('hits', '-')}/{cc.get('hits', 0) + cc.get('misses', 0) or '-'}",
                               bk.build_json.get("key")))
    t_build = time.monotonic() - t_start

    t = time.monotonic()
    run, run_dir = run_campaign(campaign, results_root=tmp / "results", progress=Progress(open("/dev/null", "w")),
                                kernel_tree=tree)
    t_run = time.monotonic() - t

    t = time.monotonic()
    if not args.no_publish:
        from rtlab.store.publish import publish_run
        try:
            publish_run(run_dir, progress=quiet)
        except Exception as e:  # noqa: BLE001
            print(f"publish failed: {type(e).__name__}: {e}")
    t_publish = time.monotonic() - t
    total = time.monotonic() - t_start

    boot = test = jobs = 0.0
    print(f"board {args.board} ({arch}), variants {', '.join(VARIANTS)}, cyclictest {args.duration} s, "
          f"kernel {'Debian prebuilt' if args.prebuilt else tree}")
    print(f"\n{'job':<12} {'verdict':<8} {'boot s':>7} {'test s':>7} {'other s':>8} {'job s':>7}")
    for jr in run.jobs:
        ev = [json.loads(x) for x in (run_dir / jr.board / jr.variant / "events.jsonl").read_text().splitlines()
              if x.strip()] if (run_dir / jr.board / jr.variant / "events.jsonl").exists() else []
        b = next((e["duration_s"] for e in ev if e.get("event") == "booted"), 0.0)
        s = sum(e["duration_s"] for e in ev if e.get("event") == "test" and e.get("test", "").startswith("test_suite"))
        boot, test, jobs = boot + b, test + s, jobs + jr.duration_s
        print(f"{jr.variant:<12} {jr.verdict.value:<8} {b:7.1f} {s:7.1f} {jr.duration_s - b - s:8.1f} {jr.duration_s:7.1f}")
    if build_rows:
        print(f"\n{'build':<12} {'cached':<7} {'now s':>7} {'built s':>8} {'ccache hits':>12}")
        for v, s, cached, cold, hits, _ in build_rows:
            print(f"{v:<12} {str(cached):<7} {s:7.1f} {cold:8.1f} {hits:>12}")
    other_run = t_run - jobs
    parts = {"build": t_build, "boot": boot, "test": test, "job other": jobs - boot - test,
             "run other (images, report)": other_run, "publish": t_publish}
    print(f"\ncommit -> verdict: {total:.1f} s (verdict {run.verdict.value})")
    for k, v in parts.items():
        print(f"  {k:<28} {v:8.1f} s  {100 * v / total:5.1f} %")
    cold = sum({key: c for _, _, _, c, _, key in build_rows}.values())  # each distinct kernel once
    if cold and not args.new_commit:
        rest = total - t_build
        print(f"  cold builds (distinct kernels) {cold:.0f} s = {cold / rest:.1f} x the rest of the pipeline "
              f"({rest:.0f} s); cold total {cold + rest:.0f} s")
    print(f"  boot / test = {boot / test:.2f}" if test else "")
    print(f"results: {run_dir}")
    return 0


def new_commit(source: Path) -> Path:
    """A new commit on top of *source*'s HEAD in the bench work tree."""
    import subprocess
    from rtlab.kernel import cache_root
    work = cache_root() / "bench" / "linux"
    git = lambda *a: subprocess.run(["git", "-C", str(work), *a], check=True,  # noqa: E731
                                    capture_output=True, text=True).stdout.strip()
    if not (work / ".git").exists():
        work.parent.mkdir(parents=True, exist_ok=True)
        print(f"cloning {source} to {work} (once)")
        subprocess.run(["git", "clone", "-q", str(source), str(work)], check=True)
    base = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    git("fetch", "-q", str(source), base)
    git("checkout", "-q", "-f", "--detach", base)
    timer = work / "kernel" / "time" / "timer.c"
    timer.write_text(timer.read_text() + f"/* bench_pipeline {time.time_ns()} */\n")
    git("-c", "user.name=bench", "-c", "user.email=bench@rtlab.invalid", "commit", "-q", "-am",
        "bench: a one-file commit")
    print(f"new commit {git('rev-parse', 'HEAD')[:12]} in {work} (kernel/time/timer.c)")
    return work


if __name__ == "__main__":
    sys.exit(main())
