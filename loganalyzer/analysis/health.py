"""Run health beside the efficiency figures: where a step's time goes, numerics, memory.

- phases: each logged leaf timer's median (ms) and its share of the median step;
- skipped and NaN iterations: counts and the records that logged them (Megatron prints the
  count per logging interval);
- loss-scale drops: records where the fp16 loss scale fell (an overflow halves it);
- memory headroom: the largest `max allocated` any rank logged, against the device's memory;
- tokens per second per GPU at the steady pace.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from loganalyzer.model import Metrics
from loganalyzer.spill import collect

LISTED = 10


@dataclass(frozen=True)
class Phase:
    """A timer's median and its share of the median step."""

    name: str
    median_ms: float
    share: float | None


@dataclass(frozen=True)
class Counted:
    """A count over the run and the first `LISTED` iterations where it happened."""

    total: int
    iterations: tuple[int, ...]


@dataclass(frozen=True)
class Memory:
    """Peak allocated memory (GB) against the device's, where both are known."""

    max_allocated_gb: float | None
    rank: int | None
    device_gb: float | None
    headroom: float | None


@dataclass(frozen=True)
class Health:
    """Everything `summary` shows under run health."""

    phases: tuple[Phase, ...]
    skipped: Counted
    nan: Counted
    loss_scale_drops: Counted
    memory: Memory
    tokens_per_s_per_gpu: float | None


def assess(
    table: pl.DataFrame,
    metrics: Metrics,
    shares: pl.DataFrame,
    device_gb: float | None,
    tokens_per_s: float | None,
    num_gpus: int | None,
) -> Health:
    """Health of one run; `shares` is the timer breakdown (`waterfall.timer_shares`)."""
    return Health(
        phases=tuple(
            Phase(row["phase"], row["median_ms"], row["share"])
            for row in shares.iter_rows(named=True)
        ),
        skipped=_counted(table, "skipped_iterations"),
        nan=_counted(table, "nan_iterations"),
        loss_scale_drops=_drops(table),
        memory=_memory(table, metrics, device_gb),
        tokens_per_s_per_gpu=tokens_per_s / num_gpus if tokens_per_s and num_gpus else None,
    )


def _counted(table: pl.DataFrame, column: str) -> Counted:
    hits = table.filter(pl.col(column).fill_null(0) > 0)
    return Counted(int(hits[column].sum()), tuple(hits["iteration"].head(LISTED).to_list()))


def _drops(table: pl.DataFrame) -> Counted:
    scale = pl.col("loss_scale")
    fell = table.filter((scale > 0) & (scale < scale.shift(1).over(pl.col("segment").fill_null(0))))
    return Counted(fell.height, tuple(fell["iteration"].head(LISTED).to_list()))


def _memory(table: pl.DataFrame, metrics: Metrics, device_gb: float | None) -> Memory:
    highest = _first_highest(
        metrics.lazy().filter(pl.col("name").is_in(["memory/max_allocated_mb"]))
    )
    best_gb, rank = None, None
    if highest.height:
        row = highest.row(0, named=True)
        best_gb, rank = row["value"] / 1024, row["rank"]
    # through an expression: `table[name]` would write a literal out (`model.compact_table`)
    logged = table.select(pl.col("mem_max_allocated_gb").max()).item()
    if isinstance(logged, (int, float)) and (best_gb is None or logged > best_gb):
        best_gb, rank = float(logged), None
    headroom = 1 - best_gb / device_gb if best_gb is not None and device_gb else None
    return Memory(best_gb, rank, device_gb, headroom)


def _first_highest(rows: pl.LazyFrame) -> pl.DataFrame:
    """The first row (in log order) of those `rows.sort("value", descending=True)` puts first
    (nulls, then nan, then the largest value), found in two streaming passes instead of a
    sort that would hold every row: one row per rank and memory line adds up."""
    value = pl.col("value")
    seen = collect(
        rows.select(nulls=value.is_null().any(), nans=value.is_nan().any(), top=value.max())
    )
    if seen["nulls"].item():
        first = value.is_null()
    elif seen["nans"].item():
        first = value.is_nan()
    else:
        top = seen["top"].item()
        if top is None:  # no rows
            return collect(rows.head(0))
        first = value == top
    return collect(rows.filter(first).head(1))
