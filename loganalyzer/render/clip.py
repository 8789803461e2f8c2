"""Text from a log, cut to a length a page or a terminal can show.

A config value, a name or a quoted line can be megabytes long (a data blend pasted whole, a
value a process wrote without end): shown whole, it makes a report of tens of megabytes and
buries everything else. Every display (report, compare, fleet page, Markdown, terminal)
cuts such text at `MAX_SHOWN` characters and says how long it was. The data channels
(`--json`, export, the dataset) keep the values whole: a script reads what was logged.
"""

from __future__ import annotations

# Characters of one value shown: a long data blend (about 20 weighted paths) still fits.
MAX_SHOWN = 1000


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """`text`, or its first `limit` characters, an ellipsis and its full length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"
