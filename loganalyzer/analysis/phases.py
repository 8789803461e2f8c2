"""Which per-phase timer grew the most at a slow step.

Timers come from the long metrics table as `timer/<phase>` (one value, ms) or
`timer/<phase>/max` and `timer/<phase>/min` (across ranks). The max across ranks bounds the
step, so a phase's value at an iteration is the largest of what was logged for it (`/min`
ignored). Its growth is its value minus its median over the run. Timers that enclose others
(`ENCLOSING`) grow whenever any phase inside them does, so they are named only when no other
timer was logged.
"""

from __future__ import annotations

import polars as pl

ENCLOSING = frozenset({"forward-backward", "interval-time", "iteration-time", "train-step"})


def phase_growth(metrics: pl.DataFrame, iterations: pl.Series) -> pl.DataFrame:
    """For each of `iterations` with timers, the phase that grew the most: columns
    `iteration`, `phase`, `phase_delta_ms`."""
    name = pl.col("name")
    timers = (
        metrics.lazy()
        .filter(name.str.starts_with("timer/") & ~name.str.ends_with("/min"))
        .select(
            "iteration",
            name.str.strip_prefix("timer/").str.strip_suffix("/max").alias("phase"),
            "value",
        )
        .group_by("iteration", "phase")
        .agg(pl.col("value").max())
        .with_columns(pl.col("value").median().over("phase").alias("median"))
        .collect()
    )
    leaves = timers.filter(~pl.col("phase").is_in(list(ENCLOSING)))
    if leaves.height:
        timers = leaves
    return (
        timers.join(pl.DataFrame({"iteration": iterations.unique()}), on="iteration", how="semi")
        .select("iteration", "phase", (pl.col("value") - pl.col("median")).alias("phase_delta_ms"))
        .sort(["iteration", "phase_delta_ms", "phase"], descending=[False, True, False])
        .group_by("iteration", maintain_order=True)
        .first()
    )
