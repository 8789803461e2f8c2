"""The goodput budget: the wall clock split into productive steady steps and badput by cause.

The wall clock is what the logs span: the start-up timers of the first launch (see
`startup`; a later launch's start-up lies inside its restart gap, which it is taken from),
then per segment its timestamp span plus the work of its first record
(a record is stamped when its interval ends), or the sum of its step times where records
carry no timestamps or their timestamps contradict the step times (`invariants`), then the
restart gaps between segments. A timestamped segment whose log was cut (iterations missing
between two records) spans iterations that no step time covers: "iterations not in the
log", at the next shown record's pace, up to what the clock between the two records holds.

The logged step time is split as in `accounting` (productive, warm-up, slow steps, redone
work), each slow step's and stall's loss going to its cause (see `causes`), and records that
paid for a printed save or evaluation handing their excess to it. What the clock holds
beyond the step times and the stalls is "untimed gaps". A segment's clock is never less than
what it holds (its step times, iterations not in the log and stalls: timestamps printed to
the second can span a little less), so no line is negative, and the items sum to the wall
clock exactly.

A run that ended long after its last progress held its GPUs meanwhile: a hang before a
kill, a time limit, an NCCL watchdog (see `held_after`). The wall clock then reaches the
ending event, and that time is the line "hang before the ending".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from loganalyzer.analysis._records import by_segment, timed_records
from loganalyzer.analysis.causes import Causes
from loganalyzer.analysis.clocks import resolution_of
from loganalyzer.analysis.outcome import Outcome

if TYPE_CHECKING:
    from loganalyzer.analysis import Analysis

# Budget lines in display order; a cause kind maps to one of them.
PRODUCTIVE = "productive steady steps"
UNLOGGED = "iterations not in the log"
HANG = "hang before the ending"
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
    HANG,
)


def line_slug(line: str) -> str:
    """A budget line as a column name: `checkpoint saves` -> `checkpoint_saves`."""
    return re.sub(r"[^a-z0-9]+", "_", line.lower()).strip("_")


# The budget lines that are time lost, by slug (the fleet's lost_<cause>_s columns): start-up,
# warm-up, checkpoint saves, evaluation, data loading, stragglers, other slow steps, restart
# gaps, redone work, untimed gaps, a hang before the ending.
LOST_LINES = {line_slug(line): line for line in LINES if line not in (PRODUCTIVE, UNLOGGED)}
LOST_CAUSES = tuple(LOST_LINES)
# Endings that can come long after the last progress with the GPUs held: not a run's own end
# (`completed`, `stopped`: a final save or evaluation is the framework's work) nor a log that
# just stops (`unknown`: no ending event).
HELD_ENDINGS = frozenset({"hung", "killed", "crashed"})
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
class Held:
    """Time from the last progress to the ending. `seconds` is the budget line (None: unknown,
    `render.wording.hang_note` says why), `bound` "exact" or "at_least" (the hang began before
    the first line timed after the last progress, or an NCCL collective ran at least that
    long), `extends_s` what it adds to the wall clock: the line plus the log interval in
    flight; `last_iteration` the last progress and `ending_at` the ending's time as printed
    (None: the log printed none)."""

    seconds: float | None
    bound: str | None
    extends_s: float
    last_iteration: int
    ending_at: str | None


def held_after(outcome: Outcome, line_pace_s: float | None) -> Held | None:
    """The hang before the ending of a hung, killed or crashed run. The rule: the time from
    the last progress to the ending event (`outcome.hang_s`; else, for an NCCL timeout, the
    time its collective ran, at least) beyond one log interval at the steady pace counts as
    held without progress (within one interval the next record was still to come). The
    wall clock grows by all of it, the interval in flight going to "untimed gaps". Where no
    such time is known, for a hang, a kill or an NCCL timeout the hang is said to be
    unknown, not guessed: a note and no line."""
    if outcome.status not in HELD_ENDINGS or outcome.last_iteration is None:
        return None  # no progress: no budget to extend
    hang, bound = outcome.hang_s, outcome.hang_bound
    ran = (outcome.collective or {}).get("ran_ms")
    if hang is None and isinstance(ran, int):
        hang, bound = ran / 1000, "at_least"
    if hang is None:
        if outcome.status == "crashed" and outcome.reason != "nccl_timeout":
            return None
        return Held(None, None, 0.0, outcome.last_iteration, outcome.at)
    interval = line_pace_s or 0.0
    if hang <= interval:
        return None
    return Held(hang - interval, bound, hang, outcome.last_iteration, outcome.at)


@dataclass(frozen=True)
class Goodput:
    """The budget; `lines` sum to `wall_s`. `goodput` is the productive share of the wall
    clock the log covers (iterations not in the log left out: they are unknown, not lost).
    `render.wording.goodput_summary` words it."""

    wall_s: float
    wall_clock: str
    lines: tuple[BudgetLine, ...]
    goodput: float | None
    beyond_clock: UnloggedExcess | None
    hang: Held | None = None

    @property
    def covered_s(self) -> float:
        """The wall clock the log covers: iterations not in the log left out."""
        unlogged = sum(line.seconds for line in self.lines if line.name == UNLOGGED)
        return self.wall_s - unlogged


def budget(
    analysis: Analysis, causes: Causes, table: pl.DataFrame, held: Held | None = None
) -> Goodput:
    """The goodput budget of a run from its analysis, its causes and its per-iteration
    `table` (start-up timers from `analysis.long`), the wall clock reaching the ending
    where the run `held` its GPUs after its last progress (`held_after`)."""
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
        rest = "untimed gaps" if entry.entry == "stall" else "other slow steps"
        # a save and an evaluation the log times apart each get their part
        for kind, part in entry.cause.split(entry.lost_s):
            seconds[LINE_OF_CAUSE.get(kind, rest)] += part
    for cost in causes.events:
        seconds[PRODUCTIVE] -= cost.lost_s
        seconds[LINE_OF_CAUSE[cost.kind]] += cost.lost_s
    stalls: dict[int, float] = {}
    for stall in analysis.stalls:
        stalls[stall.segment] = stalls.get(stall.segment, 0.0) + stall.gap_s
    clock = segments_clock(table, analysis.checks.unstamped, stalls, resolution_of(analysis.clocks))
    clock_s, unlogged_s = clock.seconds, clock.unlogged_s
    seconds[UNLOGGED] = unlogged_s
    # never negative: each segment's clock holds at least its work, unlogged iterations and
    # stalls (but may fall short of them by the last bits of a sum)
    untimed = max(0.0, clock_s - time.logged_s - unlogged_s - time.stalls_s)
    seconds["untimed gaps"] += untimed
    wall = outside + clock_s + time.restart_gaps_s
    if held is not None and held.seconds is not None:
        seconds[HANG] = held.seconds
        seconds["untimed gaps"] += held.extends_s - held.seconds
        wall += held.extends_s
    lines = tuple(
        BudgetLine(name, value, value / wall if wall > 0 else None)
        for name, value in seconds.items()
    )
    covered = wall - unlogged_s
    share = seconds[PRODUCTIVE] / covered if covered > 0 else None
    return Goodput(
        wall_s=wall,
        wall_clock=clock.how,
        lines=lines,
        goodput=share,
        beyond_clock=clock.beyond,
        hang=held,
    )


@dataclass(frozen=True)
class UnloggedExcess:
    """Gaps between stamped records where the iterations the log skips would take longer at
    the next record's pace than the clock holds (an iteration counter that jumps): each is
    counted at what the clock holds."""

    gaps: int
    iterations: int
    at_pace_s: float
    clock_s: float
    first_after_iteration: int
    first_iteration: int


@dataclass(frozen=True)
class SegmentsClock:
    """Seconds the segments span on the clock; of those, the seconds of iterations not in the
    log; how the clock was measured; and where the skipped iterations outran the clock."""

    seconds: float
    unlogged_s: float
    how: str
    beyond: UnloggedExcess | None


def segments_clock(
    table: pl.DataFrame,
    unstamped: frozenset[int] = frozenset(),
    stalls: Mapping[int, float] | None = None,
    resolution: pl.Expr | None = None,
) -> SegmentsClock:
    """The segments' clock. A segment with timestamps (and not in `unstamped`, whose stamps
    contradict its step times) spans its stamps, never less than what it holds: its step
    times, its iterations not in the log and its `stalls` (seconds by segment). Iterations a
    timestamped segment ran but the log does not show (a cut log) count at the next shown
    record's pace, as `restarts.find_stalls` assumes, up to what the clock between the two
    records holds beyond the later one's work. `resolution` (`clocks.resolution_of`) keeps
    the zero readings of a coarse clock."""
    # only the columns read: a filter copies every column it is given
    read = ["segment", "iteration", "interval", "step", "timestamp"]
    recs = timed_records(table, read, resolution=resolution)
    if recs.is_empty():
        return SegmentsClock(0.0, 0.0, "no timed records", None)
    segment = by_segment(recs)  # the same key for the window and the sums
    work = pl.col("step") * pl.col("interval")
    skipped, at_pace, room = _gap(segment)
    # The clock between two records is read only where the log skips iterations (a cut log;
    # none, in most): elsewhere nothing is unlogged.
    skips = bool(recs.select((skipped > 0).any()).item())
    unlogged = pl.min_horizontal(at_pace, room.fill_null(float("inf"))) if skips else pl.lit(0.0)
    # Summed in slices, by a sorted key: a hashed group's sum is cut between polars' threads,
    # and its last digits would depend on the machine's cores. Polars puts a frame in one
    # piece to slice it: only the columns aggregated are given.
    aggregated = recs.select(
        "segment", "timestamp", unlogged.cast(pl.Float64).alias("unlogged"), work.alias("work")
    )
    excess = _outran(recs, unstamped) if skips else None
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
            (
                pl.col("first_stamp").is_not_null()
                & pl.col("last_stamp").is_not_null()
                & ~pl.col("segment").is_in(list(unstamped))
            ).alias("stamped"),
        )
        .with_columns(
            pl.col("segment").replace_strict(dict(stalls or {}), default=0.0).alias("stalls")
        )
    )
    stamped = spans["stamped"]
    held = pl.col("work") + pl.col("unlogged") + pl.col("stalls")
    clock, unlogged = spans.select(
        pl.when("stamped").then(pl.max_horizontal("timestamp", held)).otherwise("work").sum(),
        pl.when("stamped").then(pl.col("unlogged")).otherwise(0.0).sum(),
    ).row(0)
    n = int(stamped.sum())
    why = "timestamps set aside" if unstamped & set(spans["segment"]) else "no timestamps"
    how = (
        "timestamps of every segment"
        if n == spans.height
        else f"sum of step times ({why})"
        if n == 0
        else f"timestamps of {n} of {spans.height} segments, step times elsewhere"
    )
    return SegmentsClock(float(clock), float(unlogged), how, _excess(excess))


def _gap(segment: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Of the gap before each record: the iterations the log skips, their seconds at the
    record's pace, and the seconds the clock holds beyond the record's own work."""
    skipped = (
        pl.col("iteration") - pl.col("iteration").shift(1).over(segment) - pl.col("interval")
    ).clip(lower_bound=0)
    elapsed = (
        pl.col("timestamp") - pl.col("timestamp").shift(1).over(segment)
    ).dt.total_microseconds() / 1e6
    room = (elapsed - pl.col("step") * pl.col("interval")).clip(lower_bound=0)
    return skipped, skipped.fill_null(0) * pl.col("step"), room


def _outran(recs: pl.DataFrame, unstamped: frozenset[int]) -> pl.DataFrame | None:
    """The gaps of stamped segments whose skipped iterations, at the next record's pace,
    outran the clock between the two records (a mask first: none, in a cut log)."""
    segment = by_segment(recs)
    skipped, at_pace, room = _gap(segment)
    outran = recs.select(
        ((at_pace > room) & ~pl.col("segment").is_in(list(unstamped))).fill_null(False)
    ).to_series()
    if not outran.any():
        return None
    return recs.select(
        "iteration",
        pl.col("iteration").shift(1).over(segment).alias("after"),
        skipped.alias("skipped"),
        at_pace.alias("at_pace"),
        room.alias("room"),
    ).filter(outran)


def _excess(gaps: pl.DataFrame | None) -> UnloggedExcess | None:
    if gaps is None or gaps.is_empty():
        return None
    return UnloggedExcess(
        gaps=gaps.height,
        iterations=int(gaps["skipped"].sum()),
        at_pace_s=float(gaps["at_pace"].sum()),
        clock_s=float(gaps["room"].sum()),
        first_after_iteration=int(gaps.item(0, "after")),
        first_iteration=int(gaps.item(0, "iteration")),
    )
