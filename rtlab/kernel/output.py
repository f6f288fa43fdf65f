"""What rtlab takes from a build's output directory, checked before it takes it.

The output directory was the sandbox's one writable place, so everything in
it was written by the tree's code: the image could be a symlink to a secret
of the runner, a device, a FIFO, a 10 GB file, or not a kernel at all. Only
a regular file (no symlink, opened without following one) of bounded size in
the architecture's image format enters the kernel cache.
"""
from __future__ import annotations

import os
import re
import stat
import struct
from pathlib import Path

from ..targets.arch import Arch
from .errors import KernelError

#: the largest boot image taken (Debian's arm64 Image is ~35 MB, a tinyconfig one a few MB)
IMAGE_MAX_BYTES = 128 << 20
#: the largest .config taken (allyesconfig is ~350 kB)
CONFIG_MAX_BYTES = 8 << 20
#: `make kernelrelease`: what `uname -r` can be (Kbuild: version, localversion, git describe)
RELEASE_RE = re.compile(r"[0-9][A-Za-z0-9._+~-]{0,99}")


def read_output(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of *path*, a regular file of at most *max_bytes*, opened
    without following a symlink; KernelError naming *what* otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise KernelError(f"the build's {what} {path} cannot be taken: "
                          + ("it is a symlink" if os.path.islink(path) else (e.strerror or str(e)))) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise KernelError(f"the build's {what} {path} is not a regular file")
        if st.st_size > max_bytes:
            raise KernelError(f"the build's {what} {path} is {st.st_size} bytes, more than the "
                              f"{max_bytes} bytes a {what} may have")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise KernelError(f"the build's {what} {path} grew past {max_bytes} bytes while read")
    return data


def image_format_problem(data: bytes, karch: Arch) -> str:
    """Why *data* is not a boot image of *karch*, or "" when it is."""
    name = karch.kernel_image_name
    if name == "bzImage":
        ok = data[0x202:0x206] == b"HdrS"
        want = "an x86 bzImage (setup header 'HdrS' at 0x202)"
    elif name == "Image":
        ok = data[0x38:0x3C] == b"ARM\x64"
        want = "an arm64 Image (magic 'ARM\\x64' at 0x38)"
    elif name == "zImage":
        ok = len(data) >= 0x28 and struct.unpack_from("<I", data, 0x24)[0] == 0x016F2818
        want = "an ARM zImage (magic 0x016F2818 at 0x24)"
    else:  # an arch added without its format: refuse rather than take anything
        return f"no image format known for {name}"
    return "" if ok else f"not {want}"


def take_image(src: Path, dest: Path, karch: Arch) -> None:
    """Copy the build's boot image to *dest* once it is shown to be one."""
    data = read_output(src, IMAGE_MAX_BYTES, "image")
    why = image_format_problem(data, karch)
    if why:
        raise KernelError(f"the build's image {src} is {why}")
    dest.write_bytes(data)


def take_config(src: Path, dest: Path) -> str:
    """Copy the build's .config to *dest*; returns its text."""
    data = read_output(src, CONFIG_MAX_BYTES, ".config")
    dest.write_bytes(data)
    return data.decode(errors="replace")


def check_release(text: str) -> str:
    """The kernel release `make -s kernelrelease` printed (its last line), checked."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    release = lines[-1] if lines else ""
    if not RELEASE_RE.fullmatch(release):
        raise KernelError("`make -s kernelrelease` printed no kernel release (a version such as 6.12.57-rt14: "
                          "digits, letters and . _ + ~ -, at most 100 characters)")
    return release
