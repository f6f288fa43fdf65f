"""Kernel image facts: release and `uname -v` from the image, the preemption model
from a .config."""
from __future__ import annotations

import gzip
import lzma
import re
import struct
import zlib
from pathlib import Path

from .errors import ImageError

_BANNER_RE = re.compile(rb"Linux version (\S+) [^\n\0]*?(#\d+ [^\n\0]*)")


def _arm_zimage_payload(data: bytes, path: Path) -> bytes:
    """The kernel inside a 32-bit ARM zImage (magic 0x016F2818 at 0x24): a
    decompressor stub followed by the compressed kernel (xz for Debian's
    armmp, gzip for others); the first stream that decompresses wins."""
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
