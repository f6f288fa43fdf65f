"""rtlab.images without a network: the ELF reader and DT_NEEDED walk on
generated ELF files, apt output parsing, and the content-keyed cache driven
by a fake package source that builds small .debs with dpkg-deb."""
from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess
import textwrap
from pathlib import Path

import pytest

from rtlab import images as im
from rtlab.errors import RtlabError

X86_64, AARCH64 = 62, 183


# ---------------------------------------------------------------- ELF files

def make_elf(*, machine: int = X86_64, bits: int = 64, little: bool = True, interp: str | None = None,
             needed: tuple[str, ...] = (), runpath: str | None = None, soname: str | None = None,
             modinfo: dict[str, str] | None = None, vaddr: int = 0x10000) -> bytes:
    """A minimal ELF file: one PT_LOAD mapping the file at *vaddr*, optional
    PT_INTERP and PT_DYNAMIC (NEEDED/RUNPATH/SONAME), optional .modinfo."""
    e = "<" if little else ">"
    ehsize, phentsize, shentsize = (64, 56, 64) if bits == 64 else (52, 32, 40)
    dyn_entry = "qQ" if bits == 64 else "iI"
    dynstr = b"\0"
    tags: list[tuple[int, int]] = []

    def string(s: str) -> int:
        nonlocal dynstr
        off = len(dynstr)
        dynstr += s.encode() + b"\0"
        return off

    for n in needed:
        tags.append((im.DT_NEEDED, string(n)))
    if runpath:
        tags.append((im.DT_RUNPATH, string(runpath)))
    if soname:
        tags.append((im.DT_SONAME, string(soname)))
    has_dyn = bool(tags)
    phnum = 1 + (interp is not None) + has_dyn
    off = ehsize + phnum * phentsize
    interp_b = (interp.encode() + b"\0") if interp else b""
    interp_off = off
    off += len(interp_b)
    dynstr_off = off
    off += len(dynstr)
    off = (off + 7) & ~7
    dyn_off = off
    tags += [(im.DT_STRTAB, vaddr + dynstr_off), (im.DT_STRSZ, len(dynstr)), (im.DT_NULL, 0)]
    dyn = b"".join(struct.pack(e + dyn_entry, t, v) for t, v in tags) if has_dyn else b""
    off += len(dyn)
    body = bytearray(off - ehsize - phnum * phentsize)
    rel = ehsize + phnum * phentsize
    body[interp_off - rel:interp_off - rel + len(interp_b)] = interp_b
    body[dynstr_off - rel:dynstr_off - rel + len(dynstr)] = dynstr
    body[dyn_off - rel:dyn_off - rel + len(dyn)] = dyn

    sections = b""
    shoff = shnum = shstrndx = 0
    if modinfo is not None:
        mi = b"".join(f"{k}={v}".encode() + b"\0" for k, v in modinfo.items())
        shstr = b"\0.modinfo\0.shstrtab\0"
        mi_off = off
        shstr_off = mi_off + len(mi)
        shoff = (shstr_off + len(shstr) + 7) & ~7
        pad = shoff - (shstr_off + len(shstr))
        fmt = e + ("IIQQQQIIQQ" if bits == 64 else "IIIIIIIIII")
        shdrs = [struct.pack(fmt, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                 struct.pack(fmt, 1, 1, 0, 0, mi_off, len(mi), 0, 0, 1, 0),
                 struct.pack(fmt, 10, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)]
        sections = mi + shstr + b"\0" * pad + b"".join(shdrs)
        shnum, shstrndx = 3, 2

    total = off + len(sections)
    phdrs = []
    if bits == 64:
        def ph(t: int, o: int, sz: int) -> bytes:
            return struct.pack(e + "IIQQQQQQ", t, 4, o, vaddr + o, vaddr + o, sz, sz, 8)
        ident = b"\x7fELF" + bytes([2, 1 if little else 2, 1]) + b"\0" * 9
        header = ident + struct.pack(e + "HHIQQQIHHHHHH", 3, machine, 1, 0, ehsize, shoff, 0,
                                     ehsize, phentsize, phnum, shentsize, shnum, shstrndx)
    else:
        def ph(t: int, o: int, sz: int) -> bytes:
            return struct.pack(e + "IIIIIIII", t, o, vaddr + o, vaddr + o, sz, sz, 4, 4)
        ident = b"\x7fELF" + bytes([1, 1 if little else 2, 1]) + b"\0" * 9
        header = ident + struct.pack(e + "HHIIIIIHHHHHH", 3, machine, 1, 0, ehsize, shoff, 0,
                                     ehsize, phentsize, phnum, shentsize, shnum, shstrndx)
    phdrs.append(ph(im.PT_LOAD, 0, total))
    if interp is not None:
        phdrs.append(ph(im.PT_INTERP, interp_off, len(interp_b)))
    if has_dyn:
        phdrs.append(ph(im.PT_DYNAMIC, dyn_off, len(dyn)))
    return header + b"".join(phdrs) + bytes(body) + sections


@pytest.mark.parametrize("bits,little,machine", [(64, True, X86_64), (32, False, 8), (64, True, AARCH64)])
def test_read_elf_interp_needed_runpath_soname(tmp_path, bits, little, machine):
    p = tmp_path / "prog"
    p.write_bytes(make_elf(bits=bits, little=little, machine=machine, interp="/lib/ld.so.1",
                           needed=("libfoo.so.1", "libc.so.6"), runpath="$ORIGIN/../lib:/opt/x",
                           soname="libprog.so.3"))
    info = im.read_elf(p)
    assert (info.bits, info.little_endian, info.machine) == (bits, little, machine)
    assert info.interp == "/lib/ld.so.1"
    assert info.needed == ("libfoo.so.1", "libc.so.6")
    assert info.runpath == ("$ORIGIN/../lib", "/opt/x")
    assert info.soname == "libprog.so.3"


def test_read_elf_of_a_real_host_binary():
    info = im.read_elf(Path("/bin/ls"))
    assert "libc.so.6" in info.needed and info.interp and info.bits == 64


def test_read_elf_rejects_non_elf(tmp_path):
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert not im.is_elf(tmp_path / "script")
    with pytest.raises(im.ImageError, match="script: not an ELF file"):
        im.read_elf(tmp_path / "script")


def test_read_modinfo_depends(tmp_path):
    ko = tmp_path / "virtio_net.ko"
    ko.write_bytes(make_elf(modinfo={"name": "virtio_net", "depends": "net_failover,virtio"}))
    assert im.read_modinfo(ko)["depends"] == ["net_failover,virtio"]


# ------------------------------------------------------------ NEEDED walk

def _tree(root: Path, files: dict[str, bytes | str]) -> Path:
    """Write files (bytes) and symlinks (str targets) below root."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            p.symlink_to(content)
        else:
            p.write_bytes(content)
    return root


def test_resolve_needed_follows_symlinks_runpath_interp_and_dlopen(tmp_path):
    t = "x86_64-linux-gnu"
    libc = _tree(tmp_path / "libc6", {
        f"lib/{t}/libc.so.6": make_elf(soname="libc.so.6", needed=("ld-linux-x86-64.so.2",)),
        f"lib/{t}/ld-linux-x86-64.so.2": make_elf(soname="ld-linux-x86-64.so.2"),
        "lib64/ld-linux-x86-64.so.2": f"/lib/{t}/ld-linux-x86-64.so.2",
        f"lib/{t}/libunused.so.1": make_elf(),
    })
    gcc = _tree(tmp_path / "libgcc-s1", {f"lib/{t}/libgcc_s.so.1": make_elf(needed=("libc.so.6",))})
    numa = _tree(tmp_path / "libnuma1", {
        # an arm64 copy first in the search order must be skipped, like ld.so does
        f"lib/{t}/libnuma.so.1": make_elf(machine=AARCH64),
        f"usr/lib/{t}/libnuma.so.1": "libnuma.so.1.0.0",
        f"usr/lib/{t}/libnuma.so.1.0.0": make_elf(needed=("libc.so.6",)),
    })
    prog = _tree(tmp_path / "rt-tests", {
        "usr/bin/cyclictest": make_elf(interp="/lib64/ld-linux-x86-64.so.2",
                                       needed=("libnuma.so.1", "libpriv.so.0", "libc.so.6"),
                                       runpath="$ORIGIN/../lib/rt-tests"),
        "usr/lib/rt-tests/libpriv.so.0": make_elf(needed=("libc.so.6",)),
        "usr/bin/hwlatdetect": b"#!/usr/bin/python3\n",
    })
    view = im.RootView([("rt-tests", prog), ("libnuma1", numa), ("libc6", libc), ("libgcc-s1", gcc)])
    progs = im.find_programs(view, ["rt-tests"])
    assert progs == ["usr/bin/cyclictest"]  # the python script is not a program
    got = im.resolve_needed(view, progs, "x86_64", extra=["libgcc_s.so.1"])
    assert sorted(got) == sorted([
        "usr/bin/cyclictest",
        "lib64/ld-linux-x86-64.so.2", f"lib/{t}/ld-linux-x86-64.so.2",
        f"usr/lib/{t}/libnuma.so.1", f"usr/lib/{t}/libnuma.so.1.0.0",
        "usr/lib/rt-tests/libpriv.so.0",
        f"lib/{t}/libc.so.6", f"lib/{t}/libgcc_s.so.1",
    ])
    assert got[f"usr/lib/{t}/libnuma.so.1"].is_link and got[f"usr/lib/{t}/libnuma.so.1"].package == "libnuma1"


def test_resolve_needed_names_binary_and_missing_library(tmp_path):
    prog = _tree(tmp_path / "stress-ng", {"usr/bin/stress-ng": make_elf(needed=("libJudy.so.1",))})
    view = im.RootView([("stress-ng", prog)])
    with pytest.raises(im.MissingLibraryError) as exc:
        im.resolve_needed(view, ["usr/bin/stress-ng"], "x86_64")
    assert isinstance(exc.value, RtlabError)
    assert exc.value.binary == "/usr/bin/stress-ng" and exc.value.library == "libJudy.so.1"
    assert "/usr/bin/stress-ng (package stress-ng) needs libJudy.so.1" in str(exc.value)


def test_resolve_needed_missing_interpreter(tmp_path):
    prog = _tree(tmp_path / "mbw", {"usr/bin/mbw": make_elf(interp="/lib/ld-linux-aarch64.so.1",
                                                            machine=AARCH64)})
    with pytest.raises(im.MissingLibraryError, match="mbw.*ld-linux-aarch64.so.1"):
        im.resolve_needed(im.RootView([("mbw", prog)]), ["usr/bin/mbw"], "aarch64")


# ------------------------------------------------------------ apt output

def test_parse_apt_depends_alternatives_virtuals_and_arch_qualifiers():
    text = textwrap.dedent("""\
        iperf3:arm64
          PreDepends: <init-system-helpers:arm64>
            init-system-helpers
          Depends: libc6:arm64
         |Depends: <debconf:arm64>
            debconf
          Depends: <debconf-2.0>
            cdebconf:arm64
            debconf
          Depends: libiperf0:arm64
          Recommends: libsctp1:arm64
          Breaks: old:arm64
        libc6:arm64
          Depends: libgcc-s1:arm64
        libc6
          Depends: libgcc-s1
        <debconf-2.0>
        """)
    deps = im.parse_apt_depends(text)
    # OR group "debconf | debconf-2.0" counts once, as its first alternative
    assert deps["iperf3:arm64"] == ["init-system-helpers", "libc6", "debconf", "libiperf0"]
    assert deps["libc6:arm64"] == ["libgcc-s1"] and deps["libc6"] == ["libgcc-s1"]
    assert "<debconf-2.0>" not in deps


def test_preempt_model_and_kernel_banner(tmp_path):
    assert im.preempt_model("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n") == "dynamic"
    assert im.preempt_model("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPTION=y\n") == "rt"
    assert im.preempt_model("CONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\n") == "voluntary"
    bz = bytearray(0x400)
    bz[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", bz, 0x20E, 0x100)
    text = b"6.1.0-50-rt-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)\0"
    bz[0x300:0x300 + len(text)] = text
    (tmp_path / "bz").write_bytes(bytes(bz))
    assert im.kernel_banner(tmp_path / "bz") == ("6.1.0-50-rt-amd64", "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)")
    raw = b"\0" * 64 + b"Linux version 6.1.0-50-arm64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) " \
          b"12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP Debian 6.1.176-1 (2026-07-02)\n\0"
    (tmp_path / "Image.gz").write_bytes(gzip.compress(raw))
    assert im.kernel_banner(tmp_path / "Image.gz") == ("6.1.0-50-arm64", "#1 SMP Debian 6.1.176-1 (2026-07-02)")


# ------------------------------------------------- cache and idempotence

T = "x86_64-linux-gnu"


def _kernel_files(release: str, preempt: str) -> dict[str, bytes | str]:
    kind = {"dynamic": "PREEMPT_DYNAMIC", "rt": "PREEMPT_RT"}[preempt]
    banner = f"Linux version {release} (x@y) (gcc) #1 SMP {kind} Debian 6.1.1-1 (2026-01-01)\n".encode()
    mods = f"lib/modules/{release}"
    return {
        f"boot/vmlinuz-{release}": b"\0" * 128 + banner,
        f"boot/config-{release}": f"CONFIG_{kind}=y\n".encode(),
        f"{mods}/kernel/drivers/net/virtio_net.ko": make_elf(modinfo={"depends": "failover"}),
        f"{mods}/kernel/net/core/failover.ko": make_elf(modinfo={"depends": ""}),
        f"{mods}/kernel/drivers/gpu/unused.ko": make_elf(modinfo={"depends": ""}),
        f"{mods}/modules.builtin": b"kernel/drivers/virtio/virtio_pci.ko\n",
    }


PACKAGES: dict[str, tuple[str, str, list[str], dict[str, bytes | str]]] = {
    # name: (version, section, depends, files)
    "linux-image-6.1.0-1-amd64": ("6.1.1-1", "kernel", [], _kernel_files("6.1.0-1-amd64", "dynamic")),
    "linux-image-6.1.0-1-rt-amd64": ("6.1.1-1", "kernel", [], _kernel_files("6.1.0-1-rt-amd64", "rt")),
    "busybox-static": ("1:1.35.0-4", "shells", [], {"bin/busybox": make_elf()}),
    "rt-tests": ("2.4-1", "misc", ["libc6", "libnuma1", "python3"], {
        "usr/bin/cyclictest": make_elf(interp="/lib64/ld-linux-x86-64.so.2",
                                       needed=("libnuma.so.1", "libc.so.6")),
        "usr/bin/hwlatdetect": b"#!/usr/bin/python3\n",
        "usr/share/doc/rt-tests/README": b"docs are left out\n",
    }),
    "libnuma1": ("2.0.16-1", "libs", ["libc6"], {
        f"usr/lib/{T}/libnuma.so.1": "libnuma.so.1.0.0",
        f"usr/lib/{T}/libnuma.so.1.0.0": make_elf(needed=("libc.so.6",)),
    }),
    "libc6": ("2.36-9", "libs", ["libgcc-s1"], {
        f"lib/{T}/libc.so.6": make_elf(needed=("ld-linux-x86-64.so.2",)),
        f"lib/{T}/ld-linux-x86-64.so.2": make_elf(),
        "lib64/ld-linux-x86-64.so.2": f"/lib/{T}/ld-linux-x86-64.so.2",
        f"lib/{T}/libunused.so.1": make_elf(),
    }),
    "libgcc-s1": ("12.2.0-14", "libs", ["libc6"], {f"lib/{T}/libgcc_s.so.1": make_elf()}),
    "python3": ("3.11.2-1", "python", [], {"usr/bin/python3": make_elf()}),
}

CONFIG = """\
kernels:
  x86_64:
    generic: {package: linux-image-6.1.0-1-amd64, version: 6.1.1-1, release: 6.1.0-1-amd64, preempt: dynamic}
    rt: {package: linux-image-6.1.0-1-rt-amd64, version: 6.1.1-1, release: 6.1.0-1-rt-amd64, preempt: rt}
initramfs:
  packages: [busybox-static, rt-tests]
  dlopen: [libgcc_s.so.1]
  modules: [virtio_pci, virtio_net]
"""


class FakeSource:
    """Packages from PACKAGES, built once into .debs with dpkg-deb."""

    def __init__(self, workdir: Path):
        self.debs: dict[str, tuple[im.Pkg, Path]] = {}
        self.calls: list[str] = []
        for name, (version, section, _deps, files) in PACKAGES.items():
            tree = _tree(workdir / "src" / name, files)
            (tree / "DEBIAN").mkdir()
            (tree / "DEBIAN" / "control").write_text(
                f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                f"Maintainer: t <t@example.org>\nDescription: test\n")
            deb = workdir / f"{name}.deb"
            subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(tree), str(deb)],
                           check=True, capture_output=True)
            self.debs[name] = (im.Pkg(name, version, "amd64", im.sha256_file(deb), deb.stat().st_size,
                                      section, "amd64"), deb)

    def show(self, names, arch, pins=None):
        self.calls.append("show")
        pins = pins or {}
        return {n: self.debs[n][0] for n in names
                if n in self.debs and pins.get(n, self.debs[n][0].version) == self.debs[n][0].version}

    def depends(self, pkgs):
        self.calls.append("depends")
        return {p.name: PACKAGES[p.name][2] for p in pkgs}

    def download(self, pkgs, dest):
        self.calls.append("download")
        for p in pkgs:
            shutil.copy(self.debs[p.name][1], dest / p.deb_name)


class NoSource:
    def __getattr__(self, name):
        raise AssertionError(f"the cache hit called the package source ({name})")


def _cpio_names(path: Path) -> list[str]:
    out = subprocess.run(["cpio", "-t", "--quiet"], input=gzip.decompress(path.read_bytes()),
                         capture_output=True, check=True)
    return out.stdout.decode().split()


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    d = tmp_path_factory.mktemp("fake")
    (d / "images.yaml").write_text(CONFIG)
    return FakeSource(d), d / "images.yaml"


def test_build_then_cache_hit_is_quiet_and_does_not_rebuild(tmp_path, fake):
    source, config = fake
    overlay = _tree(tmp_path / "overlay", {"usr/bin/rtbench": b"#!/bin/sh\necho v1\n"})
    (overlay / "usr/bin/rtbench").chmod(0o755)
    said: list[str] = []
    first = im.ensure_images("x86_64", cache_dir=tmp_path / "cache", overlays=[overlay],
                             progress=said.append, config=config, source=source)
    assert said and all(line.startswith("images x86_64: ") for line in said)
    assert "download" in source.calls
    names = _cpio_names(first.initramfs)
    for want in ("init", "bin/busybox", "bin/sh", "sbin/init", "etc/inittab", "usr/bin/cyclictest",
                 f"usr/lib/{T}/libnuma.so.1.0.0", f"lib/{T}/libc.so.6", "lib64/ld-linux-x86-64.so.2",
                 f"lib/{T}/libgcc_s.so.1", "usr/bin/rtbench", "dev", "proc", "sys", "tmp",
                 "lib/modules/6.1.0-1-rt-amd64/kernel/drivers/net/virtio_net.ko",
                 "lib/modules/6.1.0-1-rt-amd64/kernel/net/core/failover.ko",
                 "lib/modules/6.1.0-1-amd64/rtlab.load"):
        assert want in names, want
    for unwanted in (f"lib/{T}/libunused.so.1", "usr/bin/hwlatdetect", "usr/bin/python3",
                     "usr/share/doc/rt-tests/README", "lib/modules/6.1.0-1-amd64/kernel/drivers/gpu/unused.ko"):
        assert unwanted not in names, unwanted
    assert {p.name for p in first.packages} == set(PACKAGES) - {"python3"}
    rt = first.kernels["rt"]
    assert (rt.release, rt.preempt, rt.version) == ("6.1.0-1-rt-amd64", "rt", "6.1.1-1")
    assert rt.uname_v == "#1 SMP PREEMPT_RT Debian 6.1.1-1 (2026-01-01)"
    load = (rt.path.parent / "modules" / rt.release / "rtlab.load").read_text().split()
    assert load == ["kernel/net/core/failover.ko", "kernel/drivers/net/virtio_net.ko"]  # deps first
    manifest = first.manifest()
    assert manifest["initramfs"]["sha256"][:16] in first.initramfs.name
    assert (tmp_path / "cache" / "x86_64" / "manifest.json").is_file()
    assert list((tmp_path / "cache" / "debs").glob("*.deb.sha256"))

    mtime = first.initramfs.stat().st_mtime_ns
    said.clear()
    again = im.ensure_images("x86_64", cache_dir=tmp_path / "cache", overlays=[overlay],
                             progress=said.append, config=config, source=NoSource())
    assert said == []
    assert again.manifest() == manifest
    assert again.initramfs.stat().st_mtime_ns == mtime


def test_a_moved_or_shared_cache_names_its_own_files(tmp_path, fake):
    """The cache's manifest names files relative to the cache root: a cache
    moved elsewhere, or reached by another checkout through a symlink, is a
    hit that names its files where they are now, never where they were built."""
    source, config = fake
    built = im.ensure_images("x86_64", cache_dir=tmp_path / "a", config=config, source=source, progress=None)
    stored = json.loads((tmp_path / "a" / "x86_64" / f"manifest-{built.key[:16]}.json").read_text())
    paths = [stored["initramfs"]["path"], *(k[f] for k in stored["kernels"].values() for f in ("path", "config"))]
    assert len(paths) == 5 and all(p.startswith("x86_64/") for p in paths), paths

    (tmp_path / "a").rename(tmp_path / "b")
    said: list[str] = []
    moved = im.ensure_images("x86_64", cache_dir=tmp_path / "b", config=config, source=NoSource(),
                             progress=said.append)
    assert said == [] and moved.key == built.key
    files = [moved.initramfs, *(k.path for k in moved.kernels.values()), *(k.config for k in moved.kernels.values())]
    assert all(p.is_file() and p.is_relative_to(tmp_path / "b") for p in files), files

    # a checkout whose .cache is a symlink to another checkout's cache gets the real files
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / ".cache").symlink_to(tmp_path / "b")
    shared = im.ensure_images("x86_64", cache_dir=tmp_path / "checkout" / ".cache", config=config,
                              source=NoSource(), progress=None)
    assert shared.initramfs == moved.initramfs and shared.kernels == moved.kernels


def test_content_hash_follows_overlay_content_and_is_reproducible(tmp_path, fake):
    source, config = fake
    overlay = _tree(tmp_path / "overlay", {"usr/bin/rtbench": b"v1\n"})

    def build(cache: str):
        return im.ensure_images("x86_64", cache_dir=tmp_path / cache, overlays=[overlay],
                                progress=None, config=config, source=source)

    a = build("cache")
    (overlay / "usr/bin/rtbench").write_bytes(b"v2\n")
    b = build("cache")
    assert b.initramfs != a.initramfs and b.initramfs_sha256 != a.initramfs_sha256
    assert b.key != a.key
    assert b.kernels == a.kernels  # kernels do not depend on overlays
    (overlay / "usr/bin/rtbench").write_bytes(b"v1\n")
    assert build("cache").initramfs == a.initramfs  # back to v1: the v1 build again
    # a fresh cache rebuilds byte-for-byte the same initramfs
    fresh = build("fresh")
    assert fresh.initramfs_sha256 == a.initramfs_sha256
    assert fresh.initramfs.read_bytes() == a.initramfs.read_bytes()


def test_errors_name_the_file_or_package(tmp_path, fake):
    source, config = fake
    with pytest.raises(RtlabError, match="unknown arch 'riscv64'"):
        im.ensure_images("riscv64", cache_dir=tmp_path, config=config, source=source)
    bad = tmp_path / "images.yaml"
    bad.write_text(CONFIG.replace("version: 6.1.1-1, release: 6.1.0-1-rt-amd64", "version: 9.9-9, release: 6.1.0-1-rt-amd64"))
    with pytest.raises(im.ImageError, match=r"linux-image-6.1.0-1-rt-amd64 9.9-9 .*kernels.x86_64.rt"):
        im.ensure_images("x86_64", cache_dir=tmp_path / "c", config=bad, source=source, progress=None)
    bad.write_text(CONFIG.replace("preempt: rt}", "preempt: dynamic}"))
    with pytest.raises(im.ImageError, match="config-6.1.0-1-rt-amd64 is preempt=rt, images.yaml says dynamic"):
        im.ensure_images("x86_64", cache_dir=tmp_path / "c", config=bad, source=source, progress=None)
    bad.write_text(CONFIG.replace("[busybox-static, rt-tests]", "[busybox-static, rt-tests, nosuch]"))
    with pytest.raises(im.ImageError, match="initramfs.packages nosuch"):
        im.ensure_images("x86_64", cache_dir=tmp_path / "c", config=bad, source=source, progress=None)
    with pytest.raises(RtlabError, match="overlay is not a directory"):
        im.ensure_images("x86_64", cache_dir=tmp_path / "c", config=config, source=source,
                         overlays=[tmp_path / "missing"], progress=None)


def test_kernel_banner_reads_an_arm_zimage_with_an_xz_payload(tmp_path):
    """32-bit ARM kernels are zImages: a decompressor stub, the magic
    0x016F2818 at 0x24, then the xz-compressed kernel (Debian's armmp)."""
    import lzma
    import struct

    from rtlab.images import ImageError, kernel_banner

    kernel = b"\0" * 4096 + b"Linux version 6.1.0-50-armmp (debian-kernel@lists.debian.org) " \
        b"(gcc 12) #1 SMP Debian 6.1.176-1 (2026-07-02)\n\0" + b"\0" * 4096
    stub = bytearray(0x200)
    struct.pack_into("<I", stub, 0x24, 0x016F2818)
    z = tmp_path / "vmlinuz"
    # a false xz magic first (as in the stub's own code): the real stream is found after it
    z.write_bytes(bytes(stub) + b"\xfd7zXZ\x00junk" + lzma.compress(kernel, lzma.FORMAT_XZ) + b"\0" * 64)
    assert kernel_banner(z) == ("6.1.0-50-armmp", "#1 SMP Debian 6.1.176-1 (2026-07-02)")
    z.write_bytes(bytes(stub) + b"\0" * 100)
    with pytest.raises(ImageError, match="zImage without"):
        kernel_banner(z)
