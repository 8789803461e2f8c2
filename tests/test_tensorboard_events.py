"""The scalar decoder against tensorboard's own protobuf classes: random events (one simple
value, TF2 tensor scalars, two values in one event, no summary), tags of one length and of
different lengths, steps of every varint length or none, each record decoded as
`Event.FromString` reads it, whichever path (a group of one length and tag, per-record
offsets, or the protobuf classes) the decoder takes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.parsers.tensorboard.events import Decoded, scalars
from loganalyzer.parsers.tensorboard.tfrecord import Chunk
from loganalyzer.parsers.tensorboard.uniform import uniform_groups

# tags of one length that differ ("lm loss", "lm-loss"), empty, non-ASCII, one too long for
# a one-byte length field
TAGS = ["lm loss", "lm-loss", "learning-rate", "loss", "", "été/perte", "x" * 130]
FRAMING = b"\0" * 16  # where a TFRecord's length and CRCs lie between two records' data
ODD = ("tensor", "two values", "no summary", "no wall time", "not an event")


def _events(
    count: int, tags: list[str], steps: str, seed: int, odd: list[tuple[int, str]]
) -> list[bytes]:
    from tensorboard.compat.proto.event_pb2 import Event

    rng = np.random.default_rng(seed)
    start = int(rng.integers(-(2**62), 2**62)) if steps == "any" else int(rng.integers(0, 300))
    oddities = {at % count: kind for at, kind in odd}
    records = []
    for index in range(count):
        event = Event(wall_time=1.7e9 + float(rng.random()) * index)
        if steps != "none":
            event.step = start + index // len(tags)
        kind = oddities.get(index)
        if kind == "not an event":
            records.append(b"\x09not an event")
            continue
        if kind == "no wall time":
            event.wall_time = 0.0
        if kind != "no summary":
            value = event.summary.value.add(tag=tags[index % len(tags)])
            if kind == "tensor":
                value.tensor.dtype = 1
                value.tensor.float_val.append(float(rng.random()))
                value.metadata.plugin_data.plugin_name = "scalars"
            else:
                value.simple_value = float(rng.standard_normal())
            if kind == "two values":
                event.summary.value.add(tag="second", simple_value=2.5)
        records.append(event.SerializeToString())
    return records


# How a merged summary's value holds its number: a simple value, or a TF2 tensor scalar in
# float_val, double_val, int_val (a varint: no fixed layout) or tensor_content (float, double).
KINDS = ("simple", "float_val", "double_val", "int_val", "content_f4", "content_f8")


def _merged(count: int, kinds: list[str], steps: str, seed: int, odd: list[int]) -> list[bytes]:
    """Events of several values each (TF1's merged summaries), one kind per slot; the `odd`
    events lose their last value (another layout)."""
    from tensorboard.compat.proto.event_pb2 import Event

    rng = np.random.default_rng(seed)
    start = int(rng.integers(-(2**62), 2**62)) if steps == "any" else int(rng.integers(0, 300))
    records = []
    for index in range(count):
        event = Event(wall_time=1.7e9 + float(rng.random()) * index)
        if steps != "none":
            event.step = start + index
        shown = kinds[:-1] if index in odd and len(kinds) > 1 else kinds
        for slot, kind in enumerate(shown):
            value = event.summary.value.add(tag=f"group/{slot}")
            number = float(rng.standard_normal())
            if kind == "simple":
                value.simple_value = number
                continue
            value.metadata.plugin_data.plugin_name = "scalars"
            tensor = value.tensor
            tensor.dtype = 2 if kind in ("double_val", "content_f8") else 1
            if kind == "float_val":
                tensor.float_val.append(number)
            elif kind == "double_val":
                tensor.double_val.append(number)
            elif kind == "int_val":
                tensor.dtype = 3
                tensor.int_val.append(int(number * 1000))
            else:
                dtype = "<f8" if kind == "content_f8" else "<f4"
                tensor.tensor_content = np.array([number], dtype=dtype).tobytes()
        records.append(event.SerializeToString())
    return records


def _chunk(records: list[bytes]) -> Chunk:
    data = np.frombuffer(b"".join(FRAMING + record for record in records) + FRAMING, np.uint8)
    lengths = np.array([len(record) for record in records], dtype=np.int64)
    ends = np.cumsum(lengths + len(FRAMING))
    return Chunk(data, ends - lengths, lengths, 0)


def _expected(records: list[bytes]) -> list[tuple[Any, ...]]:
    """Each scalar as tensorboard's Event class reads it."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    rows = []
    for index, record in enumerate(records):
        try:
            event = Event.FromString(record)
        except DecodeError:
            continue
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                number = value.simple_value
            elif value.WhichOneof("value") == "tensor":
                tensor = value.tensor
                listed = [*tensor.float_val, *tensor.double_val, *tensor.int_val]
                dtype = "<f8" if tensor.dtype == 2 else "<f4"
                number = listed[0] if listed else np.frombuffer(tensor.tensor_content, dtype)[0]
            else:
                continue
            rows.append((value.tag, event.step, event.wall_time, float(number), index))
    return rows


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=600),
    tags=st.lists(st.sampled_from(TAGS), min_size=1, max_size=4),
    steps=st.sampled_from(["small", "any", "none"]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    odd=st.lists(st.tuples(st.integers(0, 599), st.sampled_from(ODD)), max_size=4),
)
def test_scalars_are_what_tensorboards_event_class_reads(
    count: int, tags: list[str], steps: str, seed: int, odd: list[tuple[int, str]]
) -> None:
    records = _events(count, tags, steps, seed, odd)
    frame = scalars(_chunk(records), Decoded())
    assert frame.rows() == _expected(records)


@pytest.mark.parametrize("steps", ["small", "any", "none"])
def test_records_of_one_length_and_tag_are_decoded_as_a_group(steps: str) -> None:
    """The groups cover every record: a tag of its own length, and each of two tags of one
    length ("lm loss", "lm-loss": a layout each); they read as the Event class reads them."""
    tags = ["lm loss", "lm-loss", "learning-rate"]
    records = _events(900, tags, steps, 0, [])
    chunk = _chunk(records)
    groups = uniform_groups(chunk)
    assert sorted((group.tags, len(group.members)) for group in groups) == [
        (("learning-rate",), 300),
        (("lm loss",), 300),
        (("lm-loss",), 300),
    ]
    assert scalars(chunk, Decoded()).rows() == _expected(records)


@settings(max_examples=150, deadline=None)
@given(
    steps=st.sampled_from(["small", "any", "none"]),
    flips=st.lists(
        st.tuples(st.integers(0, 299), st.integers(0, 40), st.integers(0, 7)), min_size=1
    ),
)
def test_a_changed_bit_in_a_group_reads_as_the_per_record_decoder_reads_it(
    steps: str, flips: list[tuple[int, int, int]]
) -> None:
    """Records that are not what their group's first one says (any bit changed: a field
    key, a varint's continuation, the tag), decoded as the decoder does without groups."""
    from loganalyzer.parsers.tensorboard import events

    records = [bytearray(record) for record in _events(300, ["learning-rate"], steps, 0, [])]
    for record, byte, bit in flips:
        records[record][byte % len(records[record])] ^= 1 << bit
    chunk = _chunk([bytes(record) for record in records])
    grouped = scalars(chunk, Decoded())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "uniform_groups", lambda chunk: [])
        each = scalars(chunk, Decoded())
    assert grouped.equals(each)


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=400),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4),
    steps=st.sampled_from(["small", "any", "none"]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    odd=st.lists(st.integers(0, 399), max_size=4),
)
def test_merged_summaries_are_what_tensorboards_event_class_reads(
    count: int, kinds: list[str], steps: str, seed: int, odd: list[int]
) -> None:
    records = _merged(count, kinds, steps, seed, odd)
    frame = scalars(_chunk(records), Decoded())
    assert frame.rows() == _expected(records)


@pytest.mark.parametrize("steps", ["small", "any", "none"])
def test_events_of_several_values_in_one_layout_are_decoded_as_a_group(steps: str) -> None:
    """TF1 merged summaries (three values an event: simple, tensor float_val, tensor
    content) take the numpy path: every event in a group of its layout, never the protobuf
    classes one by one; an int_val tensor (a varint, of varying width) is the exception."""
    from loganalyzer.parsers.tensorboard import events

    records = _merged(300, ["simple", "float_val", "content_f8"], steps, 0, [])
    chunk = _chunk(records)
    groups = uniform_groups(chunk)
    assert {group.tags for group in groups} == {("group/0", "group/1", "group/2")}
    assert sum(len(group.members) for group in groups) == 300
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "_one_by_one", lambda *args: pytest.fail("one by one"))
        assert scalars(chunk, Decoded()).rows() == _expected(records)
    varint = _merged(300, ["simple", "int_val"], steps, 0, [])
    assert uniform_groups(_chunk(varint)) == []
    assert scalars(_chunk(varint), Decoded()).rows() == _expected(varint)
