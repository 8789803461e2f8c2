"""Deterministic benchmark inputs: large Megatron-LM logs in the shapes real runs print.

Every generator writes the same bytes for the same arguments (no clock, no randomness: each
value is a function of the iteration number), so a table measured today can be compared with
one measured after a change. The line formats are Megatron-LM's own format strings (see the
shared FORMATS reference); the start of each log (world size, arguments dump) is the head of a
bundled fixture, so the config is real.

The lines are built a chunk of iterations at a time with polars' string kernels, not a Python
`format` per line: writing 1 GB takes seconds instead of about a minute and a half, which is
harness time that measures nothing. A value that repeats with the iteration (`i * 31 % 400`)
is formatted once per residue by Python itself and gathered, so every number has exactly the
text Python's format spec gives it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import BinaryIO

import numpy as np
import polars as pl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "megatron"

# Lines of the current-format log that are not Megatron's: launcher, NCCL and Python noise.
_NOISE = (
    "r7i3n0:38600:38856 [2] NCCL INFO comm 0x1450d4001060 rank {i} nranks 64 cudaDev 2 busId 48000",
    "/usr/lib/python3/dist-packages/torch/distributed/c10d.py:12: UserWarning: barrier() is slow",
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to port 29500 (errno: 98)",
)

_BLOCK = 1000  # the log grows by whole blocks of this many iterations until it is big enough
_CHUNK = 100 * _BLOCK  # the most iterations built by one set of polars calls (~55-115 MB)

# The dates of the run's days (six seconds an iteration: 2.4 M iterations take 167 days).
_DAYS = pl.Series([(date(2025, 9, 1) + timedelta(days=d)).isoformat() for d in range(2000)])


def _head(fixture: str, prefix: str) -> str:
    """The fixture's lines before its first iteration line, each with `prefix`."""
    lines = []
    for line in (FIXTURES / fixture).read_text().splitlines():
        if " iteration " in line and "|" in line:
            break
        lines.append(prefix + line)
    return "\n".join(lines) + "\n"


def _cycle(i: pl.Series, period: int, text: Callable[[int], str]) -> pl.Series:
    """`text(i)` for a value that repeats every `period` iterations: Python formats each
    residue once, polars gathers them."""
    return pl.Series([text(k) for k in range(period)]).gather(i % period)


def _padded(values: pl.Series, width: int, fill: str = " ") -> pl.Series:
    """An integer as `{value:width d}` (or `:0width d` with `fill="0"`) formats it."""
    padded: pl.Series = values.cast(pl.String).str.pad_start(width, fill)
    return padded


def _every(i: pl.Series, period: int, text: Callable[[pl.Series], pl.Series]) -> pl.Series:
    """`text` of the iterations of `i` that are multiples of `period`, "" for the others:
    built only for the iterations that print it."""
    where = i % period == 0
    built = text(i.filter(where))
    return pl.repeat("", len(i), eager=True).scatter(where.arg_true(), built)


def _joined(*pieces: pl.Series | str) -> pl.Series:
    """The pieces (columns or constants) concatenated row by row."""
    return pl.select(pl.concat_str([pl.lit(piece) for piece in pieces])).to_series()


def _current_chunk(i: pl.Series) -> pl.Series:
    """All the lines of iterations `i` as Megatron-LM core 0.12 prints them under
    `srun --label`: timestamped iteration lines (rank 63), a memory line every 3 iterations,
    a (min, max) timer block every 5, and a noise line after every iteration (about 30 % of
    the lines)."""
    second = 8 * 3600 + 9 + i * 6
    return _joined(
        "63:  [",
        _DAYS.gather(second // 86400),
        " ",
        _padded(second // 3600 % 24, 2, "0"),
        ":",
        _padded(second // 60 % 60, 2, "0"),
        ":",
        _padded(second % 60, 2, "0"),
        ".",
        _padded(i * 7919 % 1000000, 6, "0"),
        "] ",
        *_progress_fields(i, 5000000, 128, 6000),
        " | throughput per GPU (TFLOP/s/GPU): ",
        _cycle(i, 90, lambda k: f"{130 + k * 17 % 90 / 10:.1f}"),
        " | learning rate: ",
        _cycle(i, 1000, lambda k: f"{3e-4 * (1 + k % 1000) / 1000:.6E}"),
        " | global batch size:   128",
        *_loss_fields(i, "1.0"),
        _every(i, 3, _current_memory),
        _every(i, 5, _current_timers),
        _cycle(i, 192, lambda k: f"{k % 64}: " + _NOISE[k % 3].format(i=k % 64) + "\n"),
    )


def _progress_fields(
    i: pl.Series, train_iters: int, batch: int, base_ms: int
) -> tuple[str | pl.Series, ...]:
    """The start of an iteration line, the same in both formats: `iteration N/ M`, the
    consumed samples (`batch` per iteration) and the step time (from `base_ms`)."""
    return (
        "iteration ",
        _padded(i, 8),
        f"/{train_iters:8d} | consumed samples: ",
        _padded(i * batch, 12),
        " | elapsed time per iteration (ms): ",
        _cycle(i, 400, lambda k: f"{base_ms + k * 31 % 400:.1f}"),
    )


def _loss_fields(i: pl.Series, loss_scale: str) -> tuple[str | pl.Series, ...]:
    """The end of an iteration line, the same in both formats: loss, loss scale, grad norm,
    skipped and nan iterations."""
    return (
        " | lm loss: ",
        _cycle(i, 1000, lambda k: f"{2 + k * 13 % 1000 / 1000:.6E}"),
        f" | loss scale: {loss_scale} | grad norm: ",
        _cycle(i, 100, lambda k: f"{0.5 + k * 7 % 100 / 100:.3f}"),
        " | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
    )


def _current_memory(i: pl.Series) -> pl.Series:
    """The memory line of one rank after iterations `i`."""
    rank = _cycle(i, 8, str)
    return _joined(
        rank,
        ": [Rank ",
        rank,
        "] (after ",
        i.cast(pl.String),
        " iterations) memory (MB) | allocated: ",
        _cycle(i, 50, lambda k: f"{17694.36 + k:.2f}"),
        " | max allocated: 20045.01 | reserved: 24084.00 | max reserved: 24084.00\n",
    )


def _current_timers(i: pl.Series) -> pl.Series:
    """The (min, max) timer block printed after iterations `i`."""
    return _joined(
        f"0: (min, max) time across ranks (ms):\n0:     {'forward-backward ':.<48}: (",
        _cycle(i, 90, lambda k: f"{5900 + k:.2f}"),
        ", ",
        _cycle(i, 97, lambda k: f"{5950 + k:.2f}"),
        f")\n0:     {'optimizer ':.<48}: (",
        _cycle(i, 9, lambda k: f"{40 + k:.2f}"),
        ", ",
        _cycle(i, 11, lambda k: f"{45 + k:.2f}"),
        ")\n",
    )


# The fixed part of the 2021 format's one-line timer report.
_LEGACY_TIMERS = (
    " | backward-send: 65.31 | backward-send-forward-recv: 152.65"
    " | backward-params-all-reduce: 22.00 | backward-embedding-all-reduce: 1000.10"
    " | optimizer-copy-to-main-grad: 9.24 | optimizer-unscale-and-check-inf: 73.55"
    " | optimizer: 82.95 | batch-generator: "
)


def _legacy_chunk(i: pl.Series) -> pl.Series:
    """All the lines of iterations `i` as Megatron-LM printed them in 2021 (v2.x, the
    BigScience runs): no timestamp, a one-line `time (ms)` report of eleven timers after
    every iteration line, the memory lines of all 32 ranks every 10 iterations, and some
    noise."""
    return _joined(
        " ",
        *_progress_fields(i, 292968, 4, 1600),
        " | learning rate: ",
        _cycle(i, 1000, lambda k: f"{1.5e-4 * (1 + k % 1000) / 1000:.3E}"),
        " | global batch size:     4",
        *_loss_fields(i, "16384.0"),
        "time (ms) | forward-compute: ",
        _cycle(i, 50, lambda k: f"{265 + k:.2f}"),
        " | forward-recv: ",
        _cycle(i, 70, lambda k: f"{1118 + k:.2f}"),
        " | backward-compute: ",
        _cycle(i, 30, lambda k: f"{462 + k:.2f}"),
        _LEGACY_TIMERS,
        _cycle(i, 5, lambda k: f"{2 + k:.2f}\n"),
        _every(i, 10, _legacy_memory),
        _every(i, 4, _legacy_noise),
    )


def _legacy_noise(i: pl.Series) -> pl.Series:
    """The noise line printed after iterations `i` (one iteration in four)."""
    return _cycle(i, 96, lambda k: _NOISE[k % 3].format(i=k % 32) + "\n")


def _legacy_memory(i: pl.Series) -> pl.Series:
    """The memory lines of all 32 ranks after iterations `i`."""
    after = i.cast(pl.String)
    pieces: list[pl.Series | str] = []
    for rank in range(32):
        pieces += [
            f"[Rank {rank}] (after ",
            after,
            f" iterations) memory (MB) | allocated: {17694.361328125 + rank:.9f} |"
            " max allocated: 20045.0126953125 | reserved: 24084.0 | max reserved: 24084.0\n",
        ]
    return _joined(*pieces)


FORMATS: dict[str, tuple[Callable[[pl.Series], pl.Series], tuple[str, str]]] = {
    "current": (_current_chunk, ("core_0_12_llama3_8b_throughput.log", "0: ")),
    "legacy": (_legacy_chunk, ("bigscience_gpt2_tp4_pp8.out", "")),
}


def write_log(path: Path, size_bytes: int, kind: str = "current", first: int = 1) -> int:
    """Write a `kind` log of at least `size_bytes` bytes to `path`, in whole blocks of
    `_BLOCK` iterations (the first block that reaches the size is the last); returns the
    iteration lines written (so a parse can be checked against it)."""
    chunk_lines, (fixture, prefix) = FORMATS[kind]
    head = _head(fixture, prefix).encode()
    iteration = first
    with path.open("wb") as out:
        out.write(head)
        written = len(head)
        block_bytes = 0  # of the last block built: how many more blocks are worth building
        while written < size_bytes:
            wanted = -(-(size_bytes - written) // block_bytes) if block_bytes else 1
            count = min(_CHUNK, wanted * _BLOCK)
            text = chunk_lines(pl.int_range(iteration, iteration + count, eager=True))
            sizes = text.str.len_bytes().to_numpy().reshape(-1, _BLOCK).sum(axis=1)
            ends = written + np.cumsum(sizes)
            # blocks are written while the log is smaller: up to the first that reaches it
            blocks = min(int(np.searchsorted(ends, size_bytes)) + 1, len(ends))
            kept = text.head(blocks * _BLOCK)
            _write_rows(out, kept)
            written = int(ends[blocks - 1])
            block_bytes = int(sizes[-1])
            iteration += len(kept)
    return iteration - first


def _write_rows(out: BinaryIO, text: pl.Series) -> None:
    """The rows of `text`, one after another: polars' CSV writer (no quoting, one column)
    writes them from Rust, each row's own final newline stripped and given back as the line
    terminator; joining them into one Python string first takes seven times as long."""
    rows = pl.DataFrame({"text": text.str.head(-1)})
    rows.write_csv(out, include_header=False, quote_style="never", line_terminator="\n")


def write_run_dir(folder: Path, files: int, size_bytes: int) -> int:
    """A run directory of `files` logs of `size_bytes` each, as a job array or a run
    restarted that often leaves: each file continues the iterations of the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for index in range(files):
        total += write_log(folder / f"slurm-{index:04d}.out", size_bytes, first=1 + total)
    return total


def main() -> None:
    """`python -m bench.generate current|legacy MEGABYTES PATH`: one log of that size (the
    memory figures of the README's memory model were measured on 1 GB and 4 GB ones)."""
    import sys

    kind, megabytes, path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    print(f"{path}: {write_log(path, megabytes << 20, kind):,} iterations")


if __name__ == "__main__":
    main()
