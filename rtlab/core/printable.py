"""What rtlab prints is printable: every line a command writes to stdout or
stderr passes one filter (:class:`PrintableStream`, installed by rtlab.cli.main).

Board, test and load names, LAVA failure comments, probe replies, store
records and file names come from outside rtlab and reach tables and status
lines of every command; a terminal escape among them could retitle the
terminal, clear the CI log or hide a line behind a carriage return. So
escapes and control characters (all but newline and tab) are removed where
text leaves the process, not at each print. Escapes a child process writes
to an inherited descriptor are the child's and pass untouched.
"""
from __future__ import annotations

from typing import Any, TextIO

from ..errors import printable


class PrintableStream:
    """A text stream writing to *stream* what :func:`rtlab.errors.printable` keeps of each write."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        # fileno, isatty, encoding, buffer...: the stream's own (a child
        # given the descriptor writes its own bytes)
        return getattr(self.stream, name)
