"""Hostile inputs that once took time superlinear in their size, each beside a benign input
of about the same size read by the same command: a test or the bench compares the two
times (a ratio), never an absolute time, so that a slow or busy machine does not fail it.

Every writer is deterministic and takes the size in bytes it should come near. The event
files are framed here as tensorboard's `RecordWriter` frames them (u64 length, masked
CRC-32C of the length, data, masked CRC-32C of the data); the Megatron-LM lines are
written from its format strings (`training.py`'s `' iteration {:8d}/{:8d} |'`,
`' {}: {:.6E} |'`; `timers.py`'s `'time (ms)'` + `' | {}: {:.2f}'`).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import google_crc32c

# The first record of every event file tensorboard's writer writes.
FILE_VERSION = "brain.Event:2"
START = 1_700_000_000.0


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: the length, its CRC, the data and its CRC."""
    head = struct.pack("<Q", len(data))
    return (
        head
        + struct.pack("<I", masked_crc32c(head))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _event(step: int, **fields: object) -> bytes:
    from tensorboard.compat.proto.event_pb2 import Event

    event = Event(wall_time=START + step, step=step)
    for name, value in fields.items():
        setattr(event, name, value)
    return event.SerializeToString()


def _scalar(step: int, tag: str, value: float) -> bytes:
    from tensorboard.compat.proto.event_pb2 import Event

    event = Event(wall_time=START + step, step=step)
    entry = event.summary.value.add()
    entry.tag, entry.simple_value = tag, value
    return event.SerializeToString()


def tensorboard_scalars(path: Path, size: int) -> Path:
    """Benign: an event file of `lm loss` and `iteration-time` scalars, about `size` bytes."""
    parts = [record(_event(0, file_version=FILE_VERSION))]
    written, step = len(parts[0]), 1
    while written < size:
        for tag, value in (("lm loss", 10.0 / step), ("iteration-time", 1.0 + step % 7 / 100)):
            parts.append(record(_scalar(step, tag, value)))
            written += len(parts[-1])
        step += 1
    path.write_bytes(b"".join(parts))
    return path


def tensorboard_long_record(path: Path, size: int) -> Path:
    """One event whose tensor summary holds about `size` bytes (a long text summary), between
    a few scalars: each byte of it is CRC-checked once."""
    from tensorboard.compat.proto.event_pb2 import Event

    event = Event(wall_time=START + 1, step=1)
    entry = event.summary.value.add()
    entry.tag = "notes/text_summary"
    entry.tensor.dtype = 7  # DT_STRING
    entry.tensor.string_val.append(b"x" * size)
    scalars = [record(_scalar(step, "lm loss", 10.0 / step)) for step in range(2, 12)]
    head = record(_event(0, file_version=FILE_VERSION))
    path.write_bytes(head + record(event.SerializeToString()) + b"".join(scalars))
    return path


def tensorboard_forged_headers(path: Path, size: int, count: int) -> Path:
    """A few good records, one damaged byte, then `count` forged record headers (their
    length CRCs check) spread over `size` bytes, each claiming a record that runs to the end
    of the file and fails its data CRC: searching for the next intact record after the
    damage could check each of them whole."""
    good = record(_event(0, file_version=FILE_VERSION)) + b"".join(
        record(_scalar(step, "lm loss", 10.0 / step)) for step in range(1, 101)
    )
    gap = max((size - len(good) - 17) // count, 12)
    body = bytearray(good + b"\xff" + bytes(gap * count + 16))
    for index in range(count):
        at = len(good) + 1 + index * gap
        length = struct.pack("<Q", len(body) - at - 16)
        body[at : at + 12] = length + struct.pack("<I", masked_crc32c(length))
    path.write_bytes(bytes(body))
    return path


def _iteration_line(step: int, extra: str = "") -> str:
    return (
        f" iteration {step:8d}/ 1000000 | consumed samples: {step * 512:12d} |"
        f" elapsed time per iteration (ms): {1000.0 + step % 13:.1f} |"
        f" learning rate: {3e-4:.6E} | global batch size:   512 | lm loss: {10.0 / step:.6E} |"
        f" loss scale: 1.0 | grad norm: {1.0 + step % 5 / 10:.3f} |"
        f" number of skipped iterations:   0 | number of nan iterations:   0 |{extra}\n"
    )


def _timer_line(step: int) -> str:
    names = ("forward-backward", "forward-compute", "backward-compute", "optimizer")
    return "time (ms)" + "".join(f" | {n}: {100.0 + step % 9 + i:.2f}" for i, n in enumerate(names))


def megatron_benign(path: Path, size: int) -> Path:
    """Benign: iteration lines, each followed by its timer line, about `size` bytes."""
    lines, written, step = [], 0, 1
    while written < size:
        lines.append(_iteration_line(step) + _timer_line(step) + "\n")
        written += len(lines[-1])
        step += 1
    path.write_text("".join(lines))
    return path


def megatron_timer_field(path: Path, size: int) -> Path:
    """A few iteration lines, then a timer line whose one field is `a:a:...a: x y` of about
    `size` bytes: a key pattern with a lazy key and a greedy value backtracks over it."""
    head = "".join(_iteration_line(step) + _timer_line(step) + "\n" for step in range(1, 4))
    path.write_text(head + "time (ms) | " + "a:" * (size // 2) + " x y\n" + _iteration_line(4))
    return path


def megatron_many_fields(path: Path, size: int, lines: int = 2) -> Path:
    """`lines` iteration lines of about `size // lines` bytes each: their usual fields and then
    as many more short `key: value` fields as fit (`m17: 3 |`)."""
    each = max(size // lines, 200)
    extra = "".join(f" m{i}: {i % 7} |" for i in range(each // 10))
    path.write_text("".join(_iteration_line(step, extra) for step in range(1, lines + 1)))
    return path


def gzip_flood(path: Path, size: int, byte: bytes) -> Path:
    """A gzip file that decompresses to a few iteration lines and then `size` copies of `byte`
    (newline or NUL): about a thousand times smaller than what it holds.

    Each MB of `byte` is compressed once: after a full flush the compressor starts afresh,
    so every further MB compresses to the same bytes (a GB in 0.3 s, not 3 s of deflate)."""
    head, piece = megatron_text(3).encode(), byte * (1 << 20)
    pieces, rest = divmod(size, len(piece))
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw: framed here
    flush = zlib.Z_FULL_FLUSH
    start = deflate.compress(head) + deflate.flush(flush)
    block = deflate.compress(piece) + deflate.flush(flush)
    crc = zlib.crc32(head)
    with path.open("wb") as stream:
        # gzip's header (RFC 1952): magic, deflate, no flags, no time, best compression, Unix
        stream.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03" + start)
        for _ in range(pieces):
            stream.write(block)
            crc = zlib.crc32(piece, crc)
        stream.write(deflate.compress(piece[:rest]) + deflate.flush())
        crc = zlib.crc32(piece[:rest], crc)
        length = (len(head) + size) & 0xFFFFFFFF
        stream.write(struct.pack("<II", crc, length))
    return path


def megatron_text(steps: int) -> str:
    return "".join(_iteration_line(step) + _timer_line(step) + "\n" for step in range(1, steps + 1))


def gzip_benign(path: Path, size: int) -> Path:
    """Benign: a gzip file of iteration and timer lines, about `size` bytes decompressed."""
    text = megatron_benign(path.with_suffix(""), size).read_bytes()
    path.with_suffix("").unlink()
    with gzip.open(path, "wb", compresslevel=6) as stream:
        stream.write(text)
    return path
