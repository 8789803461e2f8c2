"""Sources: turning the paths a user names into files, and reading them (gzip transparently).

Inputs are only ever opened for reading. Text is decoded leniently (invalid UTF-8 becomes
U+FFFD) because real logs carry binary junk, and a parser must see every line's number.
"""

from __future__ import annotations

import codecs
import functools
import gzip
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import BinaryIO

from loganalyzer.errors import InputError
from loganalyzer.gzipread import DamagedGzipReader
from loganalyzer.gzipread import cap as decompressed_cap

GZIP_MAGIC = b"\x1f\x8b"
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
HEAD_BYTES = 4 * 1024 * 1024
CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 64 * 1024 * 1024

# Told (file, bytes read so far, total bytes or None for .gz) after every chunk read; the
# command line sets it to show progress on long work. Library callers leave it unset.
READ_PROGRESS: ContextVar[Callable[[Path, int, int | None], None] | None] = ContextVar(
    "read_progress", default=None
)
# Set by `--refresh`: sources that are kept in a local cache (a W&B run) are fetched again.
REFRESH_REMOTE: ContextVar[bool] = ContextVar("refresh_remote", default=False)

# Damage met while reading (a gzip file cut short, a last line without its line break), one
# line each naming the file; `load` collects them into the run's warnings. Unset: not kept.
READ_NOTES: ContextVar[list[str] | None] = ContextVar("read_notes", default=None)


# Files a parser read as part of another source (an output_dir's config.json beside its
# trainer_state.json) or knowingly left unread (a checkpoint's copy of one it read), by path,
# with how: `load` lists them so instead of as unrecognised. Unset: not kept.
READ_ALONG: ContextVar[dict[str, tuple[bool, str]] | None] = ContextVar("read_along", default=None)


def note_read_along(path: Path, read: bool, how: str) -> None:
    """Say that `path` was read as part of the source being parsed (`how`: "as part of
    ..."), or that it was deliberately not read (`how`: why)."""
    found = READ_ALONG.get()
    if found is not None:
        found[os.path.normpath(path)] = (read, how)


def _note(path: Path, message: str) -> None:
    notes = READ_NOTES.get()
    if notes is not None:
        notes.append(f"{path}: {message}")


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading, decompressing gzip by its magic bytes rather than its name
    (keeping what a damaged one holds, up to `gzipread.cap` of its size) and UTF-16 text
    (Windows consoles write it) as UTF-8."""
    try:
        if _is_gzip(path):
            reader = DamagedGzipReader(
                path.open("rb"),
                lambda message: _note(path, message),
                decompressed_cap(path.stat().st_size),
            )
            return io.BufferedReader(reader)
        stream = path.open("rb")
        if stream.read(2) in UTF16_BOMS:
            stream.seek(0)
            return codecs.EncodedFile(stream, "utf-8", "utf-16")
        stream.seek(0)
        return stream
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc}); check the path") from exc


def read_head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first `size` bytes of a file (decompressed), decoded: as much as can be read, so
    a truncated .gz still shows its head. '' if nothing can be read. Never raises: detection
    calls it, once per parser."""
    try:
        if not _is_gzip(path):
            stat = path.stat()
            return _plain_head(path, size, stat.st_mtime_ns, stat.st_size)
    except (OSError, InputError):
        return ""
    blocks: list[bytes] = []
    read = 0
    try:
        with open_binary(path) as stream:
            while read < size:
                block = stream.read(min(4096, size - read))  # small: keep what precedes a cut
                if not block:
                    break
                blocks.append(block)
                read += len(block)
    except (OSError, EOFError, InputError, gzip.BadGzipFile):
        pass
    data = b"".join(blocks)
    return data.decode("utf-8", errors="replace")


def text_head(path: Path, *, json_too: bool = False) -> str | None:
    """The head of a file that may be a text log (`read_head`), for a parser's `detect`; None
    for what cannot be one: not a regular file, a .json file (unless `json_too`: a parser
    that reads JSON as text), nothing to read, or mostly binary (`is_probably_binary`).
    Never raises."""
    if not path.is_file() or (path.suffix == ".json" and not json_too):
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return _text_head(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _text_head(path: Path, modified_ns: int, file_size: int) -> str | None:
    """`text_head` kept while the file is unchanged: every parser's detection asks for it,
    and the binary test costs about 3 ms a head (a compressed head is decompressed once)."""
    head = read_head(path)
    return None if not head or is_probably_binary(head) else head


@functools.lru_cache(maxsize=4)
def _plain_head(path: Path, size: int, modified_ns: int, file_size: int) -> str:
    """`read_head` of an uncompressed file in one read, kept while the file is unchanged (its
    modification time and size are part of the key): every parser's detection reads it."""
    with open_binary(path) as stream:
        return stream.read(size).decode("utf-8", errors="replace")


def check_readable(path: Path) -> None:
    """Raise InputError, naming the file, if its first bytes cannot be read (or decompressed)."""
    try:
        with open_binary(path) as stream:
            empty = stream.read(1) == b""
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"{path}: cannot be read ({exc}); is it a whole, valid file?") from exc
    if empty:
        raise InputError(f"{path}: the file is empty")


def iter_line_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, list[str]]]:
    """Yield (number of the first line, lines) in bounded chunks, splitting only on '\\n'.

    Lines are numbered from 1 as an editor would; a lone '\\r' stays inside its line (parsers
    decide what it means); a trailing '\\r' of CRLF files is removed.
    """
    for first, block in iter_line_blocks(path, chunk_bytes):
        yield first, decode_lines(block)


def iter_line_blocks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """Yield (number of the first line, bytes of whole lines without the last '\\n'), read
    (and decompressed, for gzip) as a stream in bounded chunks: a block holds
    `block.count(b"\\n") + 1` lines. A "line" longer than MAX_LINE_BYTES means the file is not
    a text log, and is refused rather than buffered.
    """
    next_line = 1
    carry = b""
    done = 0
    report = READ_PROGRESS.get()
    try:
        total = None if _is_gzip(path) else path.stat().st_size
        with open_binary(path) as stream:
            while True:
                block = stream.read(chunk_bytes)
                if not block:
                    break
                done += len(block)
                if report is not None:
                    report(path, done, total)
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry += block
                    if len(carry) > MAX_LINE_BYTES:
                        raise InputError(
                            f"{path}: line {next_line} runs past {MAX_LINE_BYTES >> 20} MB"
                            " without a line break; this is not a text log"
                        )
                    continue
                # One copy of the block's whole lines (joining a view), not two.
                # Held in a list popped as it is yielded: neither the bytes read nor the
                # joined ones stay referenced here while the consumer works on them.
                lines = [b"".join((carry, memoryview(block)[:cut]))]
                carry = block[cut + 1 :]
                del block
                count = lines[0].count(b"\n") + 1
                yield next_line, lines.pop()
                next_line += count
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(
            f"{path}: read failed after line {next_line - 1} ({exc}); "
            "the file may be truncated or corrupt"
        ) from exc
    if carry:
        _note(path, f"line {next_line} has no line break: the file may have been cut mid-line")
        yield next_line, carry


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as probe:
        return probe.read(2) == GZIP_MAGIC


def decode_lines(block: bytes) -> list[str]:
    """A block's lines, decoded leniently, without the '\\r' of CRLF line ends."""
    lines = block.decode("utf-8", errors="replace").split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def expand_sources(paths: Sequence[str]) -> list[Path]:
    """Every file named, and every file below each directory named, in a stable order."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs.sort()
                found.extend(Path(root) / f for f in sorted(files))
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"{name}: no such file or directory")
    return found


def is_utf8_path(path: Path) -> bool:
    """Whether a path's name is text: a file system name is bytes, and one that is not UTF-8
    (a Latin-1 folder name) cannot become a table's `source`, a JSON string or a report's
    text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: Path | str) -> str:
    """A path as text, its bytes that are not UTF-8 written `\\xff`."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


NOT_UTF8 = (
    "its path holds bytes that are not UTF-8: rename it, or link it under a UTF-8 name"
    " (ln -s) and pass the link"
)


def is_probably_binary(head: str) -> bool:
    """True when a head is mostly undecodable bytes or scattered NULs: not a text log.

    Runs of NULs are not counted: a writer that crashed on a network file system leaves
    them in the middle of a text log.
    """
    sample = re.sub("\x00{16,}", "", head[:65536])
    bad = sample.count("\ufffd") + sample.count("\x00")
    return bad > len(sample) * 0.1
