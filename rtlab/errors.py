"""Errors that reach users. Each names the file, field or board at fault."""
import re

#: the most of one message a terminal or CI log is shown
MESSAGE_MAX_CHARS = 2000
#: terminal escapes (CSI, OSC, two-character) and every other control
#: character but tab and newline: text from a probe, a LAVA server or a file
#: must not drive the CI log's terminal
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """*text* without terminal escapes and control characters (newline and tab stay)."""
    return _ESCAPES.sub("", str(text))


def said(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """*text* as a message may show it: terminal escapes and control
    characters removed, cut at *limit* characters saying how much was left out."""
    text = printable(text)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters not shown)"
    return text



class RtlabError(Exception):
    """Base of every error rtlab reports to a user (exit code 2 on the CLI)."""


class InputError(RtlabError):
    """A file rtlab was given is malformed: names the file and what is wrong."""

    def __init__(self, path, what: str):
        self.path = str(path)
        self.what = what
        super().__init__(f"{self.path}: {what}")


class InfraError(RtlabError):
    """The lab failed (no boot, lost console, load died, tool crashed).

    Never a latency statement: callers turn it into Verdict.INFRA.
    """

    def __init__(self, board: str, cause: str):
        self.board = board
        self.cause = cause
        super().__init__(f"board {board}: {cause}")


class SuiteFailure(Exception):
    """A command on the board did not give a trustworthy result (a tool that
    crashed, a file that did not arrive whole): infra. Raised by the suites'
    and the loads' board-side code alike."""


SuiteFailure.__module__ = "rtlab.suites.board"  # how reports have always named it


class Cancelled(BaseException):
    """SIGTERM (or SIGINT, as KeyboardInterrupt) arrived: unwind, keep what was
    measured, mark the run cancelled (INFRA), exit 2. A BaseException like
    KeyboardInterrupt, so no `except Exception` on the way swallows it."""
