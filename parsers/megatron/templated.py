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

from loganalyzer.parsers.megatron import template
from loganalyzer.parsers.megatron.metrics import MEMORY_AFTER, MEMORY_METRIC, TIMER_METRIC
from loganalyzer.parsers.megatron.records import ITERATION_STAMP, record_key
from loganalyzer.parsers.megatron.template import (
    counts_as_integers,
    key_value_rows,
    read_template,
    template_fields,
)
from loganalyzer.textlog import LAUNCHER_PREFIX, timestamps

# The head of a report line, whole: the launcher label, then an iteration line's
# `[stamp] iteration N/ M`, a memory report's `[Rank r] (after K iterations) memory (MB)` or
# a one-line timer report's `time (ms)`.
HEAD = (
    LAUNCHER_PREFIX
    + r"\s*(?:"
    + rf"(?:\[(?P<stamp>{ITERATION_STAMP})\]\s*)?iteration\s+(?P<number>\d{{1,18}})\s*/\s*\d+\s*"
    + rf"|{MEMORY_AFTER} memory \(MB\)\s*"
    + r"|(?P<timer>time \(ms\) )"
    + r")$"
)

# After the head, any of these leaves the line to the general path: a carriage return or
# colour code (the general path splits and cleans), a record glued on, or the marker of a
# line another reader of `scan.py` looks at.
NOT_PLAIN = "|".join(
    [
        r"\r",
        r"\x1b",
        r"\[[0-9;]{1,8}m",
        r"iteration\s+\d",
        r"\[Rank \d",
        *(
            re.escape(marker)
            for marker in (
                "memory (MB)",
                "time (ms)",
                "across ranks",
                ".:",
                "world size",
                "padded vocab",
                "parameters",
                "batch_size",
                "gradient_accumulation_steps",
                "saving checkpoint",
                "validation",
            )
        ),
    ]
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
    split = (
        frame.filter(
            ~pl.col("in_args")
            & text.str.contains("|", literal=True)
            & ~text.str.contains("\r", literal=True)
        )
        .select("line", "launch", "text", parts=text.str.split("|"))
        .with_columns(head=pl.col("parts").list.first())
        .with_columns(rest=text.str.slice(pl.col("head").str.len_chars() + 1))
        .filter(~pl.col("rest").str.contains(NOT_PLAIN))
        .with_columns(found=pl.col("head").str.extract_groups(HEAD))
        .unnest("found")
    )
    label_rank = pl.coalesce("srun", "torchrun").cast(pl.Int32, strict=False)
    records, extras, keys = _iteration_lines(
        split.filter(pl.col("number").is_not_null()).with_columns(rank=label_rank)
    )
    memory = split.filter(pl.col("after").is_not_null()).select(
        "line",
        "launch",
        "rest",
        rank=pl.coalesce(pl.col("own_rank").cast(pl.Int32), label_rank),
        after=pl.col("after").cast(pl.Int64),
    )
    timer = split.filter(pl.col("timer").is_not_null()).select(
        "line", "launch", "rest", rank=label_rank, after=pl.lit(None, dtype=pl.Int64)
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


def _iteration_lines(
    lines: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, frozenset[str]]:
    """The iteration lines that fit one of the first `template.MAX_TEMPLATES` templates met:
    records (as `scan_chunk` gives them), their extra fields and their field names."""
    remaining = lines.with_columns(count=pl.col("parts").list.len())
    records: list[pl.DataFrame] = []
    extras: list[pl.DataFrame] = []
    keys: set[str] = set()
    for _ in range(template.MAX_TEMPLATES):
        if remaining.height == 0:
            break
        shape = re.sub(r":[^|]*", ":", remaining.item(0, "rest"))
        texts = shape.split("|")
        fields = template_fields(shape)
        parts = remaining.with_columns(
            pl.col("parts").list.get(i + 1, null_on_oob=True).alias(f"field_{i}")
            for i in range(len(texts))
        )
        fits = parts.select(
            pl.all_horizontal(
                pl.col("count") == len(texts) + 1,
                *(
                    pl.col(f"field_{i}").str.starts_with(text)
                    if text.endswith(":")
                    else pl.col(f"field_{i}") == text
                    for i, text in enumerate(texts)
                ),
            ).fill_null(False)
        ).to_series()
        matched = parts.filter(fits).with_columns(piece=pl.lit(0, dtype=pl.Int32))
        remaining = remaining.filter(~fits)
        if matched.height == 0:
            continue
        keys.update(f.printed.lower() for f in fields)
        wide, extra = read_template(matched, fields)
        records.append(_records(matched).hstack(counts_as_integers(wide).drop("line", "piece")))
        if extra is not None:
            extras.append(extra)
    if not records:
        return lines.clear().select("line"), pl.DataFrame(), frozenset()
    found = pl.concat(records)
    return (
        found.with_columns(timestamps(found.get_column("timestamp"))),
        pl.concat(extras) if extras else pl.DataFrame(),
        frozenset(keys),
    )


def _records(matched: pl.DataFrame) -> pl.DataFrame:
    """One record per iteration line, with the columns `iteration_records` gives."""
    stamp = pl.coalesce("stamp", "kubelet")
    return matched.select(
        "line",
        "piece",
        "launch",
        "rank",
        iteration=pl.col("number").cast(pl.Int64),
        timestamp=stamp,
        key=record_key(pl.col("launch"), pl.col("number"), pl.col("rest"), stamp),
    )
