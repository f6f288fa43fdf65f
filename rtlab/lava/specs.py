"""The rtlab spec a LAVA job carries (metadata ``rtlab.spec``), checked at load.

A job file comes back from the LAVA server (``lavacli jobs definition ID``),
so whoever can submit a job to that server wrote it. Its names become
directories under the results root and its paths are files rtlab copies into
the results, which CI keeps as artifacts: every name must be a safe name and
every path must resolve, symlinks included, inside the lab's repository
(``campaign_file``) or its budgets/ directory (``budgets``). An error names
the job file and the spec's key; nothing is written before the check.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from .. import ROOT
from ..core.config import shown
from ..core.params import ParamError, check_name
from ..errors import InputError
from ..plan.campaign import BUDGETS_DIR
from ..suites import SUITES

KEY = "metadata.rtlab.spec"


def lab_relative(path: Path, root: Path) -> str:
    """*path* as the spec records it: relative to the lab's repository when it
    resolves inside *root*, else "" (a file from outside the lab is never
    named to ingest, which would copy it or judge by it)."""
    real = Path(os.path.realpath(path))
    root_real = Path(os.path.realpath(root))
    if real != root_real and root_real not in real.parents:
        return ""
    return str(real.relative_to(os.path.realpath(ROOT)))


def lab_file(value: Any, key: str, where, root: Path) -> Optional[Path]:
    """The spec's path *value* resolved inside *root* (a regular file), None
    when the spec names none; anything else is refused."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or "\0" in value or os.path.isabs(value):
        raise InputError(where, f"{KEY}.{key}: {shown(value)} is not a path relative to the lab's "
                                f"repository {ROOT}: refused")
    real = Path(os.path.realpath(ROOT / value))
    root_real = Path(os.path.realpath(root))
    if root_real not in real.parents:
        raise InputError(where, f"{KEY}.{key}: {shown(value)} leads outside {root}: refused")
    if not real.is_file():
        raise InputError(where, f"{KEY}.{key}: {shown(value)} is not a file in {root}")
    return real


def _name(d: Any, key: str, where) -> str:
    """*d*'s name at the last part of the dotted *key* (*d* is the mapping it sits in)."""
    parent, _, leaf = key.rpartition(".")
    if not isinstance(d, dict):
        raise InputError(where, f"{KEY}.{parent}: must be a mapping, got {shown(d)}")
    try:
        return check_name(d.get(leaf), "name")
    except ParamError as e:
        raise InputError(where, f"{KEY}.{key}: {e}") from None


def check_spec(spec: Any, where, *, job: bool = True) -> dict:
    """*spec* when its names are safe names and its paths the lab's own; a
    build-failure entry of a render index (*job* False) has no suite."""
    if not isinstance(spec, dict):
        raise InputError(where, f"{KEY}: must be a mapping, got {shown(spec)}")
    _name(spec.get("board"), "board.name", where)
    _name(spec.get("variant"), "variant.name", where)
    if spec.get("board", {}).get("budget_class") is not None:
        _name(spec["board"], "board.budget_class", where)
    if spec.get("campaign") not in (None, ""):
        _name(spec, "campaign", where)
    if job:
        suite = spec.get("suite")
        for k in ("name", "load"):
            _name(suite, f"suite.{k}", where)
        if suite.get("id") != f"{suite['name']}@{suite['load']}":
            raise InputError(where, f"{KEY}.suite.id: {shown(suite.get('id'))} is not "
                                    f"{suite['name']}@{suite['load']} (suite.name@suite.load)")
        if suite.get("suite") not in SUITES:
            raise InputError(where, f"{KEY}.suite.suite: {shown(suite.get('suite'))} is not one of "
                                    f"rtlab's suites ({', '.join(sorted(SUITES))})")
    lab_file(spec.get("campaign_file"), "campaign_file", where, ROOT)
    lab_file(spec.get("budgets"), "budgets", where, BUDGETS_DIR)
    return spec
