"""Lines split by polars' CSV reader are exactly the lines Python's split gives."""

from __future__ import annotations

import inspect
import types
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.sources import decode_lines, iter_line_blocks, iter_line_chunks
from loganalyzer.textlog import block_lines, line_frames

PIECES = [b"a", b"iteration 1 | x: 2", b" ", b"\n", b"\n\n", b'"', b"'", b"#", b",", b"\t"]
PIECES += [b"\xff", b"\xc3\xa9", b"\xe2\x82", b"\r", b"\r\n", b"\x1f", b"\x00", b";", b"|"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_block_lines_are_python_lines(pieces: list[bytes]) -> None:
    block = b"".join(pieces)
    assert block_lines(block).to_list() == decode_lines(block)


def test_line_frames_number_every_line(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    text = "".join(f"line {i}\n" + ("\n" if i % 7 == 0 else "") for i in range(5000))
    log.write_bytes(text.encode() + b"\xffend")
    frames = list(line_frames(log))
    lines = [line for frame in frames for line in frame.get_column("text").to_list()]
    assert lines == [line for _, chunk in iter_line_chunks(log) for line in chunk]
    assert [f.get_column("line")[0] for f in frames] == [n for n, _ in iter_line_blocks(log)]
    numbers = [n for frame in frames for n in frame.get_column("line").to_list()]
    assert numbers == list(range(1, len(lines) + 1))


def test_a_block_is_held_only_by_its_reader(tmp_path: Path) -> None:
    """The reading generator keeps no reference to the block it handed over, nor to the
    bytes it read it from, so a block is freed as soon as its reader is done with it."""
    log = tmp_path / "x.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
    blocks = iter_line_blocks(log, chunk_bytes=1000)
    _, block = next(blocks)
    assert len(block) > 900 and isinstance(blocks, types.GeneratorType)
    held = list(inspect.getgeneratorlocals(blocks).values())
    held += [item for value in held if isinstance(value, list) for item in value]
    # what it may keep: the piece of a line cut off at the end of the read
    assert [v for v in held if isinstance(v, bytes) and len(v) > len(b"line 999\n")] == []
