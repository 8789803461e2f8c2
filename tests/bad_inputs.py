"""The hostile-input corpus: every kind of bad input and the outcome loganalyzer documents.

One table serves three readers: `test_bad_inputs.py` runs each row through the command line
as a subprocess and asserts its outcome, the troubleshooting page (docs/troubleshooting.md) is
generated from it (`troubleshooting_markdown`), and the fuzzing harness's findings become rows.

Small inputs are committed in `fixtures/bad/`; large, binary or special ones (a 50 MB line,
random bytes, 10,000 empty files, a FIFO, a symlink loop) are made at test time, the same
every time. A row whose input needs a reader that is not registered yet sits in `PENDING`,
never in `CASES`: `test_pending_rows_wait_only_for_what_is_missing` fails as soon as what a
pending row waits for exists, so it is moved into `CASES` and runs.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import FIXTURES

BAD = FIXTURES / "bad"
GOOD_LOG = BAD / "crlf.log"  # ten intact records (CRLF line ends are read as plain ones)

# What a row's input is made of: a path relative to fixtures/bad, or a builder that makes
# the input in a scratch directory and returns the command-line arguments naming it.
Builder = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    """One kind of bad input and what loganalyzer answers."""

    name: str
    what: str  # the input, as the troubleshooting table shows it
    source: str | Builder
    exit_code: int
    message: str | None  # a substring of stderr (the error, a warning or an `ignored` line)
    advice: str  # what the user should do, for the troubleshooting table
    records: int | None = None  # records kept (`iterations.logged`) when the exit code is 0
    seconds: float = 20.0  # time limit for one command on this input
    needs: str = "parser:megatron"  # what must be registered: parser:NAME or option:NAME

    def arguments(self, scratch: Path) -> list[str]:
        if isinstance(self.source, str):
            return [str(BAD / self.source)]
        return self.source(scratch)


def _text(name: str, data: bytes) -> Builder:
    def build(scratch: Path) -> list[str]:
        path = scratch / name
        path.write_bytes(data)
        return [str(path)]

    return build


def _random_bytes(scratch: Path) -> list[str]:
    path = scratch / "random.log"
    path.write_bytes(random.Random(13).randbytes(1 << 20))
    return [str(path)]


def _long_line(scratch: Path) -> list[str]:
    """Five records, a 50 MB line without a break, five more records."""
    lines = GOOD_LOG.read_bytes().replace(b"\r\n", b"\n").split(b"\n")
    head, tail = lines[:16], lines[16:]
    path = scratch / "long_line.log"
    with path.open("wb") as out:
        out.write(b"\n".join(head) + b"\n")
        out.write(b"x" * (50 << 20) + b"\n")
        out.write(b"\n".join(tail))
    return [str(path)]


def _no_line_breaks(scratch: Path) -> list[str]:
    """An intact iteration line, then 70 MB more without a break (a binary dump, say)."""
    first_record = GOOD_LOG.read_bytes().split(b"\r\n")[11]
    path = scratch / "blob.log"
    path.write_bytes(first_record + b"y" * (70 << 20))
    return [str(path)]


def _gzip_corrupt_member(scratch: Path) -> list[str]:
    """Two gzip members (a log rotated with `gzip >>`); the first damaged in its middle."""
    text = GOOD_LOG.read_bytes()
    cut = text.index(b"\r\n [", len(text) // 2) + 2
    first = bytearray(gzip.compress(text[:cut], mtime=0))
    first[len(first) // 2 : len(first) // 2 + 8] = b"\xff" * 8
    path = scratch / "rotated.log.gz"
    path.write_bytes(bytes(first) + gzip.compress(text[cut:], mtime=0))
    return [str(path)]


def _fake_gzip(scratch: Path) -> list[str]:
    path = scratch / "fake.log.gz"
    path.write_bytes(b"\x1f\x8b" + b"this is not compressed data\n")
    return [str(path)]


def _run_dir(scratch: Path, *, empty_files: int = 0) -> Path:
    folder = scratch / "run"
    folder.mkdir()
    (folder / "slurm-1.out").write_bytes(GOOD_LOG.read_bytes())
    for k in range(empty_files):
        (folder / f"empty-{k:05d}.log").touch()
    return folder


def _dir_with_broken_link(scratch: Path) -> list[str]:
    folder = _run_dir(scratch)
    (folder / "rank1.log").symlink_to(scratch / "deleted-before-copy.log")
    return [str(folder)]


def _dir_with_symlink_loop(scratch: Path) -> list[str]:
    folder = _run_dir(scratch)
    (folder / "a.log").symlink_to(folder / "b.log")
    (folder / "b.log").symlink_to(folder / "a.log")
    (folder / "again").symlink_to(folder, target_is_directory=True)
    return [str(folder)]


def _dir_with_fifo(scratch: Path) -> list[str]:
    folder = _run_dir(scratch)
    os.mkfifo(folder / "live.log")
    return [str(folder)]


def _fifo(scratch: Path) -> list[str]:
    path = scratch / "live.log"
    os.mkfifo(path)
    return [str(path)]


def _many_empty_files(scratch: Path) -> list[str]:
    return [str(_run_dir(scratch, empty_files=10_000))]


def _only_empty_files(scratch: Path) -> list[str]:
    folder = scratch / "run"
    folder.mkdir()
    for k in range(50):
        (folder / f"empty-{k:02d}.log").touch()
    return [str(folder)]


def _not_utf8_name(scratch: Path) -> list[str]:
    """A log whose folder's name is Latin-1 bytes (`run-\xe9t\xe9`), as a file system allows."""
    folder = Path(os.fsdecode(bytes(scratch) + b"/run-\xe9t\xe9"))
    folder.mkdir()
    (folder / "train.log").write_bytes(GOOD_LOG.read_bytes())
    return [str(folder / "train.log")]


def _not_utf8_inside(scratch: Path) -> list[str]:
    """A run folder of one log beside a subfolder whose name is Latin-1 bytes."""
    folder = scratch / "run"
    inside = Path(os.fsdecode(bytes(folder) + b"/\xe9t\xe9"))
    inside.mkdir(parents=True)
    (folder / "train.log").write_bytes(GOOD_LOG.read_bytes())
    (inside / "train.log").write_bytes(GOOD_LOG.read_bytes())
    return [str(folder)]


def _empty_dir(scratch: Path) -> list[str]:
    (scratch / "run").mkdir()
    return [str(scratch / "run")]


def _unreadable(scratch: Path) -> list[str]:
    """A regular file whose read fails (tests run as root, which reads any mode bits)."""
    return ["/proc/self/mem"]


CASES: list[Case] = [
    Case(
        "empty",
        "an empty file",
        _text("empty.log", b""),
        1,
        "the file is empty",
        "name the log the job wrote (the run may not have started)",
    ),
    Case(
        "whitespace_only",
        "a file of spaces, tabs and blank lines",
        "whitespace_only.log",
        3,
        "no registered parser recognises this file",
        "name the log the job wrote, or pass --format NAME",
    ),
    Case(
        "random_bytes",
        "1 MB of random bytes",
        _random_bytes,
        3,
        "no registered parser recognises this file",
        "name a text log, an event file or a run folder",
    ),
    Case(
        "cut_mid_line",
        "a log cut in the middle of an iteration line",
        "cut_mid_line.log",
        0,
        "line 21 has no line break: the file may have been cut mid-line",
        "nothing: every record is kept; check the last one's values",
        records=10,
    ),
    Case(
        "cut_mid_utf8",
        "a log cut inside a multi-byte UTF-8 character",
        "cut_mid_utf8.log",
        0,
        "has no line break",
        "nothing: the broken character reads as U+FFFD",
        records=5,
    ),
    Case(
        "latin1",
        "Latin-1 bytes (a host name, a path) in a UTF-8 log",
        "latin1.log",
        0,
        None,
        "nothing: undecodable bytes read as U+FFFD",
        records=5,
    ),
    Case(
        "utf16",
        "a log saved as UTF-16 (Windows PowerShell `>`)",
        "utf16.log",
        0,
        None,
        "nothing: UTF-16 with a byte-order mark is read as text",
        records=5,
    ),
    Case(
        "nul_padding",
        "4 KB of NUL bytes in the middle of a log (a crashed writer on NFS)",
        "nul_padding.log",
        0,
        None,
        "nothing: the records on both sides are kept",
        records=10,
    ),
    Case(
        "long_line",
        "a 50 MB line without a break between records",
        _long_line,
        0,
        None,
        "nothing: the records on both sides are kept (a line past 64 MB is refused)",
        records=10,
        seconds=60,
    ),
    Case(
        "no_line_breaks",
        "70 MB without a line break",
        _no_line_breaks,
        1,
        "without a line break; this is not a text log",
        "name a text log; compressed or binary data needs its own reader",
        seconds=60,
    ),
    Case(
        "crlf",
        "CRLF line ends",
        "crlf.log",
        0,
        None,
        "nothing",
        records=10,
    ),
    Case(
        "lone_cr",
        "records separated by a lone `\\r` (a progress bar's overwrites)",
        "lone_cr.log",
        0,
        "need seq_length to compute",
        "the records are kept; pass the model's shape (--seq-length, --model) the lost "
        "arguments dump held",
        records=10,
    ),
    Case(
        "nan_inf",
        "`nan`, `inf`, `-inf`, `-` and `1e309` where step times belong",
        "nan_inf_numbers.log",
        0,
        "6 of 10 records have no usable step time",
        "nothing: such records are counted, not timed",
        records=10,
    ),
    Case(
        "iteration_backwards",
        "an iteration counter that goes backwards (a restart without a new arguments dump)",
        "iteration_backwards.log",
        0,
        None,
        "nothing: a step back starts a new segment (a restart)",
        records=10,
    ),
    Case(
        "iteration_repeats",
        "an iteration logged twice with different values",
        "iteration_repeats.log",
        0,
        None,
        "nothing: both are kept, the repeat starts a new segment",
        records=5,
    ),
    Case(
        "iteration_jump",
        "an iteration counter that jumps by millions",
        "iteration_jump.log",
        0,
        None,
        "nothing: a record covers at most the log interval, so the gap is not read as work",
        records=6,
    ),
    Case(
        "timestamp_backwards",
        "timestamps that go backwards (a clock reset)",
        "timestamp_backwards.log",
        0,
        None,
        "nothing: step times come from the printed elapsed time",
        records=6,
    ),
    Case(
        "zero_size",
        "a model size of 0 among the arguments",
        "zero_hidden_size.log",
        0,
        "FLOPs unknown: hidden_size is 0: a size must be positive",
        "pass the model's shape (--hidden-size, --model)",
        records=5,
    ),
    Case(
        "gzip_cut",
        "a .gz cut short",
        "gzip_cut.log.gz",
        0,
        "the compressed data ends early at offset 339 (the file was cut short)",
        "nothing: everything before the cut is kept",
        records=1,
    ),
    Case(
        "gzip_trailing_garbage",
        "a .gz followed by bytes that are not gzip",
        "gzip_trailing_garbage.log.gz",
        0,
        "are not gzip",
        "nothing: the whole member is kept",
        records=10,
    ),
    Case(
        "gzip_corrupt_member",
        "a .gz of two members, the first corrupt in its middle",
        _gzip_corrupt_member,
        0,
        "reading resumed at the gzip member at offset",
        "nothing: reading resumes at the next member; the damaged member's records are lost",
        records=5,
    ),
    Case(
        "fake_gzip",
        "a file with gzip's magic bytes and no gzip data",
        _fake_gzip,
        1,
        "cannot be read",
        "name the real file",
    ),
    Case(
        "missing",
        "a path that does not exist",
        lambda scratch: [str(scratch / "nope.log")],
        1,
        "no such file or directory",
        "check the path",
    ),
    Case(
        "unreadable",
        "a file whose read fails (I/O error, permission denied)",
        _unreadable,
        1,
        "cannot open",
        "check the file's permissions and storage",
        needs="core",
    ),
    Case(
        "fifo",
        "a named pipe (a FIFO, `<(zcat log.gz)`)",
        _fifo,
        1,
        "not a regular file",
        "save the stream to a file and name that",
        needs="core",
        seconds=10,
    ),
    Case(
        "dir_fifo",
        "a run folder holding a FIFO",
        _dir_with_fifo,
        0,
        "live.log: not a regular file",
        "nothing: the FIFO is listed as ignored",
        records=10,
        seconds=10,
    ),
    Case(
        "dir_broken_link",
        "a run folder holding an unreadable entry (a broken symlink)",
        _dir_with_broken_link,
        0,
        "rank1.log: not a regular file",
        "nothing: the entry is listed as ignored",
        records=10,
    ),
    Case(
        "dir_symlink_loop",
        "a run folder holding a symlink loop and a link to itself",
        _dir_with_symlink_loop,
        0,
        "a.log: not a regular file",
        "nothing: loops are listed as ignored, linked folders not followed",
        records=10,
    ),
    Case(
        "dir_10000_empty",
        "a run folder of one log and 10,000 empty files",
        _many_empty_files,
        0,
        "empty-09999.log: no parser recognises it",
        "nothing: the empty files are listed as ignored (`-q` hides the list)",
        records=10,
        seconds=60,
    ),
    Case(
        "dir_only_empty",
        "a folder of empty files only",
        _only_empty_files,
        1,
        "no file any parser could read (50 ignored: no parser recognises it)",
        "name the folder the logs are in",
    ),
    Case(
        "path_not_utf8",
        "a log whose path holds bytes that are not UTF-8 (a Latin-1 folder name)",
        _not_utf8_name,
        1,
        "run-\\xe9t\\xe9/train.log: its path holds bytes that are not UTF-8",
        "rename it, or link it under a UTF-8 name (`ln -s`) and pass the link",
    ),
    Case(
        "dir_not_utf8_inside",
        "a run folder with a subfolder whose name is not UTF-8",
        _not_utf8_inside,
        0,
        "\\xe9t\\xe9/train.log: its path holds bytes that are not UTF-8",
        "nothing: the file is listed as ignored; rename it to have it read",
        records=10,
    ),
    Case(
        "empty_dir",
        "an empty folder",
        _empty_dir,
        1,
        "no file any parser could read",
        "name the folder the logs are in",
    ),
    Case(
        "control_characters",
        "ANSI escape sequences, a terminal title change, backspaces in a log's values",
        "ansi_and_controls.log",
        0,
        "exp_name = \\x1b]0;pwned\\x07red\\x08\\x08\\u202eevil differs from first",
        "nothing: every value from a log is printed escaped",
        records=5,
    ),
    Case(
        "secret_in_config",
        "API keys among a log's arguments",
        "secret_in_config.log",
        0,
        "wandb_api_key = *** differs from ***",
        "nothing: credentials (by name, context or token prefix) never reach the JSON, a "
        "report or an export; commit ids stay readable",
        records=5,
    ),
]


# ---------------------------------------------------------------------------------------------
# Damaged metrics stores, damaged HF Trainer state, two runs in one folder. Builders corrupt
# the first fixture the parser claims, so they need no fixture named here.


def _claimed_fixture(parser: str) -> Path:
    """The first fixture (outside fixtures/bad) that the registered parser `parser` claims."""
    from loganalyzer.registry import load_registry

    detect = load_registry().get(parser).detect
    for path in sorted(FIXTURES.rglob("*")):
        if "bad" not in path.relative_to(FIXTURES).parts[:1] and detect(path) >= 0.5:
            return path
    raise AssertionError(f"no fixture of {parser} to corrupt")


def _tfrecords(data: bytes) -> list[tuple[int, int]]:
    """(offset, length of data) of each TFRecord: u64 length, u32 CRC, data, u32 CRC."""
    found, offset = [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        found.append((offset, length))
        offset += 16 + length
    return found


def _event_file(damage: str) -> Builder:
    def build(scratch: Path) -> list[str]:
        source = _claimed_fixture("tensorboard")
        data = bytearray(source.read_bytes())
        records = _tfrecords(bytes(data))
        offset, length = records[len(records) // 2]
        if damage == "crc":
            data[offset + 12] ^= 0xFF
        elif damage == "length":
            data[offset : offset + 8] = struct.pack("<Q", 1 << 63)
        elif damage == "cut_header":
            del data[offset + 6 :]
        elif damage == "cut_payload":
            del data[offset + 12 + length // 2 :]
        path = scratch / source.name
        path.write_bytes(bytes(data))
        return [str(path)]

    return build


def _wandb_file(damage: str) -> Builder:
    def build(scratch: Path) -> list[str]:
        source = _claimed_fixture("wandb")
        data = bytearray(source.read_bytes())
        if damage == "block":
            middle = len(data) // 2
            data[middle : middle + 64] = b"\xa5" * 64
        else:
            del data[len(data) * 2 // 3 :]
        path = scratch / source.name
        path.write_bytes(bytes(data))
        return [str(path)]

    return build


def _trainer_state(log_history: object, *, broken: bool = False) -> Builder:
    def build(scratch: Path) -> list[str]:
        text = json.dumps({"global_step": 20, "log_history": log_history}, indent=2)
        path = scratch / "trainer_state.json"
        path.write_text(text[:-20] if broken else text)
        return [str(path)]

    return build


def _deep_trainer_state(scratch: Path) -> list[str]:
    path = scratch / "trainer_state.json"
    path.write_text('{"global_step": 20, "log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return [str(path)]


def _two_runs(scratch: Path) -> list[str]:
    return [str(BAD / "two_runs")]


_HISTORY = [{"step": k, "loss": 2.0 - k / 100, "learning_rate": 1e-4} for k in range(1, 21)]

CASES += [
    Case(
        "event_bad_crc",
        "an event file with a bad CRC in the middle",
        _event_file("crc"),
        0,
        "skipped",
        "nothing: reading resumes at the next intact record",
        needs="parser:tensorboard",
    ),
    Case(
        "event_length_2_63",
        "an event file with a record length of 2^63",
        _event_file("length"),
        0,
        "skipped",
        "nothing: reading resumes at the next intact record",
        needs="parser:tensorboard",
    ),
    Case(
        "event_cut_header",
        "an event file cut inside a record header",
        _event_file("cut_header"),
        0,
        "the file ends inside a record",
        "nothing: every record before the cut is kept",
        needs="parser:tensorboard",
    ),
    Case(
        "event_cut_payload",
        "an event file cut inside a record's data",
        _event_file("cut_payload"),
        0,
        "the file ends inside a record",
        "nothing: every record before the cut is kept",
        needs="parser:tensorboard",
    ),
    Case(
        "wandb_corrupt_block",
        "a .wandb file with a corrupt block in the middle",
        _wandb_file("block"),
        0,
        "skipped",
        "nothing: reading resumes at the next intact block",
        needs="parser:wandb",
    ),
    Case(
        "wandb_cut",
        "a .wandb file cut short",
        _wandb_file("cut"),
        0,
        "the file ends inside a record",
        "nothing: every record before the cut is kept",
        needs="parser:wandb",
    ),
    Case(
        "trainer_state_syntax",
        "a trainer_state.json with a syntax error",
        _trainer_state(_HISTORY, broken=True),
        1,
        "trainer_state.json",
        "name an intact trainer_state.json (the checkpoint folder's copy)",
        needs="parser:hf_trainer",
    ),
    Case(
        "trainer_state_wrong_type",
        "a trainer_state.json whose log_history is not a list",
        _trainer_state({"step": 1}),
        0,
        "no log_history list; not used",
        "name an intact trainer_state.json (the config it holds is still read)",
        needs="parser:hf_trainer",
    ),
    Case(
        "trainer_state_deep",
        "a trainer_state.json nested 100,000 levels deep",
        _deep_trainer_state,
        1,
        "JSON nested deeper than 100 levels",
        "the file is damaged or hostile (no framework writes such nesting): name another copy",
        needs="parser:hf_trainer",
    ),
    Case(
        "two_runs",
        "two different runs' logs (another model and world size) in one folder",
        _two_runs,
        1,
        "run_b.out",
        "name one run's folder, or pass --split-runs",
        needs="option:split_runs",
    ),
]

# Rows whose reader or option is not registered yet (none today): each waits for its `needs`,
# and a test fails once that is registered, so that the row moves into CASES.
PENDING: list[Case] = []


def troubleshooting_markdown() -> str:
    """The troubleshooting table (docs/troubleshooting.md), one row per case of `CASES`."""
    rows = [
        "| input | exit | what loganalyzer says (stderr) | what to do |",
        "|---|---|---|---|",
    ]
    for case in CASES:
        said = f"`{case.message}`" if case.message else "—"
        plural = "" if case.records == 1 else "s"
        kept = f"; {case.records} record{plural} kept" if case.records is not None else ""
        rows.append(f"| {case.what} | {case.exit_code}{kept} | {said} | {case.advice} |")
    return "\n".join(rows) + "\n"
