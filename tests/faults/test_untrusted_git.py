"""Git on a kernel tree rtlab did not make runs nothing of the tree's own
configuration (rtlab/kernel/git.py): a tree whose .git/config names a
program git would run by itself (an fsmonitor, a clean filter, a textconv
driver, an include, a hooks directory) is refused before any git command
that could run it, naming the key; a hook in .git/hooks never runs on
rtlab's checkouts (bisect, paired boots); a tree owned by another user stays
refused by git (rtlab never marks it safe.directory)."""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from .conftest import rtlab


def tree_with_marker(tmp_path: Path) -> tuple[Path, Path]:
    """A minimal kernel-looking repository and the file its programs would write."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "Makefile").write_text("all:\n")
    (tree / "Kconfig").write_text("# nothing\n")
    (tree / ".gitattributes").write_text("* filter=evil diff=evil\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "tree"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True)
    (tree / "Makefile").write_text("all:\n\t@true\n")  # a change: `git diff` reads the work tree
    return tree, tmp_path / f"ran-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("key", ["core.fsmonitor", "filter.evil.clean", "diff.evil.textconv",
                                 "core.hooksPath", "include.path", "core.worktree"])
def test_a_tree_whose_git_config_names_a_program_is_refused_and_nothing_runs(tmp_path, key):
    tree, marker = tree_with_marker(tmp_path)
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat\n")
    script.chmod(0o755)
    value = {"core.hooksPath": str(tmp_path), "include.path": str(tmp_path / "more.cfg"),
             "core.worktree": "/"}.get(key, str(script))
    (tmp_path / "more.cfg").write_text(f"[core]\n\tfsmonitor = {script}\n")
    subprocess.run(["git", "-C", str(tree), "config", key, value], check=True)
    res = rtlab("kernel", "build", "--tree", tree, "--arch", "x86_64", "--variant", "rt", "--config-only",
                "--cache-dir", tmp_path / "kcache", timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{tree}/.git/config: {key.lower()}: " in res.stderr.lower(), res.stderr
    assert "does not run a tree's git configuration" in res.stderr
    assert not marker.exists(), "the tree's program ran"


def test_a_hook_of_the_tree_never_runs_on_rtlab_checkouts(tmp_path):
    from rtlab.verdict.bisect import _git, original_head, restore
    tree, marker = tree_with_marker(tmp_path)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", "Makefile"], check=True)
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q",
                    "--allow-empty", "-m", "second"], check=True)
    hook = tree / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    orig = original_head(tree)
    _git(tree, "checkout", "-q", "--detach", "HEAD~1")
    restore(tree, orig)
    assert not marker.exists(), "the tree's post-checkout hook ran"
    # the same checkout by plain git runs it: the hook is real
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", "HEAD~1"], check=True)
    assert marker.exists()


def test_the_ci_kernel_work_tree_is_moved_without_its_hooks(tmp_path):
    """ci/kernel-tree.sh (sourced by every CI job) moves the runner's kernel
    work tree with git: a hook planted in it never runs."""
    from .conftest import ROOT
    repo, marker = tree_with_marker(tmp_path)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "Makefile"], check=True)
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    hook = work / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q",
                    "--allow-empty", "-m", "moved away"], check=True)
    r = subprocess.run(["bash", "-c", f'. "{ROOT}/ci/kernel-tree.sh"'], capture_output=True, text=True,
                       env={**os.environ, "KERNEL_REPO": str(repo), "KERNEL_SHA": sha,
                            "RTLAB_CI_KERNEL_DIR": str(work), "RTLAB": "/bin/false"})
    assert r.returncode == 0, r.stdout + r.stderr
    head = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert head.strip() == sha
    assert not marker.exists(), "kernel-tree.sh ran the work tree's post-checkout hook"


def test_a_tree_owned_by_another_user_is_refused_not_trusted(tmp_path):
    tree, _ = tree_with_marker(tmp_path)
    subprocess.run(["chown", "-R", "65534:65534", str(tree)], check=True)
    res = rtlab("kernel", "build", "--tree", tree, "--arch", "x86_64", "--variant", "rt", "--config-only",
                "--cache-dir", tmp_path / "kcache", timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "dubious ownership" in res.stderr and "safe.directory" in res.stderr, res.stderr
