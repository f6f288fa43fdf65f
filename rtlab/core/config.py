"""Loading rtlab's declarative data files (variants, boards, campaigns, budgets).

Every error names the file and the dotted key at fault, so a typo in a
budget never turns into a confusing traceback in the middle of a run.
"""
from __future__ import annotations

import builtins
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..errors import InputError
from .fsutil import read_text_bounded

#: a key or value shown in an error as it is: a name, a number, a wildcard.
#: Anything else is described, not echoed: the "data file" may be /etc/shadow
#: behind a symlink or a path, and its first line must not reach a CI log.
_SHOWN = re.compile(r"[A-Za-z0-9*][A-Za-z0-9._*+@/-]{0,63}\Z")


def is_shown(value: Any) -> bool:
    """Whether :func:`shown` gives *value* itself (a name, a number, a wildcard)."""
    return value is None or isinstance(value, (bool, int, float)) or \
        (isinstance(value, str) and _SHOWN.match(value) is not None)


def shown(value: Any) -> str:
    """*value* for an error message: as is when it is a number, a boolean or a
    short name-like string, otherwise only its type (and length)."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        if _SHOWN.match(value):
            return repr(value)
        return f"a string of {len(value)} character{'s' * (len(value) != 1)} (not shown)"
    return f"a {type(value).__name__}"


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, mark):
        self.problem = f"key {shown(key)} appears twice in one mapping (the second would silently win)"
        self.problem_mark = mark


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping: in a budget
    file the later entry would replace the earlier without a word (it did:
    two merges each added oslat's budget for class local)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                hashable = key in seen
            except TypeError:
                continue  # unhashable: SafeLoader names it below
            if hashable:
                raise _DuplicateKey(key, key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path, root=None) -> Any:
    """A data file's YAML, read bounded and only from inside *root* (default:
    its own directory; a symlink out of it is refused, never followed); a key
    given twice in one mapping is an error."""
    path = Path(path)
    text = read_text_bounded(path, root=root)
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise InputError(path, f"{where}invalid YAML: {getattr(e, 'problem', e)}") from None


class Node:
    """A value inside a data file that knows where it came from."""

    def __init__(self, path, value: Any, key: str = ""):
        self.path = Path(path)
        self.value = value
        self.key = key

    def error(self, what: str) -> InputError:
        return InputError(self.path, f"{self.key or '<top>'}: {what}")

    def child(self, name) -> "Node":
        part = str(name)
        if isinstance(name, bool) or not isinstance(name, (str, int, float)) or not _SHOWN.match(part):
            index = list(self.mapping()).index(name) + 1 if name in self.mapping() else 0
            part = f"<key {index}>"  # file content, never echoed (see shown)
        key = f"{self.key}.{part}" if self.key else part
        return Node(self.path, self.mapping().get(name), key)

    def mapping(self) -> dict:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.error(f"must be a mapping, got {type(self.value).__name__}")
        return self.value

    def items(self):
        for k in self.mapping():
            yield k, self.child(k)

    def only(self, allowed: Iterable[str]) -> "Node":
        allowed = set(allowed)
        for k in self.mapping():
            if k not in allowed:
                raise self.child(k).error(f"unknown key (expected one of: {', '.join(sorted(allowed))})")
        return self

    def req(self, name) -> "Node":
        if name not in self.mapping():
            raise self.error(f"missing required key '{name}'")
        return self.child(name)

    def str(self, default=None) -> str:
        if self.value is None:
            if default is None:
                raise self.error("missing value")
            return default
        if not isinstance(self.value, (str, int, float)) or isinstance(self.value, bool):
            raise self.error(f"must be a string, got {type(self.value).__name__}")
        return str(self.value)

    def number(self, default=None, positive=False) -> float:
        if self.value is None:
            if default is None:
                raise self.error("missing value")
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise self.error(f"must be a number, got {shown(self.value)}")
        if not math.isfinite(self.value):  # YAML's .nan/.inf: a budget that always passes
            raise self.error(f"must be a finite number, got {shown(self.value)}")
        if positive and self.value <= 0:
            raise self.error(f"must be a positive number, got {shown(self.value)}")
        return self.value

    def integer(self, default=None, minimum=None) -> int:
        if self.value is None:
            if default is None:
                raise self.error("missing value")
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.error(f"must be an integer, got {shown(self.value)}")
        if minimum is not None and self.value < minimum:
            raise self.error(f"must be >= {minimum}, got {shown(self.value)}")
        return self.value

    def boolean(self, default=None) -> bool:
        if self.value is None:
            if default is None:
                raise self.error("missing value")
            return default
        if not isinstance(self.value, bool):
            raise self.error(f"must be true or false, got {shown(self.value)}")
        return self.value

    def str_list(self, default=None) -> list[builtins.str]:  # Node.str shadows str here
        if self.value is None:
            if default is None:
                raise self.error("missing value")
            return list(default)
        if isinstance(self.value, str):
            return [self.value]
        if not isinstance(self.value, list) or not all(isinstance(v, str) for v in self.value):
            raise self.error("must be a string or a list of strings")
        return list(self.value)


def open_node(path) -> Node:
    return Node(path, load_yaml(path))


def seconds_setting(name: str, default: float, lo: float, hi: float, value: Any = None) -> float:
    """A duration from the environment variable *name* (or *value*), typed and
    ranged; *default* when unset or empty; an InputError names the variable."""
    text = os.environ.get(name, "") if value is None else value
    if not str(text).strip():
        return default
    try:
        t = float(text)
    except ValueError:
        t = float("nan")
    if not lo <= t <= hi:  # also NaN
        raise InputError(name, f"must be a number of seconds in [{lo:g}, {hi:g}], got {shown(str(text))}")
    return t


def parse_cpulist(text: str) -> list[int]:
    """Kernel cpulist syntax ("0-2,5") to a sorted list; "" is empty."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            if int(hi) < int(lo):
                raise ValueError(f"descending CPU range {part!r}")
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    cpus = sorted(set(cpus))
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)
