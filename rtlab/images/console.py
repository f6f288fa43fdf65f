"""What the board's console looks like: host name and shell prompt."""
from __future__ import annotations




HOSTNAME = "rtlab-board"
#: the shell prompt on the board console (PS1)
PROMPT = "rtlab# "
#: regex for labgrid's ShellDriver ``prompt`` (and LAVA's prompts). Not
#: anchored with ``$``: busybox ash follows every prompt with ESC[6n (a
#: cursor-position query, FEATURE_EDITING_ASK_TERMINAL, not switchable at
#: run time) that nobody answers on a serial line, so "rtlab# \x1b[6n" is
#: what arrives. ash sends no bracketed-paste \x1b[?2004h (unlike bash).
PROMPT_RE = r"rtlab# "
