"""Slow steps: records far above their local baseline, and lasting slowdowns.

A record is slow when its step time exceeds the threshold * its local baseline (see
`baseline`): the threshold is `slow_factor`, raised to the run's noise floor where the run is
noisier than that. A record that averages `interval` iterations is judged by the time it lost:
it is slow when its excess is what one iteration at `slow_factor` * the baseline would have
added (the relative excess over `interval`), still above the noise floor. One iteration that
stalled is far likelier than ten that ran slowly, so such a record, where the interval is
above 1, is a `stall` of its excess time. Slow records are `periodic` when they recur at a
fixed iteration period (see `periodic`), else `spike` (or `stall`). A lasting shift of the
baseline above `slow_factor` * the pace is one `Sustained` event. Time lost is the excess over
the baseline * the iterations a record covers; inside a sustained event, the shift's share
goes to the event and only the rest to a spike there, so nothing is counted twice. On a
coarse clock, the excess is what the clock resolves of it (`clocks.relative_excess`): a
record is never slow by less than its clock's resolution, and the noise floor is that of the
run, not of the clock's ticks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from loganalyzer.analysis._records import first_iteration
from loganalyzer.analysis.baseline import noise_floor, with_baseline
from loganalyzer.analysis.clocks import relative_excess
from loganalyzer.analysis.periodic import find_periods
from loganalyzer.analysis.phases import Timers, phase_growth
from loganalyzer.model import Metrics

SlowKind = Literal["spike", "stall", "periodic"]


@dataclass(frozen=True)
class SlowStep:
    """One slow record, covering `first_iteration`..`last_iteration` (= `iteration`, the
    record's own number; `interval` iterations); `phase` is the timer that grew the most
    there, where timers exist."""

    iteration: int
    first_iteration: int
    last_iteration: int
    segment: int
    interval: int
    step_time_s: float
    baseline_s: float
    ratio: float
    lost_s: float
    kind: SlowKind
    period_iterations: int | None
    phase: str | None
    phase_delta_ms: float | None


@dataclass(frozen=True)
class Sustained:
    """A lasting slowdown: the baseline stayed above `slow_factor` * the pace, over the
    records `first_record`..`last_record` (real records), which cover the iterations
    `start_iteration`..`end_iteration` (= `last_record`); `interval` is their log interval."""

    segment: int
    start_iteration: int
    end_iteration: int
    first_record: int
    last_record: int
    interval: int
    records: int
    iterations: int
    step_time_s: float
    baseline_s: float
    factor: float
    lost_s: float


@dataclass(frozen=True)
class Periodic:
    """Slow steps recurring every `period_iterations`."""

    period_iterations: int
    occurrences: int
    first_iteration: int
    last_iteration: int
    median_ratio: float
    lost_s: float


@dataclass(frozen=True)
class SlowSteps:
    """Everything slow in a run; `threshold` is the ratio to the baseline that flags a record."""

    slow_factor: float
    threshold: float
    pace_s: float | None
    steps: tuple[SlowStep, ...]
    sustained: tuple[Sustained, ...]
    periodic: tuple[Periodic, ...]
    lost_s: float


def find_slow_steps(
    recs: pl.DataFrame,
    metrics: Metrics,
    timers: Timers,
    slow_factor: float,
    known_periods: Sequence[int] = (),
) -> tuple[SlowSteps, pl.DataFrame]:
    """The slow steps of `recs` (timed records, warm-up excluded), and `recs` labelled with
    `level`, `event` (sustained event id or null) and `slow`; `metrics` is the long table,
    `timers` the run's (`phases.read_timers`)."""
    if recs.is_empty():
        empty = SlowSteps(slow_factor, slow_factor, None, (), (), (), 0.0)
        return empty, recs.with_columns(
            level=pl.col("step"), event=pl.lit(None, pl.UInt32), slow=pl.lit(False)
        )
    framed, pace = with_baseline(recs, slow_factor)
    excess = relative_excess(pl.col("step"), pl.col("level"), framed)
    noise = noise_floor(framed, excess)  # not kept beside `framed`'s columns
    threshold = max(slow_factor - 1.0, noise)
    per_record = pl.max_horizontal((slow_factor - 1.0) / pl.col("interval"), pl.lit(noise))
    labelled = framed.with_columns(slow=excess > per_record)
    rows = _steps(labelled.filter("slow"), metrics, timers, known_periods)
    sustained = _sustained(labelled, pace)
    lost = float(rows["lost_s"].sum()) + sum(event.lost_s for event in sustained)
    result = SlowSteps(
        slow_factor=slow_factor,
        threshold=1 + threshold,
        pace_s=pace,
        steps=tuple(SlowStep(**row) for row in rows.iter_rows(named=True)),
        sustained=sustained,
        periodic=_periodic(rows),
        lost_s=lost,
    )
    return result, labelled


def _steps(
    slow: pl.DataFrame, metrics: Metrics, timers: Timers, known_periods: Sequence[int]
) -> pl.DataFrame:
    slow = slow.with_columns(find_periods(slow, known_periods))
    phases = phase_growth(metrics, slow["iteration"], timers)
    return slow.join(phases, on="iteration", how="left", maintain_order="left").select(
        "iteration",
        first_iteration().alias("first_iteration"),
        pl.col("iteration").alias("last_iteration"),
        "segment",
        "interval",
        pl.col("step").alias("step_time_s"),
        pl.col("level").alias("baseline_s"),
        (pl.col("step") / pl.col("level")).alias("ratio"),
        ((pl.col("step") - pl.col("level")) * pl.col("interval")).alias("lost_s"),
        pl.when(pl.col("period").is_not_null())
        .then(pl.lit("periodic"))
        .when(pl.col("interval") > 1)
        .then(pl.lit("stall"))
        .otherwise(pl.lit("spike"))
        .alias("kind"),
        pl.col("period").alias("period_iterations"),
        "phase",
        "phase_delta_ms",
    )


def _sustained(labelled: pl.DataFrame, pace: float) -> tuple[Sustained, ...]:
    own_share = pl.when("slow").then("level").otherwise("step")
    rows = (
        labelled.filter(pl.col("event").is_not_null())
        # in slices (events are numbered in log order): a hashed group's sum is cut between
        # polars' threads, and its last digits would depend on the machine's cores
        .group_by(pl.col("event").set_sorted(), maintain_order=True)
        .agg(
            pl.col("segment").first(),
            first_iteration().first().alias("start_iteration"),
            pl.col("iteration").last().alias("end_iteration"),
            pl.col("iteration").first().alias("first_record"),
            pl.col("iteration").last().alias("last_record"),
            pl.col("interval").median().cast(pl.Int64).alias("interval"),
            pl.len().alias("records"),
            pl.col("interval").sum().alias("iterations"),
            pl.col("step").median().alias("step_time_s"),
            ((own_share - pace) * pl.col("interval")).sum().alias("lost_s"),
        )
        .drop("event")
    )
    return tuple(
        Sustained(baseline_s=pace, factor=row["step_time_s"] / pace, **row)
        for row in rows.iter_rows(named=True)
    )


def _periodic(steps: pl.DataFrame) -> tuple[Periodic, ...]:
    rows = (
        steps.filter(pl.col("period_iterations").is_not_null())
        .group_by("period_iterations")
        .agg(
            pl.len().alias("occurrences"),
            pl.col("iteration").min().alias("first_iteration"),
            pl.col("iteration").max().alias("last_iteration"),
            pl.col("ratio").median().alias("median_ratio"),
            pl.col("lost_s").sum(),
        )
        .sort("period_iterations")
    )
    return tuple(Periodic(**row) for row in rows.iter_rows(named=True))
