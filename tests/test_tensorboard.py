"""TensorBoard event files written by tensorboard's own writer, read back value for value."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.cli import main
from loganalyzer.parsers.framing import Damage
from loganalyzer.parsers.tensorboard import TensorBoardParser
from loganalyzer.parsers.tensorboard.tfrecord import Framer
from tests.conftest import FIXTURES, ROOT, assert_golden

STEPS = 100_000
TAGS = ("lm loss", "learning-rate", "iteration-time")
START = 1_795_000_000.0


def _value(tag_index: int, step: int) -> float:
    return float(np.float32(tag_index * 1000 + step / 7))


def _fast_masked_crc32c(data: bytes) -> int:
    """tensorboard's masked crc32c, computed in C: the writer's own CRC is pure Python and
    would take most of a minute for 300,000 events. Checked against it below."""
    import crc32c

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclass
class Framed:
    """A file's records framed whole: the framer's chunks joined."""

    starts: np.ndarray
    lengths: np.ndarray
    records: list[bytes]
    damage: list[Damage]
    cut_at: int | None

    def record(self, index: int) -> bytes:
        return self.records[index]


def frame(data: np.ndarray) -> Framed:
    framer = Framer(data)
    chunks = list(framer)
    return Framed(
        np.concatenate([np.zeros(0, np.int64), *(chunk.starts for chunk in chunks)]),
        np.concatenate([np.zeros(0, np.int64), *(chunk.lengths for chunk in chunks)]),
        [chunk.record(i) for chunk in chunks for i in range(len(chunk.starts))],
        framer.damage,
        framer.cut_at,
    )


def test_the_fast_crc_is_tensorboards() -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    for data in (b"", b"x", bytes(range(256)) * 3):
        assert _fast_masked_crc32c(data) == masked_crc32c(data)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 simple_value tags x 100,000 steps, one TF2 tensor scalar tag, text arguments: framed
    by tensorboard's RecordWriter (what its EventFileWriter writes through, minus the queue
    thread), with the CRC computed in C."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer import record_writer

    path = tmp_path_factory.mktemp("tb") / "events.out.tfevents.1795000000.host.1.0"
    own_crc = record_writer.masked_crc32c
    record_writer.masked_crc32c = _fast_masked_crc32c
    with path.open("wb") as stream:
        writer = record_writer.RecordWriter(stream)
        events = [
            Event(wall_time=START, file_version="brain.Event:2"),
            Event(wall_time=START, step=0, summary=text_pb("num_layers/text_summary", "24")),
        ]
        for event in events:
            writer.write(event.SerializeToString())
        event = Event()
        value = event.summary.value.add()
        for step in range(1, STEPS + 1):
            event.wall_time = START + step / 3
            event.step = step
            for index, tag in enumerate(TAGS):
                value.tag = tag
                value.simple_value = _value(index, step)
                writer.write(event.SerializeToString())
        tensor = Summary.Value(tag="eval/loss")
        tensor.tensor.dtype = 1
        tensor.tensor.float_val.append(2.5)
        tensor.metadata.plugin_data.plugin_name = "scalars"
        last = Event(wall_time=START + 1, step=7, summary=Summary(value=[tensor]))
        writer.write(last.SerializeToString())
    record_writer.masked_crc32c = own_crc
    return path


def test_every_value_step_and_wall_time_is_read_back_exactly(big_file: Path) -> None:
    run = TensorBoardParser().parse(big_file)
    table = run.table
    assert table.height == STEPS
    steps = np.arange(1, STEPS + 1)
    assert table["iteration"].to_list() == steps.tolist()
    for column, index in (("loss", 0), ("lr", 1), ("step_time_s", 2)):
        expected = (index * 1000 + steps / 7).astype(np.float32).astype(np.float64)
        assert (table[column].to_numpy() == expected).all(), column
    stamps = table["timestamp"].dt.epoch("us").to_numpy()
    assert (stamps == np.round((START + steps / 3) * 1e6).astype(np.int64)).all()
    assert run.metrics.filter(pl.col("name") == "eval/loss").rows() == [
        (7, "eval/loss", 2.5, str(big_file), None, STEPS * 3 + 2)
    ]
    assert run.get("num_layers") == 24
    assert "'num_layers/text_summary' step 0" in str(run.config["num_layers"].provenance)
    assert run.framework == "megatron-lm"
    assert run.warnings == []


def test_a_corrupt_record_mid_file_loses_only_that_record(big_file: Path, tmp_path: Path) -> None:
    data = bytearray(big_file.read_bytes())
    framed = frame(np.frombuffer(bytes(data), dtype=np.uint8))
    victim = len(framed.starts) // 2
    at = int(framed.starts[victim]) + 3
    data[at] ^= 0xFF
    broken = tmp_path / big_file.name
    broken.write_bytes(bytes(data))
    again = frame(np.frombuffer(bytes(data), dtype=np.uint8))
    assert len(again.starts) == len(framed.starts) - 1
    assert again.starts.tolist() == np.delete(framed.starts, victim).tolist()
    run = TensorBoardParser().parse(broken)
    assert run.table.height == STEPS  # the damaged event was one of three of its step
    (warning,) = run.warnings
    start = int(framed.starts[victim]) - 12
    end = int(framed.starts[victim + 1]) - 12
    assert warning == (
        f"{broken}: bytes {start}-{end} are damaged (bad CRC or length) and were skipped;"
        f" {len(framed.starts) - victim - 1} intact records after them were kept"
    )


def test_a_file_cut_mid_record_keeps_everything_before(big_file: Path, tmp_path: Path) -> None:
    data = big_file.read_bytes()
    framed = frame(np.frombuffer(data, dtype=np.uint8))
    cut = int(framed.starts[-5]) + 2
    short = tmp_path / big_file.name
    short.write_bytes(data[:cut])
    run = TensorBoardParser().parse(short)
    assert run.table.height == STEPS - 1  # the last step's events are the last records
    (warning,) = run.warnings
    assert f"ends inside a record at byte {cut - 14}" in warning
    assert str(short) in warning


def _framed_by_tensorboard(records: Iterable[bytes]) -> bytearray:
    """The records framed by tensorboard's own RecordWriter (length, CRCs), in memory."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, chunk: bytes) -> None:
            self.data += chunk

        def flush(self) -> None:
            pass

    sink = Sink()
    writer = RecordWriter(sink)
    for record in records:
        writer.write(record)
    return sink.data


@settings(max_examples=40, deadline=None)
@given(
    records=st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=30),
    victim=st.integers(min_value=0),
    offset=st.integers(min_value=0),
)
def test_damage_to_one_record_never_costs_another(
    records: list[bytes], victim: int, offset: int
) -> None:
    written = _framed_by_tensorboard(records)
    framed = frame(np.frombuffer(bytes(written), dtype=np.uint8))
    assert [framed.record(i) for i in range(len(framed.starts))] == records
    victim %= len(records)
    first = sum(16 + len(r) for r in records[:victim])
    at = first + offset % (16 + len(records[victim]))
    damaged = bytearray(written)
    damaged[at] ^= 0x5A
    again = frame(np.frombuffer(bytes(damaged), dtype=np.uint8))
    kept = [again.record(i) for i in range(len(again.starts))]
    assert kept == records[:victim] + records[victim + 1 :]


def test_deepspeed_monitor_events_hold_every_value_of_its_csv_files(shared_logs: Path) -> None:
    out = shared_logs / "generated" / "ds_run" / "out"
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(out / "tb")])
    assert result.exit_code == 0, result.output
    (event_file,) = (out / "tb" / "tiny").glob("events.out.tfevents.*")
    run = TensorBoardParser().parse(event_file)
    for csv in sorted((out / "csv" / "tiny").glob("*.csv")):
        written = pl.read_csv(csv)
        name = written.columns[1]
        iterations = (written["step"] // 16).to_list()
        expected = [float(np.float32(v)) for v in written[name]]
        if name == "lr":
            got = run.table.select("iteration", "lr")
        else:
            got = run.metrics.filter(pl.col("name") == f"Train/Samples/{name}").select(
                "iteration", "value"
            )
        assert got.rows() == list(zip(iterations, expected, strict=True)), name
    parts = run.metrics.filter(
        pl.col("name").cast(pl.String).str.contains("time_ms_(forward|backward|step)$")
    )
    sums = parts.group_by("iteration").agg(pl.col("value").sum() / 1000).sort("iteration")
    assert run.table["step_time_s"].to_list() == sums["value"].to_list()
    assert json.loads(result.stdout)["iterations"]["logged"] == 20


FIXTURE_CASES = sorted(p for p in (FIXTURES / "tensorboard").iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", FIXTURE_CASES, ids=[p.name for p in FIXTURE_CASES])
def test_fixture_summaries_match_golden(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", str(folder.relative_to(ROOT)), "--gpu", "h100-sxm"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert_golden(f"tensorboard/{folder.name}.json", result.stdout)
    assert not math.isnan(json.loads(result.stdout)["step_time_s"]["median"])


def test_a_folder_of_event_files_is_one_run_with_a_segment_per_file(tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    for launch, steps in enumerate((range(1, 11), range(6, 16))):
        writer = EventFileWriter(str(tmp_path), filename_suffix=f".{launch}")
        for step in steps:
            value = Summary.Value(tag="iteration-time", simple_value=0.5)
            wall = START + launch * 100 + step
            writer.add_event(Event(wall_time=wall, step=step, summary=Summary(value=[value])))
        writer.close()
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["iterations"] == {
        "logged": 20,
        "covered": 20,
        "first": 1,
        "last": 15,
        "segments": 2,
    }
    assert len(document["sources"]) == 2


@settings(max_examples=30, deadline=None)
@given(
    pattern=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=5),
    count=st.integers(min_value=40, max_value=400),
    at=st.integers(min_value=0),
    damage=st.sampled_from(["flip", "huge_length", "max_length", "cut"]),
    chunk=st.sampled_from([1 << 17, 1, 7, 100]),
)
def test_predicted_record_positions_are_the_walked_ones(
    pattern: list[int], count: int, at: int, damage: str, chunk: int
) -> None:
    """Records whose sizes repeat (as one tag per step does) are framed by prediction; damage
    anywhere, a huge stored length included, gives what walking one by one, in one chunk,
    gives, however many records a chunk holds."""
    import struct

    from loganalyzer.parsers.tensorboard import tfrecord

    data = _framed_by_tensorboard(
        bytes([index % 251]) * pattern[index % len(pattern)] for index in range(count)
    )
    at %= len(data)
    if damage == "flip":
        data[at] ^= 0x41
    elif damage in ("huge_length", "max_length"):  # in the length field of a record
        victim = at % count
        head = sum(16 + pattern[i % len(pattern)] for i in range(victim))
        value = (1 << 63) if damage == "huge_length" else (1 << 64) - 1
        data[head : head + 8] = struct.pack("<Q", value)
    else:
        del data[at:]
    array = np.frombuffer(bytes(data), dtype=np.uint8)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tfrecord, "CHUNK_RECORDS", chunk)
        predicted = frame(array)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tfrecord, "PROBE_RECORDS", 1 << 30)  # never predict
        walked = frame(array)
    assert predicted.starts.tolist() == walked.starts.tolist()
    assert predicted.lengths.tolist() == walked.lengths.tolist()
    assert predicted.damage == walked.damage and predicted.cut_at == walked.cut_at


def _event_files(shared_logs: Path) -> list[Path]:
    """The fixtures' event files and DeepSpeed's monitor file (logged against samples)."""
    files = sorted((FIXTURES / "tensorboard").rglob("events.out.tfevents.*"))
    monitor = shared_logs / "generated" / "ds_run" / "out" / "tb" / "tiny"
    return [*files, *sorted(monitor.glob("events.out.tfevents.*"))]


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_a_file_read_in_chunks_is_read_as_whole(
    chunk: int, big_file: Path, shared_logs: Path, tmp_path: Path
) -> None:
    """Tables are built chunk by chunk with restarts, iterations split between chunks and
    damage carried over: any chunk size gives what one chunk gives."""
    from loganalyzer.parsers.tensorboard import tfrecord

    data = bytearray(big_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / big_file.name
    damaged.write_bytes(bytes(data))
    files = [*_event_files(shared_logs), damaged] if chunk == 1000 else _event_files(shared_logs)
    assert len(files) >= 3
    for path in files:
        whole = TensorBoardParser().parse(path)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tfrecord, "CHUNK_RECORDS", chunk)
            chunked = TensorBoardParser().parse(path)
        assert chunked.table.equals(whole.table), path
        assert chunked.metrics.equals(whole.metrics), path
        assert chunked.warnings == whole.warnings, path
        assert chunked.config == whole.config, path


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(min_size=0, max_size=600), min_size=1, max_size=20),
    copies=st.integers(min_value=1, max_value=100),
)
def test_crcs_by_length_tables_are_crc32c(records: list[bytes], copies: int) -> None:
    """Records of a common length (checked by distance tables) and of rare ones (byte at a
    time) get the CRC-32C that the C library computes."""
    from loganalyzer.parsers.tensorboard.checksum import masked_crcs, masked_length_crcs

    many = records * copies
    data = np.frombuffer(b"".join(many) or b"\0", dtype=np.uint8)
    lengths = np.array([len(r) for r in many], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    assert masked_crcs(data, starts, lengths).tolist() == [_fast_masked_crc32c(r) for r in many]
    assert masked_length_crcs(lengths).tolist() == [
        _fast_masked_crc32c(len(r).to_bytes(8, "little")) for r in many
    ]


@settings(max_examples=60, deadline=None)
@given(
    template=st.binary(min_size=1, max_size=70),
    copies=st.integers(min_value=64, max_value=300),
    flips=st.lists(st.tuples(st.integers(0, 299), st.integers(0, 69), st.integers(0, 7))),
    padding=st.lists(st.binary(max_size=3), max_size=4),
    rows=st.sampled_from([16, 1 << 14]),
)
def test_crcs_of_records_sharing_most_bytes_are_crc32c(
    template: bytes,
    copies: int,
    flips: list[tuple[int, int, int]],
    padding: list[bytes],
    rows: int,
) -> None:
    """Records of one length that differ in a few bits (an event file's records of one
    tag: the same tag and field keys, other times, steps and values), evenly spaced or not,
    checked in blocks of `rows`: each gets the CRC-32C that the C library computes."""
    from loganalyzer.parsers.tensorboard import checksum

    records = [bytearray(template) for _ in range(copies)]
    for record, position, bit in flips:
        records[record % copies][position % len(template)] ^= 1 << bit
    gaps = [padding[i % len(padding)] if padding else b"" for i in range(copies)]
    joined = b"".join(bytes(record) + gap for record, gap in zip(records, gaps, strict=True))
    data = np.frombuffer(joined, np.uint8)
    lengths = np.full(copies, len(template), dtype=np.int64)
    starts = np.cumsum([0] + [len(template) + len(gap) for gap in gaps[:-1]]).astype(np.int64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checksum, "ROWS", rows)
        crcs = checksum.masked_crcs(data, starts, lengths).tolist()
    assert crcs == [_fast_masked_crc32c(bytes(r)) for r in records]
