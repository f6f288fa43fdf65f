"""Configuring a build: tinyconfig, the kernel's merge_config.sh, olddefconfig, then the option check."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..targets import arch as _arch
from .fragments import Fragment, requested_options
from .make import _Make
from .output import CONFIG_MAX_BYTES, read_output, take_config
from .options import Dropped, KernelConfigError, check_options, kconfig_hint
from .progress import Progress


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
    dropped = check_options(requested, read_output(obj / ".config", CONFIG_MAX_BYTES, ".config")
                            .decode(errors="replace"))
    if dropped:
        take_config(obj / ".config", bdir / ".config")
        dropped = [Dropped(d.option, d.wanted, d.got, d.fragment, d.line,
                           kconfig_hint(tree, karch.kernel_arch, d.option)) for d in dropped]
        with open(make.log, "a") as f:
            f.write("\nrtlab: requested options that did not survive olddefconfig:\n"
                    + "\n".join(d.describe() for d in dropped) + "\n")
        raise KernelConfigError(dropped, arch, bdir / ".config", make.log)
    return len(requested)
