"""Which parser reads a tool's output: asked of the suite registry.

A suite names its parser (``Suite.parser``, rtlab.suites): one of the
format parsers here (:func:`rtlab.parsers.rt_tests` for every rt-tests
program, :func:`rtlab.parsers.rtbench_json`), or None when the suite reads its
raw files itself (rtla's two-part histograms). There is no table of tools
beside the suites: a new suite's tool is parseable once its class exists.

The suites import the format parsers from this package, so the registry is
looked up when a tool is resolved, not when this module is imported.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..errors import InputError
from ..model import ToolOutput

#: a format parser: (box, path, tool, nsecs) -> ToolOutput. *box* is a
#: one-item list holding the text; the parser takes it out, so a big text
#: is freed as soon as it is decoded. *tool* is None when the content is
#: to tell which program wrote it.
FormatParser = Callable[[list, Any, Optional[str], Optional[bool]], ToolOutput]


def _suites() -> dict:
    from ..suites import SUITES  # the suites point at this package's parsers
    return SUITES


def known_tools() -> tuple[str, ...]:
    """Every tool some suite has a parser for, in registry order."""
    return tuple(dict.fromkeys(s.tool for s in _suites().values() if s.parser is not None))


def parser_for(tool: str, path: Any) -> FormatParser:
    """The parser of *tool*'s suite; InputError naming *path* when no suite has one."""
    parsers = {s.tool: s.parser for s in _suites().values()}
    if tool not in parsers:
        raise InputError(path, f"unknown tool {tool!r} (known: {', '.join(known_tools())})")
    parser = parsers[tool]
    if parser is None:
        raise InputError(path, f"{tool}: its suite reads its raw files itself (rtlab.suites), "
                               f"there is no single-file parser for it")
    return parser
