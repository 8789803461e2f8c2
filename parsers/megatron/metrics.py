"""Timer, memory, checkpoint and validation lines: rows of the long metrics table."""

from __future__ import annotations

import polars as pl

from loganalyzer.parsers.megatron.template import key_value_rows

TIMER_MINMAX = r"^\s+(\S.*?)\s*\.*:\s*\(\s*(" + r"[\d.]+" + r"),\s*([\d.]+)\)\s*$"


TIMER_MAX = r"^\s{3,}(\S.*?)\s*\.{2,}:\s*([\d.]+)\s*$"


# Numbers that must fit Int32 (rank) and Int64 (iteration) are bounded in length.
MEMORY_AFTER = r"(?:\[Rank (?P<own_rank>\d{1,9})\] )?\(?after (?P<after>\d{1,18}) iterations\)?"
MEMORY = rf"{MEMORY_AFTER} memory \(MB\)(?P<fields>.*)$"
MEMORY_MARK = "memory (MB)"
MEMORY_HEAD = rf"{MEMORY_AFTER} $"


CHECKPOINT_SAVE = r"saving checkpoint at iteration\s+(\d{1,18})\b"


VALIDATION = r"validation(?: loss)? at iteration (\d{1,18}) \|(.*)$"

# Megatron-DeepSpeed's (bigscience, 2021) and DeepSpeedExamples' Megatron-LM v1.1.5
# `flops_calculator` (megatron/utils.py), called by `training_log` after the timers below
# each iteration line: `print_rank_0(f"Effective Tera Flops per GPU: {round(tflops, 2)} and
# total parameters {round(params_in_billions, 3)} B")`. The TFLOPS per GPU it reports for
# the iteration line above it.
EFFECTIVE_TFLOPS_MARK = "Effective Tera Flops per GPU:"
EFFECTIVE_TFLOPS = r"Effective Tera Flops per GPU: ([\d.]+)"
EFFECTIVE_TFLOPS_METRIC = "reported/effective_tflops_per_gpu"


# A metric's name from the key of a `key: value` field of a memory or one-line timer report.
MEMORY_METRIC = pl.lit("memory/") + pl.col("key").str.replace_all(" ", "_") + pl.lit("_mb")
TIMER_METRIC = pl.lit("timer/") + pl.col("key")

# An iteration line's position, the anchor of the timer and memory lines below it.
ANCHOR_SCHEMA = {"anchor_line": pl.Int64, "launch": pl.Int32, "iteration": pl.Int64}


def anchored(metrics: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """Timer, memory and event rows with the iteration they belong to and a copy key.

    A row states its own iteration (`after K iterations`, `at iteration N`) or belongs to
    the last iteration line above it in the same launch (null if `anchors` has none). Copies
    printed by several ranks share `copy_key`.
    """
    if metrics.height == 0:
        return pl.DataFrame(
            schema={
                "line": pl.Int64,
                "launch": pl.Int32,
                "iteration": pl.Int64,
                "name": pl.Categorical,
                "value": pl.Float64,
                "rank": pl.Int32,
                "copy_key": pl.UInt64,
            }
        )
    placed = (
        metrics.with_columns(pl.col("launch").cast(pl.Int32))
        .sort("line", maintain_order=True)
        .join_asof(
            anchors,
            left_on="line",
            right_on="anchor_line",
            by="launch",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(iteration=pl.coalesce("after", "iteration"))
    )
    # The key hashes the name's category, not its text: cheaper, and the same for the same
    # name in every chunk (the categories are global).
    return placed.with_columns(pl.col("name").cast(pl.Categorical)).select(
        "line", "launch", "iteration", "name", "value", "rank", copy_key=row_key(pl.col("name"))
    )


def row_key(name: pl.Expr) -> pl.Expr:
    """The key the copies of one timer, memory or event row share (several ranks print the
    same line); `name` Categorical."""
    return pl.struct(
        "launch", name.alias("name"), "rank", "value", pl.col("iteration").alias("iteration")
    ).hash()


def key_values(frame: pl.DataFrame, fields: pl.Expr, name: pl.Expr) -> pl.DataFrame:
    """One metric row per `key: value` of `fields` (a '|'-separated text): `name` builds the
    metric's name from the key (`pl.col("key")`). Keeps line, launch, rank and `after`."""
    rows: pl.DataFrame = key_value_rows(frame, fields, name)
    return rows


def timers(pieces: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text")
    one_line = key_values(
        pieces.filter(text.str.contains(r"time \(ms\) \|")).with_columns(
            after=pl.lit(None, dtype=pl.Int64)
        ),
        text.str.replace(r"^.*?time \(ms\) \|", ""),
        TIMER_METRIC,
    )
    minmax = _matching(pieces, TIMER_MINMAX)
    blocks = (
        pl.concat(
            [
                _timer_rows(minmax, "/min", value_group="2"),
                _timer_rows(minmax, "/max", value_group="3"),
                _timer_rows(_matching(pieces, TIMER_MAX), "/max", value_group="2"),
            ]
        )
        .drop_nulls(["name", "value"])
        .with_columns(after=pl.lit(None, dtype=pl.Int64))
    )
    return pl.concat([one_line, blocks], how="diagonal")


def _matching(pieces: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """The pieces `pattern` matches, its groups in the struct column `m`."""
    return pieces.with_columns(m=pl.col("text").str.extract_groups(pattern)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )


def _timer_rows(matched: pl.DataFrame, suffix: str, value_group: str) -> pl.DataFrame:
    """One row per timer block line: `timer/<name><suffix>` and the value in `value_group`."""
    return matched.select(
        "line",
        "launch",
        "rank",
        name=pl.lit("timer/") + pl.col("m").struct.field("1") + suffix,
        value=pl.col("m").struct.field(value_group).cast(pl.Float64, strict=False),
    )


def memory_lines(pieces: pl.DataFrame) -> pl.DataFrame:
    """`[Rank N] (after K iterations) memory (MB) | allocated: v | ...` → memory/<key>_mb."""
    found = _memory_parts(pieces).filter(pl.col("after").is_not_null())
    return key_values(
        found.with_columns(rank=pl.coalesce(pl.col("own_rank"), pl.col("rank"))),
        pl.col("fields"),
        MEMORY_METRIC,
    )


def _memory_parts(pieces: pl.DataFrame) -> pl.DataFrame:
    """`pieces` with MEMORY's groups: `own_rank`, `after` and `fields`.

    A line with one `memory (MB)` is cut there and only its short head is matched (the
    whole-line regular expression costs several times more); it matches there or nowhere.
    Lines with several go through the whole expression.
    """
    text = pl.col("text")
    single = text.str.count_matches(MEMORY_MARK, literal=True) == 1
    at = text.str.find(MEMORY_MARK, literal=True)
    head = text.str.slice(0, at).str.extract_groups(MEMORY_HEAD)
    cut = pieces.filter(single).with_columns(
        own_rank=head.struct.field("own_rank").cast(pl.Int32),
        after=head.struct.field("after").cast(pl.Int64),
        fields=text.str.slice(at + len(MEMORY_MARK)),
    )
    whole = pieces.filter(~single)
    if whole.height == 0:
        return cut
    m = pl.col("text").str.extract_groups(MEMORY)
    matched = whole.with_columns(
        own_rank=m.struct.field("own_rank").cast(pl.Int32),
        after=m.struct.field("after").cast(pl.Int64),
        fields=m.struct.field("fields"),
    )
    return pl.concat([cut, matched]).sort("line", "piece", maintain_order=True)


def checkpoint_saves(pieces: pl.DataFrame) -> pl.DataFrame:
    return (
        pieces.with_columns(after=pl.col("text").str.extract(CHECKPOINT_SAVE).cast(pl.Int64))
        .drop_nulls("after")
        .select(
            "line",
            "launch",
            "rank",
            "after",
            name=pl.lit("event/checkpoint_save"),
            value=pl.lit(1.0),
        )
    )


def validation_lines(pieces: pl.DataFrame) -> pl.DataFrame:
    """`validation loss at iteration N | lm loss value: v | lm loss PPL: v |` → validation/<key>."""
    found = _matching(pieces, VALIDATION)
    return key_values(
        found.with_columns(after=pl.col("m").struct.field("1").cast(pl.Int64)),
        pl.col("m").struct.field("2"),
        pl.lit("validation/") + pl.col("key"),
    )


def effective_tflops(pieces: pl.DataFrame) -> pl.DataFrame:
    """`Effective Tera Flops per GPU: v and total parameters p B` → EFFECTIVE_TFLOPS_METRIC,
    tied like a timer to the iteration line above it."""
    return (
        pieces.with_columns(
            value=pl.col("text").str.extract(EFFECTIVE_TFLOPS).cast(pl.Float64, strict=False)
        )
        .drop_nulls("value")
        .select(
            "line",
            "launch",
            "rank",
            "value",
            after=pl.lit(None, dtype=pl.Int64),
            name=pl.lit(EFFECTIVE_TFLOPS_METRIC),
        )
    )
