"""The straggler evidence (`spreads`) on a long table whose truth is known, held in memory and
spilled to Parquet: the rows narrowed in streaming passes give what a whole-table group-by
gives."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from loganalyzer.analysis.spreads import STRAGGLER_RATIO, iteration_spreads
from loganalyzer.model import Metrics
from loganalyzer.spill import metric_names
from tests.analysis_factories import make_metrics

ITERATIONS = range(1, 41)
STRAGGLING = {7: 2, 23: 1}  # iteration: the rank that ran slow there


def _long_table() -> pl.DataFrame:
    """Four ranks' forward-backward timers (one slow rank at two iterations), rank 0's
    optimizer timer printed once per iteration (no spread), and a (min, max) block without
    ranks for the data loader (max far above min at iteration 31)."""
    rows: list[tuple[int, str, float, int | None]] = []
    for i in ITERATIONS:
        for rank in range(4):
            slow = STRAGGLING.get(i) == rank
            rows.append((i, "timer/forward-backward", 900.0 + 3 * rank + i % 5 + 600 * slow, rank))
        rows.append((i, "timer/optimizer", 50.0 + i % 3, 0))
        rows.append((i, "timer/batch-generator/min", 10.0, None))
        rows.append((i, "timer/batch-generator/max", 40.0 if i == 31 else 11.0 + i % 2, None))
        rows.append((i, "lm loss", 2.0, None))
    return make_metrics(rows)


def _whole_table_spreads(metrics: pl.DataFrame) -> pl.DataFrame:
    """The same evidence the direct way: every timer row grouped at once."""
    timers = metrics.filter(pl.col("name").cast(pl.String).str.starts_with("timer/"))
    per_rank = (
        timers.filter(pl.col("rank").is_not_null())
        .sort("value", descending=True)
        .group_by("iteration", pl.col("name").cast(pl.String).alias("metric"))
        .agg(
            spread=pl.col("value").max() / pl.col("value").median(),
            rank=pl.col("rank").first(),
            n=pl.len(),
        )
        .filter(pl.col("n") >= 2)
        .select("iteration", "metric", "spread", "rank", against=pl.lit("median rank"))
    )
    name = pl.col("name").cast(pl.String)
    across = (
        timers.filter(pl.col("rank").is_null())
        .with_columns(
            metric=name.str.replace(r"/(max|min)$", ""), bound=name.str.extract(r"/(max|min)$")
        )
        .pivot("bound", index=["iteration", "metric"], values="value", aggregate_function="max")
        .select(
            "iteration",
            "metric",
            spread=pl.col("max") / pl.col("min"),
            rank=pl.lit(None, dtype=pl.Int32),
            against=pl.lit("fastest rank (max over min across ranks)"),
        )
    )
    return (
        pl.concat([per_rank, across])
        .with_columns(typical=pl.col("spread").median().over("metric"))
        .with_columns(excess=pl.col("spread") / pl.col("typical"))
        .filter(pl.col("excess") >= STRAGGLER_RATIO)
    )


def _spilled(metrics: pl.DataFrame, folder: Path) -> pl.LazyFrame:
    """`metrics` as the spill leaves a long table past its budget: Parquet files, scanned."""
    paths = []
    for number, part in enumerate(metrics.iter_slices(64)):
        paths.append(folder / f"part-{number}.parquet")
        part.write_parquet(paths[-1], row_group_size=16)
    return pl.scan_parquet(paths)


@pytest.mark.parametrize("spilled", [False, True], ids=["held", "spilled"])
def test_spreads_are_those_of_a_whole_table_group_by(spilled: bool, tmp_path: Path) -> None:
    metrics = _long_table()
    table: Metrics = _spilled(metrics, tmp_path) if spilled else metrics
    found = iteration_spreads(table, metrics_names := metric_names(table))
    assert "timer/optimizer" in metrics_names
    order = ["iteration", "metric"]
    assert found.sort(order).equals(_whole_table_spreads(metrics).sort(order))
    # the slow rank at each straggling iteration, and the data loader's max over min
    named = {(row["iteration"], row["metric"]): row["rank"] for row in found.iter_rows(named=True)}
    assert named == {
        (7, "timer/forward-backward"): 2,
        (23, "timer/forward-backward"): 1,
        (31, "timer/batch-generator"): None,
    }


def test_a_timer_printed_once_per_iteration_gives_no_spread() -> None:
    """Rank 0's timer block, one row per iteration and timer: no group of two ranks."""
    rows = [(i, "timer/forward-backward", 900.0 + i, 0) for i in ITERATIONS]
    metrics = make_metrics(rows)
    assert iteration_spreads(metrics, metric_names(metrics)).is_empty()
