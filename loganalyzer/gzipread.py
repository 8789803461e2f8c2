"""Reading gzip that a crash or a careless copy damaged, keeping everything that decompresses.

Python's gzip module raises on a file cut short, on bytes after the last member and on a
corrupt member, and loses the block it was decompressing. This reader keeps every byte that
decompresses; at damage it notes the compressed byte offset, scans forward for the next
gzip member header (concatenated members, as `cat a.gz b.gz` or `gzip >> log.gz` make) and
goes on from there: a deflate stream has no other point to resume at.

Its cost is linear in what it gives out: each step decompresses at most OUT_BYTES, and what
a read does not take is handed out by an offset, not copied again (a 64 KB piece of a file of
NUL bytes decompresses to 64 MB, which 4 KB reads sliced off one copy at a time: minutes).
What it gives out is capped: a file that decompresses past `limit` bytes (see `cap`) stops
there, with a note, as a decompression bomb would otherwise be read whole (a 4 MB file of
4 GB of newlines).
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import BinaryIO

MEMBER_HEADER = b"\x1f\x8b\x08"
READ_BYTES = 1 << 20
# Decompressed a piece at a time; a corrupt piece is decompressed again in small steps to
# keep what precedes the damage.
PIECE_BYTES = 64 * 1024
SALVAGE_BYTES = 256
# Decompressed bytes made at most per step.
OUT_BYTES = 1 << 20
# The cap: a file may decompress to MAX_RATIO times its size, and always to CAP_FLOOR bytes.
# Logs compress 3-10 times (the excerpts of real runs), a synthetic log of repeated lines 24.
MAX_RATIO = 100
CAP_FLOOR = 16 << 20


def cap(compressed_bytes: int) -> int:
    """The decompressed bytes a file of `compressed_bytes` may give."""
    return max(CAP_FLOOR, MAX_RATIO * compressed_bytes)


class DamagedGzipReader(io.RawIOBase):
    """A readable stream of a gzip file's decompressed bytes that survives damage.

    `note(message)` is told, in one line, of each damage and of the compressed bytes
    skipped, and of the cap if the file reaches `limit` decompressed bytes (None: no cap). A
    file of which nothing decompresses raises OSError, as gzip does.
    """

    def __init__(
        self, raw: BinaryIO, note: Callable[[str], None], limit: int | None = None
    ) -> None:
        super().__init__()
        self._raw = raw
        self._note = note
        self._pending = b""  # compressed bytes read, not yet used
        self._offset = 0  # compressed offset of _pending[0]
        self._raw_done = False
        self._inflate: zlib._Decompress | None = zlib.decompressobj(wbits=31)
        self._in_member = False
        self._skipped_from = 0
        self._out = b""
        self._out_at = 0  # how much of _out was handed out
        self._produced = 0
        self._limit = limit
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._out_at == len(self._out) and not self._eof:
            self._out, self._out_at = b"", 0
            self._step()
        size = min(len(buffer), len(self._out) - self._out_at)
        capped = self._limit is not None and self._produced + size > self._limit
        if self._limit is not None and capped:
            size = self._limit - self._produced
        buffer[:size] = memoryview(self._out)[self._out_at : self._out_at + size]
        self._out_at += size
        self._produced += size
        if capped:
            self._capped()
        return size

    def _capped(self) -> None:
        """Stop at the limit: what remains is not read, and the note says so once."""
        if not self._eof:
            self._note(
                f"decompressed to more than {self._limit} bytes, over {MAX_RATIO} times the"
                " compressed size (a decompression bomb?); reading stopped there and the rest"
                " of the file was not read"
            )
        self._eof = True
        self._out, self._out_at = b"", 0

    def close(self) -> None:
        self._raw.close()
        super().close()

    def _step(self) -> None:
        if len(self._pending) < PIECE_BYTES and not self._raw_done:
            more = self._raw.read(READ_BYTES)
            self._pending += more
            self._raw_done = not more
        if not self._pending and self._in_member and self._inflate is not None:
            # what the last input left to give out, past the previous step's OUT_BYTES
            self._out = self._inflate.decompress(b"", OUT_BYTES)
            if not self._out:
                self._finish()
        elif not self._pending:
            self._finish()
        elif self._inflate is None:
            self._scan()
        elif not self._in_member:
            self._member_start()
        else:
            self._inflate_piece(self._inflate)

    def _member_start(self) -> None:
        """Between members: NUL padding is allowed, anything but a header is not gzip."""
        stripped = self._pending.lstrip(b"\x00")
        self._offset += len(self._pending) - len(stripped)
        self._pending = stripped
        if not stripped:
            return
        if stripped.startswith(MEMBER_HEADER[: len(stripped)]):
            self._in_member = True
            return
        if self._produced == 0 and not self._out:
            raise OSError("not a gzip file")
        self._note(f"bytes from compressed offset {self._offset} on are not gzip")
        self._start_scan()

    def _inflate_piece(self, inflate: zlib._Decompress) -> None:
        piece, rest = self._pending[:PIECE_BYTES], self._pending[PIECE_BYTES:]
        before = inflate.copy()
        try:
            self._out = inflate.decompress(piece, OUT_BYTES)
        except zlib.error as exc:
            self._out, good = _salvage(before, piece)
            self._note(
                f"corrupt compressed data ({exc}) at compressed offset {self._offset + good}"
            )
            self._start_scan(skip=1)  # past this member's own header
            return
        if inflate.eof:
            unused = inflate.unused_data
            self._offset += len(piece) - len(unused)
            self._pending = unused + rest
            self._inflate = zlib.decompressobj(wbits=31)
            self._in_member = False
        else:
            tail = inflate.unconsumed_tail  # input left when OUT_BYTES were made
            self._offset += len(piece) - len(tail)
            self._pending = tail + rest if tail else rest

    def _start_scan(self, skip: int = 0) -> None:
        self._inflate = None
        self._in_member = False
        self._skipped_from = self._offset
        self._pending = self._pending[skip:]
        self._offset += skip

    def _scan(self) -> None:
        found = self._pending.find(MEMBER_HEADER)
        if found < 0:  # keep what could be the start of a header split between reads
            drop = len(self._pending) if self._raw_done else len(self._pending) - 2
            self._offset += drop
            self._pending = self._pending[drop:]
            return
        self._offset += found
        self._pending = self._pending[found:]
        self._note(
            f"compressed bytes {self._skipped_from}-{self._offset} skipped; "
            f"reading resumed at the gzip member at offset {self._offset}"
        )
        self._inflate = zlib.decompressobj(wbits=31)

    def _finish(self) -> None:
        self._eof = True
        if self._produced == 0 and not self._out and (self._in_member or self._inflate is None):
            raise OSError("no data could be decompressed")
        if self._inflate is None:
            self._note(
                f"compressed bytes {self._skipped_from}-{self._offset} skipped: "
                "no gzip member follows them"
            )
        elif self._in_member:
            self._note(
                f"the compressed data ends early at offset {self._offset} (the file was cut "
                "short); everything before it is kept"
            )


def _salvage(inflate: zlib._Decompress, piece: bytes) -> tuple[bytes, int]:
    """What `piece` decompresses to before its damage, and the compressed bytes that gave it."""
    kept: list[bytes] = []
    good = 0
    for start in range(0, len(piece), SALVAGE_BYTES):
        try:
            kept.append(inflate.decompress(piece[start : start + SALVAGE_BYTES]))
        except zlib.error:
            break
        good = start
    return b"".join(kept), good
