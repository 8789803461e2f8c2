"""Framing of W&B's `run-<id>.wandb` transaction log: LevelDB-log style blocks.

The file is a 7-byte header (`:W&B`, u16 0xBEE1, u8 version) and then 32 KiB blocks of
chunks, each `u32 crc | u16 length | u8 type | data`, the CRC being zlib's crc32 of the type
byte and the data. A record is one FULL chunk or FIRST, MIDDLE..., LAST chunks; a block's
tail too short for a chunk header is zero padding.

After a damaged chunk (bad CRC, impossible length or type) reading resumes at the next
position in its block where a whole chunk's CRC checks, or else at the next block boundary,
where a chunk header always starts (LevelDB's own recovery); a record whose chunks were
damaged is dropped, every other one kept. A chunk cut short by the end of the file
(a run killed mid-write) keeps everything before it. CRCs are checked with numpy, all at once.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from loganalyzer.parsers.crc import CRC32_POLY, I64Array, U8Array, crc_many
from loganalyzer.parsers.framing import Damage

MAGIC = b":W&B"
FILE_HEADER = 7
BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_CHUNK = struct.Struct("<IHB")
# zlib.crc32 of each type byte: the state each chunk's data CRC continues from.
_TYPE_CRC = np.array([zlib.crc32(bytes([t])) for t in range(256)], dtype=np.uint32)


@dataclass
class LogRecords:
    """The whole records of the log, each with the file offset of its first chunk."""

    records: list[bytes]
    offsets: list[int]
    version: int
    damage: list[Damage] = field(default_factory=list)
    cut_at: int | None = None


def is_transaction_log(head: bytes) -> bool:
    return head[:4] == MAGIC and head[4:6] == struct.pack("<H", 0xBEE1)


def read_log(data: U8Array) -> LogRecords:
    """Every whole record of a `.wandb` file's bytes, in order."""
    raw = data.tobytes()
    if not is_transaction_log(raw[:FILE_HEADER]):
        raise ValueError("not a W&B transaction log (no ':W&B' header)")
    chunks: list[tuple[int, int, int]] = []  # (data start, length, type) of intact chunks
    damage: list[Damage] = []
    cut_at: int | None = None
    position = FILE_HEADER
    while position < len(raw):
        found, stop, cut = _walk(raw, position)
        good = _intact_prefix(data, found)
        chunks.extend(found[:good])
        if good < len(found):
            bad = found[good][0] - CHUNK_HEADER
        elif cut:
            cut_at = stop
            break
        elif stop >= len(raw):
            break
        else:
            bad = stop
        resume = _next_intact(data, bad + 1)
        damage.append(Damage(bad, resume))
        position = resume
    records, offsets, counted = _assemble(raw, chunks, damage)
    return LogRecords(records, offsets, raw[6], counted, cut_at)


def _walk(raw: bytes, position: int) -> tuple[list[tuple[int, int, int]], int, bool]:
    """Chunks from `position` while their headers make sense; where the walk stopped, and
    whether it stopped because the file ends inside a chunk."""
    size = len(raw)
    found: list[tuple[int, int, int]] = []
    unpack = _CHUNK.unpack_from
    while position < size:
        block_end = (position // BLOCK + 1) * BLOCK
        if block_end - position < CHUNK_HEADER:
            position = block_end  # zero padding at a block's end
            continue
        if position + CHUNK_HEADER > size:
            return found, position, any(raw[position:])
        crc, length, kind = unpack(raw, position)
        if crc == 0 and length == 0 and kind == 0:
            position = block_end  # a zeroed rest of block: padding up to the next one
            continue
        end = position + CHUNK_HEADER + length
        if kind not in (FULL, FIRST, MIDDLE, LAST) or end > block_end:
            return found, position, False
        if end > size:
            return found, position, True
        found.append((position + CHUNK_HEADER, length, kind))
        position = end
    return found, position, False


def _next_intact(data: U8Array, position: int) -> int:
    """The first position from `position` on, within its block, where a chunk with a sensible
    header and a good CRC starts; else the next block boundary (or the end). Every position
    of the block is checked at once."""
    size = len(data)
    block_end = min((position // BLOCK + 1) * BLOCK, size)
    heads = np.arange(position, max(position, block_end - CHUNK_HEADER + 1), dtype=np.int64)
    if len(heads) == 0:
        return block_end
    kinds = data[heads + 6].astype(np.int64)
    lengths = data[heads + 4].astype(np.int64) | (data[heads + 5].astype(np.int64) << 8)
    fits = (kinds >= FULL) & (kinds <= LAST) & (heads + CHUNK_HEADER + lengths <= block_end)
    candidates = heads[fits]
    if len(candidates) == 0:
        return block_end
    expected = crc_many(
        data, candidates + CHUNK_HEADER, lengths[fits], CRC32_POLY, init=_TYPE_CRC[kinds[fits]]
    )
    index = candidates[:, None] + np.arange(4, dtype=np.int64)[None, :]
    stored = np.ascontiguousarray(data[index]).view("<u4").ravel()
    good = np.flatnonzero(stored == expected)
    return int(candidates[good[0]]) if len(good) else block_end


def _intact_prefix(data: U8Array, found: list[tuple[int, int, int]]) -> int:
    """How many of the walked chunks, from the first, have a good CRC."""
    if not found:
        return 0
    table = np.array(found, dtype=np.int64)
    starts: I64Array = table[:, 0]
    lengths: I64Array = table[:, 1]
    kinds = table[:, 2]
    expected = crc_many(data, starts, lengths, CRC32_POLY, init=_TYPE_CRC[kinds])
    index = (starts - CHUNK_HEADER)[:, None] + np.arange(4, dtype=np.int64)[None, :]
    stored = np.ascontiguousarray(data[index]).view("<u4").ravel()
    bad = np.flatnonzero(stored != expected)
    return int(bad[0]) if len(bad) else len(found)


def _assemble(
    raw: bytes, chunks: list[tuple[int, int, int]], damage: list[Damage]
) -> tuple[list[bytes], list[int], list[Damage]]:
    """Records from chunks; a record missing a chunk (lost to damage) is dropped."""
    records: list[bytes] = []
    offsets: list[int] = []
    parts: list[bytes] = []
    first_offset = 0
    for start, length, kind in chunks:
        piece = raw[start : start + length]
        if kind == FULL:
            parts = []
            records.append(piece)
            offsets.append(start - CHUNK_HEADER)
        elif kind == FIRST:
            parts = [piece]
            first_offset = start - CHUNK_HEADER
        elif parts:
            parts.append(piece)
            if kind == LAST:
                records.append(b"".join(parts))
                offsets.append(first_offset)
                parts = []
    bounds = [*(hurt.start for hurt in damage[1:]), len(raw) + 1][: len(damage)]
    counted = [
        Damage(hurt.start, hurt.end, sum(1 for at in offsets if hurt.end <= at < bound))
        for hurt, bound in zip(damage, bounds, strict=True)
    ]
    return records, offsets, counted
