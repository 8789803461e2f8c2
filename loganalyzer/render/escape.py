"""Text from a log, made safe to print on a terminal.

A log can hold anything a process wrote: ANSI sequences that recolour, clear the screen or
retitle the window, backspaces and carriage returns that hide text, bidirectional overrides
that reorder it. Printed raw, they act on the user's terminal; escaped, they are visible.
An OSC or DCS sequence (a title, a clipboard write with OSC 52) loses its introducer (ESC,
or the 8-bit 0x9d / 0x90) and its terminator (BEL, ST) to the escaping, so the whole
sequence shows as inert text. `loganalyzer.terminal.echo` applies this to every text the
commands print.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting marks
# (the Arabic letter mark, LRM/RLM, the embeddings and overrides, the isolates).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with every control character shown as a Python escape (`\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)
