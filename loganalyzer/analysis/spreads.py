"""Per iteration and timer, how far the slowest rank sat from the others: the straggler
evidence `causes` looks up at slow iterations.

Two kinds of rows give it: a timer several ranks logged at one iteration (its largest value
over their median), and a timer's `/max` and `/min` across ranks (max over min). Either is
compared with the timer's typical spread over the run.

The long table may be far larger than memory allows to sort (`loganalyzer.spill`), so rows
are narrowed in streaming passes before anything is held: per-rank rows only for the timers
some iteration logged more than once (a timer each iteration logs once, as Megatron's rank 0
prints its timer block, makes groups of one row, which have no spread), and three columns
of them; names are mapped to their timer and bound once each, not row by row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

from loganalyzer.model import Metrics
from loganalyzer.spill import collect

# A per-rank (or max-over-min) spread this far beyond its run-typical value marks a straggler.
STRAGGLER_RATIO = 1.25

_BOUND = re.compile(r"/(max|min)$")


def iteration_spreads(metrics: Metrics, names: Sequence[str]) -> pl.DataFrame:
    """Rows `iteration`, `metric`, `spread`, `rank` (the slowest rank, where rows name ranks),
    `against`, `typical` and `excess` (spread over typical) wherever the excess reaches
    `STRAGGLER_RATIO`; `names` are the table's metric names (`spill.metric_names`)."""
    # rows matched by category, names by text once each (see `events_of`)
    timer_names = [name for name in names if name.startswith("timer/")]
    timers = metrics.lazy().filter(
        pl.col("name").is_in(timer_names) & pl.col("iteration").is_not_null()
    )
    spreads = _rank_spreads(timers.filter(pl.col("rank").is_not_null()))
    across = _bound_spreads(
        timers.filter(pl.col("rank").is_null()),
        [name for name in timer_names if _BOUND.search(name)],
    )
    if across is not None:
        spreads = pl.concat([spreads, across], how="diagonal_relaxed")
    typical = pl.col("spread").median().over("metric")
    return (
        spreads.with_columns(typical.alias("typical"))
        .with_columns((pl.col("spread") / pl.col("typical")).alias("excess"))
        .filter(pl.col("excess") >= STRAGGLER_RATIO)
    )


def _rank_spreads(ranked: pl.LazyFrame) -> pl.DataFrame:
    """Per iteration and timer logged by two ranks or more: max over median, and the rank of
    the max."""
    counts = collect(
        ranked.group_by("name").agg(rows=pl.len(), iterations=pl.col("iteration").n_unique())
    )
    repeated = counts.filter(pl.col("rows") > pl.col("iterations"))["name"].cast(pl.String)
    # sort and median are not run a batch at a time: the few rows left are held
    rows = collect(
        ranked.filter(pl.col("name").is_in(repeated.to_list())).select(
            "iteration", "name", "value", "rank"
        )
    )
    # plain aggregations, the ratio taken after: an expression over aggregates inside `agg`
    # gathers every group's rows
    return (
        rows.sort("value", descending=True)
        .group_by("iteration", "name")
        .agg(
            pl.col("value").max().alias("highest"),
            pl.col("value").median().alias("middle"),
            pl.col("rank").first(),
            pl.len().alias("n"),
        )
        .filter(pl.col("n") >= 2)
        .select(
            "iteration",
            pl.col("name").cast(pl.String).alias("metric"),
            (pl.col("highest") / pl.col("middle")).alias("spread"),
            "rank",
            against=pl.lit("median rank"),
        )
    )


def _bound_spreads(unranked: pl.LazyFrame, bound_names: list[str]) -> pl.DataFrame | None:
    """Per iteration and timer with both a `/max` and a `/min` across ranks: max over min
    (the largest of each where one was logged twice); None when no timer has both."""
    bounds = pl.DataFrame(
        {
            "name": bound_names,
            "metric": [_BOUND.sub("", name) for name in bound_names],
            "bound": [match.group(1) for name in bound_names if (match := _BOUND.search(name))],
        },
        schema={"name": pl.Categorical, "metric": pl.String, "bound": pl.String},
    )
    rows = collect(
        unranked.filter(pl.col("name").is_in(bound_names)).select("iteration", "name", "value")
    )
    pivoted = (
        rows.join(bounds, on="name", how="left", maintain_order="left")
        .drop("name")
        .pivot("bound", index=["iteration", "metric"], values="value", aggregate_function="max")
    )
    if not {"max", "min"} <= set(pivoted.columns):
        return None
    return pivoted.filter(pl.col("min") > 0).select(
        "iteration",
        "metric",
        (pl.col("max") / pl.col("min")).alias("spread"),
        rank=pl.lit(None, dtype=pl.Int32),
        against=pl.lit("fastest rank (max over min across ranks)"),
    )
