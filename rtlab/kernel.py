"""Kernels built from source, from config fragments (``rtlab kernel``).

Two things live here:

* :func:`ensure_source` turns Debian's ``linux-source-6.12`` package (pinned,
  ``apt-get download``, nothing installed) into a git repository with one
  commit, so there is a real kernel tree with a commit SHA to build from.
* :func:`build_kernel` builds a tree for an arch from fragments in
  ``kernel-configs/fragments/``: ``make tinyconfig``, the kernel's own
  ``scripts/kconfig/merge_config.sh -m`` over base + preemption model +
  options, ``make olddefconfig``, then a check that **every option the
  fragments ask for survived** olddefconfig (a dropped ``PREEMPT_RT`` is an
  error naming the option, the fragment and what became of it, never a
  silently different kernel). Then ``nice make -j2`` with ccache.

Builds are cached by (tree commit + hash of uncommitted changes, arch,
fragments' contents, compiler): the same inputs return the recorded build at
once, without running make. :func:`ensure_built_kernel` combines both for the
image code: a kernel from the pinned source tree, built once.

Cache layout (``$RTLAB_CACHE/kernel``, default ``~/.cache/rtlab/kernel``)::

    debs/                 downloaded linux-source .debs
    src/linux-source-6.12_<version>/      the git tree (+ .json beside it)
    builds/<arch>/<key16>/  bzImage|Image, .config, build.json, build.log
    builds/<arch>/<key16>/obj/            O= objects when the tree is read-only
    <tree>/.rtlab-build-<key16>/          O= objects otherwise (see _object_dir);
                          removed after every build, failed or not
    ccache/               compiler cache (unless $CCACHE_DIR is set), shared by
                          builds into any cache_dir
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import ROOT
from . import arch as _arch
from .arch import Arch
from .errors import InputError, RtlabError

Progress = Callable[[str], Any]

#: the kernel source rtlab builds when no tree is given (bookworm-security).
#: `apt-cache policy linux-source-6.12` lists what apt offers; the security
#: archive kept 6.12.107 .. 6.12.117 on 2026-11-21, snapshot.debian.org keeps
#: every upload. Bumping it changes the tree's commit, so every build reruns.
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_VERSION = "6.12.117-1~deb12u1"

FRAGMENTS_DIR = ROOT / "kernel-configs" / "fragments"

#: bump when the build changes its output for the same inputs (part of the key)
FORMAT = 1

#: seconds between "last line of make" progress lines
TAIL_EVERY_S = 10.0

#: identity of the generated source commit and of the kernel's build banner
GIT_IDENT = {"GIT_AUTHOR_NAME": "rtlab", "GIT_AUTHOR_EMAIL": "rtlab@localhost",
             "GIT_COMMITTER_NAME": "rtlab", "GIT_COMMITTER_EMAIL": "rtlab@localhost"}


#: the arches a kernel builds for (rtlab/arch.py: ARCH=, cross compiler, image)
ARCHES = _arch.ARCHES


class KernelError(RtlabError):
    """A kernel could not be fetched, configured or built; says what and where."""


@dataclass(frozen=True)
class Dropped:
    """A requested option that ``make olddefconfig`` did not keep."""

    option: str            # CONFIG_FOO
    wanted: str            # y, m, n ("is not set") or a value
    got: Optional[str]     # same forms, None = absent from .config (not visible)
    fragment: str          # fragment name that asked for it (the last one that did)
    line: int
    hint: str = ""         # Kconfig dependencies, when known

    def describe(self) -> str:
        if self.got is None:
            got = "left it out of .config (invisible: unmet dependencies, or no such option)"
        else:
            got = f"made it {_show(self.got)}"
        msg = f"{self.option}: {self.fragment}:{self.line} asks for {_show(self.wanted)}, olddefconfig {got}"
        return msg + (f"\n      {self.hint}" if self.hint else "")


def _show(v: str) -> str:
    return "'is not set'" if v == "n" else v


class KernelConfigError(KernelError):
    """Requested options did not survive ``make olddefconfig``."""

    def __init__(self, dropped: Sequence[Dropped], arch: str, config: Optional[Path] = None,
                 log: Optional[Path] = None):
        self.dropped = list(dropped)
        where = []
        if config:
            where.append(f"resulting .config: {config}")
        if log:
            where.append(f"log: {log}")
        n = len(self.dropped)
        super().__init__(
            f"kernel config for {arch}: {n} requested option{'s' * (n != 1)} did not survive "
            f"`make olddefconfig`:\n" + "\n".join(f"  {d.describe()}" for d in self.dropped)
            + ("\n  " + "; ".join(where) if where else ""))


# --------------------------------------------------------------------------
# Cache locations and small helpers
# --------------------------------------------------------------------------

def cache_root() -> Path:
    """``$RTLAB_CACHE`` or ``~/.cache/rtlab``."""
    env = os.environ.get("RTLAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rtlab"


def kernel_cache() -> Path:
    return cache_root() / "kernel"


from .fsutil import atomic_write as _atomic_write  # noqa: E402
from .fsutil import locked as _locked  # noqa: E402
from .fsutil import try_locked as _try_locked  # noqa: E402
from .fsutil import sha256_file  # noqa: E402,F401 - also used by callers


def _quiet(_: str) -> None:
    pass


def _git(tree: Path, *args: str, check: bool = True, env: Optional[Mapping[str, str]] = None,
         text: bool = True) -> subprocess.CompletedProcess:
    # GIT_OPTIONAL_LOCKS=0: reading the state (diff, describe --dirty) never
    # takes index.lock, so concurrent builds of one tree do not trip on it
    res = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=text,
                         env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", **(env or {})})
    if check and res.returncode != 0:
        err = res.stderr if text else res.stderr.decode(errors="replace")
        raise KernelError(f"git {' '.join(args)} in {tree}: {err.strip()}")
    return res


def _fmt_s(s: float) -> str:
    m, s = divmod(int(round(s)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


# --------------------------------------------------------------------------
# The source tree: linux-source-6.12 as a git repository with one commit
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Tree state: commit + uncommitted changes
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class TreeState:
    path: Path
    commit: str
    describe: str
    #: sha256 over `git diff HEAD` and untracked files; None when clean
    dirty_hash: Optional[str] = None
    dirty_files: tuple[str, ...] = ()
    #: committer date of HEAD, unix seconds (the build's timestamp)
    commit_time: int = 0


def tree_state(tree: Path) -> TreeState:
    tree = Path(tree).resolve()
    if not (tree / "Makefile").is_file() or not (tree / "Kconfig").is_file():
        raise InputError(tree, "not a kernel source tree (no Makefile/Kconfig)")
    top = _git(tree, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0:
        raise InputError(tree, "not a git repository: builds are keyed by commit "
                               "(`rtlab kernel source` makes one from Debian's linux-source)")
    if Path(top.stdout.strip()).resolve() != tree:
        raise InputError(tree, f"is inside the git repository {top.stdout.strip()}, not its top")
    for f in (".config", "include/config"):
        if (tree / f).exists():
            raise InputError(tree, f"has an in-tree build ({f}); out-of-tree builds (O=) refuse "
                                   f"a configured source tree: run `make mrproper` there")
    commit = _git(tree, "rev-parse", "HEAD").stdout.strip()
    describe = _git(tree, "describe", "--tags", "--always", "--dirty").stdout.strip()
    ctime = int(_git(tree, "log", "-1", "--format=%ct").stdout.strip() or 0)
    # tracked changes (staged or not) against HEAD, binary-safe, then untracked files
    diff = _git(tree, "diff", "--binary", "--no-ext-diff", "HEAD", text=False).stdout
    changed = [p for p in _git(tree, "diff", "--name-only", "-z", "HEAD").stdout.split("\0") if p]
    untracked = sorted(p for p in _git(tree, "ls-files", "-z", "--others", "--exclude-standard")
                       .stdout.split("\0") if p)
    if not diff and not untracked:
        return TreeState(tree, commit, describe, None, (), ctime)
    h = hashlib.sha256(diff)
    for p in untracked:
        f = tree / p
        h.update(b"\0untracked\0" + p.encode() + b"\0")
        if f.is_symlink():
            h.update(b"link:" + os.readlink(f).encode())
        elif f.is_file():
            h.update(sha256_file(f).encode())
    return TreeState(tree, commit, describe, h.hexdigest(), tuple(sorted(set(changed) | set(untracked))), ctime)


# --------------------------------------------------------------------------
# Fragments and the "option survived" check
# --------------------------------------------------------------------------

_SET_RE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET_RE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse_config(text: str, source: str = "<config>", strict: bool = False) -> dict[str, tuple[str, int]]:
    """``CONFIG_X`` -> (value, line number). Values: ``y``, ``m``, ``n`` (for
    ``# CONFIG_X is not set``) or the literal right-hand side (``"str"``, ``42``,
    ``0x10``). With *strict*, any other non-comment line is an error."""
    out: dict[str, tuple[str, int]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _SET_RE.match(line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), n)
            continue
        m = _UNSET_RE.match(line)
        if m:
            out[m.group(1)] = ("n", n)
            continue
        if strict and line and not line.startswith("#"):
            raise InputError(source, f"line {n}: not a Kconfig assignment "
                                     f"(CONFIG_X=y, CONFIG_X=\"v\" or # CONFIG_X is not set): {raw!r}")
        if strict and line.startswith("#") and re.match(r"^#\s*CONFIG_\w+\s+is not set", line):
            raise InputError(source, f"line {n}: write exactly '# CONFIG_X is not set': {raw!r}")
    return out


@dataclass(frozen=True)
class Fragment:
    name: str
    path: Path
    sha256: str
    options: dict[str, tuple[str, int]] = field(compare=False, repr=False, default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "sha256": self.sha256}


def fragment_path(name: str, fragments_dir: Optional[Path] = None) -> Path:
    return Path(fragments_dir or FRAGMENTS_DIR) / f"{name}.config"


def load_fragment(ref: Union[str, Path], fragments_dir: Optional[Path] = None) -> Fragment:
    """A fragment by name (``preempt-rt`` -> kernel-configs/fragments/preempt-rt.config)
    or by path (anything containing a ``/`` or ending in ``.config``)."""
    s = str(ref)
    if "/" in s or s.endswith(".config"):
        path = Path(s)
        name = path.name[:-len(".config")] if path.name.endswith(".config") else path.name
    else:
        path = fragment_path(s, fragments_dir)
        name = s
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        known = sorted(p.stem for p in Path(fragments_dir or FRAGMENTS_DIR).glob("*.config"))
        raise InputError(path, f"no such config fragment (known: {', '.join(known) or 'none'})") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror}") from None
    opts = parse_config(data.decode(errors="replace"), str(path), strict=True)
    if not opts:
        raise InputError(path, "config fragment sets no option")
    return Fragment(name, path, hashlib.sha256(data).hexdigest(), opts)


def requested_options(fragments: Sequence[Fragment]) -> dict[str, tuple[str, str, int]]:
    """Option -> (value, fragment name, line): later fragments win, as in merge_config.sh."""
    req: dict[str, tuple[str, str, int]] = {}
    for frag in fragments:
        for opt, (val, line) in frag.options.items():
            req[opt] = (val, frag.name, line)
    return req


def _same_value(wanted: str, got: Optional[str]) -> bool:
    if wanted == "n":
        return got in (None, "n")
    if got is None:
        return False
    if wanted == got:
        return True
    # numbers: 0x10 == 0x0010, 010 == 10 as Kconfig writes them
    try:
        return int(wanted, 0) == int(got, 0)
    except ValueError:
        return False


def check_options(requested: Mapping[str, tuple[str, str, int]], config_text: str) -> list[Dropped]:
    """Every requested option whose final value differs (``n`` is satisfied by
    "is not set" or by the option being absent: invisible options are off)."""
    final = parse_config(config_text)
    dropped = []
    for opt, (wanted, frag, line) in requested.items():
        got = final.get(opt, (None, 0))[0]
        if not _same_value(wanted, got):
            dropped.append(Dropped(opt, wanted, got, frag, line))
    return dropped


def kconfig_hint(tree: Path, make_arch: str, option: str) -> str:
    """Where *option* is defined and what it depends on (best effort, for errors)."""
    name = option[len("CONFIG_"):]
    srcarch = {"x86_64": "x86", "i386": "x86"}.get(make_arch, make_arch)
    rx = re.compile(rf"^\s*(?:menu)?config\s+{re.escape(name)}\s*$")
    found = []
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", "Documentation", "tools", "debian")]
        elif rel == "arch":
            dirnames[:] = [d for d in dirnames if d == srcarch]
        for fn in filenames:
            if not fn.startswith("Kconfig"):
                continue
            path = Path(dirpath) / fn
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for i, l in enumerate(lines):
                if rx.match(l):
                    deps = []
                    for nxt in lines[i + 1:]:
                        if re.match(r"^\s*(config|menuconfig|choice|endchoice|menu|endmenu|if|endif|source|comment)\b", nxt):
                            break
                        m = re.match(r"^\s*depends on\s+(.*)$", nxt)
                        if m:
                            deps.append(m.group(1).strip())
                    where = f"{os.path.relpath(path, tree)}:{i + 1}"
                    found.append(f"{where}" + (f" depends on {' && '.join(deps)}" if deps else ""))
    if not found:
        return f"no `config {name}` in this tree's Kconfig files for {srcarch} (misspelt, or not in this kernel)"
    return "Kconfig: " + "; ".join(found[:3])


# --------------------------------------------------------------------------
# Cache key and builds
# --------------------------------------------------------------------------

def fragments_digest(fragments: Sequence[Fragment]) -> str:
    """Hash of the fragments' contents in merge order."""
    return hashlib.sha256("\n".join(f.sha256 for f in fragments).encode()).hexdigest()


def cache_key(commit: str, dirty_hash: Optional[str], arch: str, fragments_sha256: str,
              toolchain: str = "") -> str:
    return hashlib.sha256(json.dumps({
        "format": FORMAT, "commit": commit, "dirty": dirty_hash, "arch": arch,
        "fragments": fragments_sha256, "toolchain": toolchain,
    }, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class BuiltKernel:
    #: the boot image (bzImage / Image)
    path: Path
    #: its .config
    config: Path
    #: `make -s kernelrelease` (= `uname -r` on the board)
    release: str
    #: build.json as a dict
    build_json: dict
    #: the build directory in the cache
    dir: Path = Path()
    #: True when the cache answered and make did not run
    cached: bool = False

    @property
    def preempt(self) -> str:
        return self.build_json.get("preempt", "")

    @property
    def uname_v(self) -> str:
        return self.build_json.get("uname_v", "")


def _toolchain(cc: str) -> str:
    try:
        res = subprocess.run([cc, "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        raise KernelError(f"{cc} not found: install the compiler (env/apt-packages.txt)") from None
    return res.stdout.splitlines()[0].strip() if res.returncode == 0 and res.stdout else cc


def _load_build(bdir: Path, image_name: str) -> Optional[BuiltKernel]:
    try:
        info = json.loads((bdir / "build.json").read_text())
    except (OSError, ValueError):
        return None
    image, config = bdir / image_name, bdir / ".config"
    if not image.is_file() or not config.is_file():
        return None
    if info.get("image", {}).get("sha256") != sha256_file(image):
        return None
    _touch(bdir)
    return BuiltKernel(image, config, info.get("release", ""), info, bdir, cached=True)


#: a build's last use (built or answered from the cache): what prune_builds sorts by
LAST_USED = "last-used"


def _touch(bdir: Path) -> None:
    try:
        (bdir / LAST_USED).touch()
    except OSError:
        pass  # a read-only cache still answers


def _last_used(bdir: Path) -> float:
    for f in (LAST_USED, "build.json", "build.log"):
        try:
            return (bdir / f).stat().st_mtime
        except OSError:
            continue
    return bdir.stat().st_mtime


def _dir_bytes(d: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def prune_builds(cache_dir: Optional[Path] = None, *, max_bytes: int = 2 << 30, older_than_s: float = 30 * 86400,
                 in_use_s: float = 3600, now: Optional[float] = None) -> dict[str, Any]:
    """Free the kernel build cache (``builds/`` and ``configs/``), least
    recently used first, as a lab runner needs over months of commits (a
    build keeps ~6 MB: image, .config, log).

    Removed: failed or unfinished builds (no valid build.json); builds not
    used for *older_than_s*; then the least recently used until the rest
    fits in *max_bytes*. Never removed: anything used within *in_use_s* (a
    pipeline's test jobs still boot what its build jobs built), and a build
    whose lock another process holds (it is being built). The compiler
    cache has its own bound (CCACHE_MAXSIZE, 5G by default).
    """
    cache = Path(cache_dir) if cache_dir is not None else kernel_cache()
    now = time.time() if now is None else now
    entries: list[dict[str, Any]] = []
    for kind in ("builds", "configs"):
        for arch_dir in sorted((cache / kind).glob("*")):
            for bdir in sorted(p for p in arch_dir.iterdir() if p.is_dir()):
                complete = kind == "builds" and (bdir / "build.json").is_file() and any(
                    (bdir / k.kernel_image_name).is_file() for k in ARCHES.values())
                entries.append({"dir": bdir, "last_used": _last_used(bdir), "bytes": _dir_bytes(bdir),
                                "complete": complete or (kind == "configs" and (bdir / ".config").is_file())})
    removed, kept = [], []

    def remove(e: dict, why: str) -> None:
        with _try_locked(e["dir"].with_name(e["dir"].name + ".lock")) as mine:
            if not mine:
                kept.append(e)  # being built right now
                return
            shutil.rmtree(e["dir"], ignore_errors=True)
        removed.append({"dir": str(e["dir"]), "bytes": e["bytes"], "why": why,
                        "unused_days": round((now - e["last_used"]) / 86400, 1)})

    candidates = []
    for e in entries:
        age = now - e["last_used"]
        if age < in_use_s:
            kept.append(e)
        elif not e["complete"]:
            remove(e, "unfinished or failed build")
        elif age > older_than_s:
            remove(e, f"unused for more than {older_than_s / 86400:g} days")
        else:
            candidates.append(e)
    total = sum(e["bytes"] for e in kept) + sum(e["bytes"] for e in candidates)
    for e in sorted(candidates, key=lambda e: e["last_used"]):
        if total <= max_bytes:
            kept.append(e)
            continue
        n = len(removed)
        remove(e, f"least recently used, cache over {max_bytes / (1 << 20):.0f} MiB")
        if len(removed) > n:
            total -= e["bytes"]
    return {"cache": str(cache), "removed": removed, "freed_bytes": sum(r["bytes"] for r in removed),
            "kept": len(kept), "kept_bytes": sum(e["bytes"] for e in kept)}


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [l for l in f.read().decode(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _tail(log: Path, n: int = 15) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + l for l in lines[-n:])


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _ccache_counts(statslog: Path) -> dict[str, int]:
    """Hits and misses of this build's source compiles, from ccache's per-build
    stats log ("# <input>" then its counters); Kbuild's compiler probes
    (input /dev/null or none) are left out."""
    counts = {"hits": 0, "misses": 0}
    try:
        lines = statslog.read_text(errors="replace").splitlines()
    except OSError:
        return counts
    source = False
    for l in lines:
        if l.startswith("#"):
            name = l[1:].strip()
            source = name.endswith((".c", ".S")) and name != "/dev/null"
        elif source and l in ("direct_cache_hit", "preprocessed_cache_hit"):
            counts["hits"] += 1
        elif source and l == "cache_miss":
            counts["misses"] += 1
    return counts


class _Make:
    """Runs make steps of one build, all output appended to one log."""

    def __init__(self, tree: Path, obj: Path, karch: Arch, log: Path, say: Progress, label: str,
                 nice: int, ccache_dir: Path, statslog: Path, timestamp: int):
        self.tree, self.obj, self.log, self.say, self.label = tree, obj, log, say, label
        self.nice = nice
        cross = karch.cross_prefix()
        self.cc = f"{cross}gcc"
        ccache = shutil.which("ccache")
        self.vars = [f"O={obj}", f"ARCH={karch.kernel_arch}"]
        if cross:
            self.vars.append(f"CROSS_COMPILE={cross}")
        if ccache:
            self.vars += [f"CC=ccache {self.cc}", "HOSTCC=ccache gcc"]
        self.ccache = bool(ccache)
        self.env = {**os.environ,
                    "KBUILD_BUILD_USER": "rtlab", "KBUILD_BUILD_HOST": "rtlab",
                    "KBUILD_BUILD_TIMESTAMP": dt.datetime.fromtimestamp(timestamp, dt.timezone.utc)
                    .strftime("%a %b %e %H:%M:%S UTC %Y") if timestamp else "",
                    "CCACHE_DIR": str(ccache_dir), "CCACHE_STATSLOG": str(statslog),
                    "LC_ALL": "C"}
        if "CCACHE_MAXSIZE" not in os.environ:
            self.env["CCACHE_MAXSIZE"] = "5G"
        if not timestamp:
            del self.env["KBUILD_BUILD_TIMESTAMP"]

    def __call__(self, *targets: str, jobs: int = 1, tail: bool = False, capture: bool = False,
                 extra_env: Optional[Mapping[str, str]] = None, cmd: Optional[list[str]] = None) -> str:
        if cmd is None:
            cmd = ["make", "-C", str(self.tree), *self.vars, f"-j{jobs}", *targets]
        cmd = ["nice", "-n", str(self.nice), *cmd]
        env = {**self.env, **(extra_env or {})}
        with open(self.log, "ab") as logf:
            logf.write(("\n$ " + " ".join(cmd) + "\n").encode())
            logf.flush()
            if capture:
                res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=logf, env=env, cwd=str(self.obj))
                if res.returncode != 0:
                    raise self.failure(cmd, res.returncode)
                return res.stdout.decode(errors="replace")
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=str(self.obj))
            next_tail = t0 + TAIL_EVERY_S
            try:
                while True:
                    try:
                        proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if tail and time.monotonic() >= next_tail:
                        next_tail += TAIL_EVERY_S
                        self.say(f"{self.label}:   [{_fmt_s(time.monotonic() - t0)}] {_last_line(self.log)}")
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
        if proc.returncode != 0:
            raise self.failure(cmd, proc.returncode)
        return ""

    def failure(self, cmd: list[str], rc: int) -> KernelError:
        what = " ".join(c for c in cmd if not c.startswith(("O=", "CC=", "HOSTCC=", "CROSS_COMPILE=")))
        return KernelError(f"{self.label}: `{what}` failed (exit {rc}); last lines:\n"
                           f"{_tail(self.log)}\n  full log: {self.log}")


def _configure(make: "_Make", tree: Path, arch: str, frags: Sequence[Fragment], bdir: Path,
               label: str, say: Progress) -> int:
    """tinyconfig, merge_config.sh -m, olddefconfig, then the option check;
    returns how many options were requested."""
    obj, karch = make.obj, _arch.get(arch)
    say(f"{label}: make ARCH={karch.kernel_arch} tinyconfig")
    make("tinyconfig")
    say(f"{label}: merge_config.sh -m .config + {len(frags)} fragments")
    # the kernel's own merger: base (tinyconfig's .config) then fragments, in order
    make(cmd=["sh", str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(obj),
              str(obj / ".config"), *(str(f.path) for f in frags)],
         extra_env={"ARCH": karch.kernel_arch})
    say(f"{label}: make olddefconfig")
    make("olddefconfig")
    requested = requested_options(frags)
    dropped = check_options(requested, (obj / ".config").read_text())
    if dropped:
        shutil.copy2(obj / ".config", bdir / ".config")
        dropped = [Dropped(d.option, d.wanted, d.got, d.fragment, d.line,
                           kconfig_hint(tree, karch.kernel_arch, d.option)) for d in dropped]
        with open(make.log, "a") as f:
            f.write("\nrtlab: requested options that did not survive olddefconfig:\n"
                    + "\n".join(d.describe() for d in dropped) + "\n")
        raise KernelConfigError(dropped, arch, bdir / ".config", make.log)
    return len(requested)


def _object_dir(tree: Path, key: str, bdir: Path) -> Path:
    """Where make's O= objects go.

    A direct subdirectory of the source tree when the tree is writable:
    Kbuild then sets ``srctree := ..`` instead of the tree's absolute path,
    so no compiler command line names where the tree is checked out, and
    ccache hits across checkouts (a CI runner's kernel work tree, a
    developer's clone, the pinned source). With O= elsewhere, every path in
    the tree changes every hash: measured, a one-file commit in a second
    clone recompiled all ~850 files. The name starts with a dot (the
    kernel's .gitignore has ``.*``; Kbuild also writes a ``*`` .gitignore
    into it), so the tree stays clean for `git status` and the cache key.
    """
    if os.access(tree, os.W_OK):
        return tree / f".rtlab-build-{key[:16]}"
    return bdir / "obj"


def _make_object_dir(obj: Path) -> None:
    obj.mkdir(parents=True)
    # before make runs (Kbuild writes the same file, later): git ignores the
    # objects even in a tree whose .gitignore does not cover dot-directories
    (obj / ".gitignore").write_text("# rtlab kernel build objects\n*\n")


def build_kernel(tree: Union[Path, str], arch: str, fragments: Sequence[Union[str, Path]], *,
                 out: Optional[Path] = None, cache_dir: Optional[Path] = None,
                 progress: Optional[Progress] = print, jobs: int = 2, nice: int = 10,
                 ccache_dir: Optional[Path] = None, fragments_dir: Optional[Path] = None,
                 config_only: bool = False) -> BuiltKernel:
    """Build *tree* for *arch* from *fragments* (merged in order), cached.

    Returns at once when the same (commit + uncommitted changes, arch,
    fragments, compiler) were built before. *out* gets a copy of the image,
    .config and build.json. *config_only* stops after the option check
    (nothing is cached; the result has only ``config``).
    """
    if _arch.get_or_none(arch) is None:
        raise InputError("--arch", f"unknown arch {arch!r}; known: {', '.join(ARCHES)}")
    arch = _arch.canonical(arch)
    if not fragments:
        raise InputError("--variant", "no config fragments to build from")
    say = progress or _quiet
    karch = _arch.get(arch)
    label = f"kernel {arch}"
    frags = [load_fragment(f, fragments_dir) for f in fragments]
    state = tree_state(Path(tree))
    cc = f"{karch.cross_prefix()}gcc"
    toolchain = _toolchain(cc)
    fdigest = fragments_digest(frags)
    key = cache_key(state.commit, state.dirty_hash, arch, fdigest, toolchain)
    cache = Path(cache_dir) if cache_dir is not None else kernel_cache()
    # a configuration check never touches (or answers from) the build cache
    bdir = cache / ("configs" if config_only else "builds") / arch / key[:16]

    def finish(bk: BuiltKernel) -> BuiltKernel:
        if out is not None:
            out_dir = Path(out)
            out_dir.mkdir(parents=True, exist_ok=True)
            for f in (bk.path, bk.config, bk.dir / "build.json"):
                shutil.copy2(f, out_dir / f.name)
            bk = BuiltKernel(out_dir / bk.path.name, out_dir / ".config", bk.release, bk.build_json,
                             bk.dir, bk.cached)
        return bk

    hit = None if config_only else _load_build(bdir, karch.kernel_image_name)
    if hit is not None:
        say(f"{label}: cached {hit.path} ({hit.release}, {hit.preempt})")
        return finish(hit)
    with _locked(bdir.with_name(bdir.name + ".lock")):
        # built by another process meanwhile?
        hit = None if config_only else _load_build(bdir, karch.kernel_image_name)
        if hit is not None:
            say(f"{label}: cached {hit.path} ({hit.release}, {hit.preempt})")
            return finish(hit)
        t0 = time.monotonic()
        dirty = (f"dirty: {len(state.dirty_files)} changed file{'s' * (len(state.dirty_files) != 1)}"
                 if state.dirty_hash else "clean")
        say(f"{label}: {state.path} at {state.commit[:12]} ({state.describe}, {dirty}); "
            f"fragments {', '.join(f.name for f in frags)}; build {key[:16]}")
        obj = _object_dir(state.path, key, bdir)
        for old in (bdir, obj):  # a failed or incomplete earlier attempt
            if old.exists():
                shutil.rmtree(old)
        bdir.mkdir(parents=True)
        _make_object_dir(obj)
        log = bdir / "build.log"
        statslog = bdir / "ccache-stats.log"
        # one compiler cache for every build cache (content-addressed, safe to share)
        ccd = Path(ccache_dir) if ccache_dir else Path(os.environ.get("CCACHE_DIR") or kernel_cache() / "ccache")
        make = _Make(state.path, obj, karch, log, say, label, nice, ccd, statslog,
                     state.commit_time)

        try:
            n_req = _configure(make, state.path, arch, frags, bdir, label, say)
            say(f"{label}: all {n_req} requested options survived olddefconfig")
            if config_only:
                shutil.copy2(obj / ".config", bdir / ".config")
                shutil.rmtree(obj)
                return BuiltKernel(Path(), bdir / ".config", "", {}, bdir, cached=False)

            say(f"{label}: nice -n {nice} make -j{jobs} {karch.kernel_image_name}"
                f"{' (ccache)' if make.ccache else ' (no ccache found)'}")
            t_make = time.monotonic()
            cpu0 = _children_cpu()
            make(karch.kernel_image_name, jobs=jobs, tail=True)
            make_s = time.monotonic() - t_make
            make_cpu = _children_cpu() - cpu0
            release = make("-s", "kernelrelease", capture=True).strip().splitlines()[-1]

            from .images import kernel_banner, preempt_model  # shared readers of kernel images
            image = bdir / karch.kernel_image_name
            shutil.copy2(obj / karch.kernel_image, image)
            shutil.copy2(obj / ".config", bdir / ".config")
            config_text = (bdir / ".config").read_text()
            try:
                _, uname_v = kernel_banner(image)
            except RtlabError:
                uname_v = ""
            counts = _ccache_counts(statslog)
            info: dict[str, Any] = {
                "format": FORMAT, "key": key,
                "tree": str(state.path), "commit": state.commit, "describe": state.describe,
                "dirty": ({"sha256": state.dirty_hash, "files": list(state.dirty_files)}
                          if state.dirty_hash else None),
                "arch": arch, "make_arch": karch.kernel_arch,
                "fragments": [f.to_json() for f in frags], "fragments_sha256": fdigest,
                "release": release, "uname_v": uname_v, "preempt": preempt_model(config_text),
                "image": {"name": image.name, "sha256": sha256_file(image), "size": image.stat().st_size},
                "config_sha256": sha256_file(bdir / ".config"),
                "toolchain": toolchain, "ccache": counts if make.ccache else None,
                "jobs": jobs, "make_seconds": round(make_s, 1),
                # CPU time of make and compilers (user+sys): comparable across loaded machines
                "make_cpu_seconds": round(make_cpu, 1),
                "build_seconds": round(time.monotonic() - t0, 1),
                "built_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            _atomic_write(bdir / "build.json", (json.dumps(info, indent=2) + "\n").encode())
            shutil.rmtree(obj)
            say(f"{label}: built {image} ({release}, {info['preempt']}) in {_fmt_s(info['build_seconds'])}"
                + (f"; ccache {counts['hits']} hits, {counts['misses']} misses" if make.ccache else ""))
            return finish(BuiltKernel(image, bdir / ".config", release, info, bdir, cached=False))
        except BaseException:
            # the log and the .config stay in bdir (named by the error); the
            # objects go: a runner's kernel tree must not fill up with the
            # objects of every commit that failed to build
            if (obj / ".config").is_file() and not (bdir / ".config").exists():
                shutil.copy2(obj / ".config", bdir / ".config")
            shutil.rmtree(obj, ignore_errors=True)
            raise


# --------------------------------------------------------------------------
# For the image code: a kernel from the pinned source, built once
# --------------------------------------------------------------------------

def base_fragment(board: str) -> str:
    """The base fragment of a board (``base-qemu-aarch64`` for ``qemu-aarch64``)."""
    return f"base-{board}"


def with_base(arch: str, fragments: Sequence[str], board: Optional[str] = None) -> list[str]:
    """*fragments* with the board's base first, unless they start with a base
    already. A board without a base of its own (the rack's twins) builds on
    its arch's (``base-qemu-<arch>``)."""
    frags = [str(f) for f in fragments]
    if frags and Path(frags[0]).name.startswith("base-"):
        return frags
    if board and fragment_path(base_fragment(board)).is_file():
        return [base_fragment(board), *frags]
    return [base_fragment(f"qemu-{_arch.canonical(arch)}"), *frags]


def ensure_built_kernel(arch: str, fragments: Sequence[str], *, progress: Optional[Progress] = print,
                        board: Optional[str] = None, cache_dir: Optional[Path] = None,
                        version: str = SOURCE_VERSION) -> BuiltKernel:
    """A kernel for *arch* from the pinned ``linux-source-6.12`` tree.

    *fragments* are merged after the board's base fragment (``base-qemu-<arch>``
    unless *board* says otherwise, or the list starts with a ``base-*``).
    The first call unpacks the source and builds (minutes); later calls with
    the same inputs return the cached build at once.
    """
    src = ensure_source(version, cache_dir=cache_dir, progress=progress)
    return build_kernel(src.path, arch, with_base(arch, fragments, board), cache_dir=cache_dir,
                        progress=progress)
