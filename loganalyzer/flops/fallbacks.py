"""Facts recovered from what a log prints when its arguments do not state them.

Sequence length: Megatron-DeepSpeed prints `consumed samples` and `consumed tokens` on every
iteration line; their ratio between two records (or of the totals, for one record) is the
tokens per sample, the sequence length, where it comes out a whole number.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.model import Metrics
from loganalyzer.spill import collect

SAMPLES = "consumed samples"
TOKENS = "consumed tokens"


def seq_length_from_consumed(metrics: Metrics) -> tuple[int, str] | None:
    """The sequence length from consumed tokens ÷ consumed samples, with where it came from."""
    names = pl.col("name").cast(pl.String)
    rows = collect(
        metrics.lazy()
        .filter(pl.col("name").is_in([SAMPLES, TOKENS]) & pl.col("iteration").is_not_null())
        .with_columns(names.alias("name"))
    ).pivot("name", index="iteration", values="value", aggregate_function="first")
    if not {SAMPLES, TOKENS} <= set(rows.columns):
        return None
    rows = rows.drop_nulls([SAMPLES, TOKENS]).sort("iteration")
    if rows.is_empty():
        return None
    first, last = rows.row(0, named=True), rows.row(-1, named=True)
    samples = last[SAMPLES] - first[SAMPLES] if rows.height > 1 else last[SAMPLES]
    tokens = last[TOKENS] - first[TOKENS] if rows.height > 1 else last[TOKENS]
    if samples <= 0 or tokens <= 0 or tokens % samples:
        return None
    span = (
        f"iterations {first['iteration']}-{last['iteration']}"
        if rows.height > 1
        else f"iteration {last['iteration']}"
    )
    return int(tokens // samples), f"derived: consumed tokens / consumed samples over {span}"
