"""Scalar events decoded a layout at a time.

In a training run's event file the records of one tag (or of one merged summary: several
tags in one event, as TF1's `merge_all()` and a writer's `add_summary` of a Summary of
several values write them) all have one length and differ only in their wall time, step
and values. So the records of a chunk are grouped by length; the first record of a group
is parsed once (and checked against tensorboard's own Event class): where its wall time,
step and each scalar (a simple value, or a TF2 tensor scalar of fixed width) lie. Every
record that holds the first one's bytes everywhere else, and whose step varint takes the
same bytes, has the same layout, and its numbers are read at those offsets, through
strided views of the data when the records lie at equal distances. The records left over
(another tag or merged summary of the same length) are grouped again by the first of them,
a few layouts per length. Small groups, records that share no layout and everything that
is not scalars are left to the per-record decoder (`events`), which reads the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loganalyzer.parsers.crc import I64Array, U8Array
from loganalyzer.parsers.tensorboard.checksum import distinct_lengths
from loganalyzer.parsers.tensorboard.numbers import WORD, BoolArray, even_gap, field_at
from loganalyzer.parsers.tensorboard.tensors import fields, scalar_offset, tensor_scalar
from loganalyzer.parsers.tensorboard.tfrecord import Chunk

# Records of one length this many or more (in a chunk) are decoded as a group.
GROUP_RECORDS = 64
# Protobuf field keys of `Event{wall_time=1, step=2, summary=5}`,
# `Summary{value=1}`, `Summary.Value{tag=1, simple_value=2}`.
WALL_TIME, STEP, SUMMARY, VALUE, TAG, SIMPLE = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
VARINT_BYTES = 10  # the longest varint (a negative int64)
# The shortest event of one simple value: wall time, summary, value, tag and value keys.
SHORTEST = 9 + 2 + 2 + 2 + 5
# Layouts looked for among the records of one length (each one more pass over them).
MAX_LAYOUTS = 8
# An event of scalars: wall time (fixed64), maybe the step (varint), the summary.
_EVENT_FIELDS = ([(1, 1), (5, 2)], [(1, 1), (2, 0), (5, 2)])
# Plugins whose tensors are not numbers: text summaries, hyper-parameters.
NOT_SCALARS = ("text", "hparams")


@dataclass(frozen=True)
class Scalar:
    """One scalar of a layout: its tag, and where and how its number is stored."""

    tag: str
    offset: int
    dtype: str  # numpy's little-endian type: "<f4" for a simple value


@dataclass(frozen=True)
class Group:
    """Scalar events of one layout: their indices in the chunk, the tags of the scalars
    each one holds, and their numbers (one array per scalar, in the events' order)."""

    members: I64Array
    tags: tuple[str, ...]
    wall_time: npt.NDArray[np.float64]
    step: I64Array
    values: tuple[npt.NDArray[np.floating[Any] | np.integer[Any]], ...]


@dataclass(frozen=True)
class Layout:
    """Where the fields of a scalar event of one length lie."""

    step_bytes: int  # 0 when the event has no step
    scalars: tuple[Scalar, ...]

    def varying(self, length: int) -> BoolArray:
        """The bytes that differ from event to event: the wall time, the step and each
        scalar's number."""
        varying = np.zeros(length, dtype=bool)
        varying[1:9] = True
        varying[10 : 10 + self.step_bytes] = True
        for scalar in self.scalars:
            varying[scalar.offset : scalar.offset + np.dtype(scalar.dtype).itemsize] = True
        return varying

    def shared(self, data: U8Array, starts: I64Array, length: int, gap: int | None) -> BoolArray:
        """Which records hold the first one's bytes everywhere but where they may vary,
        compared a word at a time (the last word overlaps the one before)."""
        varying = self.varying(length)
        same = np.ones(len(starts), dtype=bool)
        for offset in sorted({*range(0, length - WORD + 1, WORD), length - WORD}):
            kept = ~varying[offset : offset + WORD]
            if not kept.any():
                continue
            mask = np.uint64(sum(0xFF << (8 * k) for k in np.flatnonzero(kept).tolist()))
            words = field_at(data, starts, offset, "<u8", gap)
            same &= ((words ^ words[0]) & mask) == 0
        return same


def uniform_groups(chunk: Chunk) -> list[Group]:
    """The groups of the chunk's records that are decoded at once."""
    distinct, inverse, counts = distinct_lengths(chunk.lengths)
    groups = []
    for index in np.flatnonzero(counts >= GROUP_RECORDS).tolist():
        members = np.flatnonzero(inverse == index)
        groups += _groups(chunk.data, chunk.starts[members], int(distinct[index]), members)
    return groups


def layout(record: bytes) -> Layout | None:
    """The layout of an event that holds a wall time, maybe a step, and a summary of
    scalars only (simple values, or tensor scalars of fixed width), or None. The offsets
    are checked against tensorboard's Event class: it must read the same tags and numbers
    there, so a layout never reads what the per-record decoder would not."""
    length = len(record)
    if length < SHORTEST or record[0] != WALL_TIME:
        return None
    event = fields(record, 0, length)
    if event is None or [(number, wire) for number, wire, _, _ in event] not in _EVENT_FIELDS:
        return None
    step_bytes = event[1][3] - event[1][2] if len(event) == 3 else 0
    _, _, begin, end = event[-1]
    values = fields(record, begin, end)
    if not values or any((number, wire) != (1, 2) for number, wire, _, _ in values):
        return None
    scalars = [_scalar(record, begin, end) for _, _, begin, end in values]
    if None in scalars:
        return None
    shape = Layout(step_bytes, tuple(s for s in scalars if s is not None))
    return shape if _reads_as_tensorboard(record, shape) else None


def _scalar(record: bytes, start: int, stop: int) -> Scalar | None:
    """A Summary.Value of one tag and one scalar: a simple value, or a tensor scalar of
    fixed width (with or without metadata)."""
    found = fields(record, start, stop)
    if found is None:
        return None
    kinds = [number for number, _, _, _ in found]
    if sorted(kinds) not in ([1, 2], [1, 2, 9], [1, 8], [1, 8, 9]):
        return None
    tag = found[kinds.index(1)]
    if tag[1] != 2:
        return None
    name = record[tag[2] : tag[3]].decode("utf-8", errors="replace")
    _, wire, begin, end = found[kinds.index(2 if 2 in kinds else 8)]
    if 2 in kinds:
        return Scalar(name, begin, "<f4") if wire == 5 else None
    offset = scalar_offset(record, begin, end) if wire == 2 else None
    return None if offset is None else Scalar(name, *offset)


def _reads_as_tensorboard(record: bytes, shape: Layout) -> bool:
    """Whether tensorboard's Event class reads the record's scalars as `shape` says: the
    same tags, each a number (not text or hparams) equal to the one at its offset."""
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(record)
    except Exception:
        return False
    values = event.summary.value
    if len(values) != len(shape.scalars):
        return False
    for value, scalar in zip(values, shape.scalars, strict=True):
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            number: float | None = value.simple_value
        elif kind == "tensor" and value.metadata.plugin_data.plugin_name not in NOT_SCALARS:
            number = tensor_scalar(value.tensor)
        else:
            number = None
        with np.errstate(invalid="ignore"):  # a signalling NaN widened
            stored = float(np.frombuffer(record, scalar.dtype, 1, scalar.offset)[0])
        if number is None or value.tag != scalar.tag or not _same(stored, number):
            return False
    return True


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _groups(data: U8Array, starts: I64Array, length: int, members: I64Array) -> list[Group]:
    """The records of one length by layout: those of the first record's layout, then of
    the first left over's, for at most MAX_LAYOUTS layouts."""
    groups = []
    left = np.arange(len(starts))
    for _ in range(MAX_LAYOUTS):
        if len(left) == 0:
            break
        first = int(starts[left[0]])
        shape = layout(bytes(data[first : first + length]))
        if shape is None:
            left = left[1:]
            continue
        gap = even_gap(starts[left], length)
        same = shape.shared(data, starts[left], length, gap)
        step, whole = _step(data, starts[left], shape.step_bytes, gap)
        same &= whole
        taken = left[same]
        # strided views of the records taken (all of them, most often) when they lie evenly
        gap = gap if same.all() else even_gap(starts[taken], length)
        group_starts = starts[taken]
        groups.append(
            Group(
                members[taken],
                tuple(scalar.tag for scalar in shape.scalars),
                field_at(data, group_starts, 1, "<f8", gap),
                step[same],
                tuple(
                    field_at(data, group_starts, scalar.offset, scalar.dtype, gap)
                    for scalar in shape.scalars
                ),
            )
        )
        left = left[~same]
    return groups


def _step(
    data: U8Array, starts: I64Array, size: int, gap: int | None
) -> tuple[I64Array, BoolArray]:
    """Each record's step, a varint of `size` bytes at offset 10 (int64, as protobuf reads
    it), and whether in each record it ends at that byte."""
    step = np.zeros(len(starts), dtype=np.uint64)
    whole = np.ones(len(starts), dtype=bool)
    for index in range(size):
        byte = field_at(data, starts, 10 + index, "u1", gap)
        more = (byte & 0x80) != 0
        whole &= more if index < size - 1 else ~more
        step |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * index)
    steps: I64Array = step.view(np.int64)
    return steps, whole
