"""A declared format's lines read from a log: polars over each chunk of lines, as the
built-in text parsers read theirs (`loganalyzer.textlog`), then one table of records.

No Python runs per line: each pattern is one `str.contains` over the chunk and one
`str.extract_groups` over the lines it matched; values are converted column by column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from loganalyzer.declared.schema import (
    CLOCKS,
    FIGURES,
    FLAG_KEYS,
    MEMORY,
    TEXT_KEYS,
    UNIT_SUFFIX,
    DeclaredFormat,
    LinePattern,
    unit_factors,
)
from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.model import (
    ConfigValue,
    Provenance,
    conform_metrics,
    conform_table,
)
from loganalyzer.textlog import clean, launcher_rank, strip_launcher, timestamps, to_number

# Fields that are whole numbers in the per-iteration table.
_WHOLE = ("iteration", "global_batch_size", "tokens", "skipped_iterations", "nan_iterations")
# Record fields kept under another name in the per-iteration table.
_COLUMN = {"reported_tflops": "reported_tflops_per_gpu"}
# The per-iteration table's columns a record field fills directly.
_TABLE_FIELDS = (*FIGURES, *MEMORY)
# The long table's name for the framework's own MFU (a fraction), as printed.
REPORTED_MFU = "reported_mfu"


def chunk_scanner(fmt: DeclaredFormat) -> Callable[[pl.DataFrame], dict[str, pl.DataFrame]]:
    """What one chunk of (line, text) holds of `fmt`: its record lines, its other lines, its
    config lines (as line, key, value) and the candidate ending lines."""

    def scan(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
        bodies = frame.select("line", "text", body=strip_launcher(clean(pl.col("text"))))
        found = {"records": _matches(bodies, fmt.record, keep_text=True)}
        for n, line in enumerate(fmt.lines):
            found[f"lines{n}"] = _matches(bodies, line)
        config = [
            _matches(bodies, line).unpivot(index="line", variable_name="key").drop_nulls("value")
            for line in fmt.config
        ]
        # each statement once: a config pattern may match many lines of a chunk
        found["config"] = (
            pl.concat(config).unique(["key", "value"], keep="first", maintain_order=True)
            if config
            else _no_config()
        )
        found["endings"] = ending_candidates(frame)
        return found

    return scan


def _matches(bodies: pl.DataFrame, line: LinePattern, keep_text: bool = False) -> pl.DataFrame:
    """The lines `line.pattern` matches, with its named groups as String columns."""
    hits = bodies.filter(pl.col("body").str.contains(line.pattern))
    groups = pl.col("body").str.extract_groups(line.pattern)
    return hits.select(
        "line",
        *(["text"] if keep_text else []),
        *(groups.struct.field(name).alias(name) for name in line.groups),
    )


def _no_config() -> pl.DataFrame:
    return pl.DataFrame(schema={"line": pl.Int64, "key": pl.String, "value": pl.String})


@dataclass
class Records:
    """The per-iteration table, its long-table rows, and what was assumed on the way."""

    table: pl.DataFrame
    metrics: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    clock_resolution_s: float | None = None
    train_iters: ConfigValue | None = None


def records(fmt: DeclaredFormat, parts: dict[str, pl.DataFrame], source: str) -> Records:
    """The record lines as the contract's per-iteration table (copies several ranks print
    dropped, restarts as segments), and the long table of the other figures."""
    rows = parts["records"]
    notes: list[str] = []
    rows = rows.with_columns(launcher_rank(pl.col("text")).alias("rank")).drop("text")
    rows = _numbers(fmt, rows)
    unnumbered = rows.select(pl.col("iteration").is_null().sum()).item()
    if unnumbered:
        notes.append(f"{unnumbered} record lines print no readable step number: not read")
        rows = rows.filter(pl.col("iteration").is_not_null())
    copy = pl.col("iteration") == pl.col("iteration").shift(1)
    rows = rows.filter(~copy.fill_null(False))
    new_segment = (pl.col("iteration") <= pl.col("iteration").shift(1)).fill_null(False)
    rows = rows.with_columns(segment=new_segment.cum_sum().cast(pl.Int32))
    rows, placeholder_notes = _placeholders(fmt, rows)
    notes.extend(placeholder_notes)
    rows = _scaled(fmt, rows)
    rows, time_notes, resolution = _step_times(fmt, rows)
    notes.extend(time_notes)
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    interval = pl.coalesce(step, pl.min_horizontal(typical, pl.col("iteration")), pl.lit(1))
    rows = rows.with_columns(
        interval=interval.clip(lower_bound=1).cast(pl.Int64), source=pl.lit(source)
    )
    columns = {_COLUMN.get(name, name): name for name in _TABLE_FIELDS if name in rows.columns}
    table = rows.select(
        "iteration",
        "interval",
        "segment",
        "rank",
        "line",
        "source",
        *[c for c in ("step_time_s", "timestamp") if c in rows.columns],
        *(pl.col(name).alias(column) for column, name in columns.items()),
    )
    table = table.with_columns(pl.col(c).round().cast(pl.Int64) for c in _WHOLE if c in columns)
    total = None
    if "train_iters" in rows.columns:
        first = rows.drop_nulls("train_iters").head(1)
        if first.height:
            total = ConfigValue(
                int(first["train_iters"][0]), Provenance("log", source, int(first["line"][0]))
            )
    metrics = _record_metrics(fmt, rows, source)
    metrics = pl.concat([metrics, *_line_metrics(fmt, parts, table, source)])
    return Records(
        conform_table(table), conform_metrics(metrics.sort("line")), notes, resolution, total
    )


def _numbers(fmt: DeclaredFormat, rows: pl.DataFrame) -> pl.DataFrame:
    """Every captured value as a number (`textlog.to_number`: `1,234`, `nan`, `3.4K`), the
    timestamp as a UTC datetime; unit groups stay text."""
    units = {name for name in fmt.record.groups if _is_unit_group(fmt, name)}
    numeric = [name for name in fmt.record.groups if name != "timestamp" and name not in units]
    rows = _as_numbers(rows, numeric)
    rows = rows.with_columns(pl.col("iteration").round().cast(pl.Int64, strict=False))
    if "timestamp" in rows.columns:
        rows = rows.with_columns(timestamp_text=pl.col("timestamp"))
        rows = rows.with_columns(timestamps(rows["timestamp"]).alias("timestamp"))
    return rows


def _is_unit_group(fmt: DeclaredFormat, name: str) -> bool:
    """Whether a group is the unit printed beside a field (`train_time_unit`), not a value."""
    field = name.removesuffix(UNIT_SUFFIX)
    return field != name and field in fmt.record.groups and name not in fmt.metrics


def _as_numbers(rows: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """`names` as Float64: most printed values are plain numbers (thousands separators
    aside) that a cast reads; only the values it misses (`nan`, `3.4K`, `615.5 (avg ...)`)
    pay for `to_number`'s regular expression."""
    for name in names:
        text = pl.col(name)
        cast = text.str.strip_chars().str.replace_all(",", "", literal=True)
        rows = rows.with_columns(cast.cast(pl.Float64, strict=False).alias("_number"))
        missed = pl.col("_number").is_null() & text.is_not_null()
        if rows.select(missed.any()).item():
            rows = rows.with_row_index("_row")
            read = rows.filter(missed).select("_row", _slow=to_number(text))
            rows = (
                rows.join(read, on="_row", how="left", maintain_order="left")
                .with_columns(pl.coalesce("_number", "_slow").alias("_number"))
                .drop("_row", "_slow")
            )
        rows = rows.with_columns(pl.col("_number").alias(name)).drop("_number")
    return rows


def _placeholders(fmt: DeclaredFormat, rows: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Values the format says mean "not measured yet" (nanoGPT's `mfu -100.00%` before its
    fifth step) as unknown, counted in a note."""
    notes = []
    for name, spec in fmt.fields.items():
        if not spec.placeholders:
            continue
        hit = pl.col(name).is_in(list(spec.placeholders))
        count = rows.select(hit.sum()).item()
        if count:
            shown = ", ".join(f"{v:g}" for v in spec.placeholders)
            notes.append(
                f"{count} records print {name} {shown}, the format's placeholder for a figure"
                " not measured yet: read as unknown"
            )
            rows = rows.with_columns(pl.when(hit).then(None).otherwise(pl.col(name)).alias(name))
    return rows, notes


def _scaled(fmt: DeclaredFormat, rows: pl.DataFrame) -> pl.DataFrame:
    """Values in the table's units: a unit printed beside the value (`<field>_unit`) wins
    over the format's declared unit; an unknown printed unit leaves the value unknown."""
    scaled = []
    for name, spec in fmt.fields.items():
        unit_group = name + UNIT_SUFFIX
        if unit_group in rows.columns and _is_unit_group(fmt, unit_group):
            printed = pl.col(unit_group).replace_strict(
                dict(unit_factors(name)), default=None, return_dtype=pl.Float64
            )
            declared = pl.lit(spec.factor, dtype=pl.Float64)
            factor = pl.when(pl.col(unit_group).is_null()).then(declared).otherwise(printed)
            scaled.append((pl.col(name) * factor).alias(name))
        elif spec.factor is not None and spec.factor != 1.0:
            scaled.append((pl.col(name) * spec.factor).alias(name))
    return rows.with_columns(scaled) if scaled else rows


def _step_times(
    fmt: DeclaredFormat, rows: pl.DataFrame
) -> tuple[pl.DataFrame, list[str], float | None]:
    """Seconds per step: the step time as printed (times the micro-batches per step when it
    is printed per micro-batch); else the differences of a cumulative clock (`train_time`,
    else the records' timestamps) over the steps between consecutive records."""
    steps = pl.col("iteration").diff().over("segment")
    if "step_time" in rows.columns:
        seconds = pl.col("step_time")
        notes = []
        if fmt.fields["step_time"].per_micro_step:
            ratio = pl.col("micro_step").diff().over("segment") / steps
            typical = ratio.drop_nulls().mode().min().over("segment")
            seconds = seconds * pl.coalesce(ratio, typical)
            notes.append(
                "the step time is printed for one micro-batch: it is multiplied by the"
                " micro-batches per step (micro_step over step differences between records)"
            )
        return rows.with_columns(step_time_s=seconds), notes, None
    clock_field = next((name for name in CLOCKS if name in rows.columns), None)
    if clock_field is not None:
        elapsed = pl.col(clock_field).diff().over("segment")
        what = f"{clock_field} (a cumulative clock)"
        resolution = None
    elif "timestamp" in rows.columns:
        # differences of whole microseconds: seconds since 1970 in a float lose the last digits
        elapsed = pl.col("timestamp").dt.epoch("us").diff().over("segment") / 1e6
        what = "the records' timestamps"
        resolution = _stamp_resolution(rows)
    else:
        return rows, [], None
    restarts = rows.select((elapsed < 0).sum()).item()
    rows = rows.with_columns(
        step_time_s=pl.when((elapsed >= 0) & (steps > 0)).then(elapsed / steps)
    )
    note = (
        f"step times are the differences of {what} between consecutive records over the"
        " steps between them: the first record of each launch is untimed"
    )
    if restarts:
        note += f", and so are the {restarts} records after which the clock went back (reset)"
    return rows, [note], resolution


def _stamp_resolution(rows: pl.DataFrame) -> float | None:
    """1 s when the timestamps print whole seconds, else None (fine enough not to matter)."""
    printed = rows.select(pl.col("timestamp_text").drop_nulls())
    if not printed.height:
        return None
    fractional = printed.select(pl.col("timestamp_text").str.contains(r"\d[.,]\d+").all()).item()
    return None if fractional else 1.0


def _record_metrics(fmt: DeclaredFormat, rows: pl.DataFrame, source: str) -> pl.DataFrame:
    """The record line's figures the table has no column for: the framework's MFU (as a
    fraction) and the format's own metrics."""
    named = {REPORTED_MFU: "mfu"} if "mfu" in rows.columns else {}
    named.update({f"{fmt.name}/{m}": m for m in fmt.metrics if m in rows.columns})
    if not named:
        return _no_metrics()
    return _long(rows.select("line", "iteration", "rank", **named), source)


def _line_metrics(
    fmt: DeclaredFormat, parts: dict[str, pl.DataFrame], table: pl.DataFrame, source: str
) -> list[pl.DataFrame]:
    """The figures of the format's other lines, each at the step it names or, when it names
    none, at the last record before it."""
    found = []
    anchors = table.select("line", record_iteration="iteration").sort("line")
    for n, line in enumerate(fmt.lines):
        rows = parts[f"lines{n}"]
        metrics = [g for g in line.groups if g != "iteration"]
        rows = rows.with_columns(to_number(pl.col(g)).alias(g) for g in metrics)
        rows = rows.sort("line").join_asof(anchors, on="line", strategy="backward")
        step = (
            to_number(pl.col("iteration")).round().cast(pl.Int64, strict=False)
            if "iteration" in line.groups
            else pl.lit(None, dtype=pl.Int64)
        )
        rows = rows.select(
            "line",
            iteration=pl.coalesce(step, pl.col("record_iteration")),
            rank=pl.lit(None, dtype=pl.Int32),
            **{f"{fmt.name}/{g}": g for g in metrics},
        )
        found.append(_long(rows, source))
    return found


def _long(rows: pl.DataFrame, source: str) -> pl.DataFrame:
    """(line, iteration, rank, figure columns) as long-table rows, nulls dropped."""
    return (
        rows.unpivot(index=["line", "iteration", "rank"], variable_name="name")
        .drop_nulls("value")
        .select(
            "iteration",
            pl.col("name").cast(pl.Categorical),
            pl.col("value").cast(pl.Float64),
            source=pl.lit(source).cast(pl.Categorical),
            rank=pl.col("rank").cast(pl.Int32),
            line="line",
        )
    )


def _no_metrics() -> pl.DataFrame:
    return conform_metrics(
        pl.DataFrame(
            schema={
                "iteration": pl.Int64,
                "name": pl.Categorical,
                "value": pl.Float64,
                "source": pl.Categorical,
                "rank": pl.Int32,
                "line": pl.Int64,
            }
        )
    )


def config(
    fmt: DeclaredFormat, rows: pl.DataFrame, source: str
) -> tuple[dict[str, ConfigValue], list[str]]:
    """Each run fact at the first line that states it readably, then the format's fixed
    values for the facts the log does not state."""
    found: dict[str, ConfigValue] = {}
    notes: list[str] = []
    rows = rows.sort("line").unique(["key", "value"], keep="first", maintain_order=True)
    rows = rows.with_columns(number=to_number(pl.col("value")))
    for line, key, text, number in rows.iter_rows():  # the distinct statements, a handful
        if key in found:
            continue
        value = _fact(key, text, number)
        if value is None:
            notes.append(f"{source}:{line}: {key} {text!r} is not readable: not used")
            continue
        found[key] = ConfigValue(value, Provenance("log", source, line))
    for key, value in fmt.fixed.items():
        found.setdefault(key, ConfigValue(value, Provenance("config", fmt.origin)))
    return found, notes


def _fact(key: str, text: str, number: float | None) -> object | None:
    """A config value as the run model holds it: text, a flag, or a whole number (None
    for one that is not)."""
    if key in TEXT_KEYS:
        return text.strip() or None
    if key in FLAG_KEYS:
        lowered = text.strip().lower()
        return True if lowered in ("true", "1", "yes") else False if lowered else None
    if number is None or number != number or abs(number) == float("inf"):
        return None
    # every numeric fact is a count; `123.69M` scaled in floating point is one too
    whole = round(number)
    return whole if abs(number - whole) <= 1e-9 * max(1.0, abs(number)) else None
