"""Which parser reads a tool's output: a table the suites fill.

A suite names its parser (``Suite.parser``, rtlab.suites): one of the
format parsers here (:func:`rtlab.parsers.rt_tests` for every rt-tests
program, :func:`rtlab.parsers.rtbench_json`), or None when the suite reads its
raw files itself (rtla's two-part histograms). There is no table of tools
beside the suites: a new suite's tool is parseable once its class exists.

The suites sit above the parsers (they import the format parsers from this
package), so the parsers never import them: they read the suites' registry
(:data:`rtlab.registry.SUITES`) when a tool is resolved, which imports the
suites on first read (a suite defined or removed later is seen).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..errors import InputError
from ..core.model import ToolOutput
from ..registry import SUITES

#: a format parser: (box, path, tool, nsecs) -> ToolOutput. *box* is a
#: one-item list holding the text; the parser takes it out, so a big text
#: is freed as soon as it is decoded. *tool* is None when the content is
#: to tell which program wrote it.
FormatParser = Callable[[list, Any, Optional[str], Optional[bool]], ToolOutput]


def _tools() -> dict[str, Optional[FormatParser]]:
    """tool -> its suite's parser, read live from the suites' registry
    (rtlab.registry.SUITES: reading it imports rtlab.suites, whose modules
    import the format parsers here; never the other way round at import)."""
    return {s.tool: s.parser for s in SUITES.values()}


def suite_for(tool: str) -> Any:
    """The suite (rtlab.suites.Suite) whose tool is *tool*, or None."""
    return next((s for s in SUITES.values() if s.tool == tool), None)


def layout_reader(tool: str, kind: str, layouts: dict[str, Any], path: Any, no_layout: str) -> Any:
    """The reader of *tool*'s output layout of *kind* ("json" or "text": the
    suite's ``json_layout``/``text_layout``) among *layouts* (the format
    parser's table); InputError naming *path* when the suite names none
    (*no_layout* says why) or one this parser does not know."""
    suite = suite_for(tool)
    layout = getattr(suite, f"{kind}_layout", None) if suite is not None else None
    if layout is None:
        raise InputError(path, no_layout)
    if layout not in layouts:  # a suite naming a layout this parser does not know
        raise InputError(path, f"{tool}: no rt-tests {kind.upper() if kind == 'json' else kind} layout "
                               f"{layout!r} known here (known: {', '.join(sorted(layouts))})")
    return layouts[layout]


def known_tools() -> tuple[str, ...]:
    """Every tool some suite has a parser for, in registry order."""
    return tuple(tool for tool, parser in _tools().items() if parser is not None)


def parser_for(tool: str, path: Any) -> FormatParser:
    """The parser of *tool*'s suite; InputError naming *path* when no suite has one."""
    parsers = _tools()
    if tool not in parsers:
        raise InputError(path, f"unknown tool {tool!r} (known: {', '.join(known_tools())})")
    parser = parsers[tool]
    if parser is None:
        raise InputError(path, f"{tool}: its suite reads its raw files itself (rtlab.suites), "
                               f"there is no single-file parser for it")
    return parser
