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

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from loganalyzer.model import (
    ITERATION_SCHEMA,
    UTC_MICROS,
    conform_metrics,
    conform_table,
    empty_metrics,
)
from loganalyzer.parsers.metric_names import (
    AXIS_COPY,
    COLUMNS,
    SAMPLE_INDEXED_PREFIX,
    STEP_PARTS_MS,
    framework_of,
)

KEYS = ["segment", "step"]
# Steps between records below this are counted in an array (no sort) to find the mode.
MODE_COUNTS = 1 << 20
ROWED = [*COLUMNS, *STEP_PARTS_MS]


@dataclass
class Tables:
    """The two tables, the framework the names point to, and what was assumed or left out."""

    table: pl.DataFrame
    metrics: pl.DataFrame
    framework: str | None
    warnings: list[str] = field(default_factory=list)
    step_time_source: str | None = None
    # the tag each column of the per-iteration table was read from (the first, by name)
    tags: dict[str, str] = field(default_factory=dict)


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
        self.carry: dict[str, tuple[int | None, int]] = {}  # per name: last step, restarts
        self.ordered = True  # each batch's rows of the table come after the batch before's

    def add(self, long: pl.DataFrame, source: str | None = None, line_offset: int = 0) -> None:
        """Reduce one batch of the long table (record order, after the batches before).
        A batch read from another file than the builder's (`source`: a sub-folder its
        writer wrote beside it) has its long-table rows traced to that file, and its
        records numbered on after the builder's own in the per-iteration table
        (`line_offset`), whose lines must tell the records apart in the order read."""
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
        kept = [name for name in names if name not in copied]
        rowed_names = [name for name in kept if name in ROWED]
        if rowed_names:
            rowed = long
            if len(rowed_names) < len(kept):
                rowed = long.filter(pl.col("name").is_in(rowed_names))
            if line_offset:
                rowed = rowed.with_columns(pl.col("record") + line_offset)
            partial = _in_order(rowed, rowed_names, self.carry)
            if partial is None:
                partial = self._grouped(self._segmented(rowed))
            self._append(partial)
        others = [name for name in kept if name not in COLUMNS]
        if others or not self.metrics:
            rest = long.filter(pl.col("name").is_in(others))
            self.metrics.append(
                conform_metrics(
                    rest.select(
                        iteration="step",
                        name="name",
                        value="value",
                        source=pl.lit(source or self.source),
                        line="record",
                    )
                )
            )

    def _segmented(self, rowed: pl.DataFrame) -> pl.DataFrame:
        """A restart: a name's step does not move forward. The k-th restart of every name is
        the same restart, so counting them per name numbers the segments alike for all
        names; each name's count and last step carry over from the batches before."""
        carry = pl.DataFrame(
            {
                "name": list(self.carry),
                "last_step": [last for last, _ in self.carry.values()],
                "restarts": [restarts for _, restarts in self.carry.values()],
            },
            schema={"name": rowed.schema["name"], "last_step": pl.Int64, "restarts": pl.Int64},
        )
        rowed = rowed.join(carry, on="name", how="left", maintain_order="left")
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
        latest = rowed.group_by("name").agg(pl.col("step").last(), pl.col("segment").last())
        for name, step, segment in latest.iter_rows():
            self.carry[name] = (step, segment)
        return rowed

    def _grouped(self, rowed: pl.DataFrame) -> pl.DataFrame:
        """This batch's rows of the per-iteration table, sorted by segment and step; the
        step-time parts aside."""
        partial = (
            rowed.group_by(KEYS, maintain_order=True)
            .agg(wall_time=pl.col("wall_time").min(), line=pl.col("record").min())
            .sort(KEYS)
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
        return partial

    def _append(self, partial: pl.DataFrame) -> None:
        """Keep a batch's rows of the table; the last one is held back, as the next batch
        may log more of its iteration (merged then)."""
        self.columns.update(c for c in partial.columns if c not in (*KEYS, "wall_time", "line"))
        if partial.get_column("step").null_count():
            self.ordered = False
        if self.last is not None:
            last, first = self.last.select(KEYS).row(0), partial.select(KEYS).row(0)
            if last == first:  # merged as a row of its own: the batch's columns stay as built
                merged = _merge(pl.concat([self.last, partial.head(1)], how="diagonal_relaxed"))
                partial = partial.slice(1)
                if partial.height == 0:
                    self.last = merged
                    return
                self.partials.append(merged)
            else:
                self.ordered &= None not in (*last, *first) and last < first
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
        metrics = pl.concat(self.metrics, rechunk=False) if self.metrics else empty_metrics()
        self.metrics = []
        if table.height == 0:
            warnings.append(
                f"{source}: no per-iteration metric (loss, step time, learning rate, ...) was"
                f" logged; {metrics.height} values of other names are in the long table"
            )
        names = sorted(self.names)
        tags: dict[str, str] = {}
        for name in sorted(self.names):
            if name in COLUMNS:
                tags.setdefault(COLUMNS[name][0], name)
        return Tables(table, metrics, framework_of(names), warnings, step_time_source, tags)

    def _table(self, batch: int | None, warnings: list[str]) -> tuple[pl.DataFrame, str | None]:
        """One row per (segment, iteration) that logged a mapped name or a step-time part."""
        if self.last is None:
            return conform_table(pl.DataFrame()), None
        partials = [*self.partials, self.last]
        self.partials, self.last = [], None
        logged = "step_time_s" in self.columns
        # with the step time logged, the wall times are needed only as timestamps
        table = _joined(partials, stamped=self.ordered and logged)
        if not self.ordered:
            # an iteration logged again after others (or a step left empty): merged as one
            table = _merge(table).sort(KEYS)
        if "timestamp" not in table.columns:
            table = table.with_columns(timestamp=_timestamps(table))
        source = self.source
        table = table.with_columns(iteration="step", source=pl.lit(source))
        step_time_source = "logged step time" if logged else None
        if logged and "wall_time" in table.columns:
            table = table.drop("wall_time")
            release_freed_memory()
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
        table = table.with_columns(interval=_interval(table))
        keep = [c for c in table.columns if c in ITERATION_SCHEMA]
        return conform_table(table.select(keep)), step_time_source


def _joined(partials: list[pl.DataFrame], stamped: bool) -> pl.DataFrame:
    """The batches' rows as one table of one chunk per column (columns of unlike chunks
    would be copied whole, all at once, by the next operation). Joined a column at a time,
    each batch's piece freed as soon as it is copied, so that only one column is ever held
    twice; `partials` is emptied. With `stamped`, the wall times become the `timestamp`
    column piece by piece, never held whole as seconds; a segment number shared by every
    row is held once."""
    names = list(dict.fromkeys(name for partial in partials for name in partial.columns))
    schema = pl.concat([partial.clear() for partial in partials], how="diagonal_relaxed").schema
    for index, partial in enumerate(partials):
        missing = [pl.lit(None, schema[name]).alias(name) for name in names if name not in partial]
        partials[index] = partial.with_columns(missing) if missing else partial
    columns: dict[str, pl.Series] = {}
    for name in names:
        pieces = [partial.drop_in_place(name) for partial in partials]
        plain = all(piece.dtype == schema[name] and not piece.null_count() for piece in pieces)
        if plain and stamped and name == "wall_time":
            stamps = _stamped(pieces)
            if stamps is not None:
                columns["timestamp"] = stamps
                continue
        if plain:
            arrays = [chunk.to_numpy() for piece in pieces for chunk in piece.get_chunks()]
            columns[name] = pl.Series(name, np.concatenate(arrays))
            del arrays
        else:
            columns[name] = pl.concat(pieces).cast(schema[name]).rechunk()
        del pieces
        release_freed_memory()
    partials.clear()
    segment = columns.pop("segment")
    if segment.n_unique() == 1:  # no restart: one number for every row
        return pl.DataFrame(columns).with_columns(pl.lit(segment[0], pl.Int32).alias("segment"))
    return pl.DataFrame({"segment": segment, **columns})


def _stamped(pieces: list[pl.Series]) -> pl.Series | None:
    """Wall times (Unix seconds) as UTC datetimes to the microsecond, rounded half to even
    as polars rounds (`_timestamps`), a piece at a time; None if one is not finite."""
    stamps = np.empty(sum(len(piece) for piece in pieces), dtype=np.int64)
    at = 0
    for piece in pieces:
        seconds = piece.to_numpy()
        if not np.isfinite(seconds).all():
            return None
        stamps[at : at + len(seconds)] = np.rint(seconds * 1e6)
        at += len(seconds)
    stamped: pl.Series = pl.Series("timestamp", stamps).cast(UTC_MICROS)
    return stamped


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    return trim


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`). numpy's
    work arrays of a batch are freed between the table's long-lived pieces, where the heap
    cannot shrink; without this, those holes count in the process's memory for good."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _merge(partials: pl.DataFrame) -> pl.DataFrame:
    """Rows of the per-iteration table for the same (segment, step), in record order, as
    one: the earliest wall time and record, each column's first value."""
    columns = [c for c in partials.columns if c not in (*KEYS, "wall_time", "line")]
    return partials.group_by(KEYS, maintain_order=True).agg(
        pl.col("wall_time").min(),
        pl.col("line").min(),
        *(pl.col(c).drop_nulls().first() for c in columns),
    )


def _in_order(
    rowed: pl.DataFrame, names: list[str], carry: dict[str, tuple[int | None, int]]
) -> pl.DataFrame | None:
    """A batch's rows of the per-iteration table the way most files log them, with numpy:
    each name's step moving forward (no restart), the steps of all names never going back,
    no step-time parts. None for any other batch (grouped by polars instead). `carry` is
    updated with each name's last step."""
    segments = {carry.get(name, (None, 0))[1] for name in names}
    if len(segments) > 1 or any(name in STEP_PARTS_MS for name in names):
        return None
    if rowed.get_column("step").null_count() or rowed.get_column("wall_time").null_count():
        return None
    step = rowed.get_column("step").to_numpy()
    wall = rowed.get_column("wall_time").to_numpy()
    advance = np.diff(step)
    if (advance < 0).any() or np.isnan(wall).any():
        return None
    code = (
        rowed.select(
            pl.col("name").replace_strict(
                {name: index for index, name in enumerate(names)}, return_dtype=pl.Int32
            )
        )
        .to_series()
        .to_numpy()
    )
    run = np.zeros(len(step), dtype=np.int64)
    np.cumsum(advance != 0, out=run[1:])
    starts = np.flatnonzero(np.r_[True, advance != 0])
    lasts = _own_steps_forward(step, code, starts, names, carry)
    if lasts is None:
        return None
    (segment,) = segments
    for name, last_step in lasts.items():
        carry[name] = (last_step, segment)
    record = rowed.get_column("record").to_numpy()
    columns: dict[str, npt.NDArray[Any]] = {
        "segment": np.full(len(starts), segment, dtype=np.int32),
        "step": step[starts],
        "wall_time": np.minimum.reduceat(wall, starts),
        "line": record[starts],
    }
    absent: dict[str, npt.NDArray[np.bool_]] = {}
    value = rowed.get_column("value").to_numpy()
    factors = np.array([COLUMNS[name][1] for name in names])
    for column in sorted({COLUMNS[name][0] for name in names}):
        into = np.array([COLUMNS[name][0] == column for name in names])
        rows = np.flatnonzero(np.take(into, code))
        runs = run[rows]
        first = np.r_[True, runs[1:] != runs[:-1]]
        rows, runs = rows[first], runs[first]
        columns[column] = np.zeros(len(starts))
        columns[column][runs] = value[rows] * factors[code[rows]]
        if len(runs) < len(starts):  # iterations that did not log this column: null
            absent[column] = np.ones(len(starts), dtype=bool)
            absent[column][runs] = False
    return _frame(columns, absent)


def _own_steps_forward(
    step: npt.NDArray[np.int64],
    code: npt.NDArray[Any],
    starts: npt.NDArray[np.intp],
    names: list[str],
    carry: dict[str, tuple[int | None, int]],
) -> dict[str, int] | None:
    """Each name's last step, if each name's own steps move forward from its carried last
    step; None otherwise. The steps of all names never go back (checked before), so a
    name's steps move forward unless it is logged twice in one run of equal steps (`starts`):
    each run's names are a set of bits, one per name, whose sum is their OR unless one
    repeats."""
    if len(names) - 1 + len(code).bit_length() >= 63:  # a run's sum could overflow
        return None
    bits = np.left_shift(np.int64(1), code.astype(np.int64))
    present = np.bitwise_or.reduceat(bits, starts)
    if (np.add.reduceat(bits, starts) != present).any():
        return None
    lasts: dict[str, int] = {}
    for index, name in enumerate(names):
        runs = np.flatnonzero(present & (1 << index))
        last = carry.get(name, (None, 0))[0]
        if last is not None and step[starts[runs[0]]] <= last:
            return None
        lasts[name] = int(step[starts[runs[-1]]])
    return lasts


def _frame(
    columns: dict[str, npt.NDArray[Any]], absent: dict[str, npt.NDArray[np.bool_]]
) -> pl.DataFrame:
    """numpy columns as a frame, the `absent` values null. The columns stay numpy's memory
    (polars copies a column to null one of its values): a batch usually splits iterations
    only at its first and last rows, which become frames of their own."""
    count = len(columns["step"])
    incomplete = np.zeros(count, dtype=bool)
    for where in absent.values():
        incomplete |= where
    if not incomplete.any():
        return _plain(columns)
    low = 1 if incomplete[0] else 0
    high = count - 1 if incomplete[-1] else count
    if low >= high or incomplete[low:high].any():
        return _nulled(columns, absent, slice(0, count))
    pieces = [_nulled(columns, absent, slice(0, 1))] if low else []
    pieces.append(_plain({name: values[low:high] for name, values in columns.items()}))
    if high < count:
        pieces.append(_nulled(columns, absent, slice(high, count)))
    return pl.concat(pieces, rechunk=False)


def _plain(columns: dict[str, npt.NDArray[Any]]) -> pl.DataFrame:
    return pl.DataFrame({name: pl.Series(values) for name, values in columns.items()})


def _nulled(
    columns: dict[str, npt.NDArray[Any]], absent: dict[str, npt.NDArray[np.bool_]], rows: slice
) -> pl.DataFrame:
    frame = _plain({name: values[rows] for name, values in columns.items()})
    return frame.with_columns(
        frame.get_column(name).scatter(np.flatnonzero(where[rows]), None)
        for name, where in absent.items()
    )


def _timestamps(table: pl.DataFrame) -> pl.Series | pl.Expr:
    """The wall times (Unix seconds) as UTC datetimes to the microsecond (rounded half to
    even, as polars rounds), with numpy when every one is a finite number."""
    wall = table.get_column("wall_time")
    stamps = None if wall.null_count() else _stamped([wall])
    if stamps is None:
        micros = (pl.col("wall_time") * 1e6).round().cast(pl.Int64)
        expression: pl.Expr = pl.from_epoch(micros, "us").dt.replace_time_zone("UTC")
        return expression
    release_freed_memory()
    return stamps


def _interval(table: pl.DataFrame) -> pl.Series | pl.Expr:
    """Iterations a record covers: the step from the segment's previous record; a segment's
    first record covers the most common step (the smallest of ties), or its own iteration
    number if smaller. The table is sorted by segment and iteration: a segment's rows are
    one slice, and numpy needs no group-by (whose work columns would triple the table's
    memory for a moment)."""
    iteration = table.get_column("iteration")
    if iteration.null_count():
        return _interval_by_group()
    it = iteration.to_numpy()
    interval = np.empty(len(it), dtype=np.int64)
    np.subtract(it[1:], it[:-1], out=interval[1:])
    segment = table.get_column("segment")
    bounds = [len(it)]
    if segment.n_unique() > 1:
        numbers = segment.to_numpy()
        bounds = [*np.flatnonzero(numbers[1:] != numbers[:-1]) + 1, len(it)]
    first = 0
    for end in bounds:
        steps = interval[first + 1 : end]
        interval[first] = min(_mode(steps), int(it[first])) if len(steps) else it[first]
        first = end
    np.maximum(interval, 1, out=interval)
    if (interval == interval[0]).all():  # one step throughout: held once
        constant = int(interval[0])
        del interval
        release_freed_memory()
        return pl.lit(constant, pl.Int64)
    return pl.Series(interval)


def _mode(steps: npt.NDArray[np.int64]) -> int:
    """The most common step (the smallest of ties); counted in place for small steps."""
    if steps.min() >= 0 and steps.max() < MODE_COUNTS:
        return int(np.argmax(np.bincount(steps)))
    values, counts = np.unique(steps, return_counts=True)
    return int(values[np.argmax(counts)])


def _interval_by_group() -> pl.Expr:
    """`_interval` for a table with rows of unknown iteration, with polars' windows."""
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    first = pl.min_horizontal(typical, pl.col("iteration"))
    return pl.coalesce(step, first, pl.lit(1)).clip(lower_bound=1).cast(pl.Int64)
