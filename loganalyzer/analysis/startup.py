"""Start-up time, per launch, from the timers Megatron prints before its first iteration.

`model-and-optimizer-setup` (which encloses `load-checkpoint`) and
`train/valid/test-data-iterators-setup` are printed once per launch, one-line or as
`(min, max) time across ranks` (the max bounds the launch). A timer belongs to the segment
whose first record is the next one in the same file, so a restart's gap can be split into its
start-up, its checkpoint load and what remains (launch, queueing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from loganalyzer.analysis.phases import timer_phase
from loganalyzer.model import Metrics
from loganalyzer.spill import collect

SETUP_PHASES = ("model-and-optimizer-setup", "train/valid/test-data-iterators-setup")
LOAD_PHASE = "load-checkpoint"


@dataclass(frozen=True)
class StartUp:
    """Seconds of one launch's start-up, and of its checkpoint load within it."""

    setup_s: float
    checkpoint_load_s: float


def startup_by_segment(
    metrics: Metrics, table: pl.DataFrame, names: Sequence[str]
) -> dict[int | None, StartUp]:
    """Start-up per segment, from the long table whose metric names are `names`
    (`spill.metric_names`); `None` holds timers no later record of their file follows (a
    launch that never logged an iteration)."""
    phase_of = {
        name: phase for name in names if (phase := timer_phase(name)) in (*SETUP_PHASES, LOAD_PHASE)
    }
    # the few start-up rows first: `replace_strict` is not run a batch at a time
    timers = (
        collect(
            metrics.lazy().filter(
                pl.col("iteration").is_null() & pl.col("name").is_in(list(phase_of))
            )
        )
        .select(
            pl.col("source").cast(pl.String),
            "line",
            pl.col("name").cast(pl.String).replace_strict(phase_of).alias("phase"),
            (pl.col("value") / 1000).alias("seconds"),
        )
        .group_by("source", "line", "phase")
        .agg(pl.col("seconds").max())
    )
    if timers.is_empty():
        return {}
    firsts = (
        table.group_by("segment", maintain_order=True)
        .agg(pl.col("source").first(), pl.col("line").first().alias("first_line"))
        .with_columns(pl.col("segment").fill_null(0).cast(pl.Int64))
        .drop_nulls(["source", "first_line"])
        .sort("first_line")
    )
    placed = timers.sort("line").join_asof(
        firsts,
        left_on="line",
        right_on="first_line",
        by="source",
        strategy="forward",
        check_sortedness=False,
    )
    found: dict[int | None, StartUp] = {}
    for segment, rows in placed.group_by("segment", maintain_order=True):
        setup = float(rows.filter(pl.col("phase").is_in(SETUP_PHASES))["seconds"].sum())
        load = float(rows.filter(pl.col("phase") == LOAD_PHASE)["seconds"].sum())
        total = setup or load  # load-checkpoint runs inside the setup timer
        found[segment[0]] = StartUp(total, min(load, total))
    return found
