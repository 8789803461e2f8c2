"""Time lost between attempts (restarts) and to stalls inside an attempt.

A record's timestamp is written when its interval ends, after `step * interval` seconds of
training. So the dead time before a record is the time since the previous record minus that:
between segments it is the restart's gap (start-up, checkpoint load, queueing); inside a
segment, where it exceeds both `STALL_MIN_S` and `STALL_RATIO` * the record's own duration,
it is a stall the step timer did not see (a checkpoint save outside the timed loop, a hang).

Iterations redone after a restart are those the failed attempt logged beyond the iteration
the new attempt resumed from (its first record's iteration minus its interval).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from loganalyzer.analysis._records import by_segment, first_iteration

# Timestamps are often printed to the second: a stall must exceed rounding and logging jitter.
STALL_MIN_S = 10.0
# ... and be at least as long as the work the record itself covers (twice the expected gap).
STALL_RATIO = 1.0
# Records judged for stalls at a time (see `find_stalls`).
STALL_SLICE = 1 << 18


@dataclass(frozen=True)
class Restart:
    """The move from one segment to the next (`segment` is the new one)."""

    segment: int
    after_iteration: int
    resumed_at: int
    first_iteration: int
    gap_s: float | None
    gap_note: str | None
    lost_iterations: int
    redone_s: float
    lost_s: float


@dataclass(frozen=True)
class Stall:
    """Wall-clock time inside a segment that the step times do not explain."""

    segment: int
    after_iteration: int
    iteration: int
    gap_s: float
    expected_s: float


def _seconds(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_microseconds() / 1e6


def find_restarts(recs: pl.DataFrame, pace_s: float | None) -> tuple[Restart, ...]:
    """One `Restart` per segment boundary; redone iterations cost `pace_s` each."""
    # Each segment's first and last values, then what is computed from them: an expression
    # under `first()` is computed for every record before one is taken.
    bounds = (
        recs.group_by(by_segment(recs), maintain_order=True)
        .agg(
            pl.col("iteration").last().alias("after_iteration"),
            pl.col("timestamp").last().alias("left_at"),
            pl.col("iteration", "interval", "step", "timestamp").first(),
        )
        .select(
            "segment",
            "after_iteration",
            "left_at",
            first_iteration().alias("resumed_at"),
            pl.col("iteration").alias("first_iteration"),
            pl.col("timestamp").alias("back_at"),
            (pl.col("step") * pl.col("interval")).alias("first_work_s"),
        )
    )
    gap = _seconds(pl.col("back_at") - pl.col("left_at").shift(1)) - pl.col("first_work_s")
    redone = (pl.col("after_iteration").shift(1) - pl.col("resumed_at") + 1).clip(lower_bound=0)
    rows = (
        bounds.select(
            "segment",
            pl.col("after_iteration").shift(1),
            pl.col("resumed_at") - 1,
            "first_iteration",
            gap.clip(lower_bound=0).alias("gap_s"),
            redone.alias("lost_iterations"),
        )
        .slice(1)
        .with_columns(
            pl.when(pl.col("gap_s").is_null())
            .then(pl.lit("no timestamp on the records either side of the restart"))
            .alias("gap_note"),
            (pl.col("lost_iterations") * (pace_s or 0.0)).alias("redone_s"),
        )
        .with_columns((pl.col("gap_s").fill_null(0) + pl.col("redone_s")).alias("lost_s"))
    )
    return tuple(Restart(**row) for row in rows.iter_rows(named=True))


def find_stalls(recs: pl.DataFrame) -> tuple[Stall, ...]:
    """Gaps between consecutive timestamped records of a segment beyond what they logged.

    The time expected between two records is every iteration between them at the later
    record's pace: where the log lacks records (a cut or filtered log), the iterations it
    does not show are assumed to have run at that pace rather than reported as a stall.

    Segments in log order are judged `STALL_SLICE` records at a time, each slice with the
    record before it (whose own gap its slice judges): the window expressions hold several
    columns as long as what they are given (+60 MB over 2 M records at once).
    """
    if not recs["segment"].is_sorted():
        parts = [_stall_rows(recs)]
    else:
        parts = [
            _stall_rows(recs.slice(max(start - 1, 0), STALL_SLICE + min(start, 1)))
            for start in range(0, recs.height, STALL_SLICE)
        ]
    return tuple(Stall(**row) for part in parts for row in part.iter_rows(named=True))


def _stall_rows(recs: pl.DataFrame) -> pl.DataFrame:
    """The stalls of `recs` (a segment's first record in it has none), as rows."""
    segment = by_segment(recs)
    iterations = pl.max_horizontal(
        pl.col("interval"), pl.col("iteration") - pl.col("iteration").shift(1).over(segment)
    )
    expected = pl.col("step") * iterations
    elapsed = _seconds(pl.col("timestamp") - pl.col("timestamp").shift(1)).over(segment)
    return (
        recs.with_columns(
            (elapsed - expected).alias("gap_s"),
            expected.alias("expected_s"),
            pl.col("iteration").shift(1).over(segment).alias("after_iteration"),
        )
        .filter(pl.col("gap_s") > pl.max_horizontal(STALL_MIN_S, STALL_RATIO * expected))
        .select("segment", "after_iteration", "iteration", "gap_s", "expected_s")
    )
