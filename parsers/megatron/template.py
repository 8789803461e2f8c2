"""Iteration-line fields read by the key order learned from the lines themselves.

A run prints its iteration lines with one format string, so nearly every line of a chunk
has the same keys in the same order; only the values change. The keys and their order (the
line's "template": each field's text up to its first `:`) are found once per distinct
template, the lines of a template are split on `|` once, and each value is then a fixed
slice of its field: no per-field exploding, lower-casing or pivoting. The few lines whose
template is rare (more than `MAX_TEMPLATES` in one chunk) take the general path, field by
field; both give the same values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import polars as pl

from loganalyzer.model import ITERATION_SCHEMA
from loganalyzer.parsers.megatron.records import (
    FIELD_COLUMNS,
    STEP_TIME_FIELDS,
    iteration_fields,
    wide_fields,
)
from loganalyzer.textlog import to_number

MAX_TEMPLATES = 8
# A line of this many fields or more is not learned from: a template costs a few polars
# expressions per field (a line of 5,000 fields took seconds, growing faster than its
# length), the general path one pass over all the fields exploded into rows.
MAX_TEMPLATE_FIELDS = 64

# The per-iteration columns the fields fill, in a fixed order.
COLUMNS = list(dict.fromkeys([*FIELD_COLUMNS.values(), "step_time_s"]))


@dataclass(frozen=True)
class Fields:
    """The fields of a chunk's iteration lines."""

    wide: pl.DataFrame  # (line, piece), one column per entry of COLUMNS: counts Int64, else Float64
    extras: pl.DataFrame  # fields without a column: (line, piece, printed, value), in order
    keys: frozenset[str]  # every field name seen, lower-cased


@dataclass(frozen=True)
class _Field:
    """One `key: value` field of a template: where its value starts, where it goes."""

    position: int
    printed: str
    key: str  # the field's text before its value: spaces, the printed key and the colon
    column: str | None
    divisor: float


def read_fields(records: pl.DataFrame) -> Fields:
    """Every `key: value` field of the records' `rest` (the text after `iteration N/ M |`)."""
    read, remaining = shape_by_shape(
        records.select("line", "piece", "rest").drop_nulls("rest"), "rest", _read_shape
    )
    wides = [wide for wide, _, _ in read]
    extras = [extra for _, extra, _ in read if extra is not None]
    keys: set[str] = set().union(*(names for _, _, names in read))
    if remaining.height:
        general = iteration_fields(remaining)
        keys.update(general.get_column("key").unique().to_list())
        wides.append(wide_fields(general).select("line", "piece", *COLUMNS))
        extras.append(
            general.filter(pl.col("column").is_null() & pl.col("value").is_not_null()).select(
                "line",
                "piece",
                position=pl.int_range(pl.len(), dtype=pl.Int32).over("line", "piece"),
                printed="printed",
                value="value",
            )
        )
    extra_schema = pl.Schema(
        {
            "line": pl.Int64(),
            "piece": pl.Int32(),
            "position": pl.Int32(),
            "printed": pl.String(),
            "value": pl.Float64(),
        }
    )
    return Fields(
        wide=counts_as_integers(pl.concat(wides, how="vertical_relaxed"))
        if wides
        else pl.DataFrame(schema=_wide_schema()),
        extras=(
            pl.concat([e.cast(extra_schema) for e in extras]).sort("line", "piece", "position")
            if extras
            else pl.DataFrame(schema=extra_schema)
        ),
        keys=frozenset(keys),
    )


ShapeRead = TypeVar("ShapeRead")


def shape_by_shape(
    rows: pl.DataFrame,
    column: str,
    read: Callable[[pl.DataFrame, str], tuple[pl.Series, ShapeRead | None]],
) -> tuple[list[ShapeRead], pl.DataFrame]:
    """Rows read one learned shape at a time: the first row no shape was learned from gives
    one (from its text in `column`), and `read` says which rows fit it (a Boolean Series over
    `rows`, no nulls) and what it read of them (None: nothing). Up to MAX_TEMPLATES shapes;
    what each read, and the rows none fit, in their order, for the general path. A row whose
    own shape does not take it (a value a cast cannot read) is not learned from again, nor is a
    row of MAX_TEMPLATE_FIELDS fields or more (no shorter shape fits it either)."""
    found: list[ShapeRead] = []
    separators = rows.get_column(column).str.count_matches("|", literal=True)
    learned = (separators >= MAX_TEMPLATE_FIELDS - 1).fill_null(False)
    for _ in range(MAX_TEMPLATES):
        at = learned.arg_min()
        if at is None or learned[at]:
            break
        fits, result = read(rows, rows.item(at, column))
        if result is not None:
            found.append(result)
        learned = learned.scatter(at, True)
        if fits.any():
            rows, learned = rows.filter(~fits), learned.filter(~fits)
    return found, rows


def _read_shape(
    rows: pl.DataFrame, rest: str
) -> tuple[pl.Series, tuple[pl.DataFrame, pl.DataFrame | None, set[str]]]:
    """`shape_by_shape`'s reader for `read_fields`: the wide columns, extra fields and field
    names of the rows that fit the shape of `rest`."""
    template = shape_of(rest)
    fields = template_fields(template)
    separators = template.count("|")
    parts = rows.with_columns(part=pl.col("rest").str.split_exact("|", separators)).unnest("part")
    fits = parts.select(_fits(template, separators).fill_null(False)).to_series()
    wide, extra = read_template(parts.filter(fits), fields)
    return fits, (wide, extra, {f.printed.lower() for f in fields})


def shape_of(rest: str) -> str:
    """An iteration line's shape (its template): the text after `iteration N/ M |` with each
    field's value, from its first colon to the next `|`, removed."""
    return _VALUE_TEXT.sub(":", rest)


_VALUE_TEXT = re.compile(r":[^|]*")


def counts_as_integers(wide: pl.DataFrame) -> pl.DataFrame:
    """A count printed as nan, inf or past Int64 is no count: null, not a failed cast."""
    counts = [c for c in COLUMNS if c in wide.columns and ITERATION_SCHEMA[c] == pl.Int64]
    return wide.with_columns(pl.col(counts).cast(pl.Int64, strict=False))


def _wide_schema() -> dict[str, pl.DataType]:
    """The columns of `Fields.wide` with no line read: counts as integers, as
    `counts_as_integers` gives them, so that joining a chunk's records does not make every
    count a float again (a copy of each, and another back at the end)."""
    return {
        "line": pl.Int64(),
        "piece": pl.Int32(),
        **{c: pl.Int64() if ITERATION_SCHEMA[c] == pl.Int64 else pl.Float64() for c in COLUMNS},
    }


def template_fields(template: str) -> list[_Field]:
    """The `key:` fields of a template (fields without a colon hold nothing)."""
    fields = []
    for position, text in enumerate(template.split("|")):
        if not text.endswith(":"):
            continue
        printed = text[:-1].strip()
        key = printed.lower()
        divisor = STEP_TIME_FIELDS.get(key)
        column = "step_time_s" if divisor is not None else FIELD_COLUMNS.get(key)
        fields.append(_Field(position, printed, text, column, divisor or 1.0))
    return fields


def _fits(template: str, separators: int) -> pl.Expr:
    """Whether a line split on `|` has the template's keys: as many separators, each `key:`
    field starting with its key and colon (so its first colon is the template's), each field
    without a colon the same text."""
    tests = [pl.col("rest").str.count_matches("|", literal=True) == separators]
    for position, text in enumerate(template.split("|")):
        field = pl.col(f"field_{position}")
        tests.append(field.str.starts_with(text) if text.endswith(":") else field == text)
    return pl.all_horizontal(tests)


def plain_values(parts: pl.DataFrame, fields: list[_Field]) -> pl.DataFrame:
    """(line, piece) and each field's value as a plain cast reads it, in columns "0", "1",
    ...: null where the value is no plain number, or the field does not start with its key
    (what is left then holds the key's colon)."""
    return parts.select(
        "line",
        "piece",
        *[
            pl.col(f"field_{f.position}")
            .str.strip_prefix(f.key)
            .str.strip_chars()
            .cast(pl.Float64, strict=False)
            .alias(str(i))
            for i, f in enumerate(fields)
        ],
    )


def read_template(
    parts: pl.DataFrame, fields: list[_Field]
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The wide columns and the extra fields of the lines (split on `|` into `field_<i>`)
    that share one template."""
    values = plain_values(parts, fields)
    # Values a plain cast cannot read (`1,234.5`, `13100.0/13240.9`, `3.4K`) are read by the
    # general number parser; only the fields that have such values pay for it.
    unread = [
        pl.coalesce(str(i), to_number(pl.col(f"field_{f.position}").str.slice(len(f.key)))).alias(
            str(i)
        )
        for i, f in enumerate(fields)
        if values.get_column(str(i)).null_count()
    ]
    if unread:
        values = (
            values.hstack(parts.drop("line", "piece", "rest"))
            .with_columns(unread)
            .select("line", "piece", *[str(i) for i in range(len(fields))])
        )
    return arranged(values, fields)


def arranged(
    values: pl.DataFrame, fields: list[_Field]
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The wide columns and the extra fields from the fields' values (`plain_values`)."""
    first_of = {}
    for i, f in enumerate(fields):
        if f.column is not None and f.column not in first_of:
            first_of[f.column] = (i, f.divisor)
    # A division by a column of the divisor, not by a scalar: polars multiplies by the
    # reciprocal of a scalar, which is not the IEEE quotient (1614.3 / 1000).
    divisors = {
        f"divisor_{c}": pl.Series([d], dtype=pl.Float64).new_from_index(0, values.height)
        for c, (_, d) in first_of.items()
        if d != 1.0
    }
    wide = values.with_columns(**divisors).select(
        "line",
        "piece",
        *[
            _divided(
                str(first_of[c][0]), f"divisor_{c}" if f"divisor_{c}" in divisors else None
            ).alias(c)
            if c in first_of
            else pl.lit(None, dtype=pl.Float64).alias(c)
            for c in COLUMNS
        ],
    )
    extra = [
        values.select(
            "line",
            "piece",
            position=pl.lit(f.position, dtype=pl.Int32),
            printed=pl.lit(f.printed),
            value=pl.col(str(i)),
        ).drop_nulls("value")
        for i, f in enumerate(fields)
        if f.column is None
    ]
    return wide, (pl.concat(extra) if extra else None)


def _divided(column: str, divisor: str | None) -> pl.Expr:
    return pl.col(column) if divisor is None else pl.col(column) / pl.col(divisor)


# A `key: value` field of a timer, memory or validation line: the key, and one token. Run
# by polars only, whose regex engine does not backtrack (linear time); Python's `re` takes
# quadratic time on it (a 40 KB field `a:a:...: x y` took 20 s): `key_and_value` is the
# same rule in Python.
KEY_VALUE = r"^\s*(.*?[^\s])\s*:\s*(\S+)\s*$"


def key_and_value(field: str) -> tuple[str, str] | None:
    """KEY_VALUE's two groups, in linear time: the key ends at the first colon after which a
    single token follows (the key may hold colons and spaces, and is not empty), and that
    token is the value; None if there is no such colon."""
    text = field.strip()
    tokens = text.split()
    if not tokens:
        return None
    value = tokens[-1]
    before = text[: len(text) - len(value)]  # everything up to the last token
    if before:
        # a colon just before the space in front of the last token ends the key
        head = before.rstrip()
        if head.endswith(":") and head[:-1].strip():
            return head[:-1].rstrip(), value
    # else the first colon inside the last token that leaves a key and a value
    colon = value.find(":", 0 if before else 1)
    if colon < 0 or colon == len(value) - 1:
        return None
    return (before + value[:colon]).rstrip(), value[colon + 1 :]


_ROW_COLUMNS = ("line", "launch", "rank", "after")


def key_value_rows(frame: pl.DataFrame, fields: pl.Expr, name: pl.Expr) -> pl.DataFrame:
    """One row (line, launch, rank, after, name, value) per `key: value` of `fields` (a
    '|'-separated text), in line and field order; `name` builds the metric's name from the
    key (`pl.col("key")`). The lines that fit a learned template are read by slices, the
    others field by field; both give the same rows."""
    found, remaining = shape_by_shape(
        frame.select(
            *_ROW_COLUMNS, fields=fields, order=pl.int_range(pl.len(), dtype=pl.Int64)
        ).drop_nulls("fields"),
        "fields",
        functools.partial(_key_value_shape, name=name),
    )
    if remaining.height:
        found.append(_general_key_values(remaining, name))
    if not found:
        return (
            frame.select(*_ROW_COLUMNS)
            .clear()
            .with_columns(name=pl.lit(None, dtype=pl.String), value=pl.lit(None, dtype=pl.Float64))
        )
    # Each part is in line order and a line is in one part only: merging keeps the order.
    rows = functools.reduce(lambda a, b: a.merge_sorted(b, key="order"), found)
    return rows.select(*_ROW_COLUMNS, "name", "value")


def _key_value_shape(
    rows: pl.DataFrame, text: str, name: pl.Expr
) -> tuple[pl.Series, pl.DataFrame | None]:
    """`shape_by_shape`'s reader for `key_value_rows`: the rows (one per named field, in
    line and field order) of the lines that fit the shape of `text`, every token a number."""
    template = text.split("|")
    parts = rows.with_columns(part=pl.col("fields").str.split_exact("|", len(template) - 1)).unnest(
        "part"
    )
    tests = [pl.col("fields").str.count_matches("|", literal=True) == len(template) - 1]
    keys: dict[int, str] = {}
    tokens = {}
    for position, field_text in enumerate(template):
        field = pl.col(f"field_{position}")
        if key_and_value(field_text) is None:
            tests.append(field == field_text)
            continue
        prefix = field_text[: field_text.index(":") + 1]
        keys[position] = prefix[:-1].strip()
        tests.append(field.str.starts_with(prefix))
        tokens[f"token_{position}"] = field.str.slice(len(prefix)).str.strip_chars()
    # A token a plain cast reads and that starts as a number does is one `\S+` token, and the
    # general number reader gives it the same value; a line with any other token takes the
    # general path.
    values = parts.with_columns(**tokens).with_columns(
        pl.col(f"token_{p}").cast(pl.Float64, strict=False).alias(f"value_{p}") for p in keys
    )
    tests.extend(_read_as_numbers(values, list(keys)))
    fits = values.select(pl.all_horizontal(tests).fill_null(False)).to_series()
    # every key's metric name in one frame: one query, not one per key
    metrics = pl.DataFrame({"key": list(keys.values())}, schema={"key": pl.String}).select(name)
    named = {
        p: metric for p, metric in zip(keys, metrics.to_series(), strict=True) if metric is not None
    }
    if not named or not fits.any():
        return fits, None
    return fits, _interleaved(values.filter(fits), named)


def _read_as_numbers(values: pl.DataFrame, positions: list[int]) -> list[pl.Expr]:
    """Per field, whether its token was read by the cast and starts as a number does.

    A finite value is only ever cast from such a token, so the pattern is tested only in the
    fields where some value is nan or inf (or none could be read)."""
    if not positions:
        return []
    finite = values.select(
        pl.col(f"value_{p}").is_finite().all().alias(str(p)) for p in positions
    ).row(0, named=True)
    return [
        pl.col(f"value_{p}").is_not_null()
        if finite[str(p)]
        else pl.col(f"value_{p}").is_not_null() & pl.col(f"token_{p}").str.contains(r"^[-+.\d]")
        for p in positions
    ]


def _interleaved(matched: pl.DataFrame, named: dict[int, str]) -> pl.DataFrame:
    """One row per line and named field (`value_<position>`), in line and field order.

    The values (never null here) are interleaved as one fixed-width array per line flattened
    (as fast as numpy's `column_stack`, without importing numpy) and each line's columns
    repeated by one gather: a list per line exploded took ten times longer.
    """
    count = len(named)
    positions = pl.int_range(matched.height * count, eager=True)
    values = matched.select(pl.concat_arr([f"value_{p}" for p in named])).to_series()
    # The columns in the order of `_general_key_values`', which it is merged with.
    return matched.select("order", *_ROW_COLUMNS)[positions // count].with_columns(
        name=pl.Series(list(named.values()), dtype=pl.String).gather(positions % count),
        value=values.reshape((-1,)),
    )


def _general_key_values(rows: pl.DataFrame, name: pl.Expr) -> pl.DataFrame:
    """Field by field: every '|'-separated field of `fields` matched against KEY_VALUE."""
    pairs = (
        rows.with_columns(field=pl.col("fields").str.split("|"))
        .explode("field")
        .with_columns(m=pl.col("field").str.extract_groups(KEY_VALUE))
        .with_columns(key=pl.col("m").struct.field("1"))
        .select(
            "order",
            *_ROW_COLUMNS,
            name=name.cast(pl.String),
            token=pl.col("m").struct.field("2"),
        )
        .drop_nulls(["name", "token"])
    )
    return _numbers(pairs)


def _numbers(rows: pl.DataFrame) -> pl.DataFrame:
    """`token` read as the number it prints (`value`): a plain cast, and the general number
    reader for the tokens a cast cannot read; rows without a number are dropped."""
    cast = pl.col("token").cast(pl.Float64, strict=False)
    read = rows.with_columns(value=cast)
    if read.get_column("value").null_count():
        read = read.with_columns(value=pl.coalesce(cast, to_number(pl.col("token"))))
    return read.drop("token").drop_nulls("value")
