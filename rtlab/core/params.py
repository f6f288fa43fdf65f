"""Typed, ranged values from files anyone with merge rights can edit.

Campaign files run as root on lab runners: every value is checked here at
load, before anything boots, and nothing of them reaches a board shell but
through :func:`rtlab.suites.board.shell_line` (each argument quoted). A
suite declares a spec per parameter next to its defaults (``Suite.spec``);
loads' options are specced here by name (:data:`LOAD_OPTION_SPECS`).

A check returns the value (normalised) or raises :class:`ParamError`, whose
text the caller prefixes with the file and the dotted key.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .config import is_shown, parse_cpulist, shown

#: names that become paths, directory names and shell words: boards,
#: variants, suites, loads, campaign suite names, run ids
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_NAME = 100


class ParamError(ValueError):
    """A value of the wrong type or out of range; the text says which and why."""


#: what a safe name is, said in every refusal of one
NAME_RULE = (f"a name is letters, digits, '.', '_' and '-', starts with a letter or digit, has no '..' "
             f"and at most {MAX_NAME} characters")


def name_problem(value: str) -> str:
    """Why *value* is not a safe name ("" when it is one), said without
    echoing it: where the first offending character is, never which."""
    if not value:
        return "it is empty"
    if len(value) > MAX_NAME:
        return f"it has {len(value)} characters"
    if not value[0].isascii() or not value[0].isalnum():
        return "its first character is not a letter or digit"
    if ".." in value:
        return f"it has '..' at character {value.index('..') + 1}"
    for i, c in enumerate(value):
        if not (c.isascii() and (c.isalnum() or c in "._-")):
            return f"its character {i + 1} is not a letter, digit, '.', '_' or '-'"
    return ""


def check_name(value: Any, what: str = "name") -> str:
    """A safe name: letters, digits, ``.``, ``_``, ``-``, not starting with
    a punctuation mark, no ``..``; anything else is refused, never cleaned.
    The refusal describes the value (:func:`rtlab.core.config.shown`: a
    name-like value as it is, anything else by type and length) and never
    echoes what is not name-like: the file it came from may be /etc/shadow."""
    if not isinstance(value, str):
        raise ParamError(f"{what} must be a string, got {shown(value)}")
    problem = name_problem(value)  # stricter than SAFE_NAME alone, whose $ lets a final newline through
    if problem:
        said = f"{what} {shown(value)}" if is_shown(value) else \
            f"{what} (a string of {len(value)} character{'s' * (len(value) != 1)}, not shown)"
        raise ParamError(f"{said} is not a safe name: {problem}; {NAME_RULE}")
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


class Spec:
    """How one parameter is typed and ranged."""

    def check(self, v: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Int(Spec):
    lo: int
    hi: int
    #: extra words accepted as they are (e.g. "auto")
    words: tuple = ()
    none_ok: bool = False

    def check(self, v: Any) -> Any:
        if v is None and self.none_ok:
            return None
        if isinstance(v, str) and v in self.words:
            return v
        if not _is_int(v):
            alt = "".join(f" or {w!r}" for w in self.words)  # the spec's own words
            raise ParamError(f"must be an integer{alt}, got {shown(v)}")
        if not self.lo <= v <= self.hi:
            raise ParamError(f"must be between {self.lo} and {self.hi}, got {shown(v)}")
        return v


@dataclass(frozen=True)
class Num(Spec):
    """A finite number > gt (or >= ge) and <= hi."""

    hi: float
    gt: Optional[float] = 0.0
    ge: Optional[float] = None
    none_ok: bool = False

    def check(self, v: Any) -> Any:
        if v is None and self.none_ok:
            return None
        if not _is_num(v):
            raise ParamError(f"must be a finite number, got {shown(v)}")
        if self.gt is not None and not v > self.gt:
            raise ParamError(f"must be > {self.gt:g}, got {shown(v)}")
        if self.ge is not None and not v >= self.ge:
            raise ParamError(f"must be >= {self.ge:g}, got {shown(v)}")
        if v > self.hi:
            raise ParamError(f"must be <= {self.hi:g}, got {shown(v)}")
        return v


@dataclass(frozen=True)
class Bool(Spec):
    def check(self, v: Any) -> Any:
        if not isinstance(v, bool):
            raise ParamError(f"must be true or false, got {shown(v)}")
        return v


@dataclass(frozen=True)
class Text(Spec):
    """A string matching *pattern* (a narrow character set: it becomes a word
    of a command line)."""

    pattern: str
    what: str = "value"
    none_ok: bool = False

    def check(self, v: Any) -> Any:
        if v is None and self.none_ok:
            return None
        if not isinstance(v, str) or not re.fullmatch(self.pattern, v):
            raise ParamError(f"must be {self.what}, got {shown(v)}")
        return v


@dataclass(frozen=True)
class Args(Spec):
    """Free-form tool arguments: a list of strings, each passed as one quoted
    argument (never split, never interpreted by a shell). A plain string is
    refused: whether "-a b" is one argument or two is not guessed."""

    max_items: int = 32

    def check(self, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            raise ParamError(f"must be a list of arguments (e.g. [\"--mlockall\"]), got {shown(v)}")
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            raise ParamError(f"must be a list of strings, got {shown(v)}")
        if len(v) > self.max_items:
            raise ParamError(f"at most {self.max_items} arguments, got {len(v)}")
        for a in v:
            if "\x00" in a or "\n" in a or "\r" in a or len(a) > 256:
                raise ParamError(f"argument {v.index(a) + 1} ({shown(a)}): no NUL, no line breaks, at most 256 characters")
        return list(v)


_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


@dataclass(frozen=True)
class Cpus(Spec):
    """"auto", "all", a list of CPU numbers or a kernel cpulist ("0-2,5").
    The board's CPU count is checked by :func:`check_cpus_on`."""

    def check(self, v: Any) -> Any:
        if v in ("auto", "all"):
            return v
        if isinstance(v, str):
            if not _CPULIST.match(v):
                raise ParamError(f"must be 'auto', 'all', a list of CPUs or a cpulist like '0-2,5', got {shown(v)}")
            try:
                named = parse_cpulist(v)
            except ValueError as e:  # "3-1": a descending range
                raise ParamError(f"{e}, got {shown(v)}") from None
            if not named:
                raise ParamError(f"names no CPU, got {shown(v)}")
            return v
        if _is_int(v):
            v = [v]
        if not isinstance(v, list) or not v or not all(_is_int(c) and 0 <= c < 4096 for c in v):
            raise ParamError(f"must be 'auto', 'all', a non-empty list of CPU numbers or a cpulist, got {shown(v)}")
        return v


def cpus_of(v: Any) -> Optional[list[int]]:
    """The CPU numbers an explicit selection names, None for auto/all."""
    if v in (None, "auto", "all"):
        return None
    if isinstance(v, str):
        return parse_cpulist(v)
    return list(v) if isinstance(v, list) else [v]


def check_cpus_on(v: Any, ncpus: int, board: str) -> None:
    cpus = cpus_of(v)
    if cpus is None:
        return
    if not cpus:  # "3-1" or "": a selection that names no CPU measures nothing
        raise ParamError(f"names no CPU ({shown(v)})")
    bad = [c for c in cpus if c >= ncpus]
    if bad:
        raise ParamError(f"CPU(s) {', '.join(map(str, bad))} do not exist on board {board} "
                         f"({ncpus} CPUs: 0-{ncpus - 1})")


#: a host name or IPv4/IPv6 address (the network load's peer)
HOST = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|[0-9A-Fa-f:.]{2,45}"

#: every option a load may take (rtlab.loads), by name
LOAD_OPTION_SPECS: dict[str, Spec] = {
    "stall_s": Num(hi=3600.0),
    "settle_s": Num(hi=3600.0, gt=None, ge=0.0),
    "die_after_s": Num(hi=86400.0, gt=None, ge=0.0, none_ok=True),
    "workers": Int(1, 1024, none_ok=True),
    "mib": Int(1, 1 << 20, none_ok=True),
    "timer_freq": Int(1, 1_000_000),
    "groups": Int(1, 1000, none_ok=True),
    "peer": Text(HOST, "a host name or IP address", none_ok=True),
    "server_bind": Text(HOST, "a host name or IP address"),
    "ping_size": Int(0, 65507),
    "bitrate": Text(r"\d{1,12}(\.\d{1,6})?[KMGkmg]?", "an iperf3 bitrate like 100M", none_ok=True),
    # fifo-hog (a deliberate breach)
    "priority": Int(1, 99),
    "burst_ms": Int(1, 60_000),
    "load_pct": Int(1, 100),
}


def check_mapping(given: dict, specs: dict[str, Spec], where: Sequence[str] = ()) -> dict:
    """Check every key of *given* against *specs*; errors carry the dotted key."""
    out = {}
    for k, v in given.items():
        key = ".".join([*where, str(k)])
        spec = specs.get(k)
        if spec is None:
            raise ParamError(f"{key}: unknown parameter")
        try:
            out[k] = spec.check(v)
        except ParamError as e:
            raise ParamError(f"{key}: {e}") from None
    return out
