"""ELF: just enough of the format to read PT_INTERP, DT_NEEDED, DT_RUNPATH and
a module's .modinfo; no binutils needed, and it reads foreign-arch files."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from .errors import ImageError


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
