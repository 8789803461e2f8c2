"""TFRecord framing (TensorBoard event files), checked record by record, resynchronised after
damage.

A file is records of `u64 length | u32 masked crc32c(length) | data | u32 masked crc32c(data)`.
tensorboard's own readers stop at the first bad CRC and drop the rest of the file silently;
here a bad record costs only the bytes it spans: the reader scans forward for the next
position where a whole record's length and data CRCs both check, and carries on from there.
A record cut short at the end (a job killed mid-write) keeps everything before it. A length is
checked against the bytes left before its record is read: a header claiming more than the
file holds is a record cut short, at once.

The walk over lengths predicts many records ahead from the sizes' period and checks the
predictions with numpy (each offset depends on the last); the CRCs of all the records found
are then checked at once with numpy (`checksum`).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loganalyzer.errors import InputError
from loganalyzer.parsers.crc import (
    CRC32C_POLY,
    I64Array,
    U8Array,
    U32Array,
    crc_many,
    masked_crc32c,
)
from loganalyzer.parsers.framing import Damage
from loganalyzer.parsers.tensorboard.checksum import (
    distance_tables,
    distinct_lengths,
    masked_crcs,
    masked_length_crcs,
)
from loganalyzer.parsers.tensorboard.numbers import numbers_at

HEADER = 12  # u64 length + u32 length CRC
FOOTER = 4  # u32 data CRC
# Positions examined at once while looking for the next intact record after damage.
SCAN_WINDOW = 1 << 20
# The bytes of whole candidate records CRC-checked while looking for intact records after
# damage, per byte of the file: headers that check but lead to no intact record (forged, each
# claiming the rest of the file) would otherwise cost the square of the file's size.
SEARCH_BYTES_PER_BYTE = 8
_LENGTH = struct.Struct("<Q")
# The walk: records walked one by one before the sizes' period is guessed, the longest period
# looked for, and how many records are predicted at once (doubling while they all match).
PROBE_RECORDS = 32
MAX_PERIOD = 16
PREDICT_MIN = 256
PREDICT_MAX = 1 << 16
# Records whose CRCs are checked at once (the work arrays grow with them), and records framed
# and handed on at once (the reader's tables are built chunk by chunk).
CHECK_RECORDS = 65536
CHUNK_RECORDS = 1 << 16


@dataclass
class Chunk:
    """Consecutive intact records of a file: where each one's data lies."""

    data: U8Array
    starts: I64Array
    lengths: I64Array
    first: int  # the index in the file of the chunk's first record

    def record(self, index: int) -> bytes:
        """The data of the chunk's record `index`."""
        start = int(self.starts[index])
        return bytes(self.data[start : start + int(self.lengths[index])])


class Framer:
    """The intact records of a TFRecord file's bytes (mapped by `mapping`), in order, about
    CHUNK_RECORDS at a time; once iterated, what could not be read (`damage`, `cut_at`) and
    how many records were (`records`). Each chunk's pages are released when the next one is
    asked for, so memory does not grow with the file."""

    def __init__(self, data: U8Array, mapping: mmap.mmap | None = None) -> None:
        self.data = data
        self.mapping = mapping
        self.damage: list[Damage] = []
        self.cut_at: int | None = None  # a record cut short by the end of the file begins here
        self.unsearched_from: int | None = None  # the search budget ran out here
        self.records = 0

    def __iter__(self) -> Iterator[Chunk]:
        data = self.data
        marks: list[int] = []  # records read before each damage
        position = 0
        budget = SEARCH_BYTES_PER_BYTE * len(data)
        while position < len(data):
            starts, lengths, stop, fits = _walk(data, position, CHUNK_RECORDS)
            good = _intact_prefix(data, starts, lengths)
            if good:
                yield Chunk(data, starts[:good], lengths[:good], self.records)
                self.records += good
                release_pages(self.mapping, int(starts[good - 1]))
            if good < len(starts):
                bad = int(starts[good]) - HEADER
            elif stop >= len(data):
                break
            elif fits:
                position = stop
                continue
            elif len(data) - stop < HEADER or _length_checks(data, stop):
                self.cut_at = stop  # a whole header with a good CRC, or a torn one: cut short
                break
            else:
                bad = stop
            resume, budget = _next_intact(data, bad + 1, budget)
            if budget < 0:
                self.unsearched_from, resume = resume, len(data)
            self.damage.append(Damage(bad, resume))
            marks.append(self.records)
            position = resume
        ends = [*marks[1:], self.records] if marks else []
        self.damage = [
            Damage(hurt.start, hurt.end, end - mark)
            for hurt, mark, end in zip(self.damage, marks, ends, strict=True)
        ]


def read_file(path: Path) -> tuple[U8Array, mmap.mmap | None]:
    """The file's bytes, memory-mapped (never copied into memory whole); empty for an empty
    file. The map stays open as long as the returned array is referenced."""
    try:
        with path.open("rb") as stream:
            if path.stat().st_size == 0:
                return np.zeros(0, dtype=np.uint8), None
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc}); check the path") from exc
    return np.frombuffer(mapped, dtype=np.uint8), mapped


def release_pages(mapping: mmap.mmap | None, end: int) -> None:
    """Drop the mapped pages before `end` from the process's resident memory: they stay in
    the page cache and are read again if touched. Each pass over a large file releases what
    it has read, so memory does not grow with the file's size."""
    if mapping is not None and hasattr(mmap, "MADV_DONTNEED") and end >= mmap.PAGESIZE:
        mapping.madvise(mmap.MADV_DONTNEED, 0, end - end % mmap.PAGESIZE)


def _walk(data: U8Array, position: int, limit: int) -> tuple[I64Array, I64Array, int, bool]:
    """Follow the lengths from `position` while whole records fit, for about `limit`
    records; the data starts and lengths found, where the walk stopped, and whether the
    record there may fit (the limit was reached). CRCs are not checked here.

    Each record's position depends on the one before, but the records of an event file
    mostly repeat a few sizes in a fixed order (one per tag). So after a few records walked
    one by one, the sizes' period is guessed and the positions of many records ahead are
    predicted at once; the length stored at each predicted position is then read with
    numpy, and every prediction up to the first that does not match is exactly what the
    walk would have found. A file without such a pattern is walked one record at a time.
    """
    size = len(data)
    buffer = memoryview(data)
    heads: list[I64Array] = []
    ahead = PREDICT_MIN
    count = 0
    fits = True
    while count < limit:
        walked = _walk_few(buffer, position, size)
        heads.append(np.array(walked[:-1], dtype=np.int64))
        position = walked[-1]
        if len(walked) <= PROBE_RECORDS:
            fits = False  # the walk stopped: a record does not fit
            break
        predicted = _predict(np.diff(np.array(walked, dtype=np.int64)), position, ahead)
        matched, after = _matching(data, predicted)
        heads.append(predicted[:matched])
        position = after if matched else position
        ahead = min(ahead * 2, PREDICT_MAX, limit) if matched == len(predicted) else PREDICT_MIN
        count += len(walked) - 1 + matched
    bounds = np.concatenate([*heads, np.array([position], dtype=np.int64)])
    return bounds[:-1] + HEADER, np.diff(bounds) - HEADER - FOOTER, position, fits


def _walk_few(buffer: memoryview, position: int, size: int) -> list[int]:
    """Up to PROBE_RECORDS records walked one by one: their heads and the position after the
    last (one head fewer than PROBE_RECORDS + 1 when a record does not fit)."""
    heads = [position]
    unpack = _LENGTH.unpack_from
    limit = size - HEADER
    while position <= limit and len(heads) <= PROBE_RECORDS:
        end = position + unpack(buffer, position)[0] + HEADER + FOOTER
        if end > size:
            break
        position = end
        heads.append(end)
    return heads


def _predict(sizes: I64Array, position: int, count: int) -> I64Array:
    """The heads of the next `count` records from `position`, if the record sizes go on
    repeating their shortest period among the last ones walked."""
    period = next(
        (p for p in range(1, MAX_PERIOD + 1) if (sizes[-2 * p : -p] == sizes[-p:]).all()),
        len(sizes),
    )
    repeated = np.tile(sizes[-period:], -(-count // period))[:count]
    return position + np.concatenate([[0], np.cumsum(repeated[:-1])])


def _matching(data: U8Array, heads: I64Array) -> tuple[int, int]:
    """How many of the predicted heads, from the first (which is real), are real records:
    each one's stored length leads to the next prediction, and it fits in the data; and the
    position after the last of them."""
    size = len(data)
    inside = heads + HEADER <= size
    count = int(np.argmin(inside)) if not inside.all() else len(heads)
    heads = heads[:count]
    if count == 0:
        return 0, int(heads[0]) if len(heads) else 0
    ends = heads + _stored_length(data, heads) + HEADER + FOOTER
    good = (ends[:-1] == heads[1:]) & (ends[:-1] <= size)
    first_bad = int(np.argmin(good)) if not good.all() else len(good)
    # the record at `first_bad` is real (its head was reached) but its successor is not
    # predicted: it is kept and the walk resumes after it
    matched = first_bad + 1 if ends[first_bad] <= size else first_bad
    return matched, int(ends[matched - 1]) if matched else int(heads[0])


def _stored_length(data: U8Array, heads: I64Array) -> I64Array:
    """The u64 length field at each head (heads at least HEADER bytes before the end); a
    length past the end of the data (up to 2^64 - 1 in a damaged header) reads as the data's
    size, which no record fits in."""
    stored = numbers_at(data, heads, "<u8")
    size = np.uint64(len(data))
    lengths: I64Array = np.minimum(stored, size).astype(np.int64)
    return lengths


def _intact_prefix(data: U8Array, starts: I64Array, lengths: I64Array) -> int:
    """How many of the walked records, from the first, pass both CRCs (checked CHECK_RECORDS
    at a time: the work arrays of a check grow with the records checked)."""
    for first in range(0, len(starts), CHECK_RECORDS):
        part = slice(first, first + CHECK_RECORDS)
        good = _intact(data, starts[part], lengths[part])
        if good < len(starts[part]):
            return first + good
    return len(starts)


def _intact(data: U8Array, starts: I64Array, lengths: I64Array) -> int:
    groups = distinct_lengths(lengths)
    length_ok = _stored(data, starts - HEADER + 8) == masked_length_crcs(lengths, groups)
    data_ok = _stored(data, starts + lengths) == masked_crcs(data, starts, lengths, groups)
    bad = np.flatnonzero(~(length_ok & data_ok))
    return int(bad[0]) if len(bad) else len(starts)


def _stored(data: U8Array, at: I64Array) -> U32Array:
    """The little-endian u32 stored at each offset."""
    stored: U32Array = numbers_at(data, at, "<u4")
    return stored


def _length_checks(data: U8Array, head: int) -> bool:
    at = np.array([head], dtype=np.int64)
    expected = masked_crc32c(crc_many(data, at, np.array([8], dtype=np.int64), CRC32C_POLY))
    return bool(_stored(data, at + 8)[0] == expected[0])


def _length_crcs(data: U8Array, first: int, count: int) -> U32Array:
    """The masked CRC-32C of the 8 bytes at each of `count` consecutive positions from
    `first`: by the CRC's linearity, one table lookup per byte of the 8, over views of the
    data (no index array of 8 offsets per position)."""
    tables, inversions = distance_tables(8)
    crcs = np.full(count, inversions, dtype=np.uint32)
    for offset in range(8):
        crcs ^= np.take(tables[7 - offset], data[first + offset : first + offset + count])
    return masked_crc32c(crcs)


def _next_intact(data: U8Array, position: int, budget: int) -> tuple[int, int]:
    """The first position at or after `position` where a whole record with good CRCs starts,
    or the end of the data; and what is left of `budget`, the bytes of candidate records that
    may still be checked whole (negative: it ran out at the position returned).
    Length CRCs of a window of positions are checked at once; the few that pass and whose
    length fits in the bytes left are checked whole."""
    size = len(data)
    while position + HEADER + FOOTER <= size:
        last = min(size - HEADER - FOOTER, position + SCAN_WINDOW)
        heads = np.arange(position, last + 1, dtype=np.int64)
        passing = _stored(data, heads + 8) == _length_crcs(data, position, len(heads))
        for head in heads[passing]:
            (length,) = _LENGTH.unpack_from(memoryview(data), int(head))
            start = int(head) + HEADER
            if start + length + FOOTER > size:
                continue
            budget -= length
            if budget < 0:
                return int(head), budget
            one = np.array([start], dtype=np.int64)
            crc = masked_crc32c(
                crc_many(data, one, np.array([length], dtype=np.int64), CRC32C_POLY)
            )
            if _stored(data, one + length)[0] == crc[0]:
                return int(head), budget
        position = last + 1
    return size, budget
