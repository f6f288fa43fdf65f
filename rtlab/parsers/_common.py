"""Helpers shared by the rt-tests / rtbench parsers.

Every failure is raised as :class:`rtlab.errors.InputError` naming the file
and the place (``line N`` for text, ``key a.b.c`` for JSON).
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Iterable, Optional

from ..errors import InputError


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(line: str) -> str:
    """Drop terminal escapes (the live display of rt-tests without -q)."""
    return _ANSI.sub("", line)


def us(value: float, ns: bool) -> float:
    """A latency as the tool printed it, in microseconds.

    Division rather than multiplication by 0.001: ``14553 / 1000`` is the
    double nearest to 14.553, ``14553 * 0.001`` need not be.
    """
    return value / 1000 if ns else float(value)


def cpu_or_none(cpu: Optional[int]) -> Optional[int]:
    """rt-tests writes -1 for "not pinned"."""
    return None if cpu is None or cpu < 0 else cpu


#: the most JSON object members a document may hold (histogram buckets,
#: mostly): memory is bounded before it is spent (RTLAB_PARSE_MAX_ENTRIES)
DEFAULT_MAX_ENTRIES = 5_000_000
#: the largest file parsed (RTLAB_PARSE_MAX_MB)
DEFAULT_MAX_MB = 256


def limit(name: str, default: int) -> int:
    try:
        v = int(os.environ.get(name) or default)
    except ValueError:
        return default
    return v if v > 0 else default


class Buckets(dict):
    """A histogram object as decoded: {bucket index: count}, int keys, only
    non-zero counts, validated while decoding (every key digits, every count
    a non-negative integer). Built straight from the decoder's pairs, so a
    big histogram is never held twice (string keys and int keys)."""


def bucket_counts(h: "JsonPath") -> dict[int, int]:
    """A histogram object's non-zero counts by bucket index, errors naming the key."""
    if isinstance(h.obj, Buckets):
        return h.obj
    counts: dict[int, int] = {}
    for k, _ in h.items():
        if not re.fullmatch(r"\d+", k):
            raise InputError(h.path, f"key {h.where}.{k}: bucket index is not an integer")
        c = h.integer(k)
        if c < 0:
            raise InputError(h.path, f"key {h.where}.{k}: negative count {c}")
        if c:
            counts[int(k)] = c
    return counts


class JsonPath:
    """Typed access to a decoded JSON object with errors naming the key."""

    def __init__(self, path, obj: Any, where: str = ""):
        self.path = path
        self.obj = obj
        self.where = where

    def _key(self, k: str) -> str:
        return f"{self.where}.{k}" if self.where else k

    def has(self, k: str) -> bool:
        return isinstance(self.obj, dict) and k in self.obj

    def get(self, k: str) -> Any:
        if not isinstance(self.obj, dict):
            raise InputError(self.path, f"key {self.where or '(top)'}: expected an object")
        if k not in self.obj:
            raise InputError(self.path, f"key {self._key(k)}: missing")
        return self.obj[k]

    def sub(self, k: str) -> "JsonPath":
        v = self.get(k)
        if not isinstance(v, dict):
            raise InputError(self.path, f"key {self._key(k)}: expected an object, got {_show(v)}")
        return JsonPath(self.path, v, self._key(k))

    def number(self, k: str, *, nan_ok: bool = False) -> float:
        v = self.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(self.path, f"key {self._key(k)}: expected a number, got {_show(v)}")
        if isinstance(v, float) and not math.isfinite(v) and not nan_ok:
            raise InputError(self.path, f"key {self._key(k)}: expected a number, got {v}")
        return v

    def integer(self, k: str) -> int:
        v = self.number(k)
        if isinstance(v, float):
            if not v.is_integer():
                raise InputError(self.path, f"key {self._key(k)}: expected an integer, got {v}")
            v = int(v)
        return v

    def opt_integer(self, k: str) -> Optional[int]:
        return self.integer(k) if self.has(k) else None

    def string(self, k: str) -> str:
        v = self.get(k)
        if not isinstance(v, str):
            raise InputError(self.path, f"key {self._key(k)}: expected a string, got {_show(v)}")
        return v

    def items(self):
        """(key, JsonPath) of an object, in file order."""
        if not isinstance(self.obj, dict):
            raise InputError(self.path, f"key {self.where}: expected an object")
        for k, v in self.obj.items():
            yield k, JsonPath(self.path, v, self._key(k))


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def int_field(path, lineno: int, name: str, text: str) -> int:
    """One integer field of a text line, or an error naming line and field."""
    t = text.strip()
    if not re.fullmatch(r"[+-]?\d+", t):
        raise InputError(path, f"line {lineno}: field {name!r} is not an integer: {t!r}")
    return int(t)


def float_field(path, lineno: int, name: str, text: str) -> float:
    t = text.strip()
    if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", t):
        raise InputError(path, f"line {lineno}: field {name!r} is not a number: {t!r}")
    return float(t)


# ---------------------------------------------------------------------------
# Command lines recorded in rt-tests JSON ("cmdline:")

class Opt:
    """How one option of a tool takes its argument (getopt semantics)."""

    NONE, REQUIRED, OPTIONAL = 0, 1, 2


def parse_optstring(optstring: str) -> dict[str, int]:
    """getopt's "a::b:c" into {"a": OPTIONAL, "b": REQUIRED, "c": NONE}."""
    out: dict[str, int] = {}
    i = 0
    while i < len(optstring):
        c = optstring[i]
        if optstring[i + 1:i + 3] == "::":
            out[c] = Opt.OPTIONAL
            i += 3
        elif optstring[i + 1:i + 2] == ":":
            out[c] = Opt.REQUIRED
            i += 2
        else:
            out[c] = Opt.NONE
            i += 1
    return out


def scan_options(cmdline: str, short: dict[str, int],
                 long: dict[str, int]) -> list[tuple[str, Optional[str]]]:
    """The options of a recorded command line, as getopt_long saw them.

    Returns ``[(name, value)]`` in order; ``name`` is the short letter
    (``"h"``) or the full long name (``"histogram"``; unique abbreviations
    are expanded as getopt_long does). Unknown options are taken as flags.
    rt-tests joins argv with single spaces, so an argument that contained a
    space cannot be recovered; such arguments do not matter here.
    """
    tokens = cmdline.split()[1:]  # argv[0] is the program
    out: list[tuple[str, Optional[str]]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok == "--":
            break
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            full = _expand_long(name, long)
            kind = long.get(full, Opt.NONE)
            if eq:
                out.append((full, value))
            elif kind == Opt.REQUIRED and i < len(tokens):
                out.append((full, tokens[i]))
                i += 1
            else:
                out.append((full, None))
        elif tok.startswith("-") and len(tok) > 1:
            j = 1
            while j < len(tok):
                c = tok[j]
                kind = short.get(c, Opt.NONE)
                rest = tok[j + 1:]
                if kind == Opt.NONE:
                    out.append((c, None))
                    j += 1
                    continue
                if rest:
                    out.append((c, rest))
                elif kind == Opt.REQUIRED and i < len(tokens):
                    out.append((c, tokens[i]))
                    i += 1
                else:
                    out.append((c, None))
                break
        # else: a non-option argument (getopt permutes them to the end)
    return out


def _expand_long(name: str, long: dict[str, int]) -> str:
    if name in long:
        return name
    matches = [n for n in long if n.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def atoi(s: Optional[str]) -> int:
    """C atoi(): leading whitespace, sign, digits; anything else is 0."""
    m = re.match(r"\s*([+-]?\d+)", s or "")
    return int(m.group(1)) if m else 0


def last(opts: Iterable[tuple[str, Optional[str]]], *names: str):
    """(found, value) of the last occurrence of any of ``names``."""
    found, value = False, None
    for n, v in opts:
        if n in names:
            found, value = True, v
    return found, value


def program(cmdline: str) -> str:
    """The program name of a recorded command line (basename of argv[0])."""
    first = cmdline.split()[0] if cmdline.split() else ""
    return first.rsplit("/", 1)[-1]
