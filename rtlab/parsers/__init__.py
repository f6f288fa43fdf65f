"""Parsers: rt-tests (JSON and text) and rtbench outputs into the result model.

``parse_file(path)`` / ``parse_text(text, path)`` return one
:class:`rtlab.core.model.ToolOutput`. What the file is, is told by its content:

1. a JSON object (first non-blank character ``{``): rt-tests ``--json``
   or rtbench; the tool is the program named in ``"cmdline:"`` (see
   :mod:`.rtjson`);
2. otherwise text: the tool is told by the shape of its summary
   (see :mod:`.rttext`).

``tool=`` forces the tool instead of detecting it; the tool's suite names
the parser (``Suite.parser``; :mod:`.registry`), so any tool of a suite
that has one is known, and nothing else is.
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
import io
import os
import re
from typing import Optional

from ..errors import InputError
from ..core.fsutil import read_bounded
from ..core.model import ToolOutput
from . import rtjson, rttext
from ._common import DEFAULT_MAX_MB, limit
from .registry import FormatParser, known_tools, parser_for

__all__ = ["FormatParser", "known_tools", "parse_file", "parse_text", "parser_for", "read_text", "rt_tests",
           "rtbench_json"]


def parse_file(path, tool: Optional[str] = None, *, nsecs: Optional[bool] = None) -> ToolOutput:
    """Parse one output file (gzip-compressed files are read transparently)."""
    box = [read_text(path)]
    return _parse(box, os.fspath(path), tool, nsecs)


def read_text(path) -> str:
    """An output file's text: gunzipped, within the parse limit, UTF-8, or
    InputError naming the file."""
    max_bytes = limit("RTLAB_PARSE_MAX_MB", DEFAULT_MAX_MB) * 1024 * 1024
    too_big = (f"over the parse limit of {max_bytes // 1024 // 1024} MB (RTLAB_PARSE_MAX_MB): "
               f"refused before memory runs out")
    try:
        # bounded by the bytes read, not st_size: /dev/zero, a FIFO or a /proc
        # file says 0 or nothing; non-regular files are refused unread
        data = read_bounded(path, max_bytes)
    except InputError as e:
        raise InputError(path, e.what.replace(f"over the limit of {max_bytes // 1024 // 1024} MB: "
                                              "refused before memory runs out", too_big)) from None
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                data = gz.read(max_bytes + 1)  # a gzip bomb stops at the limit
        except (OSError, EOFError) as e:
            raise InputError(path, f"broken gzip data: {e}") from None
        if len(data) > max_bytes:
            raise InputError(path, f"decompressed, {too_big}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not a text file (byte {e.start} is not UTF-8)") from None
    del data  # the text is all that is needed from here: never both at once
    return text


def parse_text(text: str, path, tool: Optional[str] = None, *,
               nsecs: Optional[bool] = None) -> ToolOutput:
    """Parse the content of an output file; ``path`` is used for messages."""
    return _parse([text], path, tool, nsecs)


_NON_SPACE = re.compile(r"\S")


def _parse(box: list, path, tool: Optional[str], nsecs: Optional[bool]) -> ToolOutput:
    if tool is not None:
        return parser_for(tool, path)(box, path, tool, nsecs)
    # no tool given: rt-tests and rtbench outputs tell which program wrote them
    return rt_tests(box, path, None, nsecs)


def rt_tests(box: list, path, tool: Optional[str], nsecs: Optional[bool]) -> ToolOutput:
    """Format parser of every rt-tests program (and rtbench's rt-tests shaped
    JSON): ``--json`` output or the text summary, told apart by content.

    *box* holds the only reference to the text: a JSON text is dropped as
    soon as it is decoded (memory: text and decoded document never add up
    with copies of the text; no strip() of a 40 MB string)."""
    text = box.pop()
    if "\x00" in text:
        raise InputError(path, "not a text file (contains NUL bytes)")
    first = _NON_SPACE.search(text)
    if first is None:
        raise InputError(path, "empty file")
    if first.group() == "{":
        del first
        doc = rtjson.load(text, path)
        del text
        return rtjson.parse(doc, path, tool)
    return rttext.parse(text, path, tool, nsecs)


def rtbench_json(box: list, path, tool: Optional[str], nsecs: Optional[bool]) -> ToolOutput:
    """Format parser of rtbench (rtlab's own benchmark): JSON only."""
    first = _NON_SPACE.search(box[0])
    if first is not None and first.group() != "{":
        raise InputError(path, "rtbench writes JSON only; this file is not JSON")
    return rt_tests(box, path, tool or "rtbench", nsecs)
