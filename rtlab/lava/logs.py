"""Reading what LAVA leaves behind: the log stream and the results.

* ``lava-run`` writes its log to stderr, one YAML flow mapping per line
  (``{"dt": ..., "lvl": ..., "msg": ...}``, non-strings tagged, e.g.
  ``! "261.0"``, so a JSON parser is not enough). A LAVA server keeps the same
  records as a YAML list (``- {...}`` per line, ``lavacli jobs logs ID --raw``).
  Test cases are the ``lvl: results`` records; the board's console is the
  ``lvl: target`` records, one line each.
* ``lavacli results ID --yaml`` is the server's export: a list of cases with
  ``suite``, ``name``, ``result``, ``measurement`` and ``unit`` as strings
  (``"None"`` when absent) and the dispatcher's record under ``metadata``.

Both are normalised to the dispatcher's form: ``{"definition", "case",
"result", "measurement" (float or None), "units", ...}``.
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from ..errors import InputError
from ..core.fsutil import read_bounded, result_max_bytes
from .onboard import MARK_ABSENT, MARK_BEGIN, MARK_END

try:
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader

_B64 = re.compile(r"^[A-Za-z0-9+/=]+$")


def _load_line(line: str) -> Optional[dict]:
    line = line.strip()
    if line.startswith("- "):
        line = line[2:]
    if not line.startswith("{"):
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        try:
            rec = yaml.load(line, Loader=_Loader)
        except yaml.YAMLError:
            return None
    return rec if isinstance(rec, dict) and "lvl" in rec else None


@dataclass
class LavaLog:
    records: list[dict] = field(default_factory=list)
    #: lines that were not log records (a truncated last line, noise)
    unreadable: int = 0

    @classmethod
    def from_text(cls, text: str) -> "LavaLog":
        log = cls()
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            rec = _load_line(line)
            if rec is None:
                log.unreadable += 1
            else:
                log.records.append(rec)
        return log

    @classmethod
    def from_file(cls, path: Path) -> "LavaLog":
        # a server's log or lava-run's stream: bounded like every result file,
        # never through a symlink out of its record
        return cls.from_text(read_bounded(path, result_max_bytes()).decode(errors="replace"))

    def results(self) -> list[dict]:
        return [normalise_case(r["msg"]) for r in self.records
                if r.get("lvl") == "results" and isinstance(r.get("msg"), dict)]

    def target_lines(self) -> list[str]:
        return [str(r.get("msg", "")) for r in self.records if r.get("lvl") in ("target", "feedback")]

    def errors(self) -> list[str]:
        return [str(r.get("msg")) for r in self.records if r.get("lvl") == "error"]

    def span_s(self) -> float:
        stamps = [_dt(r.get("dt")) for r in self.records]
        stamps = [s for s in stamps if s is not None]
        return round((max(stamps) - min(stamps)).total_seconds(), 3) if len(stamps) > 1 else 0.0

    def started(self) -> Optional[dt.datetime]:
        for r in self.records:
            s = _dt(r.get("dt"))
            if s is not None:
                return s
        return None


def _dt(v) -> Optional[dt.datetime]:
    if isinstance(v, dt.datetime):
        return v
    try:
        return dt.datetime.fromisoformat(str(v))
    except (TypeError, ValueError):
        return None


def _num(v) -> Optional[float]:
    if v is None or v == "" or str(v) == "None":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def normalise_case(msg: dict) -> dict:
    """A dispatcher `results` record, tags already resolved by the loader."""
    out = dict(msg)
    out["definition"] = str(msg.get("definition", ""))
    out["case"] = str(msg.get("case", ""))
    out["result"] = str(msg.get("result", ""))
    out["measurement"] = _num(msg.get("measurement"))
    if msg.get("units") is not None:
        out["units"] = str(msg["units"])
    return out


def results_from_server(data: Any, where="results") -> list[dict]:
    """`lavacli results ID --yaml` (the server's export) -> dispatcher form."""
    if not isinstance(data, list):
        raise InputError(where, "LAVA results must be a list of test cases")
    out = []
    for i, e in enumerate(data):
        if not isinstance(e, dict) or "suite" not in e or "name" not in e:
            raise InputError(where, f"entry {i}: not a LAVA test case (needs suite and name)")
        meta = e.get("metadata") if isinstance(e.get("metadata"), dict) else {}
        rec = {**meta, "definition": str(e["suite"]), "case": str(e["name"]),
               "result": str(e.get("result", meta.get("result", ""))),
               "measurement": _num(e.get("measurement")), "job": str(e.get("job", ""))}
        unit = e.get("unit")
        if unit not in (None, "", "None"):
            rec["units"] = str(unit)
        elif meta.get("units"):
            rec["units"] = str(meta["units"])
        out.append(rec)
    return out


def job_outcome(results: Iterable[dict]) -> tuple[Optional[str], Optional[str]]:
    """(health, failure) from the `lava`/`job` case: ("Complete", None),
    ("Incomplete", "Infrastructure: ...") or (None, None) if there is none."""
    for r in results:
        if r["definition"] == "lava" and r["case"] == "job":
            if r["result"] == "pass":
                return "Complete", None
            why = ": ".join(" ".join(str(x).split()) for x in (r.get("error_type"), r.get("error_msg")) if x)
            return "Incomplete", why or r["result"]
    return None, None


@dataclass
class RawBlock:
    key: str
    name: str
    data: Optional[bytes] = None
    rc: Optional[int] = None
    error: Optional[str] = None   # why the block could not be trusted
    absent: bool = False          # the board said the file did not exist


def raw_blocks(lines: Iterable[str]) -> dict[tuple[str, str], RawBlock]:
    """Every RTLAB-RAW block on the console, decoded and checked (size and
    sha256 from the BEGIN marker). Lines that are not base64 inside a block
    (a kernel message, a shell trace) are skipped; if they broke a line in
    the middle, the checksum says so."""
    blocks: dict[tuple[str, str], RawBlock] = {}
    cur: Optional[tuple[RawBlock, int, str, list[str]]] = None
    for line in lines:
        line = line.rstrip()
        if cur is not None:
            blk, size, digest, chunks = cur
            if line.startswith(MARK_END + " "):
                parts = line.split()
                if parts[1:3] == [blk.key, blk.name]:
                    _finish(blk, size, digest, chunks)
                    blocks[(blk.key, blk.name)] = blk
                    cur = None
                continue
            if line.startswith(MARK_BEGIN + " "):
                blk.error = "block never ended (a new one began)"
                blocks[(blk.key, blk.name)] = blk
                cur = None
            elif _B64.match(line):
                chunks.append(line)
                continue
            else:
                continue
        if line.startswith(MARK_BEGIN + " "):
            parts = line.split()
            if len(parts) < 6:
                continue
            key, name, size_text, digest, rc_text = parts[1:6]
            blk = RawBlock(key, name, rc=int(rc_text) if re.fullmatch(r"-?\d+", rc_text) else None)
            cur = (blk, int(size_text) if size_text.isdigit() else -1, digest, [])
        elif line.startswith(MARK_ABSENT + " "):
            parts = line.split()
            if len(parts) >= 3:
                blocks[(parts[1], parts[2])] = RawBlock(parts[1], parts[2], absent=True)
    if cur is not None:
        cur[0].error = "block never ended (the log stops inside it)"
        blocks[(cur[0].key, cur[0].name)] = cur[0]
    return blocks


def _finish(blk: RawBlock, size: int, digest: str, chunks: list[str]) -> None:
    try:
        data = gzip.decompress(base64.b64decode("".join(chunks), validate=True))
    except (binascii.Error, OSError, EOFError, ValueError) as e:
        blk.error = f"undecodable ({type(e).__name__}: {e})"
        return
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
        blk.error = (f"corrupted in transfer: got {len(data)} bytes sha256 "
                     f"{hashlib.sha256(data).hexdigest()[:12]}, the board sent {size} bytes {digest[:12]}")
        return
    blk.data = data
