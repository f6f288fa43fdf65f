"""A kernel project for the GitLab CI test: a git repository made from Debian's
linux-source-6.12 (`rtlab kernel source`), with one branch per scenario.

    good       the pinned source, unchanged (same commit: its builds are cached)
    latency    + a late_initcall kthread that busy-waits 400 ms with preemption
               disabled every 900 ms: a real-time latency bug on any CPU
    no-rt      + PREEMPT_RT made to depend on an option nothing sets: the rt
               variant's kernel cannot be configured (build error)

Commits are made with fixed author, committer and dates, so the same branch
is the same commit on every run, and its kernel builds stay cached.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

LATENCY_BUG = r"""

/* rtlab CI test: a latency bug. A kthread that holds its CPU without
 * preemption for 400 ms, every 900 ms. */
#include <linux/kthread.h>

static int rtlab_hog_fn(void *unused)
{
	while (!kthread_should_stop()) {
		preempt_disable();
		mdelay(400);
		preempt_enable();
		msleep(500);
	}
	return 0;
}

static int __init rtlab_hog_init(void)
{
	kthread_run(rtlab_hog_fn, NULL, "rtlab_hog");
	return 0;
}
late_initcall(rtlab_hog_init);
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "rtlab ci", "GIT_AUTHOR_EMAIL": "ci@rtlab.invalid",
           "GIT_AUTHOR_DATE": "2026-11-21T00:00:00Z", "GIT_COMMITTER_NAME": "rtlab ci",
           "GIT_COMMITTER_EMAIL": "ci@rtlab.invalid", "GIT_COMMITTER_DATE": "2026-11-21T00:00:00Z"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def make_kernel_project(source: Path, dest: Path) -> dict[str, str]:
    """Clone `source` (the pinned tree) to `dest` and add the scenario
    branches; returns branch -> commit."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True)
    base = git(source, "rev-parse", "HEAD")
    git(dest, "checkout", "-q", "-B", "good", base)
    git(dest, "checkout", "-q", "-B", "latency", base)
    timer = dest / "kernel" / "time" / "timer.c"
    timer.write_text(timer.read_text() + LATENCY_BUG)
    git(dest, "commit", "-q", "-am", "timers: add a housekeeping thread (latency bug for the rtlab CI test)")
    git(dest, "checkout", "-q", "-B", "no-rt", base)
    kc = dest / "kernel" / "Kconfig.preempt"
    text = kc.read_text()
    old = "\tdepends on EXPERT && ARCH_SUPPORTS_RT\n"
    assert old in text
    kc.write_text(text.replace(old, "\tdepends on EXPERT && ARCH_SUPPORTS_RT && BROKEN\n", 1))
    git(dest, "commit", "-q", "-am", "sched: make PREEMPT_RT depend on BROKEN (rtlab CI test)")
    git(dest, "checkout", "-q", "good")
    return {b: git(dest, "rev-parse", b) for b in ("good", "latency", "no-rt")}


def make_bisect_history(source: Path, dest: Path, n: int = 8, bug_at: int = 4) -> dict:
    """Branch `history` in `dest` (a clone of `source`): n commits on the
    pinned source, one-file changes (a note under Documentation/, never
    compiled: ccache serves every build), commit `bug_at` adds the latency
    bug. Returns base, the commits (oldest first) and the bug's commit."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True)
    base = git(source, "rev-parse", "HEAD")
    git(dest, "checkout", "-q", "-B", "history", base)
    commits = []
    for i in range(1, n + 1):
        if i == bug_at:
            timer = dest / "kernel" / "time" / "timer.c"
            timer.write_text(timer.read_text() + LATENCY_BUG)
            git(dest, "commit", "-q", "-am", "timers: add a housekeeping thread (the latency bug)")
        else:
            note = dest / "Documentation" / "rtlab-history" / f"note-{i}.txt"
            note.parent.mkdir(exist_ok=True)
            note.write_text(f"note {i}\n")
            git(dest, "add", "-f", str(note.relative_to(dest)))  # the source tree ignores new paths
            git(dest, "commit", "-q", "-m", f"docs: note {i}")
        commits.append(git(dest, "rev-parse", "HEAD"))
    return {"base": base, "commits": commits, "bug": commits[bug_at - 1]}


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(make_kernel_project(Path(sys.argv[1]), Path(sys.argv[2])), indent=2))
