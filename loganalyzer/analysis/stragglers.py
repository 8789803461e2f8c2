"""Stragglers: ranks that are consistently slower (or fuller) than the others.

For every metric logged per rank (rows of the long table with `rank` set), each rank's typical
value is its median over iterations, so that one bad iteration does not make a straggler; the
spread is the largest of those over their median across ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from loganalyzer.analysis.medians import grouped_median
from loganalyzer.model import Metrics

TOP_RANKS = 3


@dataclass(frozen=True)
class RankValue:
    """A rank and its median value of a metric."""

    rank: int
    value: float


@dataclass(frozen=True)
class RankSpread:
    """How far the highest rank sits above the typical one, for one per-rank metric."""

    metric: str
    ranks: int
    median: float
    max: float
    spread: float | None
    top: tuple[RankValue, ...]


def find_stragglers(metrics: Metrics) -> tuple[RankSpread, ...]:
    """One `RankSpread` per metric logged by at least two ranks, ordered by metric name."""
    per_rank = (
        grouped_median(metrics.lazy().filter(pl.col("rank").is_not_null()), ["name", "rank"])
        # sort by the text, not category codes: cast after grouping, on one row per rank
        .with_columns(pl.col("name").cast(pl.String))
        .sort(["name", "value", "rank"], descending=[False, True, False])
    )
    rows = (
        per_rank.group_by("name", maintain_order=True)
        .agg(
            pl.len().alias("ranks"),
            pl.col("value").median().alias("median"),
            pl.col("value").max().alias("max"),
            pl.col("rank").head(TOP_RANKS).alias("top_ranks"),
            pl.col("value").head(TOP_RANKS).alias("top_values"),
        )
        .filter(pl.col("ranks") >= 2)
    )
    return tuple(
        RankSpread(
            metric=row["name"],
            ranks=row["ranks"],
            median=row["median"],
            max=row["max"],
            spread=row["max"] / row["median"] if row["median"] else None,
            top=tuple(
                RankValue(rank, value)
                for rank, value in zip(row["top_ranks"], row["top_values"], strict=True)
            ),
        )
        for row in rows.iter_rows(named=True)
    )
