"""Chart data at scale: fewer points, same shape, nothing a reader must see left out.

A chart of a million records draws no better than one of a few thousand, but it costs
megabytes and seconds to open. `keep_shape` splits the records into equal buckets and keeps
each bucket's lowest and highest point (min/max per bucket keeps every spike and dip
visible), plus every record the caller marks as essential: flagged slow steps, the first and
last record of each segment (restart boundaries), and the first and last record of the run.
"""

from __future__ import annotations

import polars as pl

# Points per series: two per bucket (min and max) over this many records.
MAX_POINTS = 2000


def keep_shape(
    frame: pl.DataFrame, value: str, keep: pl.Expr | None = None, max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """The rows of `frame` (in their order) that draw `value`'s shape: the min and max of each
    bucket, every row where `keep` is true, and the first and last row. `frame` whole when it
    is already small enough."""
    if frame.height <= max_points:
        return frame
    buckets = max(1, max_points // 2)
    indexed = frame.with_row_index("_row")
    bucket = (pl.col("_row") * buckets // frame.height).alias("_bucket")
    extremes = (
        indexed.filter(pl.col(value).is_not_null())
        .group_by(bucket)
        .agg(
            pl.col("_row").sort_by(value).first().alias("low"),
            pl.col("_row").sort_by(value).last().alias("high"),
        )
    )
    chosen = pl.concat(
        [
            extremes["low"],
            extremes["high"],
            pl.Series([0, frame.height - 1], dtype=pl.UInt32),
            indexed.filter(keep)["_row"] if keep is not None else pl.Series([], dtype=pl.UInt32),
        ]
    )
    return indexed.filter(pl.col("_row").is_in(chosen.implode())).drop("_row")
