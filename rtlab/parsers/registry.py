"""Which parser reads a tool's output: a table the suites fill.

A suite names its parser (``Suite.parser``, rtlab.suites): one of the
format parsers here (:func:`rtlab.parsers.rt_tests` for every rt-tests
program, :func:`rtlab.parsers.rtbench_json`), or None when the suite reads its
raw files itself (rtla's two-part histograms). There is no table of tools
beside the suites: a new suite's tool is parseable once its class exists.

The suites sit above the parsers (they import the format parsers from this
package), so the parsers never import them: :mod:`rtlab.suites` hands this
module a *source* of its tools (:func:`add_tool_source`) when it is
imported, and the table is read through it when a tool is resolved (a
suite defined or removed later is seen). Until something has imported
``rtlab.suites`` no tool is known.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from ..errors import InputError
from ..model import ToolOutput

#: a format parser: (box, path, tool, nsecs) -> ToolOutput. *box* is a
#: one-item list holding the text; the parser takes it out, so a big text
#: is freed as soon as it is decoded. *tool* is None when the content is
#: to tell which program wrote it.
FormatParser = Callable[[list, Any, Optional[str], Optional[bool]], ToolOutput]


#: a source of tools: () -> [(tool, its parser or None), ...] in registry order
ToolSource = Callable[[], Iterable[tuple[str, Optional[FormatParser]]]]

_SOURCES: list[ToolSource] = []


def add_tool_source(source: ToolSource) -> None:
    """Make the tools *source* yields parseable (rtlab.suites does, once)."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def _tools() -> dict[str, Optional[FormatParser]]:
    table: dict[str, Optional[FormatParser]] = {}
    for source in _SOURCES:
        table.update(source())
    return table


def known_tools() -> tuple[str, ...]:
    """Every tool some suite has a parser for, in registry order."""
    return tuple(tool for tool, parser in _tools().items() if parser is not None)


def parser_for(tool: str, path: Any) -> FormatParser:
    """The parser of *tool*'s suite; InputError naming *path* when no suite has one."""
    parsers = _tools()
    if tool not in parsers:
        if not _SOURCES:  # a library user who imported only rtlab.parsers
            raise InputError(path, f"unknown tool {tool!r}: no suite has registered a tool yet (import rtlab.suites)")
        raise InputError(path, f"unknown tool {tool!r} (known: {', '.join(known_tools())})")
    parser = parsers[tool]
    if parser is None:
        raise InputError(path, f"{tool}: its suite reads its raw files itself (rtlab.suites), "
                               f"there is no single-file parser for it")
    return parser
