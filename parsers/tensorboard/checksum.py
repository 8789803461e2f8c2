"""TFRecord's CRC-32C of many records at once, by the CRC's linearity.

Without its initial and final inversion a CRC is linear in the message's bits: a record's
CRC is the XOR of one table entry per byte, picked by the byte's value and its distance
from the record's end, XOR a term for the inversions that depends on the length alone.
Records of one length (most of an event file: one length per tag) are seen as a matrix of
byte columns (a strided view when they lie at equal distances, gathered otherwise), and each
column costs one table lookup and one XOR, against the five
operations of the byte-at-a-time update (`loganalyzer.parsers.crc`), which still checks
the records of rare lengths. The length field's CRC depends on the length alone: computed
once per distinct length.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from loganalyzer.parsers.crc import (
    CRC32C_POLY,
    I64Array,
    U8Array,
    U32Array,
    crc_many,
    crc_table,
    masked_crc32c,
)

# Records of one length this many or more (in a call) go through the distance tables.
COMMON_RECORDS = 64
# Longest record checked by the tables (a table of 1 KB per byte of length).
MAX_WIDTH = 512
# Records gathered at once: bounds the byte matrix and its index (16 bytes a record byte).
ROWS = 1 << 14


def masked_crcs(data: U8Array, starts: I64Array, lengths: I64Array) -> U32Array:
    """The masked CRC-32C of each record `data[starts[i]:starts[i] + lengths[i]]`."""
    result = np.zeros(len(starts), dtype=np.uint32)
    if len(starts) == 0:
        return result
    distinct, inverse, counts = np.unique(lengths, return_inverse=True, return_counts=True)
    common = np.flatnonzero((counts >= COMMON_RECORDS) & (distinct > 0) & (distinct <= MAX_WIDTH))
    for index in common:
        members = np.flatnonzero(inverse == index)
        result[members] = _one_length(data, starts[members], int(distinct[index]))
    rare = np.flatnonzero(~np.isin(inverse, common))
    if len(rare):
        result[rare] = crc_many(data, starts[rare], lengths[rare], CRC32C_POLY)
    return masked_crc32c(result)


def masked_length_crcs(lengths: I64Array) -> U32Array:
    """The masked CRC-32C of each length as TFRecord stores it (8 bytes, little-endian)."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    packed = np.frombuffer(distinct.astype("<u8").tobytes(), dtype=np.uint8)
    at = np.arange(len(distinct), dtype=np.int64) * 8
    crcs = crc_many(packed, at, np.full(len(distinct), 8, dtype=np.int64), CRC32C_POLY)
    expected: U32Array = masked_crc32c(crcs)[inverse.ravel()]
    return expected


def _one_length(data: U8Array, starts: I64Array, length: int) -> U32Array:
    tables, inversions = _tables(length)
    crcs = np.full(len(starts), inversions, dtype=np.uint32)
    columns = np.arange(length, dtype=np.int64)[:, None]
    for first in range(0, len(starts), ROWS):
        part = starts[first : first + ROWS]
        matrix = _evenly_spaced(data, part, length)
        if matrix is None:
            matrix = data[columns + part[None, :]]  # one row per byte position
        crc = crcs[first : first + ROWS]
        for position in range(length):
            crc ^= tables[length - 1 - position][matrix[position]]
    return crcs


def _evenly_spaced(data: U8Array, starts: I64Array, length: int) -> U8Array | None:
    """The records as a view of the data, one row per byte position, when they lie at equal
    distances (the records of one tag, with the same tags in between, in an event file):
    nothing is gathered."""
    if len(starts) < 2:
        return None
    gaps = np.diff(starts)
    gap = int(gaps[0])
    if gap < length or not (gaps == gap).all():
        return None
    view: U8Array = np.lib.stride_tricks.as_strided(
        data[int(starts[0]) :], shape=(length, len(starts)), strides=(1, gap), writeable=False
    )
    return view


@cache
def _tables(length: int) -> tuple[U32Array, np.uint32]:
    """Per distance d from the end (0 = the last byte), the CRC register a byte value leaves
    after d zero bytes; and the term of the initial and final inversions for `length`."""
    table = crc_table(CRC32C_POLY)
    tables = np.empty((length, 256), dtype=np.uint32)
    tables[0] = table
    for distance in range(1, length):
        before = tables[distance - 1]
        tables[distance] = table[before & 0xFF] ^ (before >> np.uint32(8))
    state = np.uint32(0xFFFFFFFF)
    for _ in range(length):
        state = table[state & 0xFF] ^ (state >> np.uint32(8))
    return tables, np.uint32(state ^ np.uint32(0xFFFFFFFF))
