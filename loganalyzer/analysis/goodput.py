"""The goodput budget: the wall clock split into productive steady steps and badput by cause.

The wall clock is what the logs span: the start-up timers of the first launch (see
`startup`; a later launch's start-up lies inside its restart gap, which it is taken from),
then per segment its timestamp span plus the work of its first record
(a record is stamped when its interval ends), or the sum of its step times where records
carry no timestamps, then the restart gaps between segments. A timestamped segment whose
log was cut (iterations missing between two records) spans iterations that no step time
covers: "iterations not in the log", at the next shown record's pace.

The logged step time is split as in `accounting` (productive, warm-up, slow steps, redone
work), each slow step's and stall's loss going to its cause (see `causes`), and records that
paid for a printed save or evaluation handing their excess to it. What the clock holds
beyond the step times and the stalls is "untimed gaps"; where the step timers sum to more
than the clock (timestamps rounded to the second), the excess comes off the productive time.
The items therefore sum to the wall clock exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from loganalyzer.analysis._records import by_segment, timed_records
from loganalyzer.analysis.causes import Causes
from loganalyzer.analysis.clocks import resolution_of
from loganalyzer.render.numbers import duration, percent

if TYPE_CHECKING:
    from loganalyzer.analysis import Analysis

# Below this, a difference between sums of step times is floating-point rounding.
ROUNDING_S = 1e-6
# Budget lines in display order; a cause kind maps to one of them.
PRODUCTIVE = "productive steady steps"
UNLOGGED = "iterations not in the log"
LINES = (
    PRODUCTIVE,
    "start-up",
    "warm-up",
    "checkpoint saves",
    "evaluation",
    "data loading",
    "stragglers",
    "other slow steps",
    "restart gaps",
    "redone work",
    UNLOGGED,
    "untimed gaps",
)
LINE_OF_CAUSE = {
    "checkpoint_save": "checkpoint saves",
    "evaluation": "evaluation",
    "data_loading": "data loading",
    "straggler": "stragglers",
}


@dataclass(frozen=True)
class BudgetLine:
    """One line of the budget: seconds and share of the wall clock."""

    name: str
    seconds: float
    share: float | None


@dataclass(frozen=True)
class Goodput:
    """The budget; `lines` sum to `wall_s`. `goodput` is the productive share of the wall
    clock the log covers (iterations not in the log left out: they are unknown, not lost)."""

    wall_s: float
    wall_clock: str
    lines: tuple[BudgetLine, ...]
    goodput: float | None
    summary: str


def budget(analysis: Analysis, causes: Causes, table: pl.DataFrame) -> Goodput:
    """The goodput budget of a run from its analysis, its causes and its per-iteration
    `table` (start-up timers from `analysis.long`)."""
    seconds = dict.fromkeys(LINES, 0.0)
    time = analysis.time
    gaps = {r.segment: r.gap_s for r in analysis.restarts}
    outside = 0.0  # start-up the clock does not already hold
    for segment, launch in analysis.long.startup.items():
        gap = gaps.get(segment) if segment is not None else None
        inside = min(launch.setup_s, gap) if gap is not None else 0.0
        seconds["start-up"] += launch.setup_s
        seconds["restart gaps"] -= inside
        outside += launch.setup_s - inside
    seconds["warm-up"] = time.warmup_s
    seconds["redone work"] = time.redone_s
    seconds["restart gaps"] += time.restart_gaps_s
    seconds[PRODUCTIVE] = time.productive_s
    for entry in causes.entries:
        if entry.entry == "stall":
            line = LINE_OF_CAUSE.get(entry.cause.kind, "untimed gaps")
        else:
            line = LINE_OF_CAUSE.get(entry.cause.kind, "other slow steps")
        seconds[line] += entry.lost_s
    for cost in causes.events:
        seconds[PRODUCTIVE] -= cost.lost_s
        seconds[LINE_OF_CAUSE[cost.kind]] += cost.lost_s
    clock_s, unlogged_s, how = segments_clock(table, resolution_of(analysis.clocks))
    seconds[UNLOGGED] = unlogged_s
    untimed = clock_s - time.logged_s - unlogged_s - time.stalls_s
    if abs(untimed) < ROUNDING_S:
        untimed = 0.0
    # The clock is the truth: step timers that sum to more than it overstate the work.
    seconds["untimed gaps" if untimed > 0 else PRODUCTIVE] += untimed
    wall = outside + clock_s + time.restart_gaps_s
    lines = tuple(
        BudgetLine(name, value, value / wall if wall > 0 else None)
        for name, value in seconds.items()
    )
    covered = wall - unlogged_s
    share = seconds[PRODUCTIVE] / covered if covered > 0 else None
    return Goodput(
        wall_s=wall,
        wall_clock=how,
        lines=lines,
        goodput=share,
        summary=_summary(covered, lines, share),
    )


def segments_clock(
    table: pl.DataFrame, resolution: pl.Expr | None = None
) -> tuple[float, float, str]:
    """Seconds the segments span on the clock; of those, the seconds of iterations a
    timestamped segment ran but the log does not show (a cut log: at the pace of the next
    record shown, as `restarts.find_stalls` assumes); and how the clock was measured.
    `resolution` (`clocks.resolution_of`) keeps the zero readings of a coarse clock."""
    # only the columns read: a filter copies every column it is given
    read = ["segment", "iteration", "interval", "step", "timestamp"]
    recs = timed_records(table, read, resolution=resolution)
    if recs.is_empty():
        return 0.0, 0.0, "no timed records"
    segment = by_segment(recs)  # the same key for the window and the sums
    work = pl.col("step") * pl.col("interval")
    skipped = (
        pl.col("iteration") - pl.col("iteration").shift(1).over(segment) - pl.col("interval")
    ).clip(lower_bound=0).fill_null(0) * pl.col("step")
    # Summed in slices, by a sorted key: a hashed group's sum is cut between polars' threads,
    # and its last digits would depend on the machine's cores. Polars puts a frame in one
    # piece to slice it: only the four columns aggregated are given (6 MB less for 365,000
    # records than the records with the two added).
    aggregated = recs.select("segment", "timestamp", skipped.alias("unlogged"), work.alias("work"))
    del recs
    # plain aggregations, the span taken after: an expression over aggregates inside `agg`
    # gathers every group's rows
    spans = (
        aggregated.group_by(segment, maintain_order=True)
        .agg(
            pl.col("timestamp").first().alias("first_stamp"),
            pl.col("timestamp").last().alias("last_stamp"),
            pl.col("work").first().alias("first_work"),
            pl.col("work").sum(),
            pl.col("unlogged").sum(),
        )
        .select(
            "segment",
            (
                (pl.col("last_stamp") - pl.col("first_stamp")).dt.total_microseconds() / 1e6
                + pl.col("first_work")
            ).alias("timestamp"),
            "work",
            "unlogged",
            pl.col("first_stamp").is_not_null().alias("first_stamped"),
            pl.col("last_stamp").is_not_null().alias("last_stamped"),
        )
    )
    stamped = spans["first_stamped"] & spans["last_stamped"]
    clock, unlogged = spans.select(
        pl.when(stamped).then(pl.col("timestamp")).otherwise(pl.col("work")).sum(),
        pl.when(stamped).then(pl.col("unlogged")).otherwise(0.0).sum(),
    ).row(0)
    n = int(stamped.sum())
    how = (
        "timestamps of every segment"
        if n == spans.height
        else "sum of step times (no timestamps)"
        if n == 0
        else f"timestamps of {n} of {spans.height} segments, step times elsewhere"
    )
    return float(clock), float(unlogged), how


def _summary(covered: float, lines: tuple[BudgetLine, ...], share: float | None) -> str:
    if covered <= 0:
        return "No wall-clock time was logged."
    badput = sorted(
        (line for line in lines if line.name not in (PRODUCTIVE, UNLOGGED) and line.seconds > 0),
        key=lambda line: -line.seconds,
    )
    listed = ", ".join(
        f"{line.name} {duration(line.seconds)} ({percent(line.share)})" for line in badput[:3]
    )
    text = f"Goodput {percent(share)} of the {duration(covered)} the log covers"
    return text + (f"; largest losses: {listed}." if listed else "; no time lost.")
