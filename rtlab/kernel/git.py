"""git in a kernel tree rtlab did not make: reads never take the index lock,
and nothing of the repository's own configuration runs.

A repository's ``.git/config`` can name programs git runs by itself on a
read or a checkout: ``core.fsmonitor`` on `git status`/`diff`, hooks on
`checkout`/`bisect`, clean and smudge filters and textconv drivers on
`diff`, an external diff, ``core.sshCommand`` on a fetch... A tree from a
merge request's pipeline (or handed to `rtlab kernel build --tree`) may
bring such a config, so:

* every git command rtlab runs on a kernel tree turns the first two off on
  its command line (``-c core.fsmonitor=false -c core.hooksPath=/dev/null``:
  command-line configuration wins over the repository's), and never runs
  an external diff or textconv (``--no-ext-diff``, ``--no-textconv``);
* before rtlab reads a tree, :func:`check_repository_config` refuses one
  whose own configuration (``--local`` and ``--worktree``) names any other
  program or path git would act on (:data:`REFUSED_KEYS`), naming the key;
* ``safe.directory`` is never set: a tree owned by another user stays
  refused by git itself ("dubious ownership"), said in the error.

The sandboxed build sees the tree read-only (rtlab.kernel.sandbox), so a
build cannot plant a hook or a config for the next git command either.
"""
from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from ..errors import InputError
from .errors import KernelError


#: identity of the generated source commit and of the kernel's build banner
GIT_IDENT = {"GIT_AUTHOR_NAME": "rtlab", "GIT_AUTHOR_EMAIL": "rtlab@localhost",
             "GIT_COMMITTER_NAME": "rtlab", "GIT_COMMITTER_EMAIL": "rtlab@localhost"}

#: on every git command run on a kernel tree: no fsmonitor, no hooks
SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")

#: a repository's own configuration keys (lower case, git's glob) that make
#: git run a program, read another repository or reach elsewhere: a tree
#: with any of them is refused (git-config(1))
REFUSED_KEYS = (
    "core.fsmonitor", "core.hookspath", "core.sshcommand", "core.gitproxy", "core.askpass", "core.editor",
    "core.pager", "core.worktree", "core.alternaterefscommand", "core.attributesfile", "core.excludesfile",
    "sequence.editor", "diff.external", "diff.*.command", "diff.*.textconv", "filter.*", "merge.*.driver",
    "mergetool.*", "difftool.*", "gpg.program", "gpg.*.program", "credential.*", "include.*", "includeif.*",
    "alias.*", "uploadpack.*", "receive.*", "remote.*.uploadpack", "remote.*.receivepack", "remote.*.vcs",
    "remote.*.proxy", "http.*", "url.*", "protocol.*", "submodule.*", "ssh.*", "safe.*", "trace2.*",
    "pager.*", "instaweb.*", "web.browser", "browser.*", "man.*", "sendemail.*", "imap.*",
)


def _env(env: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    # GIT_OPTIONAL_LOCKS=0: reading the state (diff, describe --dirty) never
    # takes index.lock, so concurrent builds of one tree do not trip on it;
    # no prompt for credentials, ever
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", **(env or {})}


def git_argv(tree: Path, *args: str) -> list[str]:
    """The command line of `git ARGS` in *tree*, with nothing of the tree's configuration run."""
    return ["git", *SAFE_CONFIG, "-C", str(tree), *args]


def _git(tree: Path, *args: str, check: bool = True, env: Optional[Mapping[str, str]] = None,
         text: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(git_argv(tree, *args), capture_output=True, text=text, env=_env(env))
    if check and res.returncode != 0:
        err = res.stderr if text else res.stderr.decode(errors="replace")
        raise KernelError(f"git {' '.join(args)} in {tree}: {err.strip()}")
    return res


def refused_key(name: str) -> bool:
    n = name.lower()
    return any(fnmatch.fnmatchcase(n, pat) for pat in REFUSED_KEYS)


def check_repository_config(tree: Path) -> None:
    """InputError naming the first key of *tree*'s own git configuration
    that would make git run a program or act elsewhere (REFUSED_KEYS).
    Reading the configuration runs nothing (and follows no include)."""
    keys: list[str] = []
    for scope in ("--local", "--worktree"):
        r = subprocess.run(git_argv(tree, "config", scope, "--no-includes", "--list", "--name-only"),
                           capture_output=True, text=True, env=_env())
        if r.returncode == 0:
            keys += r.stdout.splitlines()
        elif "dubious ownership" in r.stderr:
            raise InputError(tree, "is owned by another user, and git refuses it (dubious ownership): "
                                   "rtlab never marks a tree safe.directory; build a tree this user owns")
    for key in keys:
        if refused_key(key):
            shown = key if len(key) <= 100 and key.replace(".", "").replace("-", "").replace("_", "").isalnum() \
                else "a key"
            raise InputError(f"{tree}/.git/config", f"{shown}: a repository whose own configuration names a "
                             f"program or another place for git is not read (rtlab does not run a tree's git "
                             f"configuration); remove it, or clone the tree afresh")
