"""The log lines the report quotes: read back from the sources by file and line number.

Only the few lines a table shows are kept; each file is streamed once, up to the last line
wanted, so quoting a slow step of a multi-gigabyte log costs one pass and no memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from loganalyzer.errors import InputError
from loganalyzer.render.clip import clip
from loganalyzer.sources import iter_line_chunks

# A quoted line is cut here: some logs glue kilobytes of records onto one line.
MAX_QUOTE = 400


def read_lines(wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The text of each (file, line) wanted that can still be read; missing ones are left out
    (the table then shows the location alone)."""
    by_file: dict[str, set[int]] = {}
    for path, line in wanted:
        by_file.setdefault(path, set()).add(line)
    found: dict[tuple[str, int], str] = {}
    for path, lines in sorted(by_file.items()):
        last = max(lines)
        try:
            for first, chunk in iter_line_chunks(Path(path)):
                for number in lines & set(range(first, first + len(chunk))):
                    text = chunk[number - first]
                    found[(path, number)] = clip(text, MAX_QUOTE)
                if first + len(chunk) > last:
                    break
        except (InputError, OSError):
            continue
    return found
