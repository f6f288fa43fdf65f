"""Parsers: rt-tests (JSON and text) and rtbench outputs into the result model.

``parse_file(path)`` / ``parse_text(text, path)`` return one
:class:`rtlab.model.ToolOutput`. What the file is, is told by its content:

1. a JSON object (first non-blank character ``{``): rt-tests ``--json``
   or rtbench; the tool is the program named in ``"cmdline:"`` (see
   :mod:`.rtjson`);
2. otherwise text: the tool is told by the shape of its summary
   (see :mod:`.rttext`).

``tool=`` forces the tool (any of :data:`TOOLS`) instead of detecting it.
``nsecs=True`` says a cyclictest text came from ``cyclictest -N``; without
it, text is nanoseconds only when its ``T:`` lines show the ``-N`` layout
(a bare ``-N`` histogram cannot be told from a µs one). JSON says it itself
(``resolution_in_ns``) and ignores ``nsecs``.

All latencies come out in µs; percentiles only ever come from
``Histogram.percentile`` (nearest rank). Anything malformed raises
:class:`rtlab.errors.InputError` naming the file and the line or key.
"""
from __future__ import annotations

import gzip
import os
from typing import Optional

from ..errors import InputError
from ..model import ToolOutput
from . import rtjson, rttext
from ._common import TOOLS, check_tool

__all__ = ["TOOLS", "parse_file", "parse_text"]


def parse_file(path, tool: Optional[str] = None, *, nsecs: Optional[bool] = None) -> ToolOutput:
    """Parse one output file (gzip-compressed files are read transparently)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(path, f"broken gzip data: {e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not a text file (byte {e.start} is not UTF-8)") from None
    return parse_text(text, os.fspath(path), tool, nsecs=nsecs)


def parse_text(text: str, path, tool: Optional[str] = None, *,
               nsecs: Optional[bool] = None) -> ToolOutput:
    """Parse the content of an output file; ``path`` is used for messages."""
    if tool is not None:
        check_tool(path, tool)
    if "\x00" in text:
        raise InputError(path, "not a text file (contains NUL bytes)")
    if not text.strip():
        raise InputError(path, "empty file")
    if text.lstrip().startswith("{"):
        doc = rtjson.load(text, path)
        return rtjson.parse(doc, path, tool)
    if tool == "rtbench":
        raise InputError(path, "rtbench writes JSON only; this file is not JSON")
    return rttext.parse(text, path, tool, nsecs)
