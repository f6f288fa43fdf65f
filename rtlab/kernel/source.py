"""The source tree: Debian's linux-source-6.12 as a git repository with one commit."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..core.fsutil import atomic_write as _atomic_write
from ..core.fsutil import locked as _locked
from ..core.fsutil import sha256_file
from .cache import kernel_cache
from .errors import KernelError
from .git import GIT_IDENT, _git
from .progress import Progress, _fmt_s, _quiet


#: the kernel source rtlab builds when no tree is given (bookworm-security).
#: `apt-cache policy linux-source-6.12` lists what apt offers; the security
#: archive kept 6.12.107 .. 6.12.117 on 2026-11-21, snapshot.debian.org keeps
#: every upload. Bumping it changes the tree's commit, so every build reruns.
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_VERSION = "6.12.117-1~deb12u1"


@dataclass(frozen=True)
class SourceTree:
    path: Path
    package: str
    version: str
    commit: str
    deb_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "package": self.package, "version": self.version,
                "commit": self.commit, "deb_sha256": self.deb_sha256}


def _deb_name(package: str, version: str) -> str:
    # apt-get download's own naming (epoch colon escaped)
    return f"{package}_{version.replace(':', '%3a')}_all.deb"


def _download_source(package: str, version: str, debs: Path, say: Progress) -> tuple[Path, str]:
    """The .deb (apt-get download checks it against the signed index) and its sha256."""
    debs.mkdir(parents=True, exist_ok=True)
    deb = debs / _deb_name(package, version)
    side = deb.with_name(deb.name + ".sha256")
    if deb.is_file() and side.is_file():
        digest = side.read_text().strip()
        if deb.stat().st_size > 0 and sha256_file(deb) == digest:
            return deb, digest
    say(f"kernel source: apt-get download {package}={version}")
    with tempfile.TemporaryDirectory(dir=debs, prefix=".dl-") as tmp:
        res = subprocess.run(["apt-get", "download", "-q", f"{package}={version}"], cwd=tmp,
                             capture_output=True, text=True)
        got = list(Path(tmp).glob("*.deb"))
        if res.returncode != 0 or len(got) != 1:
            said = (res.stderr or res.stdout).strip().splitlines()
            raise KernelError(
                f"apt-get download {package}={version} failed: {said[-1] if said else 'no .deb'}; "
                f"`apt-cache policy {package}` lists the versions apt offers "
                f"(bookworm-security must be in the sources), snapshot.debian.org has all")
        os.replace(got[0], deb)
    digest = sha256_file(deb)
    side.write_text(digest + "\n")
    return deb, digest


def _unpack_source(deb: Path, package: str, dest: Path, say: Progress) -> int:
    """Unpack ``usr/src/<package>.tar.xz`` from *deb* into *dest* (top dir
    stripped); returns the tarball's mtime (the generated commit's date)."""
    member = f"./usr/src/{package}.tar.xz"
    say(f"kernel source: unpacking {member} from {deb.name}")
    dest.mkdir(parents=True)
    fsys = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    mtime = None
    try:
        with tarfile.open(fileobj=fsys.stdout, mode="r|") as outer:
            for info in outer:
                if info.name != member:
                    continue
                mtime = int(info.mtime)
                src = outer.extractfile(info)
                untar = subprocess.Popen(["nice", "-n", "10", "tar", "-xJ", "--strip-components=1",
                                          "--no-same-owner", "-C", str(dest)],
                                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    untar.stdin.write(chunk)
                untar.stdin.close()
                err = untar.stderr.read().decode(errors="replace")
                if untar.wait() != 0:
                    raise KernelError(f"unpacking {member} of {deb}: tar: {err.strip()}")
                break
    finally:
        fsys.stdout.close()
        fsys.wait()
    if mtime is None:
        raise KernelError(f"{deb}: no {member} inside")
    if not (dest / "Makefile").is_file() or not (dest / "scripts" / "kconfig" / "merge_config.sh").is_file():
        raise KernelError(f"{deb}: {member} does not hold a kernel tree (no Makefile / merge_config.sh)")
    return mtime


def ensure_source(version: str = SOURCE_VERSION, *, package: str = SOURCE_PACKAGE,
                  cache_dir: Optional[Path] = None, progress: Optional[Progress] = print) -> SourceTree:
    """The pinned kernel source as a git tree with one commit (cached).

    The commit's author, committer and date are fixed (date = the tarball's
    mtime in the package), so the same package gives the same SHA anywhere.
    """
    say = progress or _quiet
    cache = Path(cache_dir) if cache_dir is not None else kernel_cache()
    src = cache / "src"
    name = f"{package}_{version.replace(':', '%3a').replace('~', '_')}"
    tree = src / name
    state = src / f"{name}.json"

    def cached() -> Optional[SourceTree]:
        try:
            d = json.loads(state.read_text())
        except (OSError, ValueError):
            return None
        if not (tree / ".git").is_dir():
            return None
        head = _git(tree, "rev-parse", "HEAD", check=False)
        if head.returncode != 0 or head.stdout.strip() != d.get("commit"):
            return None
        return SourceTree(tree, package, version, d["commit"], d.get("deb_sha256", ""))

    hit = cached()
    if hit is not None:
        return hit
    with _locked(src / ".lock"):
        hit = cached()
        if hit is not None:
            return hit
        t0 = time.monotonic()
        deb, digest = _download_source(package, version, cache / "debs", say)
        if tree.exists():
            say(f"kernel source: removing incomplete {tree}")
            shutil.rmtree(tree)
        tmp = Path(tempfile.mkdtemp(dir=src, prefix=f".{name}-"))
        try:
            mtime = _unpack_source(deb, package, tmp / "tree", say)
            say(f"kernel source: git init + commit of {sum(1 for _ in tmp.rglob('*'))} files")
            work = tmp / "tree"
            _git(work, "init", "-q")
            # -f: the tarball's files are the tree, whatever its .gitignore says
            subprocess.run(["nice", "-n", "10", "git", "-C", str(work), "add", "-A", "-f"], check=True,
                           capture_output=True)
            date = f"@{mtime} +0000"
            _git(work, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m",
                 f"{package} {version}\n\nUnpacked from {deb.name} (sha256 {digest})\n"
                 f"by `rtlab kernel source`; Debian's patches are applied.",
                 env={**GIT_IDENT, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
            tag = "debian/" + re.sub(r"[^A-Za-z0-9._+-]", "_", version)
            _git(work, "tag", tag)
            commit = _git(work, "rev-parse", "HEAD").stdout.strip()
            os.replace(work, tree)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _atomic_write(state, (json.dumps({"package": package, "version": version, "commit": commit,
                                          "deb": deb.name, "deb_sha256": digest, "tag": tag},
                                         indent=2) + "\n").encode())
        say(f"kernel source: {tree} at {commit[:12]} ({tag}) in {_fmt_s(time.monotonic() - t0)}")
        return SourceTree(tree, package, version, commit, digest)
