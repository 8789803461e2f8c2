"""Numbers read at many byte offsets of a file's bytes at once (the TFRecord framing's
lengths and CRCs, the event decoder's fields, the CRC check's 8-byte words)."""

from __future__ import annotations

from typing import Any

import numpy as np

from loganalyzer.parsers.crc import I64Array, U8Array


def numbers_at(data: U8Array, at: I64Array, dtype: str) -> np.ndarray[Any, Any]:
    """The little-endian number of `dtype` at each byte offset (each leaving room for it),
    read through a view of the data with an element at every byte: no index matrix."""
    size = np.dtype(dtype).itemsize
    every_byte = np.ndarray((max(len(data) - size + 1, 0),), dtype, buffer=data, strides=(1,))
    numbers: np.ndarray[Any, Any] = every_byte[at]
    return numbers
