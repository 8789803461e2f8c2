"""The per-record facts the report draws, as columns beside the per-iteration table.

Each record's TFLOPS/GPU and MFU at its own step time (the run's FLOPs per iteration,
scaled by the record's global batch where it differs from the run's), whether it is
warm-up, and the slow step it belongs to (its kind and cause). They are read from the
summary document's facts (its FLOPs, peak, warm-up and slow steps with their causes), never
worked out again, so that an export and the report cannot disagree about a record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

# The columns `per_record` adds, in order, with their types.
PER_RECORD_SCHEMA: Mapping[str, pl.DataType] = {
    "tflops_per_gpu": pl.Float64(),
    "mfu": pl.Float64(),
    "slow_kind": pl.String(),
    "cause": pl.String(),
    "warmup": pl.Boolean(),
}


def per_record(table: pl.LazyFrame, document: Mapping[str, Any]) -> pl.LazyFrame:
    """`table` (the per-iteration table) with the `PER_RECORD_SCHEMA` columns appended, its
    rows in their order."""
    annotated = table.with_columns(
        _tflops(document).alias("tflops_per_gpu"),
        _mfu(document).alias("mfu"),
    )
    return _with_slow(annotated, document).with_columns(_warmup(document).alias("warmup"))


def _tflops(document: Mapping[str, Any]) -> pl.Expr:
    flops = (document.get("flops") or {}).get("per_iteration")
    run = document.get("run") or {}
    gpus, batch = run.get("num_gpus"), run.get("global_batch_size")
    if not flops or not gpus:
        return pl.lit(None, dtype=pl.Float64)
    # a batch ramp-up: FLOPs go with the sequences of the record's own batch
    scale = (pl.col("global_batch_size") / batch).fill_null(1.0) if batch else pl.lit(1.0)
    seconds = pl.when(pl.col("step_time_s") > 0).then(pl.col("step_time_s"))
    return scale * float(flops) / (seconds * float(gpus) * 1e12)


def _mfu(document: Mapping[str, Any]) -> pl.Expr:
    peak = (document.get("peak") or {}).get("tflops_per_gpu")
    return _tflops(document) / peak if peak else pl.lit(None, dtype=pl.Float64)


def _with_slow(table: pl.LazyFrame, document: Mapping[str, Any]) -> pl.LazyFrame:
    """The kind and cause of the slow step each record belongs to (null for the others):
    a record is in a slow step when its segment is the step's and its iteration within the
    step's range (the step nearest before it, by first iteration, in its segment)."""
    rows = []
    for step in document.get("slow_steps") or ():
        first = step.get("first_iteration", step.get("start_iteration"))
        last = step.get("last_iteration", step.get("end_iteration", step.get("iteration")))
        if first is not None and last is not None:
            cause = (step.get("cause") or {}).get("kind")
            rows.append((step.get("segment", 0), first, last, step.get("kind"), cause))
    if not rows:
        return table.with_columns(
            pl.lit(None, dtype=pl.String).alias("slow_kind"),
            pl.lit(None, dtype=pl.String).alias("cause"),
        )
    steps = pl.LazyFrame(
        rows,
        schema={
            "segment": pl.Int32,
            "first": pl.Int64,
            "last": pl.Int64,
            "slow_kind": pl.String,
            "cause": pl.String,
        },
        orient="row",
    ).sort("segment", "first")
    found = (
        table.with_row_index("_row")
        .sort("segment", "iteration")
        .join_asof(steps, left_on="iteration", right_on="first", by="segment")
        .with_columns(
            pl.when(pl.col("iteration") <= pl.col("last")).then(pl.col(c)).alias(c)
            for c in ("slow_kind", "cause")
        )
        .sort("_row")
        .drop("_row", "first", "last")
    )
    return found


def _warmup(document: Mapping[str, Any]) -> pl.Expr:
    """Warm-up: a segment's leading records, up to its warm-up's last iteration."""
    flag: pl.Expr = pl.lit(False)
    for warm in document.get("warmup") or ():
        last = warm.get("last_iteration")
        if warm.get("records") and last is not None:
            flag = flag | ((pl.col("segment") == warm["segment"]) & (pl.col("iteration") <= last))
    return flag
