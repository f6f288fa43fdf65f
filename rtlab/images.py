"""Board images: pinned Debian kernels and a per-arch initramfs userland.

For each arch (``x86_64``, ``aarch64``) :func:`ensure_images` produces

* the kernels pinned in ``env/images.yaml`` (flavour ``generic`` and ``rt``),
  fetched with ``apt-get download`` (apt checks them against the signed
  index) and unpacked with ``dpkg-deb -x``, nothing installed;
* one initramfs built from Debian packages *of that arch*: busybox-static,
  rt-tests, stress-ng, iperf3, mbw, exactly the shared libraries their ELF
  files need (DT_NEEDED, walked recursively), the dynamic loader, the few
  kernel modules the QEMU NIC needs, and an ``/init`` that ends in a root
  shell on the serial console (prompt :data:`PROMPT`);
* a manifest (JSON, beside the images) recording every package, version and
  sha256 that went in.

Everything lives in a content-keyed cache (``.cache/images`` by default):
the inputs (images.yaml, overlays, the generated files, :data:`FORMAT`) hash
to a key whose manifest, once built, is returned without calling apt or
rebuilding anything, and without printing. Package versions apt resolved on
the first build are therefore frozen until an input changes or
``refresh=True`` asks apt again: a latency baseline must not change because
a library was updated on the mirror overnight.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import posixpath
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Protocol, Sequence, Union

import yaml

from . import ROOT
from . import arch as _arch
from .errors import InputError, RtlabError

#: the arches images are built for (rtlab/arch.py: Debian arch, multiarch
#: triplet, ELF machine, QEMU machine, device trees)
ARCHES = _arch.ARCHES

FLAVOURS = ("generic", "rt")
HOSTNAME = "rtlab-board"
#: the shell prompt on the board console (PS1)
PROMPT = "rtlab# "
#: regex for labgrid's ShellDriver ``prompt`` (and LAVA's prompts). Not
#: anchored with ``$``: busybox ash follows every prompt with ESC[6n (a
#: cursor-position query, FEATURE_EDITING_ASK_TERMINAL, not switchable at
#: run time) that nobody answers on a serial line, so "rtlab# \x1b[6n" is
#: what arrives. ash sends no bracketed-paste \x1b[?2004h (unlike bash).
PROMPT_RE = r"rtlab# "

DEFAULT_CONFIG = ROOT / "env" / "images.yaml"
DEFAULT_CACHE = ROOT / ".cache" / "images"

#: bump when the build changes its output for the same inputs (part of the key)
FORMAT = 1

#: where programs are taken from in the requested packages
PROGRAM_DIRS = ("bin/", "sbin/", "usr/bin/", "usr/sbin/")

Progress = Callable[[str], Any]


class ImageError(RtlabError):
    """An image could not be built; the message names the package or file."""


class MissingLibraryError(ImageError):
    """An ELF file needs a shared library that no downloaded package has."""

    def __init__(self, binary: str, library: str, package: str = "", searched: Sequence[str] = ()):
        self.binary = binary
        self.library = library
        self.package = package
        where = f" (package {package})" if package else ""
        dirs = f"; searched {', '.join('/' + d for d in searched)}" if searched else ""
        super().__init__(f"{binary}{where} needs {library}, which no downloaded package provides{dirs}")


# --------------------------------------------------------------------------
# ELF: just enough of the format to read PT_INTERP, DT_NEEDED, DT_RUNPATH and
# a module's .modinfo; no binutils needed, and it reads foreign-arch files.
# --------------------------------------------------------------------------

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29


@dataclass(frozen=True)
class ElfInfo:
    bits: int  # 32 or 64
    little_endian: bool
    machine: int
    interp: Optional[str]
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    soname: Optional[str]


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _elf_layout(data: bytes, name: str) -> tuple[int, str]:
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise ImageError(f"{name}: not an ELF file")
    if data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ImageError(f"{name}: unknown ELF class/data encoding {data[4]}/{data[5]}")
    return (64 if data[4] == 2 else 32), ("<" if data[5] == 1 else ">")


def read_elf(path: Union[Path, str], data: Optional[bytes] = None) -> ElfInfo:
    """Interpreter, NEEDED, RUNPATH/RPATH and SONAME of an ELF file.

    Works from the program headers (what the loader uses), so stripped
    files without section headers are read too.
    """
    name = str(path)
    if data is None:
        data = Path(path).read_bytes()
    bits, e = _elf_layout(data, name)
    try:
        if bits == 64:
            machine, = struct.unpack_from(e + "H", data, 18)
            phoff, = struct.unpack_from(e + "Q", data, 32)
            phentsize, phnum = struct.unpack_from(e + "HH", data, 54)
            ph_fmt, dyn_fmt = e + "IIQQQQQQ", e + "qQ"
        else:
            machine, = struct.unpack_from(e + "H", data, 18)
            phoff, = struct.unpack_from(e + "I", data, 28)
            phentsize, phnum = struct.unpack_from(e + "HH", data, 42)
            ph_fmt, dyn_fmt = e + "IIIIIIII", e + "iI"
        loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
        interp: Optional[str] = None
        dynamic: Optional[tuple[int, int]] = None
        for i in range(phnum):
            fields = struct.unpack_from(ph_fmt, data, phoff + i * phentsize)
            if bits == 64:
                p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
            else:
                p_type, p_offset, p_vaddr, _paddr, p_filesz = fields[:5]
            if p_type == PT_LOAD:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == PT_INTERP:
                interp = data[p_offset:p_offset + p_filesz].split(b"\0", 1)[0].decode()
            elif p_type == PT_DYNAMIC:
                dynamic = (p_offset, p_filesz)
        entries: list[tuple[int, int]] = []
        if dynamic is not None:
            size = struct.calcsize(dyn_fmt)
            off, end = dynamic[0], dynamic[0] + dynamic[1]
            while off + size <= end:
                tag, val = struct.unpack_from(dyn_fmt, data, off)
                if tag == DT_NULL:
                    break
                entries.append((tag, val))
                off += size
    except struct.error as exc:
        raise ImageError(f"{name}: truncated ELF file ({exc})") from None

    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    needed: list[str] = []
    runpath: list[str] = []
    soname: Optional[str] = None
    if strtab is not None:
        # DT_STRTAB is a virtual address: map it to a file offset via PT_LOAD
        base = next((o + strtab - v for v, o, sz in loads if v <= strtab < v + sz), None)
        if base is None:
            raise ImageError(f"{name}: DT_STRTAB 0x{strtab:x} is outside every PT_LOAD segment")

        def string(off: int) -> str:
            return data[base + off:data.index(b"\0", base + off)].decode()

        for tag, val in entries:
            if tag == DT_NEEDED:
                needed.append(string(val))
            elif tag in (DT_RUNPATH, DT_RPATH):
                runpath.extend(p for p in string(val).split(":") if p)
            elif tag == DT_SONAME:
                soname = string(val)
    return ElfInfo(bits, e == "<", machine, interp, tuple(needed), tuple(runpath), soname)


def read_modinfo(path: Path) -> dict[str, list[str]]:
    """The ``.modinfo`` section of a kernel module: key -> values."""
    data = path.read_bytes()
    bits, e = _elf_layout(data, str(path))
    if bits == 64:
        shoff, = struct.unpack_from(e + "Q", data, 40)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 58)
        sh_fmt = e + "IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from(e + "I", data, 32)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 46)
        sh_fmt = e + "IIIIIIIIII"
    sections = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
    names_off = sections[shstrndx][4]
    info: dict[str, list[str]] = {}
    for sec in sections:
        name_off, offset, size = sec[0], sec[4], sec[5]
        name = data[names_off + name_off:data.index(b"\0", names_off + name_off)]
        if name == b".modinfo":
            for item in data[offset:offset + size].split(b"\0"):
                if b"=" in item:
                    k, v = item.decode(errors="replace").split("=", 1)
                    info.setdefault(k, []).append(v)
    return info


# --------------------------------------------------------------------------
# Kernel image facts: release/`uname -v` from the image, preemption model
# from the config the package ships.
# --------------------------------------------------------------------------

_BANNER_RE = re.compile(rb"Linux version (\S+) [^\n\0]*?(#\d+ [^\n\0]*)")


def _arm_zimage_payload(data: bytes, path: Path) -> bytes:
    """The kernel inside a 32-bit ARM zImage (magic 0x016F2818 at 0x24): a
    decompressor stub followed by the compressed kernel (xz for Debian's
    armmp, gzip for others); the first stream that decompresses wins."""
    import lzma
    import zlib

    for magic, decoder in ((b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ)),
                           (b"\x1f\x8b\x08", lambda: zlib.decompressobj(31))):
        off = data.find(magic)
        while off >= 0:
            try:
                out = decoder().decompress(data[off:])
                if b"Linux version " in out:
                    return out
            except (lzma.LZMAError, zlib.error):
                pass
            off = data.find(magic, off + 1)
    raise ImageError(f"{path}: ARM zImage without an xz or gzip kernel payload")


def kernel_banner(path: Path) -> tuple[str, str]:
    """(``uname -r``, ``uname -v``) of a kernel image (bzImage, Image, Image.gz)."""
    data = path.read_bytes()
    if data[0x202:0x206] == b"HdrS":
        # x86 bzImage: the setup header points at the version string, which
        # is readable although the kernel proper is compressed
        off, = struct.unpack_from("<H", data, 0x20E)
        text = data[off + 0x200:data.index(b"\0", off + 0x200)].decode(errors="replace")
        m = re.match(r"(\S+) .*?(#\d+ .*)$", text)
        if m:
            return m.group(1), m.group(2).strip()
        raise ImageError(f"{path}: cannot parse the bzImage version string {text!r}")
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    elif len(data) > 0x28 and struct.unpack_from("<I", data, 0x24)[0] == 0x016F2818:
        data = _arm_zimage_payload(data, path)
    banner = _BANNER_RE.search(data)
    if not banner:
        raise ImageError(f"{path}: no 'Linux version' banner in the kernel image")
    return banner.group(1).decode(), banner.group(2).decode().strip()


def preempt_model(config_text: str) -> str:
    """rt, dynamic, full, voluntary or none, from a kernel .config."""
    opts = {line.split("=", 1)[0] for line in config_text.splitlines() if line.endswith("=y")}
    for opt, model in (("CONFIG_PREEMPT_RT", "rt"), ("CONFIG_PREEMPT_DYNAMIC", "dynamic"),
                       ("CONFIG_PREEMPT", "full"), ("CONFIG_PREEMPT_VOLUNTARY", "voluntary")):
        if opt in opts:
            return model
    return "none"


# --------------------------------------------------------------------------
# Configuration (env/images.yaml)
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelPin:
    flavour: str
    package: str
    version: str
    release: str
    preempt: str


@dataclass(frozen=True)
class ArchConfig:
    arch: str
    path: Path
    kernels: dict[str, KernelPin]
    packages: tuple[str, ...]
    dlopen: tuple[str, ...]
    modules: tuple[str, ...]

    def key_data(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "kernels": {f: vars(k) for f, k in sorted(self.kernels.items())},
            "packages": list(self.packages),
            "dlopen": list(self.dlopen),
            "modules": list(self.modules),
        }


def load_config(arch: str, path: Optional[Path] = None) -> ArchConfig:
    path = Path(path or DEFAULT_CONFIG)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, f"invalid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(path, "expected a mapping at the top level")

    def need(obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict) or obj.get(key) in (None, ""):
            raise InputError(path, f"{where}.{key}: missing")
        return obj[key]

    kernels_doc = need(need(doc, "kernels", ""), arch, "kernels")
    kernels: dict[str, KernelPin] = {}
    for flavour in FLAVOURS:
        k = need(kernels_doc, flavour, f"kernels.{arch}")
        where = f"kernels.{arch}.{flavour}"
        pin = KernelPin(flavour, str(need(k, "package", where)), str(need(k, "version", where)),
                        str(need(k, "release", where)), str(need(k, "preempt", where)))
        if pin.package != f"linux-image-{pin.release}":
            raise InputError(path, f"{where}: package {pin.package} does not match release {pin.release}")
        kernels[flavour] = pin
    init = need(doc, "initramfs", "")
    packages = tuple(str(p) for p in need(init, "packages", "initramfs"))
    return ArchConfig(arch, path, kernels, packages,
                      tuple(str(x) for x in init.get("dlopen") or ()),
                      tuple(str(x) for x in init.get("modules") or ()))


# --------------------------------------------------------------------------
# Package source: apt (the real one) behind a small interface, so tests can
# supply packages without a network.
# --------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Pkg:
    name: str
    version: str
    arch: str  # the package's Architecture (may be "all")
    sha256: str
    size: int = 0
    section: str = ""
    select_arch: str = ""  # the arch it was selected for (apt's name:arch)

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.select_arch or self.arch}={self.version}"

    @property
    def deb_name(self) -> str:
        # apt-get download's own naming (epoch colon escaped)
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "arch": self.arch,
                "sha256": self.sha256, "size": self.size}


class PackageSource(Protocol):
    def show(self, names: Sequence[str], arch: str,
             pins: Mapping[str, str] = ...) -> dict[str, Pkg]: ...

    def depends(self, pkgs: Sequence[Pkg]) -> dict[str, list[str]]: ...

    def download(self, pkgs: Sequence[Pkg], dest: Path) -> None: ...


def _run(cmd: Sequence[str], what: str, ok: Sequence[int] = (0,), **kw: Any) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise ImageError(f"{what}: {cmd[0]} is not installed (see env/apt-packages.txt)") from None
    if res.returncode not in ok:
        err = (res.stderr or res.stdout).strip().splitlines()
        raise ImageError(f"{what}: {' '.join(cmd[:3])} ... failed: {' / '.join(err[-4:])}")
    return res


def _records(text: str) -> Iterator[dict[str, str]]:
    for block in text.split("\n\n"):
        rec: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, v = line.split(":", 1)
                rec[k] = v.strip()
        if rec:
            yield rec


class AptSource:
    """The host's apt: signed indexes, `apt-cache` to resolve, `apt-get download`."""

    def show(self, names: Sequence[str], arch: str,
             pins: Mapping[str, str] = {}) -> dict[str, Pkg]:
        """Candidate (or pinned) version of each name; missing names are left out."""
        if not names:
            return {}
        specs = [f"{n}:{arch}={pins[n]}" if n in pins else f"{n}:{arch}" for n in names]
        out = self._show(specs, names, pins, arch)
        # Architecture: all packages (libx11-data...) exist only as name:all
        rest = [n for n in names if n not in out]
        if rest:
            specs = [f"{n}:all={pins[n]}" if n in pins else f"{n}:all" for n in rest]
            out.update(self._show(specs, rest, pins, "all"))
        return out

    @staticmethod
    def _show(specs: Sequence[str], names: Sequence[str], pins: Mapping[str, str],
              arch: str) -> dict[str, Pkg]:
        # exit code is 100 when some name has no version (virtual/unknown);
        # the caller reports the names that are missing from the result
        res = _run(["apt-cache", "show", "--no-all-versions", *specs], "apt-cache show", ok=(0, 100))
        out: dict[str, Pkg] = {}
        for rec in _records(res.stdout):
            name = rec.get("Package", "")
            if name in names and name not in out:
                if name in pins and rec.get("Version") != pins[name]:
                    continue
                out[name] = Pkg(name, rec["Version"], rec.get("Architecture", arch),
                                rec.get("SHA256", ""), int(rec.get("Size", "0")),
                                rec.get("Section", ""), arch)
        return out

    def depends(self, pkgs: Sequence[Pkg]) -> dict[str, list[str]]:
        """Hard dependencies (Depends, Pre-Depends) of *pkgs* and, recursively,
        of everything they depend on: one name per dependency, the first
        alternative or a virtual package's first provider (what apt picks).

        One recursive call instead of one per level: on hosts that disable
        apt's binary cache (Docker images do) every apt-cache run costs ~2 s.
        """
        if not pkgs:
            return {}
        res = _run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                    "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                    *[p.spec for p in pkgs]], "apt-cache depends")
        # headers are "name:arch" for foreign arches and bare for the native
        # one; keep the arch asked for so a native package of the same name
        # does not lend its dependencies
        arch = pkgs[0].select_arch or pkgs[0].arch
        suffix = "" if arch == _native_arch() else f":{arch}"
        parsed = parse_apt_depends(res.stdout)
        out: dict[str, list[str]] = {}
        for header, deps in parsed.items():
            if suffix and header.endswith(suffix):
                out[header[:-len(suffix)]] = deps
            elif not suffix and ":" not in header:
                out[header] = deps
        # bare headers of a foreign-arch query are Architecture: all packages
        # (or native-only ones, which the library filter never follows)
        for header, deps in parsed.items():
            if ":" not in header:
                out.setdefault(header, deps)
        return out

    def download(self, pkgs: Sequence[Pkg], dest: Path) -> None:
        # apt drops privileges to _apt for downloads; a private world-writable
        # staging dir keeps that sandbox instead of warning about it
        os.chmod(dest, 0o777)
        _run(["apt-get", "download", "-q", *[p.spec for p in pkgs]],
             f"apt-get download {' '.join(p.name for p in pkgs)}", cwd=dest)


@functools.lru_cache(maxsize=None)
def _native_arch() -> str:
    return _run(["dpkg", "--print-architecture"], "dpkg --print-architecture").stdout.strip()


def parse_apt_depends(text: str) -> dict[str, list[str]]:
    """Parse `apt-cache depends` output: header as printed (``name`` or
    ``name:arch``) -> dependency names without arch qualifier.

    Only Depends/PreDepends count. Of an OR group (lines marked ``|``) the
    first alternative is taken; a virtual target (``<name>``) stands for its
    first provider, listed on the indented lines below it.
    """
    result: dict[str, list[str]] = {}
    current: Optional[list[str]] = None
    continues = False     # the previous relation line ended with "|"
    taken = False         # a name was already taken for the current OR group
    want_provider = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace() and line[0] != "|":
            header = line.strip()
            # a virtual package heading its own block has nothing to follow
            current = None if header.startswith("<") else result.setdefault(header, [])
            continues = taken = want_provider = False
            continue
        if current is None:
            continue
        m = re.match(r"^ ([ |])([A-Za-z-]+): (.+)$", line)
        if m:
            bar, kind, target = m.groups()
            if not continues:
                taken = False  # a new dependency starts
            continues = bar == "|"
            want_provider = False
            if kind not in ("Depends", "PreDepends") or taken:
                continue
            if target.startswith("<"):
                want_provider = True  # take its first provider (next lines)
                continue
            current.append(target.split(":", 1)[0])
            taken = True
        elif line.startswith("    ") and want_provider and not taken:
            current.append(line.strip().split(":", 1)[0])
            taken = True
            want_provider = False
    return result


def _is_library(pkg: Pkg) -> bool:
    # lib* by name, plus library packages not named so (zlib1g)
    return pkg.name.startswith("lib") or pkg.section.split("/")[-1] == "libs"


# --------------------------------------------------------------------------
# Cache helpers
# --------------------------------------------------------------------------

from .fsutil import atomic_write as _atomic_write  # noqa: E402
from .fsutil import locked as _locked  # noqa: E402
from .fsutil import sha256_file  # noqa: E402,F401 - also used by callers


class DebCache:
    """Downloaded .debs kept by name+version+arch, sha256 in a sidecar."""

    def __init__(self, root: Path, source: PackageSource):
        self.root = root
        self.source = source

    def path(self, pkg: Pkg) -> Path:
        return self.root / pkg.deb_name

    def _valid(self, pkg: Pkg) -> bool:
        p = self.path(pkg)
        return p.is_file() and sha256_file(p) == pkg.sha256

    def fetch(self, pkgs: Sequence[Pkg], progress: Progress, label: str) -> dict[str, Path]:
        missing = [p for p in pkgs if not self._valid(p)]
        if missing:
            mb = sum(p.size for p in missing) / 1e6
            progress(f"{label}: downloading {len(missing)} package(s), {mb:.1f} MB (apt-get download)")
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.root, prefix=".dl-") as tmp:
                self.source.download(missing, Path(tmp))
                for p in missing:
                    got = Path(tmp) / p.deb_name
                    if not got.is_file():
                        raise ImageError(f"apt-get download {p.spec}: no {p.deb_name} was written")
                    digest = sha256_file(got)
                    if p.sha256 and digest != p.sha256:
                        raise ImageError(f"{p.deb_name}: sha256 {digest} differs from the index's {p.sha256}")
                    os.replace(got, self.path(p))
                    (self.root / f"{p.deb_name}.sha256").write_text(f"{digest}  {p.deb_name}\n")
        for p in pkgs:
            side = self.root / f"{p.deb_name}.sha256"
            if not side.exists():  # a deb put there by hand and verified above
                side.write_text(f"{p.sha256}  {p.deb_name}\n")
        return {p.name: self.path(p) for p in pkgs}

    def cached_pin(self, name: str, version: str, arch: str) -> Optional[Pkg]:
        """A pinned package apt no longer offers but whose .deb we kept."""
        pkg = Pkg(name, version, arch, "", select_arch=arch)
        side = self.root / f"{pkg.deb_name}.sha256"
        if self.path(pkg).is_file() and side.is_file():
            digest = side.read_text().split()[0]
            return Pkg(name, version, arch, digest, self.path(pkg).stat().st_size, select_arch=arch)
        return None


def _extract_deb(deb: Path, dest: Path) -> Path:
    """``dpkg-deb -x`` into *dest* (atomically; reused when present)."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        _run(["dpkg-deb", "-x", str(deb), str(tmp)], f"{deb.name}: dpkg-deb -x")
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelImage:
    path: Path
    package: str
    version: str
    release: str
    #: preemption model from the package's config: dynamic, voluntary, rt ...
    preempt: str = ""
    #: `uname -v` of this kernel, e.g. "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)"
    uname_v: str = ""
    sha256: str = ""
    config: Optional[Path] = None

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "package": self.package, "version": self.version,
                "release": self.release, "preempt": self.preempt, "uname_v": self.uname_v,
                "sha256": self.sha256, "size": self.path.stat().st_size if self.path.exists() else None,
                "config": str(self.config) if self.config else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "KernelImage":
        return cls(Path(d["path"]), d["package"], d["version"], d["release"], d.get("preempt", ""),
                   d.get("uname_v", ""), d.get("sha256", ""),
                   Path(d["config"]) if d.get("config") else None)


@dataclass(frozen=True)
class ImageSet:
    arch: str
    kernels: dict[str, KernelImage]
    initramfs: Path
    initramfs_sha256: str = ""
    #: every Debian package that went into the images, as resolved
    packages: tuple[Pkg, ...] = ()
    overlays: tuple[dict[str, str], ...] = ()
    #: the input key the cache knows this set under
    key: str = ""
    _sizes: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def manifest(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "debian_arch": _arch.get(self.arch).debian,
            "key": self.key,
            "qemu": vars(_arch.get(self.arch).qemu),
            "console": {"device": _arch.get(self.arch).qemu.console, "prompt": PROMPT,
                        "prompt_re": PROMPT_RE, "hostname": HOSTNAME},
            "kernels": {f: k.to_json() for f, k in sorted(self.kernels.items())},
            "initramfs": {"path": str(self.initramfs), "sha256": self.initramfs_sha256,
                          "size": self.initramfs.stat().st_size if self.initramfs.exists() else None},
            "packages": [p.to_json() for p in sorted(self.packages)],
            "overlays": list(self.overlays),
        }

    @classmethod
    def from_manifest(cls, m: Mapping[str, Any]) -> "ImageSet":
        return cls(
            arch=m["arch"],
            kernels={f: KernelImage.from_json(k) for f, k in m["kernels"].items()},
            initramfs=Path(m["initramfs"]["path"]),
            initramfs_sha256=m["initramfs"]["sha256"],
            packages=tuple(Pkg(p["name"], p["version"], p["arch"], p["sha256"], p.get("size", 0))
                           for p in m.get("packages", ())),
            overlays=tuple(m.get("overlays", ())),
            key=m.get("key", ""),
            _sizes={"initramfs": m["initramfs"].get("size") or 0,
                    **{f: k.get("size") or 0 for f, k in m["kernels"].items()}},
        )

    def files_present(self) -> bool:
        """The files the manifest names exist with the recorded sizes (they
        are written atomically, so a right-sized file is the whole file)."""
        paths = {"initramfs": self.initramfs, **{f: k.path for f, k in self.kernels.items()}}
        for name, p in paths.items():
            if not p.is_file() or (self._sizes.get(name) and p.stat().st_size != self._sizes[name]):
                return False
        return True


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------

def _module_closure(moddir: Path, wanted: Sequence[str], package: str) -> list[str]:
    """Module files (relative to moddir) for *wanted*, dependencies first.
    Built-in modules (modules.builtin) are skipped: nothing to load."""
    files: dict[str, str] = {}
    for p in moddir.rglob("*.ko*"):
        base = p.name.split(".ko", 1)[0].replace("-", "_")
        files.setdefault(base, str(p.relative_to(moddir)))
    builtin: set[str] = set()
    bfile = moddir / "modules.builtin"
    if bfile.exists():
        builtin = {Path(x).name.split(".ko", 1)[0].replace("-", "_") for x in bfile.read_text().split()}
    order: list[str] = []
    visiting: set[str] = set()

    def visit(mod: str) -> None:
        mod = mod.replace("-", "_")
        if mod in order or mod in visiting:
            return
        if mod not in files:
            if mod in builtin:
                return
            raise ImageError(f"{package}: kernel module {mod} is neither built in nor shipped")
        visiting.add(mod)
        for dep in read_modinfo(moddir / files[mod]).get("depends", []):
            for d in filter(None, dep.split(",")):
                visit(d)
        visiting.discard(mod)
        order.append(mod)

    for w in wanted:
        visit(w)
    return [files[m] for m in order]


def _prepare_kernel(pin: KernelPin, deb: Path, deb_sha: str, kdir: Path, modules: Sequence[str],
                    progress: Progress, label: str, dtbs: Sequence[str] = ()) -> KernelImage:
    """vmlinuz, config, the wanted modules and device trees (*dtbs*, copied
    beside vmlinuz: boards stage ``<kernel dir>/<name>.dtb``) of one kernel
    package in *kdir*."""
    info_path = kdir / "kernel.json"
    want = {"package": pin.package, "version": pin.version, "deb_sha256": deb_sha,
            "modules": list(modules), "format": FORMAT}
    if dtbs:  # only then: x86/arm64 kernels extracted before stay valid
        want["dtbs"] = list(dtbs)
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if all(info.get(k) == v for k, v in want.items()) and (kdir / info["vmlinuz"]).is_file():
            return _kernel_from_info(kdir, info)

    progress(f"{label}: extracting kernel {pin.package} {pin.version} (dpkg-deb -x)")
    kdir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=kdir.parent, prefix=f".{kdir.name}-"))
    try:
        tree = work / "deb"
        _run(["dpkg-deb", "-x", str(deb), str(tree)], f"{deb.name}: dpkg-deb -x")
        out = work / "out"
        out.mkdir()
        vmlinuz = tree / "boot" / f"vmlinuz-{pin.release}"
        config = tree / "boot" / f"config-{pin.release}"
        if not vmlinuz.is_file() or not config.is_file():
            raise ImageError(f"{deb.name}: no boot/vmlinuz-{pin.release} or boot/config-{pin.release}; "
                             f"check kernels.*.release in env/images.yaml")
        release, uname_v = kernel_banner(vmlinuz)
        if release != pin.release:
            raise ImageError(f"{deb.name}: kernel reports release {release}, images.yaml says {pin.release}")
        preempt = preempt_model(config.read_text())
        if preempt != pin.preempt:
            raise ImageError(f"{deb.name}: config-{pin.release} is preempt={preempt}, "
                             f"images.yaml says {pin.preempt}")
        shutil.copy2(vmlinuz, out / vmlinuz.name)
        shutil.copy2(config, out / config.name)
        for name in dtbs:
            # armmp: usr/lib/linux-image-<release>/<name>.dtb
            found = sorted((tree / "usr" / "lib" / f"linux-image-{pin.release}").rglob(name))
            if not found:
                raise ImageError(f"{deb.name}: no device tree {name} under usr/lib/linux-image-{pin.release}")
            shutil.copy2(found[0], out / name)
        moddir = tree / "lib" / "modules" / pin.release
        load = _module_closure(moddir, modules, pin.package) if modules else []
        for rel in load:
            dst = out / "modules" / pin.release / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(moddir / rel, dst)
        if load:
            (out / "modules" / pin.release / "rtlab.load").write_text("".join(f"{r}\n" for r in load))
        info = {**want, "release": release, "uname_v": uname_v, "preempt": preempt,
                "vmlinuz": vmlinuz.name, "config": config.name,
                "sha256": sha256_file(out / vmlinuz.name), "load": load}
        (out / "kernel.json").write_text(json.dumps(info, indent=2) + "\n")
        if kdir.exists():
            shutil.rmtree(kdir)
        os.replace(out, kdir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _kernel_from_info(kdir, info)


def _kernel_from_info(kdir: Path, info: Mapping[str, Any]) -> KernelImage:
    return KernelImage(kdir / info["vmlinuz"], info["package"], info["version"], info["release"],
                       info["preempt"], info["uname_v"], info["sha256"], kdir / info["config"])


# --------------------------------------------------------------------------
# Userland: a merged view over unpacked packages, and the DT_NEEDED walk
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    path: Path       # on the host
    package: str
    is_link: bool


class RootView:
    """Several unpacked package trees seen as one root filesystem.

    Paths are relative ("usr/bin/cyclictest"). Symlinks are followed inside
    the view (an absolute target means the view's root, as in a chroot).
    The first package to ship a path wins.
    """

    def __init__(self, roots: Iterable[tuple[str, Path]]):
        self.entries: dict[str, Entry] = {}
        for package, root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                rel_dir = os.path.relpath(dirpath, root)
                for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                    host = Path(dirpath) / name
                    rel = posixpath.normpath(posixpath.join(rel_dir, name))
                    self.entries.setdefault(rel, Entry(host, package, host.is_symlink()))

    def follow(self, rel: str) -> Optional[list[str]]:
        """The chain of paths from *rel* to a regular file, or None."""
        chain: list[str] = []
        for _ in range(40):
            entry = self.entries.get(rel)
            if entry is None:
                return None
            chain.append(rel)
            if not entry.is_link:
                return chain
            target = os.readlink(entry.path)
            joined = target if target.startswith("/") else posixpath.join(posixpath.dirname(rel), target)
            rel = posixpath.normpath("/" + joined).lstrip("/")
        raise ImageError(f"/{chain[0]}: too many levels of symbolic links")


def default_lib_dirs(arch: str) -> tuple[str, ...]:
    t = _arch.get(arch).triplet
    return (f"lib/{t}", f"usr/lib/{t}", "lib", "usr/lib")


def resolve_needed(view: RootView, start: Iterable[str], arch: str,
                   extra: Sequence[str] = ()) -> dict[str, Entry]:
    """Everything the ELF files *start* need at run time, recursively.

    Returns path -> entry for the files themselves, their interpreter and
    every NEEDED library, with the symlinks on the way. Libraries are
    looked up like ld.so does: RUNPATH/RPATH ($ORIGIN expanded), then the
    multiarch and plain lib dirs; a library of another machine or class is
    skipped. *extra* names libraries loaded with dlopen() (so in no
    DT_NEEDED), looked up in the default dirs. Raises
    :class:`MissingLibraryError` naming the ELF file and the library when a
    name cannot be found.
    """
    machine = _arch.get(arch).elf_machine
    out: dict[str, Entry] = {}
    queue: list[str] = []
    done: set[str] = set()
    infos: dict[str, ElfInfo] = {}

    def info_of(rel: str) -> ElfInfo:
        if rel not in infos:
            infos[rel] = read_elf(view.entries[rel].path)
        return infos[rel]

    def add(chain: list[str]) -> None:
        for r in chain:
            out[r] = view.entries[r]
        queue.append(chain[-1])

    def lookup(lib: str, dirs: Sequence[str], bits: int) -> Optional[list[str]]:
        candidates = [lib.lstrip("/")] if "/" in lib else [posixpath.join(d, lib) for d in dirs]
        for cand in candidates:
            chain = view.follow(cand)
            if chain is None or not is_elf(view.entries[chain[-1]].path):
                continue
            li = info_of(chain[-1])
            if li.machine == machine and (bits == 0 or li.bits == bits):
                return chain
        return None

    for rel in start:
        chain = view.follow(rel)
        if chain is None:
            raise ImageError(f"/{rel}: not in the unpacked packages")
        add(chain)
    for lib in extra:
        chain = lookup(lib, default_lib_dirs(arch), 0)
        if chain is None:
            raise MissingLibraryError("initramfs.dlopen in images.yaml", lib, "", default_lib_dirs(arch))
        add(chain)

    while queue:
        rel = queue.pop(0)
        if rel in done:
            continue
        done.add(rel)
        info = info_of(rel)
        if info.machine != machine:
            raise ImageError(f"/{rel} ({view.entries[rel].package}) is built for ELF machine "
                             f"{info.machine}, not {arch}")
        if info.interp:
            chain = view.follow(info.interp.lstrip("/"))
            if chain is None:
                raise MissingLibraryError("/" + rel, info.interp, view.entries[rel].package)
            add(chain)
        origin = "/" + posixpath.dirname(rel)
        dirs = [posixpath.normpath(d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)).lstrip("/")
                for d in info.runpath] + list(default_lib_dirs(arch))
        for lib in info.needed:
            chain = lookup(lib, dirs, info.bits)
            if chain is None:
                raise MissingLibraryError("/" + rel, lib, view.entries[rel].package, dirs)
            add(chain)
    return out


def find_programs(view: RootView, packages: Sequence[str]) -> list[str]:
    """ELF programs (and symlinks to them) that *packages* ship in bin dirs."""
    progs = []
    for rel, entry in sorted(view.entries.items()):
        if entry.package in packages and rel.startswith(PROGRAM_DIRS):
            chain = view.follow(rel)
            if chain and is_elf(view.entries[chain[-1]].path):
                progs.append(rel)
    return progs


# --------------------------------------------------------------------------
# Generated files of the initramfs
# --------------------------------------------------------------------------

INIT = r"""#!/bin/busybox sh
# rtlab board init (generated by rtlab/images.py). Sets the system up, then
# hands PID 1 to busybox init, which reaps orphans and respawns the console
# shell, so a shell that exits never panics the kernel.
bb=/bin/busybox
$bb mount -t proc proc /proc
# applet links need /proc/self/exe; existing files (rt-tests...) are kept
$bb --install -s
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug
[ -d /sys/kernel/tracing ] && mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
hostname rtlab-board
# NIC drivers (virtio) for this kernel, in dependency order
load=/lib/modules/$(uname -r)/rtlab.load
if [ -f "$load" ]; then
    while read -r m; do insmod "/lib/modules/$(uname -r)/$m" || echo "rtlab-init: insmod $m failed"; done < "$load"
fi
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up
    # two 1 s DHCP attempts at most: a board without network still boots fast
    udhcpc -i eth0 -s /usr/share/udhcpc/default.script -n -q -t 2 -T 1 >/dev/null 2>&1 \
        || echo "rtlab-init: no DHCP lease on eth0"
fi
exec /sbin/init
"""

INITTAB = """\
# busybox init: /init already set the system up; keep a root shell on the
# console. cttyhack opens the real console tty (ttyS0/ttyAMA0) as the
# controlling terminal, so job control and Ctrl-C work.
::respawn:/bin/cttyhack /bin/sh -l
::ctrlaltdel:/bin/reboot -f
::restart:/sbin/init
"""

PROFILE = f"""\
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
export PS1='{PROMPT}'
# serial consoles report 0x0; a wide line keeps long commands from wrapping
[ -t 0 ] && stty cols 1024 rows 48 2>/dev/null
cd /root
"""

UDHCPC_SCRIPT = r"""#!/bin/sh
# udhcpc event script (generated by rtlab/images.py)
case "$1" in
deconfig)
    ifconfig "$interface" 0.0.0.0 up
    ;;
bound|renew)
    ifconfig "$interface" "$ip" ${subnet:+netmask "$subnet"} up
    if [ -n "$router" ]; then
        while route del default gw 0.0.0.0 dev "$interface" 2>/dev/null; do :; done
        for r in $router; do route add default gw "$r" dev "$interface"; break; done
    fi
    : > /etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
    ;;
esac
exit 0
"""

STATIC_FILES: dict[str, tuple[str, int]] = {
    "init": (INIT, 0o755),
    "etc/inittab": (INITTAB, 0o644),
    "etc/profile": (PROFILE, 0o644),
    "usr/share/udhcpc/default.script": (UDHCPC_SCRIPT, 0o755),
    "etc/hostname": (f"{HOSTNAME}\n", 0o644),
    "etc/hosts": (f"127.0.0.1\tlocalhost\n127.0.1.1\t{HOSTNAME}\n", 0o644),
    "etc/passwd": ("root:x:0:0:root:/root:/bin/sh\n", 0o644),
    "etc/group": ("root:x:0:\n", 0o644),
    "etc/nsswitch.conf": ("passwd: files\ngroup: files\nhosts: files dns\n", 0o644),
}

STATIC_LINKS: dict[str, str] = {
    "bin/sh": "busybox",
    "sbin/init": "../bin/busybox",
    "var/run": "../run",
}

#: standard directories (LAVA and friends expect them); (path, mode)
STANDARD_DIRS: tuple[tuple[str, int], ...] = (
    ("bin", 0o755), ("sbin", 0o755), ("usr/bin", 0o755), ("usr/sbin", 0o755),
    ("usr/local/bin", 0o755), ("lib", 0o755), ("lib/modules", 0o755), ("etc", 0o755),
    ("dev", 0o755), ("proc", 0o555), ("sys", 0o555), ("run", 0o755), ("tmp", 0o1777),
    ("root", 0o700), ("home", 0o755), ("mnt", 0o755), ("var", 0o755), ("var/tmp", 0o1777),
    ("var/log", 0o755), ("opt", 0o755),
)


def _generated_digest() -> str:
    doc = {"files": STATIC_FILES, "links": STATIC_LINKS, "dirs": STANDARD_DIRS, "format": FORMAT}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------
# Overlays, packing
# --------------------------------------------------------------------------

def overlay_digest(path: Path) -> str:
    """sha256 over an overlay tree: relative paths, types, exec bits,
    contents and symlink targets (mtimes and owners do not matter)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(path, "overlay is not a directory")
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_symlink():
            h.update(f"L {rel} {os.readlink(p)}\n".encode())
        elif p.is_dir():
            h.update(f"D {rel}\n".encode())
        elif p.is_file():
            exe = "x" if p.stat().st_mode & 0o111 else "-"
            h.update(f"F {rel} {exe} {sha256_file(p)}\n".encode())
    return h.hexdigest()


def _place(src: Path, dst: Path, is_link: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    if is_link:
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o755 if src.stat().st_mode & 0o111 else 0o644)


def _copy_overlay(src: Path, root: Path) -> None:
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_dir() and not p.is_symlink():
            (root / rel).mkdir(parents=True, exist_ok=True)
        else:
            _place(p, root / rel, p.is_symlink())


def pack_cpio(root: Path) -> bytes:
    """gzip'd newc cpio of *root*, byte-for-byte reproducible: sorted names,
    mtime 0, owner root, inode numbers renumbered, no gzip timestamp."""
    names = ["."]
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for n in dirnames + filenames:
            names.append(os.path.normpath(os.path.join(rel, n)))
    names = ["."] + sorted(set(names) - {"."}, key=lambda s: s.encode())
    for n in names:
        os.utime(root / n, (0, 0), follow_symlinks=False)
    res = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--reproducible", "--quiet"],
                         input="\n".join(names).encode() + b"\n", cwd=root, capture_output=True)
    if res.returncode != 0:
        raise ImageError(f"cpio -o -H newc in {root}: {res.stderr.decode(errors='replace').strip()}")
    return gzip.compress(res.stdout, compresslevel=9, mtime=0)


# --------------------------------------------------------------------------
# ensure_images
# --------------------------------------------------------------------------

def _quiet(_: str) -> None:
    pass


def ensure_images(arch: str, *, cache_dir: Optional[Path] = None,
                  overlays: Sequence[Union[Path, str]] = (), progress: Optional[Progress] = print,
                  config: Optional[Path] = None, source: Optional[PackageSource] = None,
                  refresh: bool = False) -> ImageSet:
    """Kernels and initramfs for *arch*, built on first use, then cached.

    A call whose inputs (env/images.yaml for this arch, *overlays*, the
    generated /init etc.) were built before returns the recorded set without
    touching apt and without output. ``refresh=True`` resolves package
    versions with apt again (picking up e.g. security updates of libraries).
    """
    if _arch.get_or_none(arch) is None:
        raise ImageError(f"unknown arch {arch!r}; known: {', '.join(ARCHES)}")
    arch = _arch.canonical(arch)
    say: Progress = progress or _quiet
    cfg = load_config(arch, config)
    cache = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE
    ovl = tuple({"path": str(Path(o).resolve()), "sha256": overlay_digest(Path(o))} for o in overlays)
    key = hashlib.sha256(json.dumps({
        "config": cfg.key_data(), "generated": _generated_digest(),
        "overlays": [o["sha256"] for o in ovl],
    }, sort_keys=True).encode()).hexdigest()
    adir = cache / arch
    state = adir / f"manifest-{key[:16]}.json"

    def cached() -> Optional[ImageSet]:
        if refresh or not state.is_file():
            return None
        try:
            iset = ImageSet.from_manifest(json.loads(state.read_text()))
        except (ValueError, KeyError, TypeError):
            return None
        return iset if iset.key == key and iset.files_present() else None

    hit = cached()
    if hit is not None:
        return hit
    with _locked(adir / ".lock"):
        hit = cached()  # another process may have built it while we waited
        if hit is not None:
            return hit
        iset = _build(cfg, cache, adir, ovl, key, say, source or AptSource())
        text = json.dumps(iset.manifest(), indent=2) + "\n"
        _atomic_write(state, text.encode())
        _atomic_write(adir / "manifest.json", text.encode())
        return iset


def _resolve(cfg: ArchConfig, source: PackageSource, debs: DebCache, label: str,
             say: Progress) -> tuple[dict[str, Pkg], dict[str, Pkg], list[Pkg]]:
    """(kernel packages by flavour, requested packages, library packages)."""
    arch = _arch.get(cfg.arch).debian
    say(f"{label}: resolving {len(cfg.packages)} packages and their library dependencies (apt-cache)")
    pins = {pin.package: pin.version for pin in cfg.kernels.values()}
    # one apt-cache call for kernels and programs: each call costs ~2 s here
    shown = source.show([*pins, *cfg.packages], arch, pins)
    kernels: dict[str, Pkg] = {}
    for flavour, pin in cfg.kernels.items():
        got = shown.get(pin.package)
        if got is None:
            got = debs.cached_pin(pin.package, pin.version, arch)
        if got is None:
            raise ImageError(f"{pin.package} {pin.version} ({cfg.path} kernels.{cfg.arch}.{flavour}) "
                             f"is not offered by apt; pick a version `apt-cache policy "
                             f"{pin.package.rsplit('-', 1)[0]}` lists (or snapshot.debian.org)")
        kernels[flavour] = got
    top = {n: shown[n] for n in cfg.packages if n in shown}
    missing = [n for n in cfg.packages if n not in top]
    if missing:
        raise ImageError(f"{cfg.path}: initramfs.packages {', '.join(missing)}: no {arch} package in apt")
    known: dict[str, Optional[Pkg]] = dict(top)  # apt-cache show results
    visited: set[str] = set(top)
    graph: dict[str, list[str]] = {}
    libs: list[Pkg] = []
    frontier = [top[n] for n in cfg.packages]
    while frontier:
        unexpanded = [p for p in frontier if p.name not in graph]
        if unexpanded:
            graph.update(source.depends(unexpanded))
        names = sorted({d for p in frontier for d in graph.get(p.name, []) if d not in visited})
        visited.update(names)
        # a recursive depends already named the whole closure: show it in
        # one go, so later levels need no apt call
        unknown = sorted({*names, *graph} - set(known))
        if unknown:
            shown = source.show(unknown, arch)
            known.update({n: shown.get(n) for n in unknown})
        frontier = []
        for n in names:
            pkg = known[n]
            if pkg is not None and _is_library(pkg):
                libs.append(pkg)
                frontier.append(pkg)
    return kernels, top, libs


def _build(cfg: ArchConfig, cache: Path, adir: Path, ovl: Sequence[Mapping[str, str]], key: str,
           say: Progress, source: PackageSource) -> ImageSet:
    arch = cfg.arch
    label = f"images {arch}"
    debs = DebCache(cache / "debs", source)
    kpkgs, top, libs = _resolve(cfg, source, debs, label, say)
    paths = debs.fetch([*kpkgs.values(), *top.values(), *libs], say, label)

    kernels = {
        flavour: _prepare_kernel(pin, paths[pin.package], kpkgs[flavour].sha256,
                                 adir / "kernels" / f"{pin.package}_{pin.version}",
                                 cfg.modules, say, label, _arch.get(arch).dtbs)
        for flavour, pin in cfg.kernels.items()
    }

    userland = [*top.values(), *libs]
    say(f"{label}: unpacking {len(userland)} packages (dpkg-deb -x)")
    roots = [(p.name, _extract_deb(paths[p.name], adir / "pkgs" / f"{p.name}_{p.version.replace(':', '%3a')}"))
             for p in userland]
    view = RootView(roots)
    programs = find_programs(view, list(cfg.packages))
    if "bin/busybox" not in programs:
        raise ImageError("busybox-static: no bin/busybox among the programs; /init needs it")
    files = resolve_needed(view, programs, arch, extra=cfg.dlopen)
    n_libs = len({e.package for e in files.values()} - set(cfg.packages))
    say(f"{label}: {len(programs)} programs need {len(files) - len(programs)} library files "
        f"from {n_libs} packages")

    with tempfile.TemporaryDirectory(dir=adir, prefix=".root-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        for d, _ in STANDARD_DIRS:
            (root / d).mkdir(parents=True, exist_ok=True)
        for rel, entry in sorted(files.items()):
            _place(entry.path, root / rel, entry.is_link)
        for k in kernels.values():
            mods = k.path.parent / "modules"
            if mods.is_dir():
                _copy_overlay(mods, root / "lib" / "modules")
        for rel, (text, mode) in STATIC_FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            os.chmod(root / rel, mode)
        for rel, target in STATIC_LINKS.items():
            if not (root / rel).is_symlink() and not (root / rel).exists():
                os.symlink(target, root / rel)
        release = {"arch": arch, "packages": {p.name: p.version for p in sorted(userland)},
                   "kernels": {f: f"{k.package} {k.version}" for f, k in kernels.items()}}
        (root / "etc" / "rtlab-release.json").write_text(json.dumps(release, indent=1, sort_keys=True) + "\n")
        for o in ovl:
            _copy_overlay(Path(o["path"]), root)
        # modes are part of the content: normalise what umask/packages left
        for dirpath, dirnames, _ in os.walk(root):
            for d in dirnames:
                p = Path(dirpath) / d
                if not p.is_symlink():
                    os.chmod(p, 0o755)
        for d, mode in STANDARD_DIRS:
            os.chmod(root / d, mode)
        os.chmod(root, 0o755)
        n_entries = sum(len(f) + len(d) for _, d, f in os.walk(root))
        say(f"{label}: packing initramfs, {n_entries} entries (cpio -H newc, gzip)")
        blob = pack_cpio(root)

    digest = hashlib.sha256(blob).hexdigest()
    initramfs = adir / f"initramfs-{arch}-{digest[:16]}.cpio.gz"
    if not initramfs.is_file() or sha256_file(initramfs) != digest:
        _atomic_write(initramfs, blob)
    say(f"{label}: {initramfs.name} {len(blob) / 1e6:.1f} MB")
    return ImageSet(arch, kernels, initramfs, digest, tuple(sorted([*kpkgs.values(), *userland])),
                    tuple(dict(o) for o in ovl), key, {"initramfs": len(blob),
                                      **{f: k.path.stat().st_size for f, k in kernels.items()}})


# --------------------------------------------------------------------------
# Running an image set under QEMU (boards build on this; handy for debugging)
# --------------------------------------------------------------------------

def qemu_command(images: ImageSet, flavour: str = "rt", *, append: str = "", smp: int = 2,
                 memory: int = 1024, accel: str = "tcg", network: bool = True) -> list[str]:
    """A plain qemu command line booting *flavour* with the initramfs, the
    serial console on stdio. TCG by default: KVM guests hang on this host."""
    q = _arch.get(images.arch).qemu
    kernel = images.kernels[flavour]
    cmd = [q.binary, "-machine", q.machine, "-cpu", q.cpu, "-accel", accel,
           "-smp", str(smp), "-m", str(memory), "-nographic", "-no-reboot",
           "-kernel", str(kernel.path), "-initrd", str(images.initramfs),
           "-append", f"console={q.console} {append}".strip()]
    cmd += ["-nic", q.nic] if network else ["-nic", "none"]
    return cmd
