"""From a long table of logged scalars (TensorBoard events, W&B history) to the per-iteration
table and the long metrics table of the data model.

Input columns: `name`, `step` (the x-axis the framework logged against), `wall_time` (Unix
seconds, may be null), `value`, `record` (index in the source, kept as `line`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from loganalyzer.model import ITERATION_SCHEMA, conform_metrics, conform_table
from loganalyzer.parsers.metric_names import (
    AXIS_COPY,
    COLUMNS,
    SAMPLE_INDEXED_PREFIX,
    STEP_PARTS_MS,
    framework_of,
)


@dataclass
class Tables:
    """The two tables, the framework the names point to, and what was assumed or left out."""

    table: pl.DataFrame
    metrics: pl.DataFrame
    framework: str | None
    warnings: list[str] = field(default_factory=list)
    step_time_source: str | None = None


def build_tables(long: pl.DataFrame, source: str) -> Tables:
    """The per-iteration table of the mapped names and the long table of every other name."""
    warnings: list[str] = []
    names = long.get_column("name").unique().sort().to_list()
    # names are matched once each, not row by row (the column may be categorical)
    copied = [name for name in names if AXIS_COPY.search(name)]
    copies = long.filter(pl.col("name").is_in(copied))
    if copies.height:
        shown = ", ".join(sorted(copied)[:3])
        warnings.append(
            f"{source}: {copies.height} values logged a second time against another axis "
            f"({shown}, ...) are not read twice"
        )
        long = long.filter(~pl.col("name").is_in(copied))
    long, batch = _samples_to_iterations(long, names)
    if batch is not None:
        warnings.append(
            f"{source}: DeepSpeed's monitor logs against samples; iteration = samples / {batch}"
            " (the samples between its records), and the global batch size is taken as"
            f" {batch}"
        )
    long = long.with_columns(segment=_segments())
    rowed = long.filter(pl.col("name").is_in([*COLUMNS, *STEP_PARTS_MS]))
    table, step_time_source = _wide(rowed, source, batch, warnings)
    rest = long.filter(~pl.col("name").is_in(list(COLUMNS)))
    metrics = conform_metrics(
        rest.select(
            iteration="step",
            name="name",
            value="value",
            source=pl.lit(source),
            line="record",
        )
    )
    if table.height == 0:
        warnings.append(
            f"{source}: no per-iteration metric (loss, step time, learning rate, ...) was logged;"
            f" {metrics.height} values of other names are in the long table"
        )
    return Tables(table, metrics, framework_of(names), warnings, step_time_source)


def _samples_to_iterations(long: pl.DataFrame, names: list[str]) -> tuple[pl.DataFrame, int | None]:
    """DeepSpeed's monitor steps are consumed samples: turn them into iterations by the most
    common step between its records (the global batch size)."""
    indexed = pl.col("name").is_in([n for n in names if n.startswith(SAMPLE_INDEXED_PREFIX)])
    samples = long.filter(indexed).get_column("step").unique().sort()
    if samples.len() < 1:
        return long, None
    gaps = samples.diff().drop_nulls().filter(samples.diff().drop_nulls() > 0)
    batch = int(gaps.mode().min()) if gaps.len() else int(samples[0])
    if batch <= 0:
        return long, None
    return long.with_columns(
        step=pl.when(indexed).then(pl.col("step") // batch).otherwise(pl.col("step"))
    ), batch


def _segments() -> pl.Expr:
    """A restart: a name's step does not move forward. The k-th restart of every name is the
    same restart, so counting them per name numbers the segments alike for all names."""
    back = pl.col("step") <= pl.col("step").shift(1).over("name", order_by="record")
    return back.fill_null(False).cum_sum().over("name", order_by="record").cast(pl.Int32)


def _wide(
    rowed: pl.DataFrame, source: str, batch: int | None, warnings: list[str]
) -> tuple[pl.DataFrame, str | None]:
    """One row per (segment, iteration) that logged a mapped name or a step-time part."""
    if rowed.height == 0:
        return conform_table(pl.DataFrame()), None
    keys = ["segment", "step"]
    table = (
        rowed.group_by(keys, maintain_order=True)
        .agg(wall_time=pl.col("wall_time").min(), line=pl.col("record").min())
        .sort(keys)
    )
    mapped = rowed.filter(pl.col("name").is_in(list(COLUMNS)))
    if mapped.height:
        columns = sorted({COLUMNS[name][0] for name in mapped.get_column("name").unique()})
        factor = pl.col("name").replace_strict(
            {name: factor for name, (_, factor) in COLUMNS.items()}, return_dtype=pl.Float64
        )
        column = pl.col("name").replace_strict(
            {name: column for name, (column, _) in COLUMNS.items()}
        )
        values = (
            mapped.with_columns(column=column, value=pl.col("value") * factor)
            .group_by(keys)
            .agg(pl.col("value").filter(pl.col("column") == c).first().alias(c) for c in columns)
        )
        table = table.join(values, on=keys, how="left", maintain_order="left")
    table = table.with_columns(
        iteration="step",
        timestamp=pl.from_epoch(
            (pl.col("wall_time") * 1e6).round().cast(pl.Int64), "us"
        ).dt.replace_time_zone("UTC"),
        source=pl.lit(source),
    )
    step_time_source: str | None = "logged step time" if "step_time_s" in table.columns else None
    parts = rowed.filter(pl.col("name").is_in(STEP_PARTS_MS))
    if step_time_source is None and parts.height:
        summed = parts.group_by(keys).agg(
            step_time_s=pl.col("value").sum() / 1000.0, parts=pl.col("name").n_unique()
        )
        whole = summed.filter(pl.col("parts") == len(STEP_PARTS_MS)).drop("parts")
        table = table.join(whole, on=keys, how="left", maintain_order="left")
        step_time_source = "DeepSpeed monitor: forward + backward + step"
        warnings.append(
            f"{source}: step time = elapsed_time_ms_forward + _backward + _step of DeepSpeed's"
            " monitor (its iteration latency; data loading is not included)"
        )
    elif step_time_source is None and table.get_column("wall_time").null_count() < table.height:
        elapsed = pl.col("wall_time") - pl.col("wall_time").shift(1).over("segment")
        advanced = pl.col("step") - pl.col("step").shift(1).over("segment")
        table = table.with_columns(step_time_s=elapsed / advanced)
        step_time_source = "wall-time deltas between records"
        warnings.append(
            f"{source}: the run logged no step time; step time = wall time between records /"
            " iterations between them (evaluation and checkpoints in that span count too)"
        )
    if batch is not None and "global_batch_size" not in table.columns:
        table = table.with_columns(global_batch_size=pl.lit(batch, dtype=pl.Int64))
    table = table.with_columns(interval=_interval())
    keep = [c for c in table.columns if c in ITERATION_SCHEMA]
    return conform_table(table.select(keep)), step_time_source


def _interval() -> pl.Expr:
    """Iterations a record covers: the step from the segment's previous record; a segment's
    first record covers the most common step (or its own iteration number, if smaller)."""
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    first = pl.min_horizontal(typical, pl.col("iteration"))
    return pl.coalesce(step, first, pl.lit(1)).clip(lower_bound=1).cast(pl.Int64)
