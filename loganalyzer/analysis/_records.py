"""The working view of the per-iteration table that every analysis step shares.

Only records with a positive, finite step time carry timing, so only they are analysed (a
log can print `nan` or `inf` where a timer broke). `first` is the
first iteration a record covers.
"""

from __future__ import annotations

import polars as pl


def timed_records(table: pl.DataFrame) -> pl.DataFrame:
    """The table's timed records, in log order, with the columns the analysis reads."""
    interval = pl.col("interval").fill_null(1)
    return table.select(
        pl.col("segment").fill_null(0),
        "iteration",
        interval.alias("interval"),
        (pl.col("iteration") - interval + 1).alias("first"),
        pl.col("step_time_s").alias("step"),
        "timestamp",
    ).filter(pl.col("step").is_finite() & (pl.col("step") > 0))
