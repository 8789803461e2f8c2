"""Reading gzip that a crash or a careless copy damaged, keeping everything that decompresses.

Python's gzip module raises on a file cut short, on bytes after the last member and on a
corrupt member, and loses the block it was decompressing. This reader keeps every byte that
decompresses; at damage it notes the compressed byte offset, scans forward for the next
gzip member header (concatenated members, as `cat a.gz b.gz` or `gzip >> log.gz` make) and
goes on from there: a deflate stream has no other point to resume at.
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


class DamagedGzipReader(io.RawIOBase):
    """A readable stream of a gzip file's decompressed bytes that survives damage.

    `note(message)` is told, in one line, of each damage and of the compressed bytes
    skipped. A file of which nothing decompresses raises OSError, as gzip does.
    """

    def __init__(self, raw: BinaryIO, note: Callable[[str], None]) -> None:
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
        self._produced = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._out and not self._eof:
            self._step()
        size = min(len(buffer), len(self._out))
        buffer[:size] = self._out[:size]
        self._out = self._out[size:]
        self._produced += size
        return size

    def close(self) -> None:
        self._raw.close()
        super().close()

    def _step(self) -> None:
        if len(self._pending) < PIECE_BYTES and not self._raw_done:
            more = self._raw.read(READ_BYTES)
            self._pending += more
            self._raw_done = not more
        if not self._pending:
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
            self._out = inflate.decompress(piece)
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
            self._offset += len(piece)
            self._pending = rest

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
