"""The file-level tables: copies removed, segments and intervals, the contract's schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.model import (
    ITERATION_SCHEMA,
    ConfigValue,
    compact_table,
    conform_metrics,
    conform_table,
    single_values,
)


def first_copies(frames: list[pl.DataFrame], key: str) -> list[pl.Series]:
    """Per frame, which rows are the first of their `key` over all frames: the one copy kept
    of a line that several ranks or nodes printed."""
    first = pl.concat([f.select(key) for f in frames]).get_column(key).is_first_distinct()
    masks = []
    offset = 0
    for frame in frames:
        masks.append(first.slice(offset, frame.height))
        offset += frame.height
    return masks


@dataclass(frozen=True)
class HeldRecords:
    """A chunk's records as they are held until the whole file is read: the columns with one
    value in every record (`model.ONE_VALUE_COLUMNS`), or none (a field the format does not
    print, a launcher label or time stamp the lines lack), left out and that value kept
    instead. Each would cost 4 or 8 bytes a record until the table is built."""

    frame: pl.DataFrame
    single: dict[str, Any]  # column: its one value (None: no record filled it)


def held(records: pl.DataFrame) -> HeldRecords:
    """`records` (a chunk's, with `line` and `iteration` always filled) as held: without the
    columns the table would hold as one value (`model.single_values`)."""
    single = single_values(records)
    return HeldRecords(records.drop(single), single)


def iteration_table(
    chunks: list[HeldRecords], config: dict[str, ConfigValue], source: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-iteration table from the chunks' records (in line order, as chunks are read in
    order): copies removed, segments and intervals added, in the contract's schema; and each
    segment's first line and the total its iteration lines count to (`iteration K/ N`: the
    run's `train_iters`), as (segment, line, total).

    A segment starts at a launch, a step back of the counter, or a change of its total: a
    10-iteration benchmark and the full run after it count to different totals.

    Everything is done chunk by chunk and the chunks are concatenated without copying; only
    segments and intervals, which need the whole run, are computed on the two columns they
    read.
    """
    frames, literals = _restored(chunks)
    masks = first_copies(frames, "key")
    kept = [f if m.all() else f.filter(m) for f, m in zip(frames, masks, strict=True)]
    new_segment = (
        (pl.col("launch") != pl.col("launch").shift(1))
        | (pl.col("iteration") <= pl.col("iteration").shift(1))
        | (pl.col("total") != pl.col("total").shift(1))
    )
    log_interval = config.get("log_interval")
    counted = pl.concat(
        [f.select("line", "launch", "iteration", "total") for f in kept]
    ).with_columns(segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32))
    totals = counted.group_by("segment", maintain_order=True).agg(
        pl.col("line").first(), pl.col("total").drop_nulls().first()
    )
    derived = counted.select(
        "segment", interval=_interval(log_interval.value if log_interval else None)
    )
    del counted
    tables = []
    offset = 0
    for frame in kept:
        columns = [c for c in frame.columns if c in ITERATION_SCHEMA]
        part = frame.select(columns).hstack(derived.slice(offset, frame.height))
        tables.append(conform_table(part.with_columns(source=pl.lit(source))))
        offset += frame.height
    if not tables:
        return conform_table(pl.DataFrame()), totals
    table = pl.concat([t.drop(literals) for t in tables], rechunk=False).with_columns(
        pl.lit(value, dtype=ITERATION_SCHEMA[name]).alias(name) for name, value in literals.items()
    )
    return compact_table(table.select(list(ITERATION_SCHEMA))), totals


_VARIES = object()  # a column's values in a chunk that holds it


def _restored(chunks: list[HeldRecords]) -> tuple[list[pl.DataFrame], dict[str, Any]]:
    """The chunks' records with every column they left out, and the columns whose one value
    is the same in every chunk with records, which the table holds as that value. A column
    left out of some chunks only is given back to those as a column of its value: the
    table's pieces must all be cut alike (see `model.compact_table`)."""
    filled = [c for c in chunks if c.frame.height]
    names = set().union(*(c.single for c in filled))
    values = {name: {c.single.get(name, _VARIES) for c in filled} for name in names}
    literals = {
        name: next(c.single[name] for c in filled)
        for name, found in values.items()
        if len(found) == 1 and _VARIES not in found
    }
    frames = []
    for chunk in chunks:
        frame = chunk.frame
        back = [
            pl.repeat(value, frame.height, dtype=ITERATION_SCHEMA[name], eager=True).alias(name)
            for name, value in chunk.single.items()
            if name not in literals
        ]
        frames.append(frame.with_columns(back) if back else frame)
    return frames, literals


def long_part(frame: pl.DataFrame, previous_keys: pl.Series, source: str) -> pl.DataFrame:
    """One chunk's rows of the long table, in the contract's schema, copies removed.

    The copies several ranks print of a timer or memory line sit next to each other, so
    they are recognised within the chunk and against the chunk before it; the keys need
    not be kept for the whole file.
    """
    key = frame.get_column("copy_key")
    first = key.is_first_distinct() & ~key.is_in(previous_keys.implode())
    kept = frame if first.all() else frame.filter(first)
    return conform_metrics(kept.drop("copy_key").with_columns(source=pl.lit(source)))


def _interval(log_interval: object) -> pl.Expr:
    """Iterations each record covers: the step from the previous record, at most the log interval.

    The log interval is the `log_interval` argument when the log has it, else the segment's
    most common step, else (a segment of one record: a relaunch that died or was stopped
    after its first line) the file's. A larger step means records are missing (a cut log),
    not a longer average; a segment's first record covers the log interval (or its
    iteration number, if smaller). Only where no segment has two records is a lone record
    taken to cover every iteration up to its number.
    """
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = (
        pl.lit(log_interval, dtype=pl.Int64)
        if isinstance(log_interval, int) and log_interval > 0
        else pl.coalesce(
            step.drop_nulls().mode().min().over("segment"), step.drop_nulls().mode().min()
        )
    )
    first = pl.min_horizontal(typical, pl.col("iteration"))
    return (
        pl.coalesce(pl.min_horizontal(step, typical), first, pl.lit(1))
        .clip(lower_bound=1)
        .cast(pl.Int64)
    )


# Megatron's `--log-interval` default: where a fresh run prints its first record.
DEFAULT_LOG_INTERVAL = 100


def lone_record_warnings(table: pl.DataFrame, config: dict[str, Any], source: str) -> list[str]:
    """The assumption `_interval` makes where nothing gives the log interval (no
    `log_interval` argument, no segment of two records): a lone record covers every
    iteration up to its number, right for a fresh run's first line, far too much for a
    resumed one's (iteration 45,000 counted as 45,000 steps). Said where the record lies
    beyond Megatron's default log interval, where a fresh run's first record rarely is."""
    if "log_interval" in config or table.height == 0:
        return []
    if table.get_column("segment").n_unique() < table.height:
        return []
    widest = table.sort("interval", descending=True).row(0, named=True)
    if widest["interval"] <= DEFAULT_LOG_INTERVAL:
        return []
    return [
        f"{source}: no segment has two records and the log prints no log_interval, so a lone"
        f" record is taken to cover every iteration up to its number (iteration"
        f" {widest['iteration']:,}: {widest['interval']:,} iterations); if the run resumed"
        " there, the logged time and goodput count too many steps"
    ]


def with_reported_tflops(table: pl.DataFrame, stated: pl.DataFrame) -> pl.DataFrame:
    """`table` with the TFLOPS per GPU that lines below its iteration lines state (`stated`:
    line, value) as the records' `reported_tflops_per_gpu`, where the line itself printed
    none: each value goes to the last record above it (copies printed by several ranks,
    the first)."""
    if table.height == 0:
        return table
    records = table.select(record=pl.col("line")).drop_nulls().sort("record")
    placed = (
        stated.sort("line")
        .join_asof(records, left_on="line", right_on="record", strategy="backward")
        .drop_nulls("record")
        .unique("record", keep="first", maintain_order=True)
        .select(line="record", stated="value")
    )
    filled = table.join(placed, on="line", how="left", maintain_order="left").select(
        pl.exclude("stated", "reported_tflops_per_gpu"),
        reported_tflops_per_gpu=pl.coalesce("reported_tflops_per_gpu", "stated"),
    )
    return compact_table(filled.select(table.columns))
