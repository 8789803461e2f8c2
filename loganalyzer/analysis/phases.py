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
    # The distinct names are few: map them to phases in Python, then the rows in one pass.
    phase_of = {
        name: name.removeprefix("timer/").removesuffix("/max")
        for name in metrics["name"].unique().cast(pl.String).to_list()
        if name.startswith("timer/") and not name.endswith("/min")
    }
    timers = (
        metrics.lazy()
        .filter(pl.col("name").is_in(list(phase_of)))
        .select(
            "iteration",
            pl.col("name").cast(pl.String).replace_strict(phase_of).alias("phase"),
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
