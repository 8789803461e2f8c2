"""Hostile inputs take time linear in their size: each is read within a few times the time
of a benign input of about the same size, measured in the same test (CPU seconds, the best
of two runs each), never against an absolute time. Inputs from `bench.hostile`, which the
bench's `hostile` stage reads at larger sizes."""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import hostile
from loganalyzer.cli import main
from loganalyzer.gzipread import CAP_FLOOR, cap
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.parsers.megatron.template import KEY_VALUE, key_and_value
from loganalyzer.sources import HEAD_BYTES, read_head

# A hostile input may cost this many times its benign twin (they measured 0.3-1.5x).
FACTOR = 4.0


def _summary(path: Path) -> dict[str, object]:
    result = CliRunner().invoke(main, ["summary", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary: dict[str, object] = json.loads(result.stdout)
    return summary


def _cpu_seconds(work: Callable[[], object]) -> float:
    """The best of two runs' CPU time (all threads): the work the command did, which other
    processes on a busy machine do not inflate as they do wall time."""
    best = float("inf")
    for _ in range(2):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def _assert_linear(
    hostile_input: Path, benign_input: Path, factor: float = FACTOR
) -> dict[str, object]:
    summary = _summary(hostile_input)
    benign = _cpu_seconds(lambda: _summary(benign_input))
    spent = _cpu_seconds(lambda: _summary(hostile_input))
    assert spent <= factor * benign, (
        f"{hostile_input.name}: {spent:.2f} s of CPU, {spent / benign:.1f}x the"
        f" {benign:.2f} s of a benign input of its size"
    )
    return summary


def _warnings(summary: dict[str, object]) -> list[str]:
    warnings = summary["warnings"]
    assert isinstance(warnings, list)
    return [str(w) for w in warnings]


def test_a_long_tensorboard_record_is_checked_in_linear_time(tmp_path: Path) -> None:
    size = 2 << 20
    long = hostile.tensorboard_long_record(tmp_path / "events.out.tfevents.long", size)
    scalars = hostile.tensorboard_scalars(tmp_path / "events.out.tfevents.scalars", size)
    summary = _assert_linear(long, scalars)
    assert not any("damaged" in w for w in _warnings(summary))


def test_forged_record_headers_cost_a_bounded_search(tmp_path: Path) -> None:
    size = 1 << 20
    forged = hostile.tensorboard_forged_headers(
        tmp_path / "events.out.tfevents.forged", size, count=4000
    )
    scalars = hostile.tensorboard_scalars(tmp_path / "events.out.tfevents.scalars", size)
    warnings = _warnings(_assert_linear(forged, scalars))
    # the records before the damage are kept, and the search given up is said
    assert any("damaged" in w and "were skipped" in w for w in warnings), warnings
    assert any("not searched for intact records" in w for w in warnings), warnings


def test_a_long_timer_field_is_read_in_linear_time(tmp_path: Path) -> None:
    size = 40 << 10  # `a:a:...: x y`: 20 s before the timer-field rule was linear
    field = hostile.megatron_timer_field(tmp_path / "timer_field.log", size)
    benign = hostile.megatron_benign(tmp_path / "benign.log", size)
    _assert_linear(field, benign)


def test_lines_of_many_fields_are_read_in_one_pass(tmp_path: Path) -> None:
    size = 140 << 10  # two lines of 7,000 fields: 40 s when each field cost a `select`
    many = hostile.megatron_many_fields(tmp_path / "many.log", size)
    benign = hostile.megatron_benign(tmp_path / "benign.log", size)
    _assert_linear(many, benign)
    # every field is still read, by the general path
    metrics = MegatronParser().parse(many).metrics
    last = size // 2 // 10 - 1
    assert metrics.filter(pl.col("name") == f"m{last}").height == 2
    assert metrics.filter(pl.col("name") == "m96").get_column("value").to_list() == [5.0, 5.0]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="a:1 \t.|", max_size=24))
def test_the_linear_key_value_rule_is_the_pattern(field: str) -> None:
    """`key_and_value` gives KEY_VALUE's groups as Python's `re` finds them on short text."""
    found = re.match(KEY_VALUE, field)
    assert key_and_value(field) == (found.groups() if found else None)


# A gzip file may decompress to gzipread.MAX_RATIO (100) times its size; the benign log
# compresses 24 times, and a newline costs more than a byte of log lines: the bomb reads
# about 4 times more bytes than its benign twin of the same compressed size.
GZIP_FACTOR = 8.0


def test_a_gzip_bomb_of_newlines_is_capped_with_a_warning(tmp_path: Path) -> None:
    # 256 MB of newlines in 0.27 MB: capped at 100 times that, the ratio's cap, not the floor
    bomb = hostile.gzip_flood(tmp_path / "newlines.log.gz", 256 << 20, b"\n")
    size = bomb.stat().st_size
    assert CAP_FLOOR < cap(size) < 256 << 20
    benign = hostile.gzip_benign(tmp_path / "benign.log.gz", 24 * size)
    summary = _assert_linear(bomb, benign, GZIP_FACTOR)
    warnings = _warnings(summary)
    assert any(
        str(bomb) in w and "decompression bomb" in w and "not read" in w for w in warnings
    ), warnings
    sources = summary["sources"]
    assert isinstance(sources, list) and sources[0]["records"] == 3


def test_a_gzip_bomb_of_nul_bytes_fails_fast_naming_the_file(tmp_path: Path) -> None:
    """4 GB of NUL bytes took a minute before the 64 MB-line error; a file this small stops
    at the line's limit, within its cap."""
    bomb = hostile.gzip_flood(tmp_path / "nul.log.gz", 1 << 30, b"\0")
    benign = hostile.gzip_benign(tmp_path / "benign.log.gz", 24 * bomb.stat().st_size)

    def refused() -> None:
        result = CliRunner().invoke(main, ["summary", str(bomb), "--json"])
        assert result.exit_code == 1
        assert f"Error: {bomb}: line 7 runs past 64 MB" in result.output

    refused()
    plain = _cpu_seconds(lambda: _summary(benign))
    spent = _cpu_seconds(refused)
    assert spent <= GZIP_FACTOR * plain, f"{spent:.3f} s against {plain:.3f} s"


def test_small_reads_of_a_gzip_bomb_take_linear_time(tmp_path: Path) -> None:
    """Detection reads a file's head in 4 KB reads: each once copied all that the 64 KB
    piece decompressed to (64 MB of NUL bytes), a minute for a 4 MB head."""
    bomb = hostile.gzip_flood(tmp_path / "nul.log.gz", 256 << 20, b"\0")
    benign = hostile.gzip_benign(tmp_path / "benign.log.gz", 8 << 20)
    plain = _cpu_seconds(lambda: read_head(benign))
    spent = _cpu_seconds(lambda: read_head(bomb))
    assert len(read_head(bomb)) == HEAD_BYTES
    assert spent <= FACTOR * plain, f"{spent:.3f} s against {plain:.3f} s"


def test_a_length_past_the_end_is_a_cut_record_at_once(tmp_path: Path) -> None:
    """A header whose length (its CRC good) claims more than the file holds is not read:
    the file ends inside that record, whatever the bytes after the header."""
    size = 1 << 20
    scalars = hostile.tensorboard_scalars(tmp_path / "events.out.tfevents.scalars", size // 2)
    length = struct.pack("<Q", size)
    head = length + struct.pack("<I", hostile.masked_crc32c(length))
    forged = tmp_path / "events.out.tfevents.forged"
    forged.write_bytes(scalars.read_bytes() + head + bytes(size - scalars.stat().st_size - 12))
    twin = hostile.tensorboard_scalars(tmp_path / "events.out.tfevents.twin", size)
    warnings = _warnings(_assert_linear(forged, twin))
    cut = scalars.stat().st_size
    assert any(f"the file ends inside a record at byte {cut}" in w for w in warnings), warnings
