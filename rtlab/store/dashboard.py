"""The Grafana dashboards' InfluxQL, run without Grafana.

A :class:`DashboardQueries` reads one dashboard of ``dashboards/json`` and
gives its panels' (and annotations' and template variables') queries with
the template variables filled in as Grafana fills them for the InfluxDB
datasource: a chosen value regex-escaped inside ``/^$var$/``, "All" as the
variable's ``allValue`` (``.*``), ``$timeFilter`` as a window ending now,
``$__interval`` as the grouping asked for. ``rtlab history`` draws its page
from these answers, so the page and the dashboards read the same numbers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .. import ROOT
from ..core.fsutil import read_text_bounded
from ..errors import InputError

DASHBOARDS = ROOT / "dashboards" / "json"
_DURATION = re.compile(r"^[1-9][0-9]{0,5}(s|m|h|d|w)$")
_RUN = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
#: characters Grafana escapes in a value placed in a regex
_REGEX_SPECIAL = re.compile(r"([\\^$*+?.()|{}\[\]/-])")


def regex_value(value: str) -> str:
    """A variable's value inside ``/^...$/``, escaped as Grafana escapes it."""
    return _REGEX_SPECIAL.sub(r"\\\1", value)


@dataclass(frozen=True)
class Window:
    """The dashboard's time range and grouping: the last ``days`` days,
    ``interval`` per point (``1s``: every run its own point)."""

    days: int = 30
    interval: str = "1s"

    def __post_init__(self) -> None:
        if not isinstance(self.days, int) or not 1 <= self.days <= 3650:
            raise InputError("--days", f"{self.days!r} is not a number of days from 1 to 3650")
        if not _DURATION.match(self.interval):
            raise InputError("interval", f"{self.interval!r} is not an InfluxQL duration like 1s or 1d")

    @property
    def time_filter(self) -> str:
        return f"time > now() - {self.days}d"


class DashboardQueries:
    """One dashboard's queries by panel title, filled in."""

    def __init__(self, name: str, directory: Optional[Path] = None):
        path = Path(directory or DASHBOARDS) / f"{name}.json"
        try:
            self.model: dict[str, Any] = json.loads(read_text_bounded(path, 4 << 20))
        except (OSError, ValueError) as e:
            raise InputError(str(path), f"cannot read the dashboard: {e}") from None
        self.path = path
        self.all_values = {v["name"]: v.get("allValue") or ".*"
                           for v in self.model.get("templating", {}).get("list", []) if v.get("includeAll")}

    def _panel(self, title_prefix: str) -> dict:
        found = [p for p in self.model.get("panels", []) if str(p.get("title", "")).startswith(title_prefix)]
        if len(found) != 1:
            raise InputError(str(self.path), f"{len(found)} panels titled {title_prefix!r}, not one")
        return found[0]

    def panel_queries(self, title_prefix: str) -> list[str]:
        """The raw InfluxQL of each target of the panel, in refId order."""
        return [t["query"] for t in sorted(self._panel(title_prefix).get("targets", []),
                                           key=lambda t: t.get("refId", ""))]

    def annotation_query(self, name: str) -> str:
        (a,) = [a for a in self.model.get("annotations", {}).get("list", []) if a.get("name") == name]
        return a["query"]

    def variable_query(self, name: str) -> str:
        (v,) = [v for v in self.model.get("templating", {}).get("list", []) if v.get("name") == name]
        return v["query"]

    def fill(self, query: str, window: Window, values: Optional[dict[str, Optional[str]]] = None) -> str:
        """The query with every variable substituted: ``values[name]`` a
        chosen value (None or absent: All); ``run`` a run's timestamp."""
        values = dict(values or {})
        run = values.pop("run", None)
        if run is not None:
            if not _RUN.match(run):
                raise InputError("run", f"{run!r} is not a run timestamp (2026-11-28T04:00:00Z)")
            query = query.replace("'$run'", f"'{run}'")
        query = query.replace("$timeFilter", window.time_filter).replace("$__interval", window.interval)

        def var(m: re.Match) -> str:
            name = m.group(1)
            v = values.get(name)
            if v is not None:
                return regex_value(v)
            if name in self.all_values:
                return self.all_values[name]
            raise InputError(str(self.path), f"variable ${name} has no value and no All")
        return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", var, query)
