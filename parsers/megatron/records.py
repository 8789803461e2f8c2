"""Iteration lines: `iteration N/ M | key: value | ...` into the per-iteration columns."""

from __future__ import annotations

import polars as pl

from loganalyzer.model import ITERATION_SCHEMA
from loganalyzer.textlog import (
    numbers,
    timestamps,
)

# At most 18 digits: an iteration number fits Int64 (a longer one is damage, not a record).
ITERATION_START = r"iteration\s+\d{1,18}\s*/\s*\d+\s*\|"


ITERATION_HEAD = r"^iteration\s+(\d{1,18})\s*/\s*(\d+)"


# The bracketed timestamp Megatron-LM prints before "iteration" (core >= 0.6).
ITERATION_STAMP = r"\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?"
TIMESTAMP_BEFORE_ITERATION = rf"\[({ITERATION_STAMP})\]\s*$"


# Iteration-line fields that have a column of their own; every other field goes to the long
# table under its printed name. Keys are lower-cased and stripped of spaces around them.
FIELD_COLUMNS: dict[str, str] = {
    "lm loss": "loss",
    "lm-loss": "loss",
    "loss": "loss",
    "learning rate": "lr",
    "grad norm": "grad_norm",
    "loss scale": "loss_scale",
    "global batch size": "global_batch_size",
    "samples per second": "samples_per_s",
    "throughput per gpu (tflop/s/gpu)": "reported_tflops_per_gpu",
    "compute per gpu (tflop/s/gpu)": "reported_tflops_per_gpu",
    "tflops": "reported_tflops_per_gpu",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
}


# Divisors to seconds (a division keeps 150471.3 ms exactly 150.4713 s).
STEP_TIME_FIELDS = {
    "elapsed time per iteration (ms)": 1000.0,
    "elapsed time per iteration (s)": 1.0,
}


def iteration_records(pieces: pl.DataFrame) -> pl.DataFrame:
    """One row per iteration line: its number, the counter's total (`train_iters`: a change
    of it is another run), its fields' text, its timestamp, its copy key.

    The match is located with a capture-free search and the pieces are sliced around it:
    capturing the whole line with a regular expression costs several times more.
    """
    text = pl.col("text")
    located = _char_offsets(pieces.with_columns(at=text.str.find(ITERATION_START)).drop_nulls("at"))
    head = text.str.slice(pl.col("at"), 48)
    number = head.str.extract(ITERATION_HEAD, 1)
    stamp = pl.coalesce(
        text.str.slice(0, pl.col("at")).str.extract(TIMESTAMP_BEFORE_ITERATION),
        pl.col("line_stamp"),
    )
    rest = text.str.slice(pl.col("at")).str.splitn("|", 2).struct.field("field_1")
    found = located.select(
        "line",
        "piece",
        "launch",
        "rank",
        iteration=number.cast(pl.Int64),
        total=head.str.extract(ITERATION_HEAD, 2).cast(pl.Int64, strict=False),
        rest=rest,
        timestamp=stamp,
        key=record_key(pl.col("launch"), number, rest, stamp),
    )
    return found.with_columns(timestamps(found.get_column("timestamp")))


def record_key(launch: pl.Expr, number: pl.Expr, rest: pl.Expr, stamp: pl.Expr) -> pl.Expr:
    """The key copies of one iteration line share: several ranks or nodes print the same
    line; a redone iteration that printed the same values at another time is not a copy."""
    return pl.struct(
        launch.alias("launch"), number.alias("number"), rest.alias("rest"), stamp.alias("stamp")
    ).hash()


def _char_offsets(located: pl.DataFrame) -> pl.DataFrame:
    """`at` in characters: `str.find` counts bytes and `str.slice` characters, so the few
    lines with non-ASCII text (a mangled byte, a host name) have theirs recounted."""
    text = pl.col("text")
    ascii_only = text.str.len_bytes() == text.str.len_chars()
    other = located.filter(~ascii_only)
    if other.height == 0:
        return located
    recounted = other.with_columns(
        at=text.str.extract(f"^(.*?){ITERATION_START}").str.len_chars().cast(located["at"].dtype)
    )
    return pl.concat([located.filter(ascii_only), recounted]).sort("line", "piece")


def iteration_fields(records: pl.DataFrame) -> pl.DataFrame:
    """Every `key: value` field of every iteration line, long: (line, piece, key, value),
    with `column` naming the table column it fills (null for fields kept in the long table).
    """
    pairs = (
        records.select("line", "piece", field=pl.col("rest").str.split("|"))
        .explode("field")
        .with_columns(kv=pl.col("field").str.splitn(":", 2))
        .select(
            "line",
            "piece",
            printed=pl.col("kv").struct.field("field_0").str.strip_chars(),
            raw=pl.col("kv").struct.field("field_1"),
        )
        .filter(pl.col("raw").is_not_null())
        .with_columns(key=pl.col("printed").str.to_lowercase())
    )
    step_divisor = pl.col("key").replace_strict(
        STEP_TIME_FIELDS, default=None, return_dtype=pl.Float64
    )
    return numbers(pairs, "raw", "value").with_columns(
        column=pl.when(step_divisor.is_not_null())
        .then(pl.lit("step_time_s"))
        .otherwise(pl.col("key").replace_strict(FIELD_COLUMNS, default=None)),
        value=pl.col("value") / step_divisor.fill_null(1.0),
    )


def wide_fields(fields: pl.DataFrame) -> pl.DataFrame:
    """The iteration-line fields that have a column, one column each, keyed by (line, piece)."""
    known = fields.drop_nulls("column")
    columns = list(dict.fromkeys([*FIELD_COLUMNS.values(), "step_time_s"]))
    wide = known.unique(["line", "piece", "column"], keep="first", maintain_order=True).pivot(
        on="column", index=["line", "piece"], values="value", on_columns=columns
    )
    # A count printed as nan, inf or past Int64 is no count: null, not a failed cast.
    counts = [c for c in columns if ITERATION_SCHEMA[c] == pl.Int64]
    return wide.with_columns(pl.col(counts).cast(pl.Int64, strict=False))
