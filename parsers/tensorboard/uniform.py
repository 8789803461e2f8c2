"""Simple-value scalar events decoded a length at a time.

In a training run's event file the records of one tag all have one length and differ only
in their wall time, step and value. So the records of a chunk are grouped by length; in a
group whose layout bytes (field keys and lengths) and tag are the same in every record,
the first record is parsed once in Python, every record's step varint
is checked to take the same bytes, and the three numbers are read at fixed offsets, through
a strided view of the data when the records lie at equal distances. Small groups, groups
of records that differ elsewhere (two tags of one length) and everything that is not one
simple value are left to the per-record decoder (`events`), which reads the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loganalyzer.parsers.crc import I64Array, U8Array
from loganalyzer.parsers.tensorboard.checksum import distinct_lengths
from loganalyzer.parsers.tensorboard.numbers import even_gap, field_at, same_bytes
from loganalyzer.parsers.tensorboard.tfrecord import Chunk

# Records of one length this many or more (in a chunk) are decoded as a group.
GROUP_RECORDS = 64
# Protobuf field keys of `Event{wall_time=1, step=2, summary=5}`,
# `Summary{value=1}`, `Summary.Value{tag=1, simple_value=2}`.
WALL_TIME, STEP, SUMMARY, VALUE, TAG, SIMPLE = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
VARINT_BYTES = 10  # the longest varint (a negative int64)
# The shortest event of one simple value: wall time, summary, value, tag and value keys.
SHORTEST = 9 + 2 + 2 + 2 + 5


@dataclass(frozen=True)
class Group:
    """Scalar events of one tag: their indices in the chunk and their numbers."""

    members: I64Array
    tag: str
    wall_time: npt.NDArray[np.float64]
    step: I64Array
    value: npt.NDArray[np.float32]


@dataclass(frozen=True)
class Layout:
    """Where the fields of a simple-value event of one length lie."""

    step_bytes: int  # 0 when the event has no step
    head: int  # the summary's field key
    value: int  # the simple value

    def shared(self, data: U8Array, starts: I64Array, gap: int | None) -> bool:
        """Whether the records hold the first one's wall time and step keys, summary,
        value and tag keys and lengths, tag, and simple value key."""
        shared: bool = (
            same_bytes(data, starts, 0, 1, gap)
            and same_bytes(data, starts, 9, 10, gap)
            and same_bytes(data, starts, self.head, self.value, gap)
        )
        return shared


def uniform_groups(chunk: Chunk) -> list[Group]:
    """The groups of the chunk's records that are decoded at once."""
    distinct, inverse, counts = distinct_lengths(chunk.lengths)
    groups = []
    for index in np.flatnonzero(counts >= GROUP_RECORDS).tolist():
        members = np.flatnonzero(inverse == index)
        group = _group(chunk.data, chunk.starts[members], int(distinct[index]), members)
        if group is not None:
            groups.append(group)
    return groups


def layout(record: bytes) -> Layout | None:
    """The layout of an event holding one simple value and nothing else, or None; the
    same checks as the per-record decoder's."""
    length = len(record)
    if length < SHORTEST or record[0] != WALL_TIME:
        return None
    step_bytes = 0
    if record[9] == STEP:
        ends = [i for i, byte in enumerate(record[10 : 10 + VARINT_BYTES]) if byte < 0x80]
        if not ends:
            return None
        step_bytes = ends[0] + 1
    head = 10 + step_bytes if step_bytes else 9
    keys = record[head : head + 6]
    if len(keys) < 6:
        return None
    tag_length = keys[5]
    value = head + 6 + tag_length + 1
    well_formed = (
        keys[0] == SUMMARY
        and keys[1] == length - head - 2
        and keys[2] == VALUE
        and keys[3] == length - head - 4
        and keys[4] == TAG
        and max(keys[1], keys[3], tag_length) < 0x80
        and value + 4 == length
        and record[value - 1] == SIMPLE
    )
    return Layout(step_bytes, head, value) if well_formed else None


def _group(data: U8Array, starts: I64Array, length: int, members: I64Array) -> Group | None:
    first = int(starts[0])
    shape = layout(bytes(data[first : first + length]))
    if shape is None:
        return None
    gap = even_gap(starts, length)
    if not shape.shared(data, starts, gap):
        return None
    step = _step(data, starts, shape.step_bytes, gap)
    if step is None:
        return None
    tag = bytes(data[first + shape.head + 6 : first + shape.value - 1])
    return Group(
        members,
        tag.decode("utf-8", errors="replace"),
        field_at(data, starts, 1, "<f8", gap),
        step,
        field_at(data, starts, shape.value, "<f4", gap),
    )


def _step(data: U8Array, starts: I64Array, size: int, gap: int | None) -> I64Array | None:
    """Each record's step, a varint of `size` bytes at offset 10 (int64, as protobuf reads
    it), or None if in some record it does not end at that byte."""
    step = np.zeros(len(starts), dtype=np.uint64)
    for index in range(size):
        byte = field_at(data, starts, 10 + index, "u1", gap)
        more = (byte & 0x80) != 0
        if not (more.all() if index < size - 1 else not more.any()):
            return None
        step |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * index)
    steps: I64Array = step.view(np.int64)
    return steps
