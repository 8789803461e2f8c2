"""Report lines read whole in one split on `|`: the common case, without the general path.

A run prints its iteration, memory and one-line timer reports with one format string each,
so nearly every such line is `head | key: value | key: value | ...`, with the same head and
the same keys in the same order. Those lines are read here: each is split on `|` once, its
head (the text before the first `|`, launcher label included) is matched in full by one
pattern, and its fields are read by the templates of `template.py`.

A line is taken only if the general path of `scan.py` would read nothing else from it: no
carriage return, colour code or second record glued on, no marker of another kind of line
after its head, and (iteration lines) every field fitting a learned template. Every other
line is left to the general path, which gives the same values for the lines taken here; the
tests hold the two paths to the same output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from loganalyzer.parsers.megatron.markers import OTHER_MARKS
from loganalyzer.parsers.megatron.metrics import (
    MEMORY_AFTER,
    MEMORY_MARK,
    MEMORY_METRIC,
    TIMER_METRIC,
)
from loganalyzer.parsers.megatron.records import ITERATION_STAMP, record_key
from loganalyzer.parsers.megatron.template import (
    arranged,
    counts_as_integers,
    key_value_rows,
    plain_values,
    shape_by_shape,
    shape_of,
    template_fields,
)
from loganalyzer.textlog import LAUNCHER_PREFIX, launcher_label, timestamps

# The head of each kind of report line, whole (the text before its first `|`): the launcher
# label, then an iteration line's `[stamp] iteration N/ M`, a memory report's `[Rank r]
# (after K iterations) memory (MB)`, a one-line timer report's `time (ms)`. Tested without
# capture groups (far cheaper); the few values a head holds are then taken one pattern each.
ITERATION_HEAD = (
    rf"{LAUNCHER_PREFIX}\s*(?:\[{ITERATION_STAMP}\]\s*)?iteration\s+\d{{1,18}}\s*/\s*\d+\s*$"
)
MEMORY_HEAD = rf"{LAUNCHER_PREFIX}\s*{MEMORY_AFTER} {re.escape(MEMORY_MARK)}\s*$"
TIMER_MARK = "time (ms)"
TIMER_HEAD = rf"{LAUNCHER_PREFIX}\s*{re.escape(TIMER_MARK)} $"

# A colour code (the general path removes them), a record glued on, or the mark of a line
# another reader of `scan.py` looks at: a memory or timer line holding one after its head is
# left to the general path, and so is a template (of iteration lines) whose text holds one.
NOT_PLAIN = "|".join(
    [r"\x1b", r"\[[0-9;]{1,8}m", r"iteration\s+\d", r"\[Rank \d", *map(re.escape, OTHER_MARKS)]
)


@dataclass(frozen=True)
class Taken:
    """What the lines read here yielded, in the shapes the general path gives them."""

    records: pl.DataFrame  # iteration lines with their per-iteration columns
    extras: pl.DataFrame  # (line, piece, position, printed, value) of fields without a column
    keys: frozenset[str]  # iteration-line field names, lower-cased
    rows: pl.DataFrame  # memory and timer rows: (line, launch, rank, after, name, value)
    lines: pl.Series  # the line numbers taken


def take_reports(frame: pl.DataFrame) -> Taken:
    """The report lines of `frame` (line, text, launch, in_args) that are read here."""
    text = pl.col("text")
    head = pl.col("head")
    split = (
        frame.filter(
            ~pl.col("in_args")
            & text.str.contains("|", literal=True)
            & ~text.str.contains("\r", literal=True)
        )
        .select("line", "launch", halves=text.str.splitn("|", 2))
        .unnest("halves")
        .rename({"field_0": "head", "field_1": "rest"})
    )
    records, extras, keys = _iteration_lines(
        split.filter(head.str.contains(ITERATION_HEAD))
        .with_columns(
            launcher_label(head),
            # The head is known whole: simpler patterns than its own find the same text.
            counter=head.str.split("iteration").list.last().str.splitn("/", 2),
            stamp=head.str.extract(r"\[([^\]]*)\]\s*iteration"),
        )
        .with_columns(
            number=pl.col("counter").struct.field("field_0").str.strip_chars(),
            total=pl.col("counter").struct.field("field_1").str.strip_chars(),
        )
        .drop("counter")
    )
    # Memory and timer lines are read by `key_value_rows`, which takes any field it can:
    # only lines with nothing else in them come here. Their heads' literal marks pick them
    # first: the patterns then see a quarter of the lines.
    marked = split.filter(
        head.str.contains(MEMORY_MARK, literal=True) | head.str.contains(TIMER_MARK, literal=True)
    )
    plain = marked.with_columns(
        is_memory=head.str.contains(MEMORY_HEAD), is_timer=head.str.contains(TIMER_HEAD)
    ).filter((pl.col("is_memory") | pl.col("is_timer")) & ~pl.col("rest").str.contains(NOT_PLAIN))
    memory = _memory_lines(plain.filter("is_memory"))
    timer = (
        plain.filter("is_timer")
        .with_columns(launcher_label(head))
        .select("line", "launch", "rest", "rank", after=pl.lit(None, dtype=pl.Int64))
    )
    rows = pl.concat(
        [
            key_value_rows(memory, pl.col("rest"), MEMORY_METRIC),
            key_value_rows(timer, pl.col("rest"), TIMER_METRIC),
        ]
    )
    lines = pl.concat(
        [records.get_column("line"), memory.get_column("line"), timer.get_column("line")]
    )
    return Taken(records=records, extras=extras, keys=keys, rows=rows, lines=lines)


def _memory_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """(line, launch, rest, rank, after) of memory lines known whole: the rank the line
    prints, else its launcher label's."""
    head = pl.col("head")
    found = lines.with_columns(
        rank=head.str.extract(r"\[Rank (\d{1,9})\] \(?after ").cast(pl.Int32),
        after=head.str.extract(r"after (\d{1,18}) iterations").cast(pl.Int64),
    )
    if found.get_column("rank").null_count():
        found = found.with_columns(
            pl.coalesce("rank", launcher_label(head)[0].alias("label_rank")).alias("rank")
        )
    return found.select("line", "launch", "rest", "rank", "after")


def _iteration_lines(
    lines: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, frozenset[str]]:
    """The iteration lines that fit one of the first `template.MAX_TEMPLATES` templates met,
    every value a plain number: records (as `scan_chunk` gives them), their extra fields and
    their field names. A value of any other kind leaves its line to the general path, so
    nothing but a number (no colour code, no glued record) can be in a line taken here."""
    read, _ = shape_by_shape(
        lines.with_columns(fields=pl.col("rest").str.split("|")).with_columns(
            count=pl.col("fields").list.len()
        ),
        "rest",
        _take_shape,
    )
    if not read:
        return lines.clear().select("line"), pl.DataFrame(), frozenset()
    found = pl.concat([records for records, _, _ in read])
    extras = [extra for _, extra, _ in read if extra is not None]
    return (
        found.with_columns(timestamps(found.get_column("timestamp"))),
        pl.concat(extras) if extras else pl.DataFrame(),
        frozenset().union(*(names for _, _, names in read)),
    )


def _take_shape(
    lines: pl.DataFrame, rest: str
) -> tuple[pl.Series, tuple[pl.DataFrame, pl.DataFrame | None, set[str]] | None]:
    """`shape_by_shape`'s reader for `_iteration_lines`: the records, extra fields and field
    names of the lines that fit the shape of `rest`, every value a plain number. A shape
    whose text holds a mark of another kind of line takes nothing."""
    shape = shape_of(rest)
    if re.search(NOT_PLAIN, shape):
        return pl.repeat(False, lines.height, eager=True), None
    texts = shape.split("|")
    fields = template_fields(shape)
    parts = lines.select(
        pl.exclude("fields"),
        *(
            pl.col("fields").list.get(i, null_on_oob=True).alias(f"field_{i}")
            for i in range(len(texts))
        ),
        piece=pl.lit(0, dtype=pl.Int32),
    )
    values = plain_values(parts, fields)
    # A value read means its field starts with the key (see `plain_values`).
    fits = pl.all_horizontal(
        pl.col("count") == len(texts),
        *(pl.col(f"field_{i}") == text for i, text in enumerate(texts) if ":" not in text),
        *(values.get_column(str(i)).is_not_null() for i in range(len(fields))),
    ).fill_null(False)
    taken = parts.select(fits).to_series()
    if not taken.any():
        return taken, None
    if not taken.all():
        parts, values = parts.filter(taken), values.filter(taken)
    wide, extra = arranged(values, fields)
    records = _records(parts).hstack(counts_as_integers(wide).drop("line", "piece"))
    return taken, (records, extra, {f.printed.lower() for f in fields})


def _records(matched: pl.DataFrame) -> pl.DataFrame:
    """One record per iteration line, with the columns `iteration_records` gives."""
    stamp = pl.coalesce("stamp", "kubelet")
    return matched.select(
        "line",
        "piece",
        "launch",
        "rank",
        iteration=pl.col("number").cast(pl.Int64),
        total=pl.col("total").cast(pl.Int64, strict=False),
        timestamp=stamp,
        key=record_key(pl.col("launch"), pl.col("number"), pl.col("rest"), stamp),
    )
