"""The log lines the report quotes: read back from the sources by file and line number.

Only the few lines a table shows are kept; each file is streamed once, up to the last line
wanted, so quoting a slow step of a multi-gigabyte log costs one pass and no memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loganalyzer.errors import InputError
from loganalyzer.render.clip import clip
from loganalyzer.render.escape import terminal_safe
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
                    # a carriage return (a progress bar's redraw) or an escape shows as text
                    found[(path, number)] = terminal_safe(clip(text, MAX_QUOTE))
                if first + len(chunk) > last:
                    break
        except (InputError, OSError):
            continue
    return found


def record_sources(doc: Mapping[str, Any]) -> set[str]:
    """The document's sources whose `line` counts records of a binary store (TensorBoard,
    W&B): they have no line to quote."""
    return {str(s.get("path")) for s in doc.get("sources") or () if s.get("unit") == "record"}


def location(
    doc: Mapping[str, Any], file: str, line: int, step: object, column: str | None = None
) -> str:
    """Where a record is, as its source counts: `file:line` in a text log; in a binary store
    `file: record N, tag T, step S` (the tag that filled `column`, where the source names
    it), never a record index passed off as a line."""
    for source in doc.get("sources") or ():
        if source.get("path") == file and source.get("unit") == "record":
            tag = (source.get("tags") or {}).get(column) if column else None
            return f"{file}: record {line}" + (f", tag {tag}" if tag else "") + f", step {step}"
    return f"{file}:{line}"
