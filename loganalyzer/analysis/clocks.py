"""Clocks with a resolution: what a coarse clock lets the analysis say about a step time.

A source's step times may be differences of a clock that ticks coarsely: tqdm's elapsed
time prints whole seconds, some logs time-stamp to the second. A record covering `interval`
iterations read from a clock of resolution r then has an uncertainty of r on its total and
r / interval on its step time. Over a 10-step interval a true 0.84 s step reads 0.8 or
0.9 s: the median of those is 5 % off, and every 0.9 is 12 % above a 0.8 baseline. At a
steady pace the readings are the two ticks either side of it, and a baseline taken as
their median is one of them or between the two: a reading is never more than r / interval
above it. So, in one rule:

- an excess over the baseline counts only beyond what the clock cannot resolve,
  `r / interval`: up to that it is not evidence of a slow step, a stall, a periodic
  slowdown or warm-up (`resolved`);
- the steady pace of such records is taken from the cumulative clock they were read from,
  total time over total iterations, whose error is r over all the iterations summed (the
  differences telescope), not from the median of quantised differences (`pace_of`).

A source states its clock (`SourceInfo.clock_resolution_s`, as the HF Trainer parser does
for tqdm's elapsed time); where none is stated, a whole-second clock is inferred when the
data shows one (`source_clocks`). A source with a fine clock gets no column and the same
expressions as before, to the last digit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import polars as pl

# The resolution inferred from the data: whole seconds (logs time-stamped to the second,
# elapsed times printed as H:MM:SS).
INFERRED_RESOLUTION_S = 1.0
# Fewer records than this are no evidence of a clock's resolution.
MIN_INFER_RECORDS = 10
# A constant pace between two ticks reads as the two neighbouring whole seconds, interleaved
# (8.4 s reads 8, 8, 9, 8, 9, ...): the evidence is consecutive records one second apart, at
# least this many and this share of the records. A few slow records of a run timed in whole
# seconds (1 s steps, one of 2 s) or a block of them (a slowdown to 2 s) are not.
MIN_TICKS = 10
TICK_SHARE = 0.05
# How far (relative, or absolute below 1 s) a record's total may sit from a whole number of
# seconds and still be one: a step time derived as 9 s / 10 reads back as 9.000000000000002.
WHOLE_TOLERANCE = 1e-9
# Per-record resolution, in seconds (0 for a fine clock), in the analysis's working records.
RESOLUTION = "resolution"

PaceMethod = Literal["median", "cumulative_clock"]


@dataclass(frozen=True)
class SourceClock:
    """The coarse clock a source's step times were read from: `resolution_s` seconds,
    `inferred` when the source did not state it and every record's time over its interval
    (step time * interval) was a whole number of seconds, consecutive records often one
    second apart (how a pace between two ticks reads on such a clock)."""

    source: str
    resolution_s: float
    inferred: bool


def source_clocks(table: pl.DataFrame, declared: Mapping[str, float]) -> tuple[SourceClock, ...]:
    """The coarse clocks of `table`'s sources: those `declared` (source path -> resolution
    in seconds, as the source states it), and for the others, a whole-second clock where the
    data shows one.

    The sources to judge are found first among the records whose total is a whole number of
    seconds, few on a fine clock: one pass over two float columns, where a group-by of every
    record by its source's name cost 60 ms of CPU over a million records. Only a source with
    enough of them is read whole."""
    stated = [SourceClock(path, float(r), inferred=False) for path, r in declared.items() if r > 0]
    total = pl.col("step_time_s") * pl.col("interval").fill_null(1)
    whole = (total - total.round()).abs() <= WHOLE_TOLERANCE * pl.max_horizontal(
        total.abs(), pl.lit(1.0)
    )
    # zero is a reading too on such a clock (no tick over the interval)
    timed = pl.col("step_time_s").is_finite() & (pl.col("step_time_s") >= 0)
    counted = table.lazy().filter(timed & whole).group_by("source").len().collect()
    candidates = pl.Series(
        "source",
        [
            source
            for source, records in counted.iter_rows()
            if source is not None and source not in declared and records >= MIN_INFER_RECORDS
        ],
        dtype=pl.String,
    )
    if candidates.is_empty():
        return tuple(sorted(stated, key=lambda clock: clock.source))
    seconds = total.round()
    found = (
        table.lazy()
        .filter(timed & pl.col("source").is_in(candidates.implode()))
        .group_by("source")
        .agg(
            records=pl.len(),
            whole=whole.all(),
            ticks=((seconds - seconds.shift(1)).abs() == 1).sum(),
        )
        .filter(
            pl.col("whole")
            & (pl.col("ticks") >= pl.max_horizontal(MIN_TICKS, TICK_SHARE * pl.col("records")))
        )
        .collect()
    )
    inferred = [
        SourceClock(source, INFERRED_RESOLUTION_S, inferred=True) for source in found["source"]
    ]
    return tuple(sorted([*stated, *inferred], key=lambda clock: clock.source))


def resolution_of(clocks: tuple[SourceClock, ...]) -> pl.Expr | None:
    """Each record's clock resolution in seconds (0.0 on a fine clock), from its `source`;
    None when no source has a coarse clock (no column at all)."""
    if not clocks:
        return None
    mapping = {clock.source: clock.resolution_s for clock in clocks}
    return (
        pl.col("source")
        .replace_strict(mapping, default=0.0, return_dtype=pl.Float64)
        .fill_null(0.0)
        .alias(RESOLUTION)
    )


def coarse(frame: pl.DataFrame) -> bool:
    """Whether `frame`'s records carry clock resolutions (some coarse source was read)."""
    return RESOLUTION in frame.columns


def unresolved() -> pl.Expr:
    """The step-time excess a record's clock cannot resolve: r / interval (a baseline read
    from the same clock at a steady pace lies within the two ticks the readings take)."""
    return pl.col(RESOLUTION) / pl.col("interval")


def resolved(excess_s: pl.Expr) -> pl.Expr:
    """A step-time difference (seconds per iteration) less what the clock cannot resolve,
    toward zero: zero when it is within the clock's uncertainty."""
    margin = unresolved()
    return (
        pl.when(excess_s > margin)
        .then(excess_s - margin)
        .when(excess_s < -margin)
        .then(excess_s + margin)
        .otherwise(0.0)
    )


def above(value: pl.Expr, bound: pl.Expr, frame: pl.DataFrame) -> pl.Expr:
    """Whether a step time (or a baseline of them) is above `bound` by more than its clock
    can resolve: `value > bound` on a fine clock."""
    if not coarse(frame):
        return value > bound
    return value - unresolved() > bound


def relative_excess(step: pl.Expr, level: pl.Expr, frame: pl.DataFrame) -> pl.Expr:
    """A record's excess over its baseline, relative to the baseline: `step / level - 1`
    on a fine clock (as always); on a coarse one, what the clock resolves of it (zero when
    nothing). A baseline that reads zero on a coarse clock lies below what the clock resolves
    (r / interval): the excess is taken relative to that, the least the readings allow, so a
    real stall there is still found and none is infinite; a baseline of zero on a fine clock
    gives zero (no step takes no time: nothing relative can be said)."""
    if not coarse(frame):
        return step / level - 1
    excess = resolved(step - level)
    base = pl.when(level > 0).then(level).otherwise(unresolved())
    return pl.when((excess == 0) | (base <= 0)).then(0.0).otherwise(excess / base)


def pace_method(frame: pl.DataFrame) -> PaceMethod:
    """How the pace of `frame`'s records is taken: from the cumulative clock where any was
    read from a coarse clock, else as their median."""
    if coarse(frame) and (frame[RESOLUTION].max() or 0.0) > 0:  # type: ignore[operator]
        return "cumulative_clock"
    return "median"


def pace_of(frame: pl.DataFrame, method: PaceMethod | None = None) -> float | None:
    """The pace of `frame`'s records (`step`, `interval`, and `resolution` where a coarse
    clock was read), taken by `method` (by default `pace_method`'s): their median step time,
    or total time over total iterations (the cumulative clock, exact to r over all of them:
    the differences of its readings telescope)."""
    if frame.is_empty():
        return None
    if (method or pace_method(frame)) == "cumulative_clock":
        time = float(frame.select(pl.col("step") * pl.col("interval")).to_series().sum())
        count = int(frame["interval"].sum())
        return time / count if count else None
    median = frame["step"].median()
    return None if median is None else float(median)  # type: ignore[arg-type]
