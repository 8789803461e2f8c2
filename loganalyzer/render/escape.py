"""Text from a log, made safe to print on a terminal.

A log can hold anything a process wrote: ANSI sequences that recolour, clear the screen or
retitle the window, backspaces and carriage returns that hide text, bidirectional overrides
that reorder it. Printed raw, they act on the user's terminal; escaped, they are visible.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting marks.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with every control character shown as a Python escape (`\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)
