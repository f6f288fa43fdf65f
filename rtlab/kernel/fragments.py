"""Config fragments (kernel-configs/fragments/*.config): reading them, what they ask for, the board's base."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from .. import ROOT
from ..targets import arch as _arch
from ..errors import InputError


FRAGMENTS_DIR = ROOT / "kernel-configs" / "fragments"

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
