"""Why each second was lost: a cause, with its evidence, for every slow step, stall and restart.

Causes are keyed by iteration range, not by entry, so they attach to whatever slow-step
entries the summary lists. A record covering iterations `first`..`last` pays for what ran
after iterations `first - 1`..`last` (a save or evaluation after iteration N lands in the
record that covers N + 1, or in the record of N where the framework saves before it logs); a
stall between the records of iterations `a` and `b` for what ran after `a`..`b`. The most
specific cause the evidence supports wins, in this order:

1. `checkpoint_save`: a `saving checkpoint` line in the range, else a multiple of the
   configured save interval;
2. `evaluation`: a validation line in the range, else a multiple of the configured
   evaluation interval;
3. `straggler`: at that iteration one rank's timer (or a timer's max across ranks against its
   min) sits `spreads.STRAGGLER_RATIO` beyond what is typical for it in the run;
4. `data_loading`: the phase that grew (see `phases`) is the data loader's;
5. `overflow` / `nan`: the record skipped iterations (fp16 loss-scale overflow) or hit NaNs;
6. `phase`: another timer grew (named, with the child it is attributed to);
7. `unknown`: nothing in the logs supports a cause.

Records that are not slow still pay for a save or an evaluation printed just before them:
their excess over the steady pace is `EventCost`, so the goodput budget counts it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from loganalyzer.analysis._records import timed_records
from loganalyzer.analysis.clocks import resolution_of, resolved
from loganalyzer.analysis.events import Events, Interval, Schedule
from loganalyzer.analysis.phases import phase_growth
from loganalyzer.analysis.restarts import Restart
from loganalyzer.analysis.spreads import iteration_spreads
from loganalyzer.analysis.startup import StartUp
from loganalyzer.render.numbers import TIMES, duration, iterations, number, plural

if TYPE_CHECKING:
    from loganalyzer.analysis import Analysis

CauseKind = Literal[
    "checkpoint_save",
    "evaluation",
    "straggler",
    "data_loading",
    "overflow",
    "nan",
    "phase",
    "restart",
    "unknown",
]
DATA_PHASES = frozenset({"batch-generator", "batch-input", "data-loader", "dataloader"})


@dataclass(frozen=True)
class Cause:
    """Why an entry lost time: `kind`, and the log facts behind it."""

    kind: CauseKind
    evidence: str


@dataclass(frozen=True)
class Attributed:
    """One slow record, sustained slowdown or stall, its iteration range and its cause."""

    entry: Literal["slow_step", "sustained", "stall"]
    segment: int
    first_iteration: int
    last_iteration: int
    lost_s: float
    cause: Cause


@dataclass(frozen=True)
class EventCost:
    """A save or evaluation paid by a record that was not slow enough to be flagged."""

    kind: Literal["checkpoint_save", "evaluation"]
    event_iteration: int
    segment: int
    first_iteration: int
    last_iteration: int
    lost_s: float
    evidence: str


@dataclass(frozen=True)
class RestartCause:
    """A restart's cost split as far as the logs allow: the gap into the new launch's
    start-up timers (checkpoint load among them) and the rest (launch, queueing), and the
    redone iterations. A part the logs do not give is None."""

    segment: int
    gap_s: float | None
    startup_s: float | None
    checkpoint_load_s: float | None
    other_gap_s: float | None
    redone_iterations: int
    redone_s: float
    cause: Cause


@dataclass(frozen=True)
class Causes:
    """Every attribution in a run."""

    entries: tuple[Attributed, ...]
    events: tuple[EventCost, ...]
    restarts: tuple[RestartCause, ...]

    def for_range(self, segment: int, first: int, last: int) -> Cause | None:
        """The cause of the slow step or sustained slowdown covering `first`..`last` of
        `segment`: the entry with exactly that range, else the first that overlaps it."""
        exact = self._by_range.get((segment, first, last))
        if exact is not None:
            return exact
        for e in self.entries:
            overlaps = e.first_iteration <= last and first <= e.last_iteration
            if e.entry != "stall" and e.segment == segment and overlaps:
                return e.cause
        return None

    @cached_property
    def _by_range(self) -> dict[tuple[int, int, int], Cause]:
        found: dict[tuple[int, int, int], Cause] = {}
        for e in self.entries:
            if e.entry != "stall":
                found.setdefault((e.segment, e.first_iteration, e.last_iteration), e.cause)
        return found

    def for_stall(self, segment: int, iteration: int) -> Cause | None:
        """The cause of the stall ending at `iteration`."""
        for found in self.entries:
            if found.entry == "stall" and (found.segment, found.last_iteration) == (
                segment,
                iteration,
            ):
                return found.cause
        return None


class _ByIteration:
    """Rows of a small frame, looked up by iteration range (bisect, not a polars filter per
    slow step: a run can have thousands of them)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        rows = frame.sort("iteration").to_dicts()
        self.rows = rows
        self.keys = [int(row["iteration"]) for row in rows]

    def between(self, first: int, last: int) -> list[dict[str, Any]]:
        return self.rows[bisect_left(self.keys, first) : bisect_right(self.keys, last)]


@dataclass(frozen=True)
class _Evidence:
    events: Events
    schedule: Schedule
    flags: _ByIteration  # iteration, skipped, nan
    phases: _ByIteration  # phase_growth at the slow iterations
    spreads: _ByIteration  # iteration, metric, spread, typical, excess, rank, against


def attribute(analysis: Analysis, table: pl.DataFrame, schedule: Schedule) -> Causes:
    """Causes for every slow record, sustained slowdown, stall and restart of `analysis`
    (whose per-iteration table is `table`); the long table's evidence from `analysis.long`."""
    long = analysis.long
    events = long.events
    slow_iterations = [s.iteration for s in analysis.slow.steps]
    for event in analysis.slow.sustained:
        slow_iterations.extend(range(event.start_iteration, event.end_iteration + 1))
    # Every lookup below is on the slow iterations only: filter the big tables once.
    slow = pl.Series(slow_iterations, dtype=pl.Int64)
    evidence = _Evidence(
        events=events,
        schedule=schedule,
        flags=_ByIteration(
            table.filter(pl.col("iteration").is_in(slow)).select(
                "iteration",
                pl.col("skipped_iterations").fill_null(0).alias("skipped"),
                pl.col("nan_iterations").fill_null(0).alias("nan"),
            )
        ),
        phases=_ByIteration(phase_growth(long.metrics, slow, long.timers)),
        spreads=_ByIteration(
            iteration_spreads(long.metrics, long.names).filter(pl.col("iteration").is_in(slow))
        ),
    )
    entries = [
        Attributed(
            "slow_step",
            s.segment,
            s.iteration - s.interval + 1,
            s.iteration,
            s.lost_s,
            _record_cause(evidence, s.iteration - s.interval, s.iteration),
        )
        for s in analysis.slow.steps
    ]
    entries += [
        Attributed(
            "sustained",
            e.segment,
            e.start_iteration,
            e.end_iteration,
            e.lost_s,
            _time_cause(evidence, e.start_iteration, e.end_iteration),
        )
        for e in analysis.slow.sustained
    ]
    entries += [
        Attributed(
            "stall",
            s.segment,
            s.after_iteration,
            s.iteration,
            s.gap_s,
            _event_cause(evidence, s.after_iteration, s.iteration)
            or Cause("unknown", "no save, evaluation or timer explains the gap"),
        )
        for s in analysis.stalls
    ]
    launches = long.startup
    return Causes(
        entries=tuple(entries),
        events=_event_costs(analysis, table, events),
        restarts=tuple(
            _restart_cause(r, events, launches.get(r.segment)) for r in analysis.restarts
        ),
    )


def _record_cause(evidence: _Evidence, low: int, high: int) -> Cause:
    return _event_cause(evidence, low, high) or _time_cause(evidence, low + 1, high)


def _event_cause(evidence: _Evidence, low: int, high: int) -> Cause | None:
    """A save or evaluation after one of iterations `low`..`high`: printed, then configured."""
    lines: list[tuple[CauseKind, dict[int, int | None], str]] = [
        ("checkpoint_save", evidence.events.saves, "saving checkpoint"),
        ("evaluation", evidence.events.evaluations, "validation"),
    ]
    for kind, printed, what in lines:
        hit = next((i for i in printed if low <= i <= high), None)
        if hit is not None:
            line = printed[hit]
            where = f" (line {line})" if line is not None else ""
            return Cause(kind, f"'{what}' at iteration {hit}{where}")
    configured: list[tuple[CauseKind, Interval | None]] = [
        ("checkpoint_save", evidence.schedule.save),
        ("evaluation", evidence.schedule.evaluation),
    ]
    for kind, interval in configured:
        if interval is None:
            continue
        multiple = high - high % interval.iterations
        if multiple >= max(low, 1):
            return Cause(kind, f"iteration {multiple} is a multiple of {interval.source}")
    return None


def _time_cause(evidence: _Evidence, first: int, last: int) -> Cause:
    """Straggler, data loading, overflow/NaN or a phase, from the records `first`..`last`."""
    spreads = evidence.spreads.between(first, last)
    if spreads:
        row = min(spreads, key=lambda r: (-r["excess"], r["metric"]))
        who = f"rank {row['rank']}" if row["rank"] is not None else "the slowest rank"
        return Cause(
            "straggler",
            f"{row['metric']} at iteration {row['iteration']}: {who} at "
            f"{number(row['spread'], '.2f')}{TIMES} the {row['against']}, against "
            f"{number(row['typical'], '.2f')}{TIMES} typically",
        )
    phases = evidence.phases.between(first, last)
    phase = max(phases, key=lambda r: r["phase_delta_ms"]) if phases else None
    if phase is not None and (phase["phase_detail"] or phase["phase"]) in DATA_PHASES:
        return Cause("data_loading", _phase_text(phase))
    flags = evidence.flags.between(first, last)
    skipped, nan = sum(r["skipped"] for r in flags), sum(r["nan"] for r in flags)
    if nan:
        return Cause("nan", f"{plural(nan, 'NaN iteration')} logged in {iterations(first, last)}")
    if skipped:
        return Cause(
            "overflow",
            f"{plural(skipped, 'skipped iteration')} (fp16 overflow) logged in "
            f"{iterations(first, last)}",
        )
    if phase is not None and phase["phase_delta_ms"] > 0:
        return Cause("phase", _phase_text(phase))
    return Cause("unknown", "no save, evaluation, rank spread, NaN or timer growth logged there")


def _phase_text(row: dict[str, object]) -> str:
    text = f"{row['phase']} grew by {number(row['phase_delta_ms'], ',.0f', ' ms')}"
    if row["phase_detail"]:
        text += f" ({row['phase_detail']} +{number(row['detail_delta_ms'], ',.0f', ' ms')})"
    return f"{text} at iteration {row['iteration']}, against its run median"


def _event_costs(analysis: Analysis, table: pl.DataFrame, events: Events) -> tuple[EventCost, ...]:
    """The excess over the pace of records that paid for a printed save or evaluation but were
    neither warm-up, slow nor inside a sustained slowdown (the first record after the event,
    in log order: the attempt that printed it)."""
    pace = analysis.step_time_s.median
    if pace is None:
        return ()
    # on a coarse clock, an excess it cannot resolve is not one
    resolution = resolution_of(analysis.clocks)
    recs = timed_records(table, resolution=resolution)
    excess = resolved(pl.col("step") - pace) if resolution is not None else pl.col("step") - pace
    recs = recs.with_columns(excess.alias("excess"))
    excluded = {(s.segment, s.iteration) for s in analysis.slow.steps}
    warm = {w.segment: w.last_iteration for w in analysis.warmup if w.last_iteration is not None}
    costs = []
    for kind, printed in (
        ("checkpoint_save", events.saves),
        ("evaluation", events.evaluations),
    ):
        for iteration, line in printed.items():
            payer = recs.filter(
                (pl.col("first") - 1 <= iteration) & (iteration < pl.col("iteration"))
            ).head(1)
            if payer.is_empty():
                continue
            rec = payer.row(0, named=True)
            segment, last = int(rec["segment"]), int(rec["iteration"])
            in_sustained = any(
                e.segment == segment and e.start_iteration <= last <= e.end_iteration
                for e in analysis.slow.sustained
            )
            if (segment, last) in excluded or in_sustained or last <= warm.get(segment, -1):
                continue
            lost = (rec["step"] - pace) * rec["interval"]
            if lost <= 0 or rec["excess"] <= 0:
                continue
            where = f" (line {line})" if line is not None else ""
            costs.append(
                EventCost(
                    kind=kind,  # type: ignore[arg-type]
                    event_iteration=iteration,
                    segment=segment,
                    first_iteration=int(rec["first"]),
                    last_iteration=last,
                    lost_s=lost,
                    evidence=(
                        f"after the {kind.replace('_', ' ')} at iteration {iteration}{where}, "
                        f"iterations {rec['first']}-{last} ran at "
                        f"{number(rec['step'], '.4g', ' s')} per step against the pace of "
                        f"{number(pace, '.4g', ' s')}: {duration(lost)} more"
                    ),
                )
            )
    return tuple(costs)


def _restart_cause(restart: Restart, events: Events, launch: StartUp | None) -> RestartCause:
    saved = events.saves.get(restart.resumed_at)
    source = (
        f"resumed from the checkpoint saved at iteration {restart.resumed_at}"
        + (f" (line {saved})" if saved is not None else "")
        if restart.resumed_at in events.saves
        else f"resumed at iteration {restart.resumed_at + 1}"
    )
    startup = load = other = None
    if restart.gap_s is None:
        gap = "a gap of unknown length (no timestamps either side)"
    elif launch is None:
        gap = (
            f"a gap of {duration(restart.gap_s)} (start-up, queueing and checkpoint load: the "
            "log prints no start-up timers to split it)"
        )
    else:
        startup = min(launch.setup_s, restart.gap_s)
        load = min(launch.checkpoint_load_s, startup)
        other = restart.gap_s - startup
        gap = (
            f"a gap of {duration(restart.gap_s)}: start-up {duration(startup)} (its setup "
            f"timers, checkpoint load {duration(load)} of it) and {duration(other)} before it "
            "(launch, queueing)"
        )
    evidence = (
        f"the attempt before segment {restart.segment} stopped after iteration "
        f"{restart.after_iteration}; {source}: {gap}, and "
        f"{plural(restart.lost_iterations, 'iteration')} redone ({duration(restart.redone_s)})"
    )
    return RestartCause(
        segment=restart.segment,
        gap_s=restart.gap_s,
        startup_s=startup,
        checkpoint_load_s=load,
        other_gap_s=other,
        redone_iterations=restart.lost_iterations,
        redone_s=restart.redone_s,
        cause=Cause("restart", evidence),
    )
