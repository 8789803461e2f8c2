"""TFRecord's CRC-32C of many records at once, by the CRC's linearity.

Without its initial and final inversion a CRC is linear in the message's bits: a record's
CRC is the XOR of one table entry per byte, picked by the byte's value and its distance
from the record's end, XOR a term for the inversions that depends on the length alone.
Records of one length (most of an event file: one length per tag) are checked a block at
a time. The byte positions where every record of the block holds the same byte as the
first (the tag and the field keys; the high bytes of the wall time) are found eight at a
time, by the OR of each 8-byte word's XOR with the first record's: their terms are the same
for every record and are added once. Each other position costs one table lookup and one
XOR per record, reading the records through a strided view when they lie at equal
distances. `loganalyzer.parsers.crc.crc_many` (a native CRC per record) checks the records
of rare lengths. The length field's CRC depends on the length alone: computed once per
distinct length.
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
from loganalyzer.parsers.tensorboard.numbers import even_gap, field_at, varying_bytes

# Records of one length this many or more (in a call) go through the distance tables.
COMMON_RECORDS = 64
# Lengths told apart by counting rather than sorting when all are shorter than this.
COUNTED_LENGTHS = 1 << 16
# Longest record checked by the tables (a table of 1 KB per byte of length).
MAX_WIDTH = 512
# Records checked at once: bounds the work arrays (8 bytes a record each).
ROWS = 1 << 16


def masked_crcs(
    data: U8Array, starts: I64Array, lengths: I64Array, groups: Lengths | None = None
) -> U32Array:
    """The masked CRC-32C of each record `data[starts[i]:starts[i] + lengths[i]]`; `groups`:
    `distinct_lengths(lengths)`, when the caller has it already."""
    result = np.zeros(len(starts), dtype=np.uint32)
    if len(starts) == 0:
        return result
    distinct, inverse, counts = distinct_lengths(lengths) if groups is None else groups
    common = (counts >= COMMON_RECORDS) & (distinct > 0) & (distinct <= MAX_WIDTH)
    for index in np.flatnonzero(common).tolist():
        members = np.flatnonzero(inverse == index)
        result[members] = _one_length(data, starts[members], int(distinct[index]))
    rare = np.flatnonzero(~common[inverse])
    if len(rare):
        result[rare] = crc_many(data, starts[rare], lengths[rare], CRC32C_POLY)
    return masked_crc32c(result)


def masked_length_crcs(lengths: I64Array, groups: Lengths | None = None) -> U32Array:
    """The masked CRC-32C of each length as TFRecord stores it (8 bytes, little-endian);
    `groups` as for `masked_crcs`."""
    distinct, inverse, _ = distinct_lengths(lengths) if groups is None else groups
    packed = np.frombuffer(distinct.astype("<u8").tobytes(), dtype=np.uint8)
    at = np.arange(len(distinct), dtype=np.int64) * 8
    crcs = crc_many(packed, at, np.full(len(distinct), 8, dtype=np.int64), CRC32C_POLY)
    expected: U32Array = np.take(masked_crc32c(crcs), inverse)
    return expected


# The distinct lengths, each length's index among them, and how many of each.
Lengths = tuple[I64Array, I64Array, I64Array]


def distinct_lengths(lengths: I64Array) -> Lengths:
    """The distinct lengths, each length's index among them, and how many of each. Lengths
    below COUNTED_LENGTHS (every record of a scalar event file) are counted in an array,
    without the sort `np.unique` would do."""
    if len(lengths) == 0 or int(lengths.max()) >= COUNTED_LENGTHS:
        distinct, inverse, counts = np.unique(lengths, return_inverse=True, return_counts=True)
        return distinct, inverse.ravel(), counts
    every = np.bincount(lengths)
    distinct = np.flatnonzero(every)
    index = np.zeros(len(every), dtype=np.int64)
    index[distinct] = np.arange(len(distinct))
    return distinct, np.take(index, lengths), every[distinct]


def _one_length(data: U8Array, starts: I64Array, length: int) -> U32Array:
    """The CRC-32C (unmasked) of records of one length, a block of ROWS at a time."""
    tables, inversions = distance_tables(length)
    crcs = np.empty(len(starts), dtype=np.uint32)
    for first in range(0, len(starts), ROWS):
        part = starts[first : first + ROWS]
        gap = even_gap(part, length)
        varying = varying_bytes(data, part, length, gap)
        # a byte every record shares with the first adds one term to every record's CRC
        head = int(part[0])
        shared = np.flatnonzero(~varying)
        distances = length - 1 - shared
        terms = tables[distances, data[head + shared]]
        crc = crcs[first : first + ROWS]
        crc[:] = inversions ^ np.bitwise_xor.reduce(terms, initial=np.uint32(0))
        for position in np.flatnonzero(varying).tolist():
            column = field_at(data, part, position, "u1", gap)
            crc ^= np.take(tables[length - 1 - position], column)
    return crcs


@cache
def distance_tables(length: int) -> tuple[U32Array, np.uint32]:
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
