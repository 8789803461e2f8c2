"""NeMo's per-step lines, as one row per printed record and one row per printed field.

Two shapes, both read with polars over a chunk's lines:
- NeMo 2's ProgressPrinter (nemo/lightning/pytorch/callbacks/progress_printer.py):
  ``Training epoch E, iteration i/N-1 | key: value | ...``, floats with 4 significant
  digits (``1.249e+03``), integral floats as integers;
- NeMo 1's PyTorch Lightning tqdm bar: ``Epoch E: : 47%|####  | 7/15 [06:19<07:13,
  reduced_train_loss=11.50, global_step=5.000, ..., train_step_timing in s=49.50]``,
  redrawn with ``\\r`` (several frames on one physical line), values with 3 or 4
  significant digits (``global_step=2e+3`` past step 999 in Lightning < 2).
"""

from __future__ import annotations

import polars as pl

from loganalyzer.textlog import clean, launcher_label, numbers, split_glued, strip_launcher

# A ProgressPrinter line, from its start (after any launcher label or logger prefix).
PROGRESS = r"^Training epoch (\d{1,9}), iteration (\d{1,18})/(\d{1,18})"
PROGRESS_MARK = "Training epoch "

# A frame of NeMo 1's Lightning bar: the epoch, the count (`7/15`, or `1it` without a
# total), the bracket with tqdm's clock and the postfix `key=value` items. The bracket ends
# at its first `]`: a logger line may be glued after it.
BAR_START = r"Epoch \d{1,9}: "
BAR = r"Epoch (\d{1,9}): .*?(\d{1,18})(?:/(\d{1,18})|it) \[([^\]]*)\]"
# Postfix items only NeMo's models log to the bar: a bar without them is no NeMo bar.
BAR_MARKS = ("reduced_train_loss=", "train_step_timing in s=")

# A logger's `[2025-11-20T14:55:23+08:00] ` or `[NeMo I 2024-06-17 08:36:41 file:12] ` stamp
# before a ProgressPrinter line, as job launchers and NeMo's logger print it.
LINE_STAMP = r"^\[(\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?)\]"

# Fields with a column of their own (names lower-cased as printed); the others go to the
# long table under their printed name.
FIELD_COLUMNS = {
    "reduced_train_loss": "loss",
    "lr": "lr",
    "global_batch_size": "global_batch_size",
    "grad_norm": "grad_norm",
    "train_step_timing in s": "step_time_s",
    # FLOPsMeasurementCallback (NeMo 2.0-2.1 `tflops_per_sec_per_gpu`, 2.2+ `TFLOPS_per_GPU`)
    "tflops_per_sec_per_gpu": "reported_tflops_per_gpu",
    "tflops_per_gpu": "reported_tflops_per_gpu",
    # torch.cuda.max_memory_allocated(), in bytes (62777982976 on an 80 GB H100)
    "max_memory_allocated": "mem_max_allocated_gb",
}

# Divisors from a field's printed unit to its column's: bytes to GiB, as the table's memory
# columns hold (Megatron's `max allocated` MB / 1024).
FIELD_DIVISORS = {"max_memory_allocated": float(2**30)}

# Lightning's own running-mean `loss=` in a NeMo 1 bar: the loss only where the model
# logged no `reduced_train_loss`.
BAR_LOSS = "loss"


def progress_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """NeMo 2 ProgressPrinter records of a chunk: (line, rank, stamp, epoch, step, total,
    rest), `rest` the `| key: value` fields as printed."""
    text = pl.col("text")
    lines = frame.filter(text.str.contains(PROGRESS_MARK, literal=True))
    if lines.height == 0:
        return _empty_progress()
    # Most logs print the line bare: only the others pay for the launcher and colour patterns
    bare = text.str.starts_with(PROGRESS_MARK)
    rank, _ = launcher_label(text)
    prefixed = lines.filter(~bare).with_columns(rank, clean(strip_launcher(text)).alias("text"))
    lines = pl.concat(
        [
            lines.filter(bare).with_columns(
                rank=pl.lit(None, pl.Int32), stamp=pl.lit(None, pl.String)
            ),
            prefixed.with_columns(
                stamp=text.str.extract(LINE_STAMP), text=text.str.extract(f"({PROGRESS_MARK}.*)$")
            ),
        ]
    ).sort("line")
    head = text.str.slice(0, 60).str.extract_groups(PROGRESS).struct.field
    return lines.select(
        "line",
        "rank",
        "stamp",
        epoch=head("1").cast(pl.Int64, strict=False),
        step=head("2").cast(pl.Int64, strict=False),
        total=head("3").cast(pl.Int64, strict=False),
        rest=text.str.splitn("|", 2).struct.field("field_1"),
    ).drop_nulls("step")


def _empty_progress() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "line": pl.Int64,
            "rank": pl.Int32,
            "stamp": pl.String,
            "epoch": pl.Int64,
            "step": pl.Int64,
            "total": pl.Int64,
            "rest": pl.String,
        }
    )


def progress_fields(records: pl.DataFrame) -> pl.DataFrame:
    """Every `key: value` field of the ProgressPrinter records, long: (line, key, printed,
    value). A value printed as a list (`global_step: [0, 1]`, NeMo 2.0's early builds) is
    read as its first number."""
    pairs = (
        records.select("line", field=pl.col("rest").str.split("|"))
        .explode("field")
        .with_columns(kv=pl.col("field").str.splitn(":", 2))
        .select(
            "line",
            printed=pl.col("kv").struct.field("field_0").str.strip_chars(),
            raw=pl.col("kv").struct.field("field_1").str.strip_chars().str.strip_prefix("["),
        )
        .filter(pl.col("raw").is_not_null() & (pl.col("printed") != ""))
    )
    return numbers(pairs, "raw", "value").with_columns(key=pl.col("printed").str.to_lowercase())


def bar_frames(frame: pl.DataFrame) -> pl.DataFrame:
    """NeMo 1 Lightning bar frames of a chunk: (line, piece, rank, epoch, count, total,
    postfix), one per `\\r`-separated frame that carries NeMo's postfix items."""
    text = pl.col("text")
    lines = frame.filter(text.str.contains_any(list(BAR_MARKS)))
    if lines.height == 0:
        return _empty_bars()
    rank, _ = launcher_label(text)
    lines = lines.with_columns(rank, clean(strip_launcher(text)).alias("text"))
    pieces = split_glued(lines, BAR_START)
    bars = pieces.filter(text.str.contains_any(list(BAR_MARKS))).with_columns(
        found=text.str.extract_groups(BAR)
    )
    field = pl.col("found").struct.field
    return bars.select(
        "line",
        "piece",
        "rank",
        epoch=field("1").cast(pl.Int64, strict=False),
        count=field("2").cast(pl.Int64, strict=False),
        total=field("3").cast(pl.Int64, strict=False),
        postfix=field("4"),
    ).drop_nulls("count")


def _empty_bars() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "line": pl.Int64,
            "piece": pl.Int32,
            "rank": pl.Int32,
            "epoch": pl.Int64,
            "count": pl.Int64,
            "total": pl.Int64,
            "postfix": pl.String,
        }
    )


def bar_fields(bars: pl.DataFrame) -> pl.DataFrame:
    """The postfix `key=value` items of the bar frames, long: (line, piece, key, printed,
    value, exact). tqdm's own clock items (`06:19<07:13`, `41.36s/it`) have no `=`.
    `exact` says the value was printed as a plain decimal (not `2e+3`)."""
    pairs = (
        bars.select("line", "piece", item=pl.col("postfix").str.split(", "))
        .explode("item")
        .filter(pl.col("item").str.contains("=", literal=True))
        .with_columns(kv=pl.col("item").str.splitn("=", 2))
        .select(
            "line",
            "piece",
            printed=pl.col("kv").struct.field("field_0").str.strip_chars(),
            raw=pl.col("kv").struct.field("field_1").str.strip_chars(),
        )
        .with_columns(exact=pl.col("raw").str.contains(r"^\d+(?:\.\d*)?$"))
    )
    return numbers(pairs, "raw", "value").with_columns(key=pl.col("printed").str.to_lowercase())
