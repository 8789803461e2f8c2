"""Numbers read at many byte offsets of a file's bytes at once (the TFRecord framing's
lengths and CRCs, the event decoder's fields, the CRC check's 8-byte words).

Records of one length that lie at equal distances (the records of one tag, with the same
tags in between, in an event file) are read through strided views of the data: nothing is
gathered or copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from loganalyzer.parsers.crc import I64Array, U8Array

BoolArray = npt.NDArray[np.bool_]
WORD = 8  # bytes compared at once when looking for the byte positions records share


def numbers_at(data: U8Array, at: I64Array, dtype: str) -> np.ndarray[Any, Any]:
    """The little-endian number of `dtype` at each byte offset (each leaving room for it),
    read through a view of the data with an element at every byte: no index matrix."""
    size = np.dtype(dtype).itemsize
    if size == 1:
        byte: np.ndarray[Any, Any] = np.take(data, at).view(dtype)
        return byte
    every_byte = np.ndarray((max(len(data) - size + 1, 0),), dtype, buffer=data, strides=(1,))
    numbers: np.ndarray[Any, Any] = every_byte[at]
    return numbers


def even_gap(starts: I64Array, length: int) -> int | None:
    """The distance between consecutive records of `length` bytes when they lie at equal
    distances (and do not overlap), else None."""
    if len(starts) < 2:
        return None
    gaps = np.diff(starts)
    gap = int(gaps[0])
    return gap if gap >= length and (gaps == gap).all() else None


def field_at(
    data: U8Array, starts: I64Array, offset: int, dtype: str, gap: int | None
) -> np.ndarray[Any, Any]:
    """The number of `dtype` at `offset` in each record (each leaving room for it): a
    strided view of the data when the records lie `gap` apart, gathered otherwise."""
    if gap is None:
        return numbers_at(data, starts + offset, dtype)
    view: np.ndarray[Any, Any] = np.ndarray(
        (len(starts),), dtype, buffer=data, offset=int(starts[0]) + offset, strides=(gap,)
    )
    return view


def varying_bytes(data: U8Array, starts: I64Array, length: int, gap: int | None) -> BoolArray:
    """Which byte positions of records of `length` bytes are not the same in all of them,
    eight at a time (`_differences`). Records shorter than a word count as varying
    everywhere."""
    varying = np.ones(length, dtype=bool)
    if length < WORD or len(starts) == 0:
        return varying
    for offset, differ in _differences(data, starts, 0, length, gap):
        varying[offset : offset + WORD] = [(differ >> 8 * k) & 0xFF != 0 for k in range(WORD)]
    return varying


def same_bytes(data: U8Array, starts: I64Array, first: int, stop: int, gap: int | None) -> bool:
    """Whether every record holds the first record's bytes `first` to `stop` - 1 (each
    record leaving room for a word from `first` when they are a word or more)."""
    return all(differ == 0 for _, differ in _differences(data, starts, first, stop, gap))


def _differences(
    data: U8Array, starts: I64Array, first: int, stop: int, gap: int | None
) -> Iterator[tuple[int, int]]:
    """Bytes `first` to `stop` - 1 of the records a word at a time (a byte at a time when
    they are shorter than a word; the last word overlaps the one before when the span is not
    a multiple of its width): each word's offset and the OR of every record's word XOR the
    first record's, nonzero where some record differs."""
    width = WORD if stop - first >= WORD else 1
    dtype = "<u8" if width == WORD else "u1"
    for offset in sorted({*range(first, stop - width + 1, width), stop - width}):
        words = field_at(data, starts, offset, dtype, gap)
        yield offset, int(np.bitwise_or.reduce(words ^ words[0]))
