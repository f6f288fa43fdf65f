"""InfluxDB line protocol: points, escaping, timestamps.

One :class:`Point` is one line::

    measurement,tag1=v1,tag2=v2 field1=1.5,field2=3i,field3="text" 1700000000

Rules that matter for rtlab (InfluxDB 1.x and later accept the same text):

- tags are strings, sorted by key (the server's preferred order), empty tag
  values are dropped (the protocol has no empty tag);
- a field keeps its type forever within a shard: floats are written without a
  suffix, integers with ``i``, booleans as ``true``/``false``, strings quoted.
  :func:`format_field` decides by the Python type, so callers convert first
  (``float(x)`` for latencies that JSON may have turned into ints);
- ``None`` fields are left out; a point with no field at all is not written.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

#: seconds per unit of each precision the write endpoints accept
PRECISIONS = {"ns": 1e-9, "n": 1e-9, "us": 1e-6, "u": 1e-6, "ms": 1e-3, "s": 1.0,
              "m": 60.0, "h": 3600.0}


def _escape_key(s: str) -> str:
    """Tag keys, tag values and field keys (a newline cannot be escaped: space)."""
    return (s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
            .replace("\n", " ").replace(" ", "\\ "))


def escape_measurement(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("\n", " ").replace(" ", "\\ ")


def escape_string_field(s: str) -> str:
    # a newline inside a quoted string is legal but would split a point over
    # two physical lines of a spool file; reasons and subjects lose nothing
    # by becoming one line
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_field(value: Any) -> Optional[str]:
    """The line-protocol text of one field value, None to leave it out."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None  # not representable in line protocol
        return repr(value)
    if isinstance(value, str):
        return escape_string_field(value)
    raise TypeError(f"unsupported field type {type(value).__name__}: {value!r}")


@dataclass
class Point:
    measurement: str
    tags: dict[str, str] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    #: timestamp in units of the precision it will be written with
    time: Optional[int] = None

    def to_line(self) -> Optional[str]:
        fields = []
        for k in sorted(self.fields):
            v = format_field(self.fields[k])
            if v is not None:
                fields.append(f"{_escape_key(k)}={v}")
        if not fields:
            return None
        head = escape_measurement(self.measurement)
        tags = "".join(f",{_escape_key(k)}={_escape_key(str(v))}"
                       for k, v in sorted(self.tags.items()) if v is not None and str(v) != "")
        ts = "" if self.time is None else f" {int(self.time)}"
        return f"{head}{tags} {','.join(fields)}{ts}"


def parse_time(iso: str) -> datetime:
    """An ISO 8601 timestamp (``Z`` or offset; naive means UTC) as aware UTC."""
    s = iso.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def timestamp(iso: str, precision: str = "s") -> int:
    """``RunResult.started`` as an integer timestamp in ``precision`` units.

    Integer arithmetic on the datetime parts so that no float rounding can
    move a run's points to a neighbouring timestamp (which would duplicate
    them on republish instead of overwriting).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (one of {', '.join(PRECISIONS)})")
    dt = parse_time(iso)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    delta = dt - epoch
    us = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    per_unit_us = {"ns": None, "n": None, "us": 1, "u": 1, "ms": 1000, "s": 1_000_000,
                   "m": 60_000_000, "h": 3_600_000_000}[precision]
    if per_unit_us is None:
        return us * 1000
    return us // per_unit_us
