"""CRC-32 and CRC-32C over many short records at once, with numpy.

The TFRecord (crc32c, masked) and `.wandb` (zlib crc32) framings check every record with a
CRC. A C call per record costs more than the CRC itself for the short records these files are
made of (a scalar event is ~50 bytes), so records are checked in batches: one table lookup
per byte position across all the records of a batch. Records of different lengths share a
batch right-aligned, each starting its CRC where its own bytes start.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected: TFRecord
CRC32_POLY = 0xEDB88320  # IEEE, reflected: zlib.crc32, the `.wandb` log
# Bytes of record data (rows x padded length) gathered at once: bounds the batch's memory.
BATCH_BYTES = 4 * 1024 * 1024
# Records of one length this many or more are checked in a batch of their own.
COMMON_LENGTH = 256

U8Array = npt.NDArray[np.uint8]
U32Array = npt.NDArray[np.uint32]
I64Array = npt.NDArray[np.int64]


@cache
def crc_table(poly: int) -> U32Array:
    """The byte-at-a-time lookup table of a reflected CRC-32 polynomial."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(poly), table >> 1).astype(np.uint32)
    return table


def crc_many(
    data: U8Array, starts: I64Array, lengths: I64Array, poly: int, init: U32Array | None = None
) -> U32Array:
    """The CRC of each record `data[starts[i]:starts[i] + lengths[i]]`.

    `init` is each record's running CRC state before its bytes (already inverted, as
    zlib's `crc32(data, value)` takes it); None starts from zero.
    """
    result = np.zeros(len(starts), dtype=np.uint32)
    if len(starts) == 0:
        return result
    state0 = (
        np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
        if init is None
        else (init ^ np.uint32(0xFFFFFFFF)).astype(np.uint32)
    )
    table = crc_table(poly)
    # Lengths shared by many records get a batch of their own (no padding); the rest are
    # bucketed by bit length, so that padding at most doubles the work of a bucket.
    distinct, counts = np.unique(lengths, return_counts=True)
    common = distinct[counts >= COMMON_LENGTH]
    groups = np.where(
        np.isin(lengths, common),
        lengths,
        -1 - np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64),
    )
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        width = int(lengths[members].max())
        rows = max(1, BATCH_BYTES // max(width, 1))
        for first in range(0, len(members), rows):
            part = members[first : first + rows]
            result[part] = _crc_block(data, starts[part], lengths[part], width, state0[part], table)
    return result


def _crc_block(
    data: U8Array,
    starts: I64Array,
    lengths: I64Array,
    width: int,
    state: U32Array,
    table: U32Array,
) -> U32Array:
    """Records right-aligned in a `width`-column matrix; column j updates only the records
    whose bytes have begun by then."""
    lead = width - lengths  # padding columns before each record's first byte
    columns = np.arange(width, dtype=np.int64)
    index = starts[:, None] - lead[:, None] + columns[None, :]
    np.clip(index, 0, len(data) - 1, out=index)
    matrix = data[index]
    state = state.copy()
    uniform = bool((lead == 0).all())
    for j in range(width):
        updated = table[(state ^ matrix[:, j]) & 0xFF] ^ (state >> np.uint32(8))
        state = updated if uniform else np.where(lead <= j, updated, state)
    finished: U32Array = (state ^ np.uint32(0xFFFFFFFF)).astype(np.uint32)
    return finished


def masked_crc32c(crc: U32Array) -> U32Array:
    """TFRecord's masking of a crc32c (so that a CRC of CRCs does not look valid)."""
    masked: U32Array = crc >> np.uint32(15)
    masked |= crc << np.uint32(17)
    masked += np.uint32(0xA282EAD8)  # modulo 2^32, as unsigned numpy arrays add
    return masked
