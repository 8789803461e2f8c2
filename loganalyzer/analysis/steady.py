"""Warm-up: the first records of each segment, slowed by compilation and start-up.

Every attempt (segment) warms up again after a restart, so warm-up is found per segment.
Automatic detection takes the leading records of a segment whose step time is more than
`WARMUP_FACTOR` * the pace (the segment's median, however short the segment), capped so that
a segment that is slow throughout is left to slow-step detection instead. On a coarse clock
the excess must also be more than the clock resolves (`clocks.above`).

The `warmup` override (`--warmup N`) counts iterations from each segment's start: a record is
warm-up when any iteration it covers is among the first N of its segment, because its average
then includes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from loganalyzer.analysis._records import by_segment, first_iteration
from loganalyzer.analysis.clocks import (
    RESOLUTION,
    PaceMethod,
    above,
    coarse,
    pace_method,
    pace_of,
)

# Leading records above this multiple of the pace are warm-up. Lower than the slow-step
# factor: the tail of a warm-up is only mildly slow (Megatron's first record averages
# start-up into its interval: 1.15x in the bigscience 3D runs), and only leading records
# are considered, so ordinary noise (a few %) does not reach it.
WARMUP_FACTOR = 1.1
# Warm-up is at most this share of a segment's records (but always allowed MIN_CAP records).
MAX_WARMUP_SHARE = 0.05
MIN_CAP = 5
# Drift is measured only with at least this many steady records (two per decile).
MIN_DRIFT_RECORDS = 20


@dataclass(frozen=True)
class Warmup:
    """The warm-up of one segment: what was excluded from the steady state, and why: `fixed`
    the `--warmup` iterations given (None: detected), `peak_ratio` the slowest warm-up record
    over the pace (None: no warm-up record). `render.wording.warmup_reason` words it."""

    segment: int
    records: int
    iterations: int
    last_iteration: int | None
    time_s: float
    lost_s: float
    fixed: int | None
    peak_ratio: float | None


def warmup_flags(recs: pl.DataFrame, warmup: int | None) -> pl.Series:
    """For each timed record, whether it belongs to its segment's warm-up."""
    if warmup is None and recs["segment"].is_sorted():
        return _detected_at_heads(recs)
    return _window_flags(recs, warmup)


def _window_flags(recs: pl.DataFrame, warmup: int | None) -> pl.Series:
    """`warmup_flags` as window expressions over every record."""
    segment = by_segment(recs)
    if warmup is not None:
        segment_start = first_iteration().first().over(segment)
        flag = first_iteration() < segment_start + warmup
    else:
        count = pl.len().over(segment)
        pace = WARMUP_FACTOR * pl.col("step").median().over(segment)
        slow = above(pl.col("step"), pace, recs).cast(pl.Int8)
        leading = slow.cum_min().over(segment) == 1
        cap = pl.max_horizontal(pl.lit(MIN_CAP), (count * MAX_WARMUP_SHARE).ceil())
        flag = leading & (pl.int_range(pl.len()).over(segment) < cap)
    return recs.select(flag.alias("warmup")).to_series()


def _detected_at_heads(recs: pl.DataFrame) -> pl.Series:
    """The detected warm-up of segments in log order, judged on each segment's first records
    up to its cap only: the window expressions hold several columns as long as the table
    (+90 MB over 2 M records), this the heads' few rows. A record's pace is its segment's
    median, as in the window expressions."""
    n = pl.col("n")
    start = n.cum_sum() - n
    cap = pl.max_horizontal(pl.lit(MIN_CAP), (n * MAX_WARMUP_SHARE).ceil()).cast(pl.UInt32)
    heads = (
        recs.group_by(by_segment(recs), maintain_order=True)
        .agg(n=pl.len(), pace=pl.col("step").median())
        .select(
            piece=pl.int_range(pl.len()),
            pace="pace",
            row=pl.int_ranges(start, start + pl.min_horizontal(n, cap)),
        )
        .explode("row")
    )
    read = ["step", "interval", RESOLUTION] if coarse(recs) else ["step"]
    heads = heads.with_columns(recs.select(pl.col(read).gather(heads["row"])))
    slow = above(pl.col("step"), WARMUP_FACTOR * pl.col("pace"), heads).cast(pl.Int8)
    leading = heads.select(slow.cum_min().over("piece") == 1).to_series()
    flags = pl.repeat(False, recs.height, dtype=pl.Boolean, eager=True).alias("warmup")
    return flags.scatter(heads["row"].filter(leading), True)


def summarise_warmup(recs: pl.DataFrame, warmup: int | None, pace_s: float) -> tuple[Warmup, ...]:
    """One `Warmup` per segment; `recs` carries the `warmup` flags, `pace_s` the steady pace."""
    time = pl.col("step") * pl.col("interval")
    excess = (pl.col("step") - pace_s).clip(lower_bound=0) * pl.col("interval")
    # Only the warm-up records are grouped (a few per segment), not the whole table.
    warm = (
        recs.filter(pl.col("warmup"))
        .group_by("segment")
        .agg(
            pl.len().alias("records"),
            pl.col("interval").sum().alias("iterations"),
            pl.col("iteration").last().alias("last_iteration"),
            time.sum().alias("time_s"),
            excess.sum().alias("lost_s"),
            (pl.col("step").max() / pace_s).alias("peak_ratio"),
        )
    )
    rows = (
        recs.select(pl.col("segment").unique())
        .join(warm, on="segment", how="left")
        .with_columns(pl.col("records", "iterations").fill_null(0))
        .with_columns(pl.col("time_s", "lost_s").fill_null(0.0))
        .sort("segment")
    )
    return tuple(
        Warmup(
            segment=row["segment"],
            records=row["records"],
            iterations=row["iterations"],
            last_iteration=row["last_iteration"],
            time_s=row["time_s"],
            lost_s=row["lost_s"],
            fixed=warmup,
            peak_ratio=row["peak_ratio"],
        )
        for row in rows.iter_rows(named=True)
    )


@dataclass(frozen=True)
class Drift:
    """The steady step time of the run's first tenth of steady records against its last;
    `pace_method` says how each tenth's was taken (their median, or on a coarse clock their
    cumulative clock: `clocks.pace_of`)."""

    records: int
    first_median_s: float
    first_iterations: tuple[int, int]
    last_median_s: float
    last_iterations: tuple[int, int]
    relative_change: float
    pace_method: PaceMethod = "median"


def find_drift(steady: pl.DataFrame) -> Drift | None:
    """Compare the paces of the first and last deciles of the steady records (`iteration`,
    `interval`, `step`, and `resolution` where read from a coarse clock), in log order: their
    medians, robust to what spikes remain and checkable by hand, or on a coarse clock their
    cumulative clocks (`clocks.pace_of`). None below `MIN_DRIFT_RECORDS`."""
    if steady.height < MIN_DRIFT_RECORDS:
        return None
    tenth, method = steady.height // 10, pace_method(steady)
    head, tail = steady.head(tenth), steady.tail(tenth)
    first, first_span = _median_and_span(head, method)
    last, last_span = _median_and_span(tail, method)
    if first <= 0:  # a coarse clock that did not tick over the first tenth
        return None
    change = last / first - 1
    if method == "cumulative_clock" and abs(last - first) <= _unresolved(head) + _unresolved(tail):
        change = 0.0  # within what the clock resolves over the tenths: no evidence of drift
    return Drift(steady.height, first, first_span, last, last_span, change, method)


def _unresolved(records: pl.DataFrame) -> float:
    """The uncertainty of records' cumulative pace: the clock's resolution over their
    iterations (the differences of its readings telescope)."""
    count = int(records["interval"].sum())
    return float(records[RESOLUTION].max() or 0.0) / count if count else 0.0  # type: ignore[arg-type]


def _median_and_span(records: pl.DataFrame, method: PaceMethod) -> tuple[float, tuple[int, int]]:
    span = (int(records.head(1).select(first_iteration()).item()), int(records["iteration"][-1]))
    return pace_of(records, method) or 0.0, span
