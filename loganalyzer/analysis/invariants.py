"""What must hold of a run's figures for them to be true, checked on every summary.

1. The wall clock is at least the logged step time. A segment whose timestamps span less than
   its step times add up to (beyond `CLOCK_SLACK_S` and `CLOCK_SLACK_SHARE`: stamps printed to
   the second, step timers that round) was not stamped as it ran: W&B history logged after
   the fact, a clock reset. Its timestamps are set aside before the restarts, stalls and the
   budget read them, and its clock is the sum of its step times (as for a segment with no
   timestamps): `clock_fallbacks` finds them, from the same records the analysis reads.
2. Every share lies in [0, 1]: the budget's lines and the goodput. (Not the MFUs: an MFU
   above 1 says that a flag, the peak or the model shape is wrong, which a verdict judges.)
3. The budget's lines sum to its wall clock, none negative.
4. The waterfall ends at the goodput MFU.
5. Records are no more than the iterations they cover, and those no more than the iteration
   counter spans: records that cover more overlap (a miscounted interval).

1 and 5 are facts about the records (`SegmentCheck`), found by the analysis; `check` tests
2-4 (and 1 again) on the finished figures, and what it returns is a defect the summary
states rather than an impossible figure printed in silence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from loganalyzer.analysis._records import by_segment

if TYPE_CHECKING:
    from loganalyzer.analysis.goodput import Goodput
    from loganalyzer.flops.waterfall import Waterfall

# A segment's timestamps may fall short of its step times by this much before they are taken
# to contradict them: both ends printed to the second...
CLOCK_SLACK_S = 1.0
# ... and step timers printed rounded, or timing a little more than the loop between prints.
CLOCK_SLACK_SHARE = 0.01
# The invariants, as the document's `invariants.checked` names them.
INVARIANTS = (
    "wall clock >= logged step time",
    "shares in [0, 1]",
    "budget lines sum to the wall clock",
    "no negative duration",
    "waterfall ends at the goodput MFU",
    "records <= iterations covered <= iterations counted",
)
# Below this (relative to the wall clock), a difference between sums of seconds is rounding.
ROUNDING = 1e-9


@dataclass(frozen=True)
class ClockFallback:
    """A segment whose timestamps span less than its logged step time: its clock is the sum
    of its step times. `stamped_s` is the span of its stamps plus its first record's work
    (what its clock would have been)."""

    segment: int
    source: str | None
    first_iteration: int
    last_iteration: int
    stamped_s: float
    logged_s: float


@dataclass(frozen=True)
class Overlap:
    """A segment whose records cover more iterations than its iteration counter spans."""

    segment: int
    source: str | None
    records: int
    covered: int
    span: int


@dataclass(frozen=True)
class SegmentCheck:
    """What the records break of invariants 1 and 5."""

    clock_fallbacks: tuple[ClockFallback, ...]
    overlaps: tuple[Overlap, ...]

    @property
    def unstamped(self) -> frozenset[int]:
        """Segments whose timestamps are set aside."""
        return frozenset(f.segment for f in self.clock_fallbacks)


@dataclass(frozen=True)
class Broken:
    """A figure outside what can be true: `value` where `bound` was required."""

    invariant: str
    figure: str
    value: float
    bound: float


def check_segments(recs: pl.DataFrame, table: pl.DataFrame) -> SegmentCheck:
    """Invariants 1 and 5 over the timed records (`segment`, `iteration`, `interval`, `step`,
    `timestamp`, `row`); the `source` of a segment that breaks one is read from `table` at its
    first row, through an expression (`get_column` would write a one-value column out in
    full, in the table)."""
    if recs.is_empty():
        return SegmentCheck((), ())
    spans = recs.group_by(by_segment(recs), maintain_order=True).agg(
        pl.len().alias("records"),
        pl.col("row").first(),
        (pl.col("iteration").first() - pl.col("interval").first() + 1).alias("first"),
        pl.col("iteration").last().alias("last"),
        pl.col("interval").sum().alias("covered"),
        (pl.col("step") * pl.col("interval")).sum().alias("logged"),
        (pl.col("step").first() * pl.col("interval").first()).alias("first_work"),
        pl.col("timestamp").first().alias("first_stamp"),
        pl.col("timestamp").last().alias("last_stamp"),
    )
    spans = spans.with_columns(
        ((pl.col("last_stamp") - pl.col("first_stamp")).dt.total_microseconds() / 1e6)
        .add(pl.col("first_work"))
        .alias("stamped"),
        (pl.col("last") - pl.col("first") + 1).alias("span"),
    )
    short = spans.filter(
        pl.col("stamped") < pl.col("logged") * (1 - CLOCK_SLACK_SHARE) - CLOCK_SLACK_S
    )
    overlapping = spans.filter(
        (pl.col("records") > pl.col("covered")) | (pl.col("covered") > pl.col("span"))
    )

    def source(row: int) -> str | None:
        value = table.select(pl.col("source").gather(row)).item()
        return None if value is None else str(value)

    return SegmentCheck(
        tuple(
            ClockFallback(
                segment=r["segment"],
                source=source(r["row"]),
                first_iteration=r["first"],
                last_iteration=r["last"],
                stamped_s=r["stamped"],
                logged_s=r["logged"],
            )
            for r in short.iter_rows(named=True)
        ),
        tuple(
            Overlap(r["segment"], source(r["row"]), r["records"], r["covered"], r["span"])
            for r in overlapping.iter_rows(named=True)
        ),
    )


def set_aside(recs: pl.DataFrame, segments: frozenset[int]) -> pl.DataFrame:
    """`recs` with the timestamps of `segments` null."""
    if not segments:
        return recs
    return recs.with_columns(
        pl.when(pl.col("segment").is_in(list(segments)))
        .then(None)
        .otherwise(pl.col("timestamp"))
        .alias("timestamp")
    )


def check(
    logged_s: float,
    goodput: Goodput,
    waterfall: Waterfall,
    mfu_goodput: float | None,
) -> tuple[Broken, ...]:
    """Invariants 1-4 on the finished figures: what breaks them (nothing, when the analysis
    is right)."""
    broken: list[Broken] = []
    wall = goodput.wall_s
    slack = ROUNDING * max(1.0, wall)
    if wall + slack < logged_s:
        broken.append(Broken("wall clock >= logged step time", "wall clock", wall, logged_s))
    total = sum(line.seconds for line in goodput.lines)
    if abs(total - wall) > slack:
        broken.append(Broken("budget lines sum to the wall clock", "budget lines", total, wall))
    for line in goodput.lines:
        if line.seconds < -slack:
            broken.append(Broken("no negative duration", line.name, line.seconds, 0.0))
    # (an MFU above 1 is not among them: it says a flag or the peak is wrong, and a verdict
    # judges it)
    shares = {f"{line.name} share": line.share for line in goodput.lines}
    shares["goodput"] = goodput.goodput
    for name, share in shares.items():
        if share is not None and not -ROUNDING <= share <= 1 + ROUNDING:
            bound = 0.0 if share < 0 else 1.0
            broken.append(Broken("shares in [0, 1]", name, share, bound))
    goal = mfu_goodput
    end = waterfall.achieved
    if waterfall.steps and goal is not None and (end is None or abs(end - goal) > ROUNDING):
        broken.append(
            Broken("waterfall ends at the goodput MFU", "waterfall end", end or 0.0, goal)
        )
    return tuple(broken)
