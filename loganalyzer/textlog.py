"""Vectorised building blocks for parsers of stdout logs (polars expressions, no row loops).

Real logs are messy in the same ways whatever the framework: launcher prefixes (`12: `,
`[rank3]:`, `[default0]:`), Kubernetes timestamps, ANSI colour codes, carriage returns,
several ranks' lines glued together without a newline, numbers with thousands separators.
These helpers handle that once for every text parser.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import polars as pl

from loganalyzer.sources import CHUNK_BYTES, decode_lines, iter_line_blocks

# ESC[...m colour codes, and the same with the ESC byte lost ("[32m"), as seen in real logs.
ANSI = r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9;]{1,8}m"

# The container runtime's (kubelet's) timestamp at the start of a line.
KUBELET_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"

# Launcher labels at the start of a line: `srun`, slurm `srun --label`'s task id (a global
# rank); `torchrun`, torchrun `--role rank`'s rank. `[default0]:` and `[host:3]:` carry local
# ranks only.
LAUNCHER_PREFIX = (
    rf"^(?:(?P<kubelet>{KUBELET_STAMP})\s+)?"
    r"(?:(?P<srun>\d+):\s|\[rank(?P<torchrun>\d+)\]:|\[default\d+\]:|\[[\w.-]+:\d+\]:)?"
)

NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf)"

# A timestamp that ends with its UTC offset.
ZONED_STAMP = r"(?:Z|[+-]\d\d:?\d\d)$"

_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}


def line_frames(path: Path) -> Iterator[pl.DataFrame]:
    """The file as DataFrames of (line: Int64, text: String), a bounded chunk at a time."""
    for first, block in iter_line_blocks(path):
        text = block_lines(block)
        del block  # its bytes are not held while the frame is worked on
        yield pl.DataFrame(
            {"line": pl.int_range(first, first + len(text), eager=True), "text": text},
            schema={"line": pl.Int64, "text": pl.String},
        )


# The largest block polars' line reader is given: it reserves about sixteen times the
# longest line (a 50 MB line, 0.8 GB), and a failed allocation aborts the process. A block
# is at most twice `sources.CHUNK_BYTES` unless a line is longer than a chunk.
LINE_READER_MAX_BYTES = 2 * CHUNK_BYTES


def block_lines(block: bytes) -> pl.Series:
    """The lines of a block of bytes (see `sources.iter_line_blocks`), decoded leniently.

    polars' line reader splits a block of valid UTF-8 exactly as `sources.decode_lines` does
    (a '\\r' kept inside a line, dropped before '\\n'; the block's last line too, though only
    Python gives an empty line after a final '\\n'), several times faster than Python; the
    block is read as it is, not copied with a '\\n' added. It refuses invalid UTF-8:
    such a block is read by polars' CSV reader, which replaces the bytes it cannot decode,
    when no byte could be read otherwise there (no '\\r', no unit separator, its column
    separator here, no NUL) and the line count is right; else by Python.
    """
    if len(block) <= LINE_READER_MAX_BYTES:
        try:
            text = pl.scan_lines(block, name="text").collect().get_column("text")
            if not block or block.endswith(b"\n"):  # Python's split gives a last, empty line
                text.append(pl.Series("text", [""]))  # in place
            return text
        except pl.exceptions.ComputeError:
            pass
    if not any(byte in block for byte in (b"\r", b"\x1f", b"\x00")):
        read = pl.read_csv(
            block,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            schema={"text": pl.String},
            encoding="utf8-lossy",
        ).get_column("text")
        if read.len() == block.count(b"\n") + 1:
            return read.fill_null("")
    return pl.Series("text", decode_lines(block), dtype=pl.String)


T = TypeVar("T")

# Chunks scanned at once: polars releases the GIL, so two use both cores of a small machine;
# more would only hold more chunks in memory.
IN_FLIGHT = 2


def scanned_chunks(path: Path, scan: Callable[[pl.DataFrame], T]) -> Iterator[T]:
    """`scan` of each of the file's line chunks, in order, IN_FLIGHT chunks at a time."""
    return scanned_in_flight(line_frames(path), scan)


def scanned_in_flight(
    frames: Iterable[pl.DataFrame], scan: Callable[[pl.DataFrame], T]
) -> Iterator[T]:
    """`scan` of each frame on a thread pool, IN_FLIGHT at a time, yielded in order while the
    next frames are read."""
    with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        pending: deque[Future[T]] = deque()
        for frame in frames:
            pending.append(pool.submit(scan, frame))
            if len(pending) >= IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def clean(text: pl.Expr) -> pl.Expr:
    """Remove ANSI colour codes."""
    return text.str.replace_all(ANSI, "")


def split_glued(frame: pl.DataFrame, record_start: str) -> pl.DataFrame:
    """Split lines where several records were glued together or separated by '\\r'.

    `record_start` is a regex for the start of a record; a newline is inserted before every
    occurrence that does not already start the line, then lines are exploded (keeping their
    line number). `piece` numbers the records of one line so (line, piece) identifies each.
    Only the few lines that need it pay for the rewriting.
    """
    text = pl.col("text")
    glued = text.str.contains("\r", literal=True) | (text.str.count_matches(record_start) > 1)
    frame = frame.with_columns(glued=glued)
    if not frame.get_column("glued").any():
        # Nothing to split (the common case): the frame as it is, without a sort.
        return frame.drop("glued").with_columns(piece=pl.lit(0, dtype=pl.Int32))
    plain = frame.filter(~pl.col("glued")).with_columns(piece=pl.lit(0, dtype=pl.Int32))
    split = (
        frame.filter(pl.col("glued"))
        .with_columns(
            text.str.replace_all("\r", "\n", literal=True)
            .str.replace_all(f"(.)({record_start})", "$1\n$2")
            .str.split("\n")
        )
        .explode("text")
        .filter(text.str.strip_chars() != "")
        .with_columns(piece=pl.int_range(pl.len(), dtype=pl.Int32).over("line"))
    )
    return pl.concat([plain, split]).sort("line", "piece").drop("glued")


def launcher_label(text: pl.Expr) -> list[pl.Expr]:
    """What the start of a line says, from one match: `rank`, the global rank a launcher label
    names (srun --label, torchrun [rankN]:), and `kubelet`, the container runtime's
    timestamp as text; each null where the line has none."""
    found = text.str.extract_groups(LAUNCHER_PREFIX)
    return [
        pl.coalesce(found.struct.field("srun"), found.struct.field("torchrun"))
        .cast(pl.Int32, strict=False)
        .alias("rank"),
        found.struct.field("kubelet").alias("kubelet"),
    ]


def launcher_rank(text: pl.Expr) -> pl.Expr:
    """The global rank a launcher label names (srun --label, torchrun [rankN]:), else null."""
    return launcher_label(text)[0]


def strip_launcher(text: pl.Expr) -> pl.Expr:
    """The line without its launcher label or kubelet timestamp."""
    return text.str.replace(LAUNCHER_PREFIX, "")


def to_number(value: pl.Expr) -> pl.Expr:
    """The first number in a printed value, as Float64.

    Accepts what frameworks print: `1,234.5`, `1.25E-04`, `nan`, Primus's `current/average`
    (`13100.0/13240.9` gives the current value), `615.5 (avg 615.5)`, and nanotron's
    3-significant-digit suffixes (`3.4K`, `1.258B`).
    """
    match = value.str.strip_chars().str.extract_groups(f"^({NUMBER})\\s*([KMBGTP])?(?:\\b|$)")
    number = match.struct.field("1").str.replace_all(",", "", literal=True)
    scale = match.struct.field("2").replace_strict(_SUFFIX, default=1.0, return_dtype=pl.Float64)
    return number.cast(pl.Float64, strict=False) * scale


def numbers(frame: pl.DataFrame, column: str, out: str) -> pl.DataFrame:
    """`frame` with `out` = the number printed in `column` (see `to_number`), dropping `column`.

    Most printed values are plain numbers that a cast reads; only the rest pay for the
    regular expression of `to_number`.
    """
    fast = frame.with_columns(
        pl.col(column).str.strip_chars().cast(pl.Float64, strict=False).alias(out)
    )
    if fast[out].null_count() == 0:
        return fast.drop(column)
    fast = fast.with_row_index("_order")
    slow = fast.filter(pl.col(out).is_null()).with_columns(to_number(pl.col(column)).alias(out))
    return (
        pl.concat([fast.filter(pl.col(out).is_not_null()), slow])
        .sort("_order")
        .drop("_order", column)
    )


def to_timestamp(text: pl.Expr) -> pl.Expr:
    """Parse the timestamp forms logs print (space or T, optional fraction, optional offset).

    Times printed without an offset are local times of unknown zone: they are read as UTC,
    which keeps intervals right; callers state that assumption.
    """
    cleaned = text.str.replace(",", ".", literal=True)
    with_zone = cleaned.str.contains(ZONED_STAMP)
    naive = _naive_timestamp(cleaned)
    zoned = cleaned.str.replace(r"Z$", "+00:00").str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%:z", time_unit="us", strict=False
    )
    return (
        pl.when(with_zone)
        .then(zoned.dt.convert_time_zone("UTC"))
        .otherwise(naive.dt.replace_time_zone("UTC"))
    )


def timestamps(stamps: pl.Series) -> pl.Series:
    """`to_timestamp` of a column of stamps. The offset-aware parse runs only when a stamp
    has an offset: most logs print none, and parsing every stamp twice costs more than the
    rest of reading the timestamp."""
    frame = stamps.to_frame("stamp")
    if frame.select(pl.col("stamp").str.contains(ZONED_STAMP).any()).item():
        read = to_timestamp(pl.col("stamp"))
    else:
        cleaned = pl.col("stamp").str.replace(",", ".", literal=True)
        read = _naive_timestamp(cleaned).dt.replace_time_zone("UTC")
    return frame.select(read.alias(stamps.name)).to_series()


def _naive_timestamp(cleaned: pl.Expr) -> pl.Expr:
    return cleaned.str.replace("T", " ", literal=True).str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False
    )
