"""The host's apt as a package source: signed indexes, apt-cache to resolve, apt-get download."""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

from .hostcmd import _run
from .packages import Pkg


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
