"""The analysis layer: how a run spent its time, from its per-iteration and metrics tables.

`analyse` is the one entry point; `verdicts.judge` turns its result into verdicts. Steps, each
in its own module: warm-up (`steady`), the local baseline and sustained slowdowns
(`baseline`), slow steps and their kinds (`slow_steps`, `periodic`, `phases`), restarts and
stalls (`restarts`), per-rank spread (`stragglers`), the time budget (`accounting`) and what
the records break of the invariants (`invariants`: timestamps that contradict the step times
are set aside before the restarts and stalls read them). All
results are frozen dataclasses, ready for the JSON and HTML renderers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from loganalyzer.analysis._records import contiguous, rejoined, timed_records
from loganalyzer.analysis.accounting import TimeAccounting, account
from loganalyzer.analysis.clocks import (
    RESOLUTION,
    PaceMethod,
    SourceClock,
    coarse,
    pace_method,
    pace_of,
    resolution_of,
    source_clocks,
)
from loganalyzer.analysis.invariants import SegmentCheck, check_segments, set_aside
from loganalyzer.analysis.longtable import LongTable
from loganalyzer.analysis.periodic import stated_periods
from loganalyzer.analysis.restarts import Restart, Stall, find_restarts, find_stalls
from loganalyzer.analysis.slow_steps import SlowSteps, find_slow_steps
from loganalyzer.analysis.steady import Drift, Warmup, find_drift, summarise_warmup, warmup_flags
from loganalyzer.analysis.stragglers import RankSpread, find_stragglers
from loganalyzer.model import Metrics

__all__ = ["Analysis", "SourceClock", "StepTimeStats", "analyse", "timed_records"]


@dataclass(frozen=True)
class StepTimeStats:
    """`median` is the steady pace (warm-up and slow records excluded, over `steady_records`),
    taken as `pace_method` says: their median step time, or, where some were read from a
    coarse clock, their total time over their iterations (`clocks.pace_of`); `mean`, `p90`
    (linear interpolation), `min` and `max` are over all timed records."""

    median: float | None
    steady_records: int
    mean: float | None
    p90: float | None
    min: float | None
    max: float | None
    pace_method: PaceMethod = "median"


@dataclass(frozen=True)
class Analysis:
    """Everything the analysis found in one run, verdicts aside. `steady_rows` holds
    the rows of the per-iteration table the steady pace is the median of, so that a figure
    taken beside it (the framework's own TFLOPS) is taken over the same records (by
    position: a join on (segment, iteration) held about 90 MB over 2 M records); `long` is
    the run's long table with what was read from it, for the steps after the analysis
    (causes, budget, waterfall) to read it no second time. `clocks` are the coarse clocks
    the step times were read from (stated by a source, or inferred from its records)."""

    records: int
    timed_records: int
    iterations: int
    segments: int
    first_iteration: int | None
    last_iteration: int | None
    step_time_s: StepTimeStats
    warmup: tuple[Warmup, ...]
    drift: Drift | None
    slow: SlowSteps
    restarts: tuple[Restart, ...]
    stalls: tuple[Stall, ...]
    stragglers: tuple[RankSpread, ...]
    time: TimeAccounting
    checks: SegmentCheck
    steady_rows: pl.Series = field(compare=False)
    long: LongTable = field(compare=False, repr=False)
    clocks: tuple[SourceClock, ...] = ()


def analyse(
    table: pl.DataFrame,
    metrics: Metrics,
    *,
    warmup: int | None = None,
    slow_factor: float = 1.5,
    configured_periods: Sequence[int] = (),
    clocks: Mapping[str, float] | None = None,
) -> Analysis:
    """Analyse one run. `warmup` (iterations from each segment's start) replaces the automatic
    warm-up detection; `slow_factor` is the step-time ratio to the baseline that makes a step
    slow; `configured_periods` are the save and evaluation intervals the run's config states;
    `clocks` the resolution (seconds) of the coarse clocks sources state, by the path the
    records' `source` names (`SourceInfo.clock_resolution_s`); others may be inferred."""
    # the long table's passes first, before the per-iteration columns are copied: their
    # working memory then never adds to theirs
    long = LongTable(metrics, table)
    stragglers = find_stragglers(metrics)
    timers = long.timers
    known = stated_periods(configured_periods, list(long.events.saves))
    # `first` is computed where it is read (`first_iteration`), and the time stamps are taken
    # once the slow steps' working columns are freed: neither is held at the peak.
    found_clocks = source_clocks(table, clocks or {})
    resolution = resolution_of(found_clocks)  # None (no column) when every clock is fine
    recs = timed_records(
        table, ["segment", "iteration", "interval", "step"], positions=True, resolution=resolution
    )
    recs = contiguous(recs)  # one copy of the few columns read, each in one piece
    # a Series' sum: an expression's cuts a long column between polars' threads, and its last
    # digits would depend on the machine's cores
    logged_s = float(recs.select(pl.col("step") * pl.col("interval")).to_series().sum())
    mean, p90, fastest, slowest = _spread(recs["step"])
    recs = recs.with_columns(warmup_flags(recs, warmup))
    # The records are held once while slow steps are found: as the warm-up records (each
    # segment's first few) and the rest, which the slow-step pass labels, and taken back
    # whole from those once its baseline columns are freed.
    columns, warming = recs.columns, recs.filter("warmup")
    work = recs.filter(~pl.col("warmup"))
    del recs
    slow, labelled = find_slow_steps(work, metrics, timers, slow_factor, known)
    del work
    # only the columns read (a filter copies every column it is given), read at once: of the
    # steady records only their rows are held through the steps below
    read = ["row", "iteration", "interval", "step", *([RESOLUTION] if coarse(labelled) else [])]
    steady = labelled.select(read).filter(~labelled["slow"] & labelled["event"].is_null())
    method = pace_method(steady)
    median = pace_of(steady, method)
    drift, steady_records = find_drift(steady), steady.height
    steady_rows = steady.get_column("row")
    del steady
    rest = labelled.select(columns)
    del labelled  # its baseline columns, before the steps below add their own
    recs = rejoined(warming, rest)
    del rest
    recs = contiguous(recs)
    # through an expression: `get_column` would write a literal out in the table for good
    recs = recs.hstack(table.select(pl.col("timestamp").gather(recs["row"])))
    # a segment whose stamps contradict its step times keeps them out of every step below
    checks = check_segments(recs, table)
    recs = set_aside(recs, checks.unstamped)
    pace = median if median is not None else _float(recs["step"].median()) or 0.0
    warm = summarise_warmup(recs, warmup, pace)
    restarts = find_restarts(recs, pace)
    stalls = find_stalls(recs)
    return Analysis(
        records=table.height,
        timed_records=recs.height,
        iterations=int(recs.select(pl.col("interval").sum()).item()),
        segments=table["segment"].n_unique(),
        first_iteration=table["iteration"].first(),  # type: ignore[arg-type]
        last_iteration=table["iteration"].last(),  # type: ignore[arg-type]
        step_time_s=StepTimeStats(
            median=median,
            steady_records=steady_records,
            mean=mean,
            p90=p90,
            min=fastest,
            max=slowest,
            pace_method=method,
        ),
        warmup=warm,
        drift=drift,
        slow=slow,
        restarts=restarts,
        stalls=stalls,
        stragglers=stragglers,
        time=account(logged_s, warm, slow, restarts, stalls),
        checks=checks,
        steady_rows=steady_rows,
        long=long,
        clocks=found_clocks,
    )


def _spread(step: pl.Series) -> tuple[float | None, ...]:
    """Mean, 90th percentile (linear), min and max of the step times."""
    return tuple(
        _float(value)
        for value in (step.mean(), step.quantile(0.9, "linear"), step.min(), step.max())
    )


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
