"""Builders of per-iteration and metrics tables for the analysis tests, with known truth."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import polars as pl

from loganalyzer.analysis.phases import Timers, read_timers
from loganalyzer.model import Metrics, conform_table, empty_metrics
from loganalyzer.spill import metric_names

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_table(
    step_times: Sequence[float],
    iterations: Sequence[int] | None = None,
    interval: int | Sequence[int] = 1,
    segment: Sequence[int] | None = None,
    timestamps: Sequence[datetime | None] | None = None,
    *,
    loss: Sequence[float | None] | None = None,
    skipped: Sequence[int] | None = None,
    nan: Sequence[int] | None = None,
) -> pl.DataFrame:
    """A per-iteration table in the contract's schema; unnamed columns are null. Iterations
    default to consecutive log intervals of one segment."""
    n = len(step_times)
    intervals = [interval] * n if isinstance(interval, int) else list(interval)
    if iterations is None:
        iterations = [sum(intervals[: k + 1]) for k in range(n)]
    columns: dict[str, object] = {
        "iteration": list(iterations),
        "interval": intervals,
        "step_time_s": list(step_times),
        "segment": list(segment) if segment is not None else [0] * n,
        "source": ["synthetic.log"] * n,
        "line": list(range(1, n + 1)),
    }
    optional = {
        "timestamp": timestamps,
        "loss": loss,
        "skipped_iterations": skipped,
        "nan_iterations": nan,
    }
    columns.update({name: list(values) for name, values in optional.items() if values is not None})
    frame = pl.DataFrame(columns, schema_overrides={"timestamp": pl.Datetime("us", "UTC")})
    return conform_table(frame)


def make_metrics(rows: Sequence[tuple[int, str, float, int | None]]) -> pl.DataFrame:
    """A long metrics table from (iteration, name, value, rank) rows."""
    if not rows:
        return empty_metrics()
    iterations, names, values, ranks = zip(*rows, strict=True)
    return pl.DataFrame(
        {
            "iteration": iterations,
            "name": names,
            "value": values,
            "source": ["synthetic.log"] * len(rows),
            "rank": ranks,
            "line": list(range(1, len(rows) + 1)),
        },
        schema=dict(empty_metrics().schema),
    )


def timer_metrics(
    iterations: Sequence[int], phases: Mapping[str, Sequence[float]], suffix: str = ""
) -> pl.DataFrame:
    """Per-phase timers (ms) named `timer/<phase><suffix>`, one value per iteration."""
    return make_metrics(
        [
            (iteration, f"timer/{phase}{suffix}", value, None)
            for phase, values in phases.items()
            for iteration, value in zip(iterations, values, strict=True)
        ]
    )


def timers_of(metrics: Metrics) -> Timers:
    """The run's timers as `analyse` reads them once (`LongTable.timers`)."""
    return read_timers(metrics, metric_names(metrics))


def cumulative_timestamps(
    step_times: Sequence[float], interval: int, gaps: Mapping[int, float] | None = None
) -> list[datetime | None]:
    """When each record would be written: after its own work, plus `gaps[k]` seconds of dead
    time just before record k."""
    gaps = gaps or {}
    elapsed = 0.0
    stamps: list[datetime | None] = []
    for k, step in enumerate(step_times):
        elapsed += gaps.get(k, 0.0) + step * interval
        stamps.append(START + timedelta(seconds=elapsed))
    return stamps


@dataclass(frozen=True)
class SyntheticRun:
    """A generated run and what was injected into it (record positions and iterations)."""

    table: pl.DataFrame
    spikes: list[int] = field(default_factory=list)
    periodic: list[int] = field(default_factory=list)
    sustained: tuple[int, int] | None = None
    restart_iteration: int | None = None


def synthetic_run(
    n: int = 2000,
    *,
    seed: int = 0,
    pace: float = 1.0,
    noise: float = 0.03,
    interval: int = 1,
    warmup: Sequence[float] = (),
    spikes: Sequence[int] = (),
    spike_factor: float = 3.0,
    period: int | None = None,
    period_factor: float = 2.5,
    sustained: tuple[int, int, float] | None = None,
    restart: tuple[int, int, float] | None = None,
    stalls: Mapping[int, float] | None = None,
    timestamps: bool = True,
) -> SyntheticRun:
    """A run of `n` records at `pace` s/iteration with uniform ±`noise` relative noise.

    `warmup` multiplies the first records of each segment; `spikes` are record positions
    slowed `spike_factor` times; `period` slows every record covering a multiple of `period`
    iterations; `sustained` = (first record, end record exclusive, factor); `restart` = (record
    where segment 1 starts, records redone, gap seconds); `stalls` = {record: dead seconds}.
    """
    rng = random.Random(seed)
    steps = [pace * (1 + rng.uniform(-noise, noise)) for _ in range(n)]
    redo = restart[1] if restart else 0
    start = restart[0] if restart else n
    segment = [0 if k < start else 1 for k in range(n)]
    iterations = [interval * (k + 1 - (redo if k >= start else 0)) for k in range(n)]
    for first in (0, start):
        for offset, factor in enumerate(warmup):
            if first + offset < n:
                steps[first + offset] *= factor
    periodic = []
    if period is not None:
        periodic = [k for k in range(n) if iterations[k] % period < interval and k > len(warmup)]
        for k in periodic:
            steps[k] *= period_factor
    if sustained is not None:
        for k in range(sustained[0], sustained[1]):
            steps[k] *= sustained[2]
    for k in spikes:
        steps[k] *= spike_factor
    gaps = dict(stalls or {})
    if restart:
        gaps[start] = gaps.get(start, 0.0) + restart[2]
    table = make_table(
        steps,
        iterations=iterations,
        interval=interval,
        segment=segment,
        timestamps=cumulative_timestamps(steps, interval, gaps) if timestamps else None,
    )
    return SyntheticRun(
        table=table,
        spikes=[iterations[k] for k in spikes],
        periodic=[iterations[k] for k in periodic],
        sustained=(iterations[sustained[0]], iterations[sustained[1] - 1]) if sustained else None,
        restart_iteration=iterations[start] if restart else None,
    )
