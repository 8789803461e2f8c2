"""The pace a record is judged against, and the lasting shifts of that pace.

The local baseline is a centred rolling median of the step time over `WINDOW` records within
each segment (warm-up excluded), because:
- a median ignores whatever fills less than half of its window, so the spikes and periodic
  stalls being looked for do not raise their own baseline, as they would a mean or an EWMA;
- a median filter preserves edges: at a lasting change of pace it follows the step at once
  instead of smearing it, so a sustained slowdown is found with its real start and end, and a
  spike inside it is measured against the shifted level;
- the analysis runs after the fact, so a centred window (no lag at a shift) beats a trailing one.
A burst shorter than `MIN_SUSTAINED` records therefore stays out of the baseline and shows up
as spikes; a longer one moves the baseline, and where the baseline sits above `slow_factor` *
the run's pace it is one sustained event, kept out of the pace itself.

The run's pace is the median step time of all non-warm-up records: robust as long as the run
spends less than half its records slowed down. On a coarse clock (`clocks`), the baseline and
the records are each uncertain by the clock's resolution over the interval: a shift counts
only beyond that.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.analysis._records import by_segment
from loganalyzer.analysis.clocks import above

WINDOW = 21
MIN_SUSTAINED = WINDOW // 2 + 1
# A step is slow only if it also sits this many robust standard deviations (1.4826 * MAD of the
# relative residuals) above its baseline: a threshold inside the run's own noise flags noise.
NOISE_SIGMAS = 5.0
MAD_TO_SIGMA = 1.4826


def with_baseline(recs: pl.DataFrame, slow_factor: float) -> tuple[pl.DataFrame, float]:
    """`recs` with `level` (the local baseline) and `event` (the id of the sustained slowdown a
    record belongs to, else null), and the run's pace in seconds."""
    pace = float(recs["step"].median())  # type: ignore[arg-type]
    shifted = above(pl.col("level"), pl.lit(slow_factor * pace), recs)
    # Runs of records on one side of the shift threshold, numbered in log order (so sorted).
    run = pl.struct("segment", shifted).rle_id().set_sorted()
    sustained = shifted & (pl.len().over("_run") >= MIN_SUSTAINED)
    # A spike next to a shift can drag the median across its edge: an event starts and ends
    # with records that are slow themselves.
    slow = above(pl.col("step"), pl.lit(slow_factor * pace), recs)
    core = slow.cum_max().over("_run") & slow.cum_max(reverse=True).over("_run")
    framed = (
        recs.with_columns(centred_median(recs, "step").alias("level"))
        .with_columns(run.alias("_run"))
        .with_columns(pl.when(sustained & core).then("_run").alias("event"))
        .drop("_run")
    )
    return framed, pace


def centred_median(frame: pl.DataFrame, column: str) -> pl.Series:
    """The rolling median of `column` over `WINDOW` records centred on each, within each
    segment, windows truncated at the segment's ends: polars' `center=True` per segment.

    A window that stays inside its segment is one trailing median over the whole column,
    shifted back by half a window (one pass, no grouping). Only the records within half a
    window of a segment's end need their window cut short: they are recomputed per segment
    on the segment's first and last `2 * half` records (the whole segment when it is short),
    which hold all of their windows. Segments out of log order (not sorted) are computed
    per segment throughout."""
    if not frame["segment"].is_sorted():
        return frame.select(_truncated(pl.col(column)).over("segment")).to_series()
    half = WINDOW // 2
    # Each segment's bounds (a few rows), then the pieces that hold its edge records' windows.
    lengths = frame.group_by(by_segment(frame), maintain_order=True).len()["len"]
    segments = pl.DataFrame({"start": lengths.cum_sum() - lengths, "length": lengths})
    short = pl.col("length") <= 4 * half
    head = segments.select(
        "start",
        "length",
        pl.col("start").alias("lo"),
        (pl.col("start") + pl.when(short).then("length").otherwise(2 * half)).alias("hi"),
    )
    tail = segments.filter(~short).select(
        "start",
        "length",
        (pl.col("start") + pl.col("length") - 2 * half).alias("lo"),
        (pl.col("start") + pl.col("length")).alias("hi"),
    )
    pieces = (
        pl.concat([head, tail])
        .with_row_index("_piece")
        .select("_piece", "start", "length", pl.int_ranges("lo", "hi").alias("_row"))
        .explode("_row")
    )
    position = pl.col("_row") - pl.col("start")
    edges = (
        pieces.with_columns(frame[column].gather(pieces["_row"]).alias("_value"))
        .with_columns(_truncated(pl.col("_value")).over("_piece").alias("_median"))
        .filter((position < half) | (position >= pl.col("length") - half))
    )
    inside = frame.select(
        pl.col(column).rolling_median(WINDOW, min_samples=1).shift(-half).alias(column)
    ).to_series()
    return inside.scatter(edges["_row"], edges["_median"])


def _truncated(values: pl.Expr) -> pl.Expr:
    """The centred rolling median of `values` with windows truncated at both ends, built from
    two trailing medians (the second over the reversed values, for the last half window; where
    the values are fewer than a window, their median): the same numbers as polars'
    `center=True`, in about half the time."""
    half = WINDOW // 2
    ahead = values.rolling_median(WINDOW, min_samples=1).shift(-half)
    behind = values.reverse().rolling_median(WINDOW, min_samples=1).reverse().shift(half)
    return ahead.fill_null(behind).fill_null(values.median())


def noise_floor(frame: pl.DataFrame, relative_excess: pl.Expr) -> float:
    """`NOISE_SIGMAS` robust standard deviations of the relative excesses of `frame`'s
    records. Each of the two medians computes them again rather than holding them beside
    its own copies (8 bytes a record each, at the analysis's peak on a long run)."""
    median = frame.select(relative_excess.median()).item()
    if median is None:
        return 0.0
    mad = frame.select((relative_excess - median).abs().median()).item()
    return NOISE_SIGMAS * MAD_TO_SIGMA * float(mad) if mad is not None else 0.0
