"""The sandbox a kernel tree's code runs in (bubblewrap).

A kernel tree from a merge request is code: its Makefiles, Kconfig scripts
and ``scripts/kconfig/merge_config.sh`` run when it is configured and built.
Every ``make`` and script of a build therefore runs in a
:class:`BuildSandbox`, never with rtlab's own rights:

* a user namespace (uid 65534 inside, no capabilities anywhere) with new
  pid, network, IPC, UTS and cgroup namespaces: no network at all, no other
  process visible, and every process the build starts ends with it (the
  build's command is the namespace's pid 1: when it exits, the kernel ends
  the rest of the namespace), or with rtlab (``--die-with-parent``);
* a file system of its own: ``/usr`` (with the usual ``/bin``, ``/lib``
  links) and the few files of ``/etc`` a compiler needs, read-only; the tree
  read-only; the build's own output directory (``O=``) read-write; a
  private ``/tmp``; the config fragments and the shared compiler cache as
  the build needs them. Nothing else exists in it: not the runner's home,
  the kernel cache, rtlab's checkout (its budgets and env files), the
  store's or LAVA's files, the labgrid coordinator's sockets;
* an environment of its own: only what the build is given
  (:data:`BASE_ENV` and the make variables), never the caller's, which
  holds the store's and LAVA's credentials and the CI trigger's token.

Why bubblewrap: Debian ships it (``bubblewrap``), it is what Flatpak
confines applications with, it needs no daemon, no root and no image, and
one command line states the whole sandbox (what is visible, what is
writable), so the sandbox is reviewable in :meth:`BuildSandbox.argv`.
``unshare`` alone would need a mount set-up script of ours, and
``systemd-run`` a systemd that is not PID 1 on every runner.

The compiler cache is shared between builds: one a tree wrote to would
serve its objects to the next build, the baseline's included. So a tree's
build reads the shared cache and writes nothing to it
(``CCACHE_READONLY``: a miss compiles, uncached); only the lab's own source
(the pinned Debian linux-source, or a tree the operator vouches for with
``rtlab kernel build --trusted-tree``) fills it. See docs/design/security.md.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from ..errors import RtlabError

#: the user a build runs as inside its user namespace (nobody)
SANDBOX_UID = 65534
#: what every build's environment holds (then the build's own variables).
#: The same whoever calls: ccache hashes LANG and LC_ALL into every key, so
#: a caller's locale would otherwise split the compiler cache by caller
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "HOME": "/tmp",
            "TMPDIR": "/tmp", "SHELL": "/bin/sh"}
#: /etc files a compiler and the kernel's build scripts read (the dynamic
#: linker's cache, Debian's alternatives for cc/awk/..., perl's and
#: python's site config, the time zone); the rest of /etc is not there
ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "perl", "python3",
       "python3.11", "passwd", "group", "nsswitch.conf")


class SandboxUnavailable(RtlabError):
    """This machine cannot confine a build: the lab's problem (INFRA), never the commit's."""


def _ambient_caps() -> bool:
    """Does this process hold ambient capabilities (the lab runner's user:
    CAP_SYS_NICE and CAP_IPC_LOCK for the local board, docs/runner.md)?"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapAmb:"):
                return int(line.split()[1], 16) != 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def drop_caps() -> list[str]:
    """The prefix that leaves a non-root caller's capabilities behind: a
    build never gets the runner's CAP_SYS_NICE, and bwrap refuses to start
    with capabilities it was not installed setuid for."""
    if os.geteuid() != 0 and _ambient_caps():
        return ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--"]
    return []


def bwrap() -> str:
    exe = shutil.which("bwrap")
    if exe is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: kernel trees are only built confined; "
                                 "install it (apt-get install bubblewrap, env/apt-packages.txt)")
    return exe


@dataclass(frozen=True)
class BuildSandbox:
    """What one build may see and write. Paths keep their names inside."""

    #: the kernel tree: read-only
    tree: Path
    #: the build's output directory (make's O=): the one writable place
    out: Path
    #: more read-only paths (config fragments, the shared compiler cache)
    readable: tuple[Path, ...] = ()
    #: more writable paths: only the shared compiler cache, for the lab's own source
    writable: tuple[Path, ...] = ()
    #: the environment inside (BASE_ENV underneath)
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self, cmd: Sequence[str], cwd: Optional[Path] = None) -> list[str]:
        """bwrap's command line running *cmd* in the sandbox."""
        a = [*drop_caps(), bwrap(), "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
             "--die-with-parent", "--new-session", "--hostname", "rtlab-build",
             # the build's command is the namespace's pid 1: when it exits, the kernel ends every
             # process left in the namespace, and its CPU time reaches rtlab (bwrap's own reaper
             # would swallow it: build.json's make_cpu_seconds)
             "--as-pid-1",
             "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
            target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
            if target is not None:
                a += ["--symlink", target, f"/{link}"]
            elif os.path.isdir(f"/{link}"):
                a += ["--ro-bind", f"/{link}", f"/{link}"]
        for name in ETC:
            a += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        a += ["--ro-bind", str(self.tree), str(self.tree)]
        for p in self.readable:
            a += ["--ro-bind", str(p), str(p)]
        for p in (self.out, *self.writable):
            a += ["--bind", str(p), str(p)]
        # the directories bwrap made for the mount points above stay read-only
        a += ["--remount-ro", "/", "--clearenv"]
        for k, v in {**BASE_ENV, **self.env}.items():
            a += ["--setenv", k, v]
        a += ["--chdir", str(cwd or self.out), "--", *cmd]
        return a


def probe() -> Optional[str]:
    """Why this machine cannot run a build sandbox, or None when it can
    (`rtlab doctor`): bwrap installed, and a user namespace for this user."""
    try:
        exe = bwrap()
    except SandboxUnavailable as e:
        return str(e)
    try:
        r = subprocess.run([*drop_caps(), exe, "--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                            "--symlink", "usr/lib64", "/lib64", "--", "/usr/bin/true"],
                           capture_output=True, text=True, timeout=30, env=dict(BASE_ENV))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not start a sandbox: {e}"
    if r.returncode != 0:
        return (f"bwrap could not start a sandbox ({r.stderr.strip()[:200]}): user namespaces must be "
                f"allowed for this user (sysctl kernel.unprivileged_userns_clone=1, "
                f"user.max_user_namespaces > 0)")
    return None
