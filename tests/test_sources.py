"""Reading inputs: gzip by magic bytes, exact line numbers across chunks, binary junk."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from loganalyzer.errors import InputError
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.sources import (
    expand_sources,
    is_probably_binary,
    iter_line_chunks,
    read_head,
    text_head,
)
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"


def test_gzip_is_read_transparently_whatever_its_name(tmp_path: Path) -> None:
    packed = tmp_path / "run.log"  # no .gz suffix: detected by magic bytes
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    plain = MegatronParser().parse(SAMPLE).table
    unpacked = MegatronParser().parse(packed).table
    assert unpacked.drop("source").equals(plain.drop("source"))
    assert MegatronParser().detect(packed) == MegatronParser().detect(SAMPLE)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_line_numbers_are_exact_across_chunk_boundaries(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"a\r\n\nb\rc\n\xff\xfe bad utf8\nlast without newline")
    chunks = list(iter_line_chunks(path, chunk))
    lines = [line for _, chunk_lines in chunks for line in chunk_lines]
    assert lines == ["a", "", "b\rc", "\ufffd\ufffd bad utf8", "last without newline"]
    expected_first = 1
    for first, chunk_lines in chunks:  # each chunk starts where the one before ended
        assert first == expected_first
        expected_first += len(chunk_lines)


def test_truncated_gzip_keeps_every_line_before_the_cut_and_says_so(tmp_path: Path) -> None:
    from loganalyzer.sources import READ_NOTES

    text = SAMPLE.read_bytes()
    packed = gzip.compress(text)
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[: len(packed) // 2])
    notes: list[str] = []
    token = READ_NOTES.set(notes)
    try:
        lines = [line for _, chunk in iter_line_chunks(path) for line in chunk]
    finally:
        READ_NOTES.reset(token)
    whole = text.decode().split("\n")
    assert len(lines) > len(whole) // 3
    assert lines[:-1] == whole[: len(lines) - 1]  # the last one may stop mid-line
    assert notes[0].startswith(f"{path}: the compressed data ends early at offset ")


def test_binary_heads_are_not_claimed(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 400)
    assert is_probably_binary(read_head(path))
    assert MegatronParser().detect(path) == 0.0


def test_directories_expand_recursively_in_a_stable_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    for name in ("b/2.log", "a.log", "b/1.log"):
        (tmp_path / name).write_text("x")
    assert [p.relative_to(tmp_path).as_posix() for p in expand_sources([str(tmp_path)])] == [
        "a.log",
        "b/1.log",
        "b/2.log",
    ]


def test_missing_source_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"no-such\.log: no such file or directory"):
        expand_sources(["no-such.log"])


def test_inputs_are_never_modified(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(SAMPLE.read_bytes())
    path.chmod(0o444)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    MegatronParser().parse(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_reading_progress_is_reported_to_whoever_asked(tmp_path: Path) -> None:
    from loganalyzer.sources import READ_PROGRESS

    path = tmp_path / "x.log"
    path.write_bytes(b"line\n" * 100)
    seen: list[tuple[int, int | None]] = []
    token = READ_PROGRESS.set(lambda _path, done, total: seen.append((done, total)))
    try:
        list(iter_line_chunks(path, 64))
    finally:
        READ_PROGRESS.reset(token)
    assert [done for done, _ in seen] == [*range(64, 500, 64), 500]
    assert {total for _, total in seen} == {500}
    list(iter_line_chunks(path, 64))  # nobody asked: nothing reported
    assert len(seen) == 8


def test_a_file_without_line_breaks_is_refused_not_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import loganalyzer.sources as sources

    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "blob.log"
    path.write_bytes(b"ok\n" + b"x" * 5000)
    with pytest.raises(InputError, match=r"blob\.log: line 2 runs past 0 MB without a line break"):
        list(iter_line_chunks(path, 256))


def test_text_head_is_none_for_what_no_text_parser_claims(tmp_path: Path) -> None:
    text = SAMPLE.read_text()
    log, named_json, packed = tmp_path / "run.log", tmp_path / "run.json", tmp_path / "run.gz"
    log.write_text(text)
    named_json.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 400)
    assert text_head(log) == text_head(packed) == text
    assert text_head(named_json) is None
    assert text_head(named_json, json_too=True) == text
    for name in ("empty.log", "blob.bin", "missing.log", "."):
        assert text_head(tmp_path / name) is None, name


def test_text_head_is_read_again_once_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_text("first line\n")
    assert text_head(path) == "first line\n"
    path.write_text("the file now holds more\n")
    assert text_head(path) == "the file now holds more\n"
    path.write_bytes(bytes(range(256)) * 400)
    assert text_head(path) is None
