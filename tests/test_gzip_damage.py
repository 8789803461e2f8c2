"""Damaged gzip: everything that decompresses is kept, and each damage is named by offset."""

from __future__ import annotations

import gzip
import io

import pytest

from loganalyzer.gzipread import DamagedGzipReader

TEXT = b"".join(b"iteration %7d | a log line of some length\n" % i for i in range(60_000))


def _read(data: bytes) -> tuple[bytes, list[str]]:
    notes: list[str] = []
    out = io.BufferedReader(DamagedGzipReader(io.BytesIO(data), notes.append)).read()
    return out, notes


def test_an_intact_file_reads_whole_and_silently() -> None:
    assert _read(gzip.compress(TEXT)) == (TEXT, [])


def test_concatenated_members_and_nul_padding_are_valid_gzip() -> None:
    half = len(TEXT) // 2
    data = gzip.compress(TEXT[:half]) + b"\x00" * 512 + gzip.compress(TEXT[half:])
    assert _read(data) == (TEXT, [])


def test_cut_short_keeps_the_head_and_names_the_offset() -> None:
    packed = gzip.compress(TEXT)
    out, notes = _read(packed[: len(packed) // 2])
    assert len(out) > len(TEXT) // 3
    assert TEXT.startswith(out)
    assert notes == [
        f"the compressed data ends early at offset {len(packed) // 2} (the file was cut short);"
        " everything before it is kept"
    ]


def test_trailing_garbage_keeps_the_whole_member() -> None:
    packed = gzip.compress(TEXT)
    out, notes = _read(packed + b"not gzip at all\n" * 10)
    assert out == TEXT
    assert notes == [
        f"bytes from compressed offset {len(packed)} on are not gzip",
        f"compressed bytes {len(packed)}-{len(packed) + 160} skipped: no gzip member follows them",
    ]


def test_a_corrupt_member_loses_only_itself_and_reading_resumes_at_the_next() -> None:
    parts = [TEXT[k::4] for k in range(4)]  # four members
    members = [gzip.compress(p) for p in parts]
    data = bytearray(b"".join(members))
    start = len(members[0]) + 100
    data[start : start + 50] = b"\xff" * 50  # damage inside the second member
    out, notes = _read(bytes(data))
    assert out.startswith(parts[0])
    assert out.endswith(parts[2] + parts[3])
    assert len(out) < len(TEXT)
    resumed = len(members[0]) + len(members[1])
    assert notes[-1].endswith(f"reading resumed at the gzip member at offset {resumed}")


@pytest.mark.parametrize("data", [b"\x1f\x8b not really gzip", gzip.compress(TEXT, mtime=0)[:6]])
def test_nothing_decompressible_is_an_error(data: bytes) -> None:
    with pytest.raises(OSError):
        _read(data)


def test_a_limit_stops_reading_with_a_note() -> None:
    notes: list[str] = []
    data = gzip.compress(b"\n" * (1 << 20))
    stream = io.BufferedReader(DamagedGzipReader(io.BytesIO(data), notes.append, limit=1000))
    assert stream.read() == b"\n" * 1000
    assert len(notes) == 1 and "decompression bomb" in notes[0], notes
    # a file that ends at its limit exactly is read whole and silently
    notes.clear()
    whole = io.BufferedReader(DamagedGzipReader(io.BytesIO(data), notes.append, limit=1 << 20))
    assert len(whole.read()) == 1 << 20 and not notes
