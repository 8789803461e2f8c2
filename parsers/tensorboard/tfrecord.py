"""TFRecord framing (TensorBoard event files), checked record by record, resynchronised after
damage.

A file is records of `u64 length | u32 masked crc32c(length) | data | u32 masked crc32c(data)`.
tensorboard's own readers stop at the first bad CRC and drop the rest of the file silently;
here a bad record costs only the bytes it spans: the reader scans forward for the next
position where a whole record's length and data CRCs both check, and carries on from there.
A record cut short at the end (a job killed mid-write) keeps everything before it.

The walk over lengths is a Python loop (each offset depends on the last); the CRCs of all the
records found are then checked at once with numpy (`loganalyzer.parsers.crc`).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loganalyzer.errors import InputError
from loganalyzer.parsers.crc import CRC32C_POLY, I64Array, U8Array, crc_many, masked_crc32c
from loganalyzer.parsers.framing import Damage

HEADER = 12  # u64 length + u32 length CRC
FOOTER = 4  # u32 data CRC
# Positions examined at once while looking for the next intact record after damage.
SCAN_WINDOW = 1 << 20
_LENGTH = struct.Struct("<Q")


@dataclass
class Framed:
    """Where each intact record's data lies in the file, and what could not be read."""

    data: U8Array
    starts: I64Array
    lengths: I64Array
    damage: list[Damage] = field(default_factory=list)
    cut_at: int | None = None  # a record cut short by the end of the file begins here

    def record(self, index: int) -> bytes:
        start = int(self.starts[index])
        return bytes(self.data[start : start + int(self.lengths[index])])


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


def frame(data: U8Array) -> Framed:
    """Every intact record of a TFRecord file's bytes, in order."""
    buffer = memoryview(data)
    starts: list[I64Array] = []
    lengths: list[I64Array] = []
    damage: list[Damage] = []
    cut_at: int | None = None
    position = 0
    while position < len(data):
        found_starts, found_lengths, stop = _walk(buffer, position)
        good = _intact_prefix(data, found_starts, found_lengths)
        starts.append(found_starts[:good])
        lengths.append(found_lengths[:good])
        if good < len(found_starts):
            bad = int(found_starts[good]) - HEADER
        elif stop >= len(data):
            break
        elif len(data) - stop < HEADER or _length_checks(data, stop):
            cut_at = stop  # a whole header with a good CRC, or a torn one: the tail was cut
            break
        else:
            bad = stop
        resume = _next_intact(data, bad + 1)
        damage.append(Damage(bad, resume))
        position = resume
    all_starts = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    return Framed(
        data,
        all_starts,
        np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64),
        _count_after(damage, all_starts),
        cut_at,
    )


def _walk(buffer: memoryview, position: int) -> tuple[I64Array, I64Array, int]:
    """Follow the lengths from `position` while whole records fit; the data starts and
    lengths found, and where the walk stopped. CRCs are not checked here."""
    size = len(buffer)
    heads = [position]
    unpack = _LENGTH.unpack_from
    add = heads.append
    limit = size - HEADER
    while position <= limit:
        end = position + unpack(buffer, position)[0] + HEADER + FOOTER
        if end > size:
            break
        position = end
        add(end)
    bounds = np.array(heads, dtype=np.int64)
    return bounds[:-1] + HEADER, np.diff(bounds) - HEADER - FOOTER, position


def _intact_prefix(data: U8Array, starts: I64Array, lengths: I64Array) -> int:
    """How many of the walked records, from the first, pass both CRCs."""
    if len(starts) == 0:
        return 0
    heads = starts - HEADER
    length_ok = _stored(data, heads + 8) == masked_crc32c(
        crc_many(data, heads, np.full(len(heads), 8, dtype=np.int64), CRC32C_POLY)
    )
    data_ok = _stored(data, starts + lengths) == masked_crc32c(
        crc_many(data, starts, lengths, CRC32C_POLY)
    )
    bad = np.flatnonzero(~(length_ok & data_ok))
    return int(bad[0]) if len(bad) else len(starts)


def _stored(data: U8Array, at: I64Array) -> U8Array:
    """The little-endian u32 stored at each offset."""
    index = at[:, None] + np.arange(4, dtype=np.int64)[None, :]
    return np.ascontiguousarray(data[index]).view("<u4").ravel()


def _length_checks(data: U8Array, head: int) -> bool:
    at = np.array([head], dtype=np.int64)
    expected = masked_crc32c(crc_many(data, at, np.array([8], dtype=np.int64), CRC32C_POLY))
    return bool(_stored(data, at + 8)[0] == expected[0])


def _next_intact(data: U8Array, position: int) -> int:
    """The first position at or after `position` where a whole record with good CRCs starts,
    or the end of the data. Length CRCs of a window of positions are checked at once; the few
    that pass are checked whole."""
    size = len(data)
    while position + HEADER + FOOTER <= size:
        last = min(size - HEADER - FOOTER, position + SCAN_WINDOW)
        heads = np.arange(position, last + 1, dtype=np.int64)
        eights = np.full(len(heads), 8, dtype=np.int64)
        passing = _stored(data, heads + 8) == masked_crc32c(
            crc_many(data, heads, eights, CRC32C_POLY)
        )
        for head in heads[passing]:
            (length,) = _LENGTH.unpack_from(memoryview(data), int(head))
            start = int(head) + HEADER
            if start + length + FOOTER > size:
                continue
            one = np.array([start], dtype=np.int64)
            crc = masked_crc32c(
                crc_many(data, one, np.array([length], dtype=np.int64), CRC32C_POLY)
            )
            if _stored(data, one + length)[0] == crc[0]:
                return int(head)
        position = last + 1
    return size


def _count_after(damage: list[Damage], starts: I64Array) -> list[Damage]:
    """Each damage with the number of intact records between it and the next damage."""
    counted = []
    for index, hurt in enumerate(damage):
        limit = damage[index + 1].start if index + 1 < len(damage) else None
        after = (
            starts[starts > hurt.end]
            if limit is None
            else starts[(starts > hurt.end) & (starts < limit)]
        )
        counted.append(Damage(hurt.start, hurt.end, len(after)))
    return counted
