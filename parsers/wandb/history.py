"""W&B history and system metrics as the scalar table `build_tables` reads: the iteration
taken from the run's step metric (HF's `train/global_step`, ...) or else W&B's `_step`."""

from __future__ import annotations

from typing import Any

import polars as pl

from loganalyzer.model import conform_metrics
from loganalyzer.parsers.metric_names import STEP_KEYS

LONG_SCHEMA = {
    "name": pl.String(),
    "step": pl.Int64(),
    "wall_time": pl.Float64(),
    "value": pl.Float64(),
    "record": pl.Int64(),
}


def history_frame(
    columns: dict[str, list[Any]], source: str
) -> tuple[pl.DataFrame, str, list[str]]:
    """The long history with `step` the iteration; the name the iteration came from."""
    long = pl.DataFrame(columns, schema=LONG_SCHEMA)
    names = set(long.get_column("name").unique().to_list())
    axis = next((key for key in STEP_KEYS if key in names), "_step")
    warnings: list[str] = []
    if axis == "_step":
        if long.height:
            warnings.append(
                f"{source}: no step metric logged; iteration = W&B's `_step` (the count of"
                " wandb.log calls)"
            )
        return long.filter(pl.col("name") != "_step"), axis, warnings
    per_record = long.filter(pl.col("name") == axis).select(
        "record", iteration=pl.col("value").cast(pl.Int64)
    )
    long = long.join(per_record, on="record", how="left", maintain_order="left")
    missing = long.filter(pl.col("iteration").is_null()).get_column("record").n_unique()
    if missing:
        warnings.append(
            f"{source}: {missing} history rows lack `{axis}`; their iteration is W&B's `_step`"
        )
    long = long.with_columns(step=pl.coalesce("iteration", "step")).drop("iteration")
    return long.filter(~pl.col("name").is_in([axis, "_step"])), axis, warnings


def system_metrics(
    system: dict[str, list[Any]], history: pl.DataFrame, source: str
) -> pl.DataFrame:
    """System metrics (sampled by time) in the long table, each tied to the last iteration
    logged before it."""
    frame = pl.DataFrame(
        system,
        schema={
            "name": pl.String(),
            "wall_time": pl.Float64(),
            "value": pl.Float64(),
            "record": pl.Int64(),
        },
    )
    if frame.height == 0:
        return conform_metrics(pl.DataFrame())
    steps = (
        history.filter(pl.col("wall_time").is_not_null())
        .group_by("step")
        .agg(wall_time=pl.col("wall_time").min())
        .sort("wall_time")
    )
    placed = frame.sort("wall_time").join_asof(steps, on="wall_time", strategy="backward")
    return conform_metrics(
        placed.sort("record").select(
            iteration="step", name="name", value="value", source=pl.lit(source), line="record"
        )
    )
