"""Step records of a stdout log as the per-iteration table: one copy of each record, launches
as segments, intervals, and step times from the logger's clock where the line prints none.

Shared by the parsers of loops that print one line per logged step with a logger timestamp
(torchtitan, nanotron): the frames are polars, no row loops.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.model import conform_table
from loganalyzer.textlog import timestamps

# What a step record may carry besides the bookkeeping columns (the data model's names).
VALUE_COLUMNS = (
    "step_time_s",
    "loss",
    "lr",
    "grad_norm",
    "global_batch_size",
    "tokens_per_s",
    "reported_tflops_per_gpu",
    "mem_max_allocated_gb",
)


def one_copy(records: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Of each step's records, those of the lowest rank a launcher label names (unlabelled
    lines kept), and of consecutive records of one step (the copies every rank prints
    without a label), the first; with how many records were dropped as copies. `records`
    is in line order."""
    before = records.height
    lowest = pl.col("rank").min().over("iteration")
    records = records.filter(pl.col("rank").is_null() | (pl.col("rank") == lowest))
    copy = pl.col("iteration") == pl.col("iteration").shift(1)
    records = records.filter(~copy.fill_null(False))
    return records, before - records.height


def step_table(records: pl.DataFrame, source: str, clock_times: bool) -> pl.DataFrame:
    """The per-iteration table of one copy of each record (line, rank, iteration, stamp,
    launch, values): a new segment where the step counter does not increase or a launch
    starts; `interval` the steps since the record before (for a segment's first record the
    typical one, at most its step number); with `clock_times`, `step_time_s` the seconds
    between consecutive records' timestamps over the steps between them (a step line is
    printed as its step ends)."""
    if records.height == 0:
        return conform_table(pl.DataFrame())
    records = records.sort("line")
    new_segment = (pl.col("iteration") <= pl.col("iteration").shift(1)) | (
        pl.col("launch") != pl.col("launch").shift(1)
    )
    records = records.with_columns(
        segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32),
        timestamp=timestamps(records.get_column("stamp")),
    )
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    interval = pl.coalesce(step, pl.min_horizontal(typical, pl.col("iteration")), pl.lit(1))
    records = records.with_columns(interval=interval.clip(lower_bound=1).cast(pl.Int64))
    if clock_times:
        seconds = pl.col("timestamp").diff().over("segment").dt.total_microseconds() / 1e6
        records = records.with_columns(
            step_time_s=pl.when(step > 0).then(seconds / step).otherwise(None)
        )
    keep = ["iteration", "interval", "timestamp", "segment", "rank", "line"]
    keep += [c for c in VALUE_COLUMNS if c in records.columns]
    return conform_table(records.select(keep).with_columns(source=pl.lit(source)))


def launches(records: pl.DataFrame, starts: pl.DataFrame) -> pl.DataFrame:
    """`records` with `launch`: how many start lines (`starts`: line) came before each."""
    numbered = starts.select("line").unique().sort("line").with_row_index("launch", offset=1)
    return (
        records.sort("line")
        .join_asof(numbered.with_columns(pl.col("launch").cast(pl.Int64)), on="line")
        .with_columns(pl.col("launch").fill_null(0))
    )
