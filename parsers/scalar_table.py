"""From a long table of logged scalars (TensorBoard events, W&B history) to the per-iteration
table and the long metrics table of the data model.

Input columns: `name`, `step` (the x-axis the framework logged against), `wall_time` (Unix
seconds, may be null), `value`, `record` (index in the source, kept as `line`).

A long table can be given whole (`build_tables`) or in batches in record order
(`TableBuilder`): each batch is reduced at once to its rows of the per-iteration table and
of the metrics table, so a file of many millions of scalars is never held as one long table.
Restart counts and the last iteration of a batch carry over to the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import polars as pl

from loganalyzer.model import ITERATION_SCHEMA, conform_metrics, conform_table
from loganalyzer.parsers.metric_names import (
    AXIS_COPY,
    COLUMNS,
    SAMPLE_INDEXED_PREFIX,
    STEP_PARTS_MS,
    framework_of,
)

KEYS = ["segment", "step"]
ROWED = [*COLUMNS, *STEP_PARTS_MS]


@dataclass
class Tables:
    """The two tables, the framework the names point to, and what was assumed or left out."""

    table: pl.DataFrame
    metrics: pl.DataFrame
    framework: str | None
    warnings: list[str] = field(default_factory=list)
    step_time_source: str | None = None


class Unknown(Enum):
    """The sample batch of a builder that has not seen the whole input yet."""

    BATCH = "unknown"


class NeedsSampleBatch(Exception):
    """A builder made without the sample batch met a name logged against samples (DeepSpeed's
    monitor): the batch is a property of the whole input (`sample_batch`), to be found first."""


def build_tables(long: pl.DataFrame, source: str) -> Tables:
    """The per-iteration table of the mapped names and the long table of every other name."""
    builder = TableBuilder(source, sample_batch(sample_steps(long)))
    builder.add(long)
    return builder.finish()


def sample_steps(long: pl.DataFrame) -> pl.Series:
    """The distinct steps of the names logged against samples (axis copies left out)."""
    names = long.get_column("name").unique().to_list()
    indexed = [n for n in names if n.startswith(SAMPLE_INDEXED_PREFIX) and not AXIS_COPY.search(n)]
    return long.filter(pl.col("name").is_in(indexed)).get_column("step").unique()


def sample_batch(steps: pl.Series) -> int | None:
    """DeepSpeed's monitor steps are consumed samples: the most common step between its
    records is the global batch size (iteration = samples / batch); None without such
    names."""
    samples = steps.unique().sort()
    if samples.len() < 1:
        return None
    gaps = samples.diff().drop_nulls().filter(samples.diff().drop_nulls() > 0)
    batch = int(gaps.mode().min()) if gaps.len() else int(samples[0])
    return batch if batch > 0 else None


class TableBuilder:
    """Both tables from batches of the long table given in record order (`add`), then
    `finish`. With `sample_batch` left unknown, `add` raises NeedsSampleBatch at the first
    name logged against samples."""

    def __init__(self, source: str, sample_batch: int | Unknown | None = Unknown.BATCH) -> None:
        self.source = source
        self.batch = sample_batch
        self.names: set[str] = set()
        self.copied: set[str] = set()
        self.copies = 0
        self.columns: set[str] = set()
        self.partials: list[pl.DataFrame] = []  # per batch: one row per (segment, step)
        self.last: pl.DataFrame | None = None  # the latest batch's last row, merged onward
        self.parts: list[pl.DataFrame] = []  # DeepSpeed's step-time parts, per batch
        self.metrics: list[pl.DataFrame] = []
        self.carry: pl.DataFrame | None = None  # per name: last step, restarts so far

    def add(self, long: pl.DataFrame) -> None:
        """Reduce one batch of the long table (record order, after the batches before)."""
        if long.height == 0:
            return
        names = long.get_column("name").unique().to_list()
        self.names.update(names)
        copied = [name for name in names if AXIS_COPY.search(name)]
        if copied:
            copies = long.filter(pl.col("name").is_in(copied))
            self.copies += copies.height
            self.copied.update(copied)
            long = long.filter(~pl.col("name").is_in(copied))
        indexed = [n for n in names if n.startswith(SAMPLE_INDEXED_PREFIX) and n not in copied]
        if indexed and self.batch is Unknown.BATCH:
            raise NeedsSampleBatch(indexed[0])
        if indexed and isinstance(self.batch, int):
            in_samples = pl.col("name").is_in(indexed)
            long = long.with_columns(
                step=pl.when(in_samples).then(pl.col("step") // self.batch).otherwise("step")
            )
        rowed = long.filter(pl.col("name").is_in(ROWED))
        if rowed.height:
            self._add_rowed(self._segmented(rowed))
        rest = long.filter(~pl.col("name").is_in(list(COLUMNS)))
        if rest.height or not self.metrics:
            self.metrics.append(
                conform_metrics(
                    rest.select(
                        iteration="step",
                        name="name",
                        value="value",
                        source=pl.lit(self.source),
                        line="record",
                    )
                )
            )

    def _segmented(self, rowed: pl.DataFrame) -> pl.DataFrame:
        """A restart: a name's step does not move forward. The k-th restart of every name is
        the same restart, so counting them per name numbers the segments alike for all
        names; each name's count and last step carry over from the batches before."""
        if self.carry is None:
            rowed = rowed.with_columns(
                last_step=pl.lit(None, pl.Int64), restarts=pl.lit(None, pl.Int64)
            )
        else:
            rowed = rowed.join(self.carry, on="name", how="left", maintain_order="left")
        rowed = rowed.with_columns(
            previous=pl.when(pl.int_range(pl.len()).over("name") == 0)
            .then("last_step")
            .otherwise(pl.col("step").shift(1).over("name"))
        )
        back = (pl.col("step") <= pl.col("previous")).fill_null(False)
        restarts = back.cum_sum().over("name") + pl.col("restarts").fill_null(0)
        rowed = rowed.with_columns(segment=restarts.cast(pl.Int32)).drop(
            "previous", "last_step", "restarts"
        )
        latest = rowed.group_by("name").agg(
            last_step=pl.col("step").last(), restarts=pl.col("segment").last().cast(pl.Int64)
        )
        if self.carry is not None:
            kept = self.carry.filter(~pl.col("name").is_in(latest.get_column("name").implode()))
            latest = pl.concat([kept, latest])
        self.carry = latest
        return rowed

    def _add_rowed(self, rowed: pl.DataFrame) -> None:
        """This batch's rows of the per-iteration table (sorted by segment and step); the
        last one is held back, as the next batch may log more of its iteration."""
        partial = (
            rowed.group_by(KEYS, maintain_order=True)
            .agg(wall_time=pl.col("wall_time").min(), line=pl.col("record").min())
            .sort(KEYS)
        )
        mapped = rowed.filter(pl.col("name").is_in(list(COLUMNS)))
        if mapped.height:
            columns = sorted({COLUMNS[name][0] for name in mapped.get_column("name").unique()})
            self.columns.update(columns)
            factor = pl.col("name").replace_strict(
                {name: factor for name, (_, factor) in COLUMNS.items()}, return_dtype=pl.Float64
            )
            column = pl.col("name").replace_strict(
                {name: column for name, (column, _) in COLUMNS.items()}
            )
            values = (
                mapped.with_columns(column=column, value=pl.col("value") * factor)
                .group_by(KEYS)
                .agg(
                    pl.col("value").filter(pl.col("column") == c).first().alias(c) for c in columns
                )
            )
            partial = partial.join(values, on=KEYS, how="left", maintain_order="left")
        parts = rowed.filter(pl.col("name").is_in(STEP_PARTS_MS))
        if parts.height:
            self.parts.append(
                parts.group_by(KEYS).agg(
                    pl.col("value").sum().alias("step_time_ms"),
                    *((pl.col("name") == name).any().alias(name) for name in STEP_PARTS_MS),
                )
            )
        if self.last is not None:
            if self.last.select(KEYS).row(0) == partial.select(KEYS).row(0):
                merged = _merge(pl.concat([self.last, partial.head(1)], how="diagonal_relaxed"))
                partial = pl.concat([merged, partial.slice(1)], how="diagonal_relaxed")
            else:
                self.partials.append(self.last)
        self.partials.append(partial.head(-1))
        self.last = partial.tail(1)

    def finish(self) -> Tables:
        """Both tables, and the warnings about what was assumed or left out."""
        warnings: list[str] = []
        source = self.source
        if self.copies:
            shown = ", ".join(sorted(self.copied)[:3])
            warnings.append(
                f"{source}: {self.copies} values logged a second time against another axis "
                f"({shown}, ...) are not read twice"
            )
        batch = self.batch if isinstance(self.batch, int) else None
        if batch is not None:
            warnings.append(
                f"{source}: DeepSpeed's monitor logs against samples; iteration = samples /"
                f" {batch} (the samples between its records), and the global batch size is"
                f" taken as {batch}"
            )
        table, step_time_source = self._table(batch, warnings)
        metrics = (
            pl.concat(self.metrics, rechunk=False) if self.metrics else conform_metrics(_EMPTY)
        )
        self.metrics = []
        if table.height == 0:
            warnings.append(
                f"{source}: no per-iteration metric (loss, step time, learning rate, ...) was"
                f" logged; {metrics.height} values of other names are in the long table"
            )
        names = sorted(self.names)
        return Tables(table, metrics, framework_of(names), warnings, step_time_source)

    def _table(self, batch: int | None, warnings: list[str]) -> tuple[pl.DataFrame, str | None]:
        """One row per (segment, iteration) that logged a mapped name or a step-time part."""
        if self.last is None:
            return conform_table(pl.DataFrame()), None
        partials = [*self.partials, self.last]
        self.partials, self.last = [], None
        table = pl.concat(partials, how="diagonal_relaxed", rechunk=False)
        partials.clear()
        if not _strictly_increasing(table):
            # an iteration logged again after others (or a step left empty): merged as one
            table = _merge(table).sort(KEYS)
        source = self.source
        table = table.with_columns(
            iteration="step",
            timestamp=pl.from_epoch(
                (pl.col("wall_time") * 1e6).round().cast(pl.Int64), "us"
            ).dt.replace_time_zone("UTC"),
            source=pl.lit(source),
        )
        step_time_source: str | None = "logged step time" if "step_time_s" in self.columns else None
        if step_time_source is None and self.parts:
            parts = pl.concat(self.parts)
            self.parts = []
            if parts.select(pl.struct(KEYS).is_duplicated().any()).item():
                parts = parts.group_by(KEYS).agg(
                    pl.col("step_time_ms").sum(), *(pl.col(n).any() for n in STEP_PARTS_MS)
                )
            whole = parts.filter(pl.all_horizontal(STEP_PARTS_MS)).select(
                *KEYS, step_time_s=pl.col("step_time_ms") / 1000.0
            )
            table = table.join(whole, on=KEYS, how="left", maintain_order="left")
            step_time_source = "DeepSpeed monitor: forward + backward + step"
            warnings.append(
                f"{source}: step time = elapsed_time_ms_forward + _backward + _step of"
                " DeepSpeed's monitor (its iteration latency; data loading is not included)"
            )
        elif step_time_source is None and table.get_column("wall_time").null_count() < table.height:
            elapsed = pl.col("wall_time") - pl.col("wall_time").shift(1).over("segment")
            advanced = pl.col("step") - pl.col("step").shift(1).over("segment")
            table = table.with_columns(step_time_s=elapsed / advanced)
            step_time_source = "wall-time deltas between records"
            warnings.append(
                f"{source}: the run logged no step time; step time = wall time between records"
                " / iterations between them (evaluation and checkpoints in that span count too)"
            )
        if batch is not None and "global_batch_size" not in table.columns:
            table = table.with_columns(global_batch_size=pl.lit(batch, dtype=pl.Int64))
        table = table.with_columns(interval=_interval())
        keep = [c for c in table.columns if c in ITERATION_SCHEMA]
        return conform_table(table.select(keep)), step_time_source


_EMPTY = pl.DataFrame(
    schema={"iteration": pl.Int64, "name": pl.String, "value": pl.Float64, "line": pl.Int64}
).with_columns(source=pl.lit(None, pl.String))


def _merge(partials: pl.DataFrame) -> pl.DataFrame:
    """Rows of the per-iteration table for the same (segment, step), in record order, as
    one: the earliest wall time and record, each column's first value."""
    columns = [c for c in partials.columns if c not in (*KEYS, "wall_time", "line")]
    return partials.group_by(KEYS, maintain_order=True).agg(
        pl.col("wall_time").min(),
        pl.col("line").min(),
        *(pl.col(c).drop_nulls().first() for c in columns),
    )


def _strictly_increasing(table: pl.DataFrame) -> bool:
    """Each row's (segment, step) after the one before: the batches' rows need no merging."""
    segment = pl.col("segment").diff()
    step = pl.col("step").diff()
    after = ((segment > 0) | ((segment == 0) & (step > 0))).slice(1).fill_null(False).all()
    return bool(table.select(after).item())


def _interval() -> pl.Expr:
    """Iterations a record covers: the step from the segment's previous record; a segment's
    first record covers the most common step (or its own iteration number, if smaller)."""
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    first = pl.min_horizontal(typical, pl.col("iteration"))
    return pl.coalesce(step, first, pl.lit(1)).clip(lower_bound=1).cast(pl.Int64)
