"""Decoding TensorBoard events into a long table of scalars, and the text summaries.

Most events in a training run's file are one `simple_value` scalar each (what torch's
SummaryWriter, Megatron, DeepSpeed and HF Trainer write), and they all have the same
protobuf layout: `wall_time, step, summary{value{tag, simple_value}}`. Those are decoded with
numpy, a chunk of records at a time: the records of one length and layout as a group each
(`uniform`: also events of several scalars, TF1's merged summaries, and TF2 tensor scalars),
the other one-value events through per-record offsets; every other event (the file-version
header, text, hyper-parameters, histograms, scalar events of rare layouts) goes through the
protobuf classes one by one.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from loganalyzer.parsers.crc import I64Array, U8Array
from loganalyzer.parsers.tensorboard.numbers import numbers_at
from loganalyzer.parsers.tensorboard.tensors import tensor_scalar
from loganalyzer.parsers.tensorboard.tfrecord import Chunk
from loganalyzer.parsers.tensorboard.uniform import (
    SHORTEST,
    SIMPLE,
    STEP,
    SUMMARY,
    TAG,
    VALUE,
    VARINT_BYTES,
    WALL_TIME,
    Group,
    uniform_groups,
)

# The columns of the scalar table, one row per (event, scalar value); a file has few tags,
# held once each (categorical) rather than once per row.
SCALAR_SCHEMA = {
    "name": pl.Categorical(),
    "step": pl.Int64(),
    "wall_time": pl.Float64(),
    "value": pl.Float64(),
    "record": pl.Int64(),
}
DT_STRING = 7
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, bits well mixed (Fibonacci hashing)
_HIGH_BITS = np.uint64(0x8080808080808080)
# The low k bytes of a little-endian word, for k = 0..8.
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)


@dataclass(frozen=True)
class Text:
    """A text summary: Megatron's arguments, HF Trainer's `args` and `model_config`."""

    tag: str
    step: int
    text: str
    record: int


@dataclass
class Decoded:
    """What a file holds besides its scalars: texts, hyper-parameters, and what was not a
    scalar or text (counted by kind, so that a warning can say what was not read)."""

    texts: list[Text] = field(default_factory=list)
    hparams: dict[str, tuple[object, int]] = field(default_factory=dict)
    other: Counter[str] = field(default_factory=Counter)
    undecodable: int = 0


def scalars(chunk: Chunk, into: Decoded) -> pl.DataFrame:
    """The chunk's scalars as a long table in record order (`record` counts from the file's
    first record); its texts, hyper-parameters and what was not read go `into`."""
    fast, frame = _simple_scalars(chunk)
    slow = np.flatnonzero(~fast)
    if len(slow) == 0:
        return frame
    others = _one_by_one(chunk, slow, into)
    if others.height == 0:
        return frame
    return pl.concat([frame, others]).sort("record", maintain_order=True)


def _simple_scalars(chunk: Chunk) -> tuple[np.ndarray[Any, np.dtype[np.bool_]], pl.DataFrame]:
    """Which records have a layout read with numpy, and their scalars: the groups of one
    length and layout at once each (`uniform`), the other one-value records at once through
    per-record offsets."""
    count = len(chunk.starts)
    if count == 0:
        return np.zeros(0, dtype=bool), pl.DataFrame(schema=SCALAR_SCHEMA)
    found = _Found(count)
    rest = np.ones(count, dtype=bool)
    for group in uniform_groups(chunk):
        if len(group.tags) == 1:
            found.add(group.members, group.wall_time, group.step, group.values[0], [*group.tags], 0)
        else:
            found.add_several(group)
        rest[group.members] = False
    others = np.flatnonzero(rest)
    if len(others):
        _each(chunk.data, chunk.starts[others], chunk.lengths[others], others, found)
    return found.ok, found.frame(chunk.first)


class _Found:
    """The scalars of a chunk's records as they are found: those of one-value records at
    each record's index, the groups of records of several values as they are."""

    def __init__(self, count: int) -> None:
        self.ok = np.zeros(count, dtype=bool)
        self.wall = np.zeros(count, dtype=np.float64)
        self.step = np.zeros(count, dtype=np.int64)
        self.value = np.zeros(count, dtype=np.float64)
        self.tag = np.zeros(count, dtype=np.int64)  # the index of its name in `names`
        self.names: dict[str, int] = {}
        self.several: list[Group] = []

    def add(
        self,
        at: I64Array,
        wall: np.ndarray[Any, Any],
        step: np.ndarray[Any, Any],
        value: np.ndarray[Any, Any],
        names: list[str],
        tags: I64Array | int,
    ) -> None:
        """The scalars of the records `at`, whose tags are `names[tags]`."""
        self.ok[at] = True
        self.wall[at] = wall
        self.step[at] = step
        # A float32 signalling NaN (a flipped bit can make one) is read as NaN, without the
        # floating-point warning its widening raises.
        with np.errstate(invalid="ignore"):
            self.value[at] = value
        codes = np.array([self.names.setdefault(name, len(self.names)) for name in names])
        self.tag[at] = np.take(codes, tags)

    def add_several(self, group: Group) -> None:
        """The scalars of a group of records of several values each."""
        self.ok[group.members] = True
        self.several.append(group)

    def frame(self, first: int) -> pl.DataFrame:
        """The scalars found, in record order (`first`: the index of the chunk's first
        record in the file), a record's scalars in its summary's order."""
        one_value = self._one_value(first)
        if not self.several:
            return one_value
        parts = [_rows(group, first) for group in self.several]
        if one_value.height:
            parts.append(one_value)
        whole = pl.concat(parts)
        return whole if len(parts) == 1 else whole.sort("record", maintain_order=True)

    def _one_value(self, first: int) -> pl.DataFrame:
        index = np.flatnonzero(self.ok)
        if self.several:
            taken = np.concatenate([group.members for group in self.several])
            index = np.setdiff1d(index, taken, assume_unique=True)
        if len(index) == 0:
            return pl.DataFrame(schema=SCALAR_SCHEMA)
        names = pl.Series("name", list(self.names), dtype=pl.Categorical)
        every = len(index) == len(self.ok)  # then nothing to gather
        return pl.DataFrame(
            {
                "name": names.gather(pl.Series(self.tag if every else self.tag[index])),
                "step": self.step if every else self.step[index],
                "wall_time": self.wall if every else self.wall[index],
                "value": self.value if every else self.value[index],
                "record": index + first,
            },
            schema=SCALAR_SCHEMA,
        )


def _rows(group: Group, first: int) -> pl.DataFrame:
    """A group's scalars, a record's values one after another in its summary's order."""
    count, width = len(group.members), len(group.tags)
    values = np.empty((count, width), dtype=np.float64)
    with np.errstate(invalid="ignore"):  # a signalling NaN widened (see `_Found.add`)
        for column, numbers in enumerate(group.values):
            values[:, column] = numbers
    names = pl.Series("name", list(dict.fromkeys(group.tags)), dtype=pl.Categorical)
    codes = np.array([names.to_list().index(tag) for tag in group.tags])
    return pl.DataFrame(
        {
            "name": names.gather(pl.Series(np.tile(codes, count))),
            "step": np.repeat(group.step, width),
            "wall_time": np.repeat(group.wall_time, width),
            "value": values.ravel(),
            "record": np.repeat(group.members + first, width),
        },
        schema=SCALAR_SCHEMA,
    )


def _each(data: U8Array, starts: I64Array, lengths: I64Array, at: I64Array, into: _Found) -> None:
    """The records (at indices `at` of the chunk) with the one-simple-value layout, decoded
    at once through per-record offsets."""
    ok = (lengths >= SHORTEST) & (_at(data, starts, 0) == WALL_TIME)
    wall = _f8(data, starts + 1)
    has_step = _at(data, starts, 9) == STEP
    step, step_bytes = _varint(data, starts + 10)
    position = 9 + np.where(has_step, 1 + step_bytes, 0)
    step = np.where(has_step, step, 0)
    # the summary's, its value's and the tag's field keys and lengths: 6 bytes of one word
    # (the checks below hold only for records that hold all of them)
    head = _read(data, starts + position, "<u8")
    ok &= _byte(head, 0) == SUMMARY
    summary_length = _byte(head, 1)
    ok &= (summary_length < 0x80) & (summary_length == lengths - position - 2)
    ok &= _byte(head, 2) == VALUE
    value_length = _byte(head, 3)
    ok &= (value_length < 0x80) & (value_length == lengths - position - 4)
    ok &= _byte(head, 4) == TAG
    tag_length = _byte(head, 5)
    ok &= tag_length < 0x80
    tag_start = position + 6
    ok &= (_at(data, starts, tag_start + tag_length) == SIMPLE) & (
        tag_start + tag_length + 5 == lengths
    )
    index = np.flatnonzero(ok)
    if len(index) == 0:
        return
    values = _f4(data, starts[index] + tag_start[index] + tag_length[index] + 1)
    names, tags = _tags(data, starts[index] + tag_start[index], tag_length[index])
    into.add(at[index], wall[index], step[index], values, names, tags)


def _at(data: U8Array, starts: I64Array, offset: I64Array | int) -> U8Array:
    """The byte at `starts + offset` of each record (0 past the end of the data)."""
    where = starts + offset
    inside = where < len(data)
    return np.where(inside, data[np.minimum(where, len(data) - 1)], 0).astype(np.uint8)


def _byte(words: np.ndarray[Any, Any], index: int) -> I64Array:
    """Byte `index` of each little-endian word."""
    byte: I64Array = ((words >> np.uint64(8 * index)) & np.uint64(0xFF)).astype(np.int64)
    return byte


def _gather(data: U8Array, at: I64Array, width: int) -> U8Array:
    index = at[:, None] + np.arange(width, dtype=np.int64)[None, :]
    np.clip(index, 0, len(data) - 1, out=index)
    return np.ascontiguousarray(data[index])


def _read(data: U8Array, at: I64Array, dtype: str) -> np.ndarray[Any, Any]:
    """The little-endian number of `dtype` starting at each byte offset, read through a view
    of the data with one element at every byte (no index matrix); an offset too near the
    end of the data reads its last byte again, as `_gather` does."""
    size = np.dtype(dtype).itemsize
    last = len(data) - size
    if last < 0:
        short: np.ndarray[Any, Any] = _gather(data, at, size).view(dtype).ravel()
        return short
    values: np.ndarray[Any, Any] = numbers_at(data, np.minimum(at, last), dtype)
    beyond = np.flatnonzero(at > last)
    if len(beyond):
        values[beyond] = _gather(data, at[beyond], size).view(dtype).ravel()
    return values


def _f8(data: U8Array, at: I64Array) -> np.ndarray[Any, np.dtype[np.float64]]:
    return _read(data, at, "<f8")


def _f4(data: U8Array, at: I64Array) -> np.ndarray[Any, np.dtype[np.float32]]:
    return _read(data, at, "<f4")


def _varint(data: U8Array, at: I64Array) -> tuple[I64Array, I64Array]:
    """Protobuf varints at each offset: their values (int64, as protobuf's int64 reads them)
    and how many bytes each took. One 8-byte word holds a varint of up to 56 bits (any
    step below 2^56): its 7-bit groups are packed with shifts and masks; longer ones
    (negative steps) are read byte by byte."""
    word = _read(data, at, "<u8")
    stops = ~word & _HIGH_BITS  # the high bit of each byte that ends a varint
    lowest = stops & (~stops + np.uint64(1))  # the first of them
    length = (np.log2(np.maximum(lowest, 1).astype(np.float64)).astype(np.int64) + 1) // 8
    word &= (lowest << np.uint64(1)) - np.uint64(1)
    value = np.zeros(len(at), dtype=np.uint64)
    for group in range(8):
        value |= (word >> np.uint64(group)) & np.uint64(0x7F << (7 * group))
    long = np.flatnonzero(lowest == 0)
    if len(long):
        value[long], length[long] = _varint_bytes(data, at[long])
    return value.view(np.int64), length


def _varint_bytes(data: U8Array, at: I64Array) -> tuple[np.ndarray[Any, Any], I64Array]:
    raw = _gather(data, at, VARINT_BYTES)
    ends = raw < 0x80
    length = np.where(ends.any(axis=1), ends.argmax(axis=1) + 1, VARINT_BYTES).astype(np.int64)
    used = np.arange(VARINT_BYTES)[None, :] < length[:, None]
    parts = (raw & 0x7F).astype(np.uint64) * used
    shifts = (7 * np.arange(VARINT_BYTES, dtype=np.uint64))[None, :]
    return np.bitwise_or.reduce(parts << shifts, axis=1), length


def _tags(data: U8Array, at: I64Array, lengths: I64Array) -> tuple[list[str], I64Array]:
    """The distinct tags, and each record's among them; the few distinct tags are decoded
    once each. Tags are
    told apart by a hash of their bytes and length (sorting 8-byte keys, not byte strings),
    and every tag is then compared whole with the one its hash names."""
    width = -(-max(int(lengths.max()) if len(lengths) else 0, 1) // 8)
    words = np.empty((len(at), width), dtype=np.uint64)
    for column in range(width):
        kept = np.clip(lengths - 8 * column, 0, 8)
        words[:, column] = _read(data, at + 8 * column, "<u8") & _BYTE_MASKS[kept]
    key = lengths.astype(np.uint64)
    for column in words.T:
        key = key * _HASH_MULTIPLIER ^ column
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    same = (words == words[first][inverse]).all() and (lengths == lengths[first][inverse]).all()
    if not same:  # two tags with one hash: told apart by their bytes and length instead
        rows = np.concatenate([words, lengths[:, None].astype(np.uint64)], axis=1)
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    names = [
        bytes(data[at[row] : at[row] + lengths[row]]).decode("utf-8", errors="replace")
        for row in first
    ]
    return names, inverse.ravel()


def _one_by_one(chunk: Chunk, records: I64Array, into: Decoded) -> pl.DataFrame:
    """The scalars of the chunk's `records` that numpy did not read, decoded through
    the protobuf classes; their texts, hyper-parameters and what was not read go `into`."""
    from tensorboard.compat.proto.event_pb2 import Event

    rows: dict[str, list[Any]] = {name: [] for name in SCALAR_SCHEMA}
    for index in records.tolist():
        record = chunk.first + index
        try:
            event = Event.FromString(chunk.record(index))
        except Exception:  # a record whose CRC checks but is not an Event: counted, not fatal
            into.undecodable += 1
            continue
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            plugin = value.metadata.plugin_data.plugin_name
            if kind == "simple_value":
                number: float | None = value.simple_value
            elif plugin == "hparams":  # torch's and tensorboardX's carry no tensor
                _hparams(value.metadata.plugin_data.content, record, into.hparams)
                continue
            elif kind == "tensor" and plugin == "text":
                into.texts.append(Text(value.tag, event.step, _text(value.tensor), record))
                continue
            elif kind == "tensor":
                number = tensor_scalar(value.tensor)
            else:
                number = None
            if number is None:
                into.other[plugin or kind or "empty"] += 1
                continue
            rows["name"].append(value.tag)
            rows["step"].append(event.step)
            rows["wall_time"].append(event.wall_time)
            rows["value"].append(number)
            rows["record"].append(record)
    return pl.DataFrame(rows, schema=SCALAR_SCHEMA)


def _text(tensor: Any) -> str:
    if tensor.dtype == DT_STRING:
        return "\n".join(s.decode("utf-8", errors="replace") for s in tensor.string_val)
    return ""


def _hparams(content: bytes, record: int, into: dict[str, tuple[object, int]]) -> None:
    """torch's and tensorboardX's `add_hparams` write the values in the hparams plugin's
    session-start record."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
    except Exception:
        return
    if not data.HasField("session_start_info"):
        return
    for name, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        if kind is None:
            continue
        found = getattr(value, kind)
        if kind == "number_value" and math.isfinite(found) and found.is_integer():
            found = int(found)  # every number is held as a double: 24.0 was num_layers=24
        into[name] = (found, record)
