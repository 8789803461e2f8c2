"""Plain figures of a run that need no model and no hardware: iterations, step times, throughput."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class IterationStats:
    """How many records the run logged and which iterations they span."""

    logged: int
    first: int | None
    last: int | None
    segments: int


@dataclass(frozen=True)
class StepTimeStats:
    """Step time over all logged records (seconds); the steady median comes from the analysis."""

    mean: float | None
    p90: float | None
    min: float | None
    max: float | None


def iteration_stats(table: pl.DataFrame) -> IterationStats:
    if table.height == 0:
        return IterationStats(0, None, None, 0)
    return IterationStats(
        logged=table.height,
        first=_int(table["iteration"].min()),
        last=_int(table["iteration"].max()),
        segments=table["segment"].n_unique(),
    )


def step_time_stats(table: pl.DataFrame) -> StepTimeStats:
    """Mean, p90, min and max over every record that printed a step time."""
    times = table["step_time_s"].drop_nulls().drop_nans()
    if times.len() == 0:
        return StepTimeStats(None, None, None, None)
    return StepTimeStats(
        mean=_float(times.mean()),
        p90=_float(times.quantile(0.9, interpolation="linear")),
        min=_float(times.min()),
        max=_float(times.max()),
    )


def typical_global_batch(table: pl.DataFrame) -> int | None:
    """The global batch size most records ran with (batch-size ramp-up excluded), if printed."""
    sizes = table["global_batch_size"].drop_nulls()
    if sizes.len() == 0:
        return None
    return _int(sizes.mode().sort().item(-1))


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
