"""The "option survived" check: requested options that `make olddefconfig` dropped, and why."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from .errors import KernelError
from .fragments import parse_config


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


#: a Kconfig file larger than this is not read for a hint
KCONFIG_MAX_BYTES = 4 << 20


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
                # the tree's files: a Kconfig that is a symlink or a FIFO is not read
                if path.is_symlink() or not path.is_file() or path.stat().st_size > KCONFIG_MAX_BYTES:
                    continue
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
