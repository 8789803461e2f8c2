"""Why each second was lost: a cause, with its evidence, for every slow step, stall and restart.

Causes are keyed by iteration range, not by entry, so they attach to whatever slow-step
entries the summary lists. A record covering iterations `first`..`last` pays for what ran
after iterations `first - 1`..`last` (a save or evaluation after iteration N lands in the
record that covers N + 1, or in the record of N where the framework saves before it logs); a
stall between the records of iterations `a` and `b` for what ran after `a`..`b`. The most
specific cause the evidence supports wins, in this order:

1. `checkpoint_save` / `evaluation`: a save or evaluation the logs record in the range, the
   strongest evidence first (`EVIDENCE`: a printed line, then a metric recorded at that
   step, then a checkpoint folder), else a multiple of the configured interval;
2. `straggler`: at that iteration one rank's timer (or a timer's max across ranks against its
   min) sits `spreads.STRAGGLER_RATIO` beyond what is typical for it in the run;
3. `data_loading`: the phase that grew (see `phases`) is the data loader's;
4. `overflow` / `nan`: the record skipped iterations (fp16 loss-scale overflow) or hit NaNs;
5. `phase`: another timer grew (named, with the child it is attributed to);
6. `unknown`: nothing in the logs supports a cause.

Each save or evaluation is attributed once. Entries that meet at one iteration (the stall
after it, then the record that follows) take its events in log order, strongest evidence
first; an entry left without one, whose own timers explain nothing, is the same event's
(which is then still counted once). One entry with a save and an evaluation names both
(`Cause.shares`), their time split by Megatron's `save-checkpoint` timer where it is logged,
else left unsplit (seconds None).

Records that are not slow still pay for a save or an evaluation printed just before them:
their excess over the steady pace is `EventCost`, so the goodput budget counts it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import polars as pl

from loganalyzer.analysis._records import timed_records
from loganalyzer.analysis.clocks import resolution_of, resolved
from loganalyzer.analysis.events import Events, Interval, Schedule
from loganalyzer.analysis.phases import phase_growth
from loganalyzer.analysis.restarts import Restart
from loganalyzer.analysis.spreads import iteration_spreads
from loganalyzer.analysis.startup import StartUp

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
# The one ranking of evidence, strongest first: a save or validation line printed at the
# iteration, a metric recorded at that step (a TensorBoard/W&B validation record, an eval
# metric), a checkpoint folder, a configured interval (a multiple of save_interval or
# eval_interval), a timer's growth (or a rank spread, skipped or NaN iterations), nothing.
EVIDENCE = ("line", "metric", "folder", "interval", "timer", "none")
EvidenceKind = Literal["line", "metric", "folder", "interval", "timer", "none"]
EventKind = Literal["checkpoint_save", "evaluation"]


# The evidence of a cause, as facts: `render.evidence` words each kind, so that every output
# (the document, the verdicts, the terminal and the report) says it alike.


@dataclass(frozen=True)
class EventSeen:
    """A save or evaluation the logs record after `iteration`: a printed line (`line` its
    number, where the source counts lines), a metric at that step, or a checkpoint folder."""

    kind: EventKind
    iteration: int
    evidence_kind: Literal["line", "metric", "folder"]
    line: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.iteration)


@dataclass(frozen=True)
class IntervalMultiple:
    """A save or evaluation no log records, inferred: `iteration` is a multiple of the
    configured interval (`interval`: where the config states it, as `events.Interval.source`)."""

    kind: EventKind
    iteration: int
    interval: str

    @property
    def evidence_kind(self) -> Literal["interval"]:
        return "interval"

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.iteration)


EventEvidence: TypeAlias = EventSeen | IntervalMultiple


@dataclass(frozen=True)
class SaveAndEvaluation:
    """A save and an evaluation after one iteration, paid by one entry (`first` the strongest
    evidence): their seconds as the timer that times one of them splits them (`timer` None and
    both seconds None where no timer does)."""

    first: EventEvidence
    other: EventEvidence
    timer: Literal["save-checkpoint", "eval_runtime"] | None
    save_s: float | None
    evaluation_s: float | None


@dataclass(frozen=True)
class RankSpread:
    """A timer's slowest rank (`rank`, None where the rows give only max over min) at
    `iteration`, `spread` times the one it is measured `against`, where `typical` is usual."""

    metric: str
    iteration: int
    rank: int | None
    spread: float
    typical: float
    against: str


@dataclass(frozen=True)
class PhaseGrowth:
    """The timer phase that grew most at `iteration` over its run median, and the child it is
    attributed to (`detail`, None where no child explains it)."""

    phase: str
    iteration: int
    delta_ms: float
    detail: str | None
    detail_delta_ms: float | None


@dataclass(frozen=True)
class FlaggedIterations:
    """The NaN or skipped (fp16 overflow) iterations the records `first`..`last` logged."""

    flag: Literal["nan", "skipped"]
    count: int
    first: int
    last: int


@dataclass(frozen=True)
class NothingFound:
    """No evidence: for a `gap` (a stall's) no save, evaluation or timer; for `records` not
    even a rank spread or flagged iterations."""

    looked_at: Literal["gap", "records"]


@dataclass(frozen=True)
class RestartGap:
    """A restart as the logs show it: the attempt before `segment` stopped after
    `after_iteration`, the next resumed after `resumed_at` (from a save the logs record where
    `from_save`, its line `save_line`); the gap (None: no timestamps either side) and, where the
    new launch printed start-up timers, its split (else all three None); the redone work."""

    segment: int
    after_iteration: int
    resumed_at: int
    from_save: bool
    save_line: int | None
    gap_s: float | None
    startup_s: float | None
    checkpoint_load_s: float | None
    other_gap_s: float | None
    redone_iterations: int
    redone_s: float


CauseEvidence: TypeAlias = (
    EventSeen
    | IntervalMultiple
    | SaveAndEvaluation
    | RankSpread
    | PhaseGrowth
    | FlaggedIterations
    | NothingFound
    | RestartGap
)


@dataclass(frozen=True)
class EventAftermath:
    """A record that was not slow enough to be flagged, paying for the save or evaluation
    after `iteration` (`line`: its printed line, where one records it): iterations
    `first`..`last` ran at `step_s` a step against the run's `pace_s`, `lost_s` in all."""

    kind: EventKind
    iteration: int
    line: int | None
    first: int
    last: int
    step_s: float
    pace_s: float
    lost_s: float


@dataclass(frozen=True)
class Share:
    """One of two events that one entry paid for: its seconds (None: the log does not time
    them apart) and its evidence."""

    kind: EventKind
    iteration: int
    seconds: float | None
    evidence_kind: EvidenceKind
    evidence: EventEvidence


@dataclass(frozen=True)
class Cause:
    """Why an entry lost time: `kind`, the log facts behind it and their kind (`EVIDENCE`);
    `shares` where a save and an evaluation at one iteration both explain it."""

    kind: CauseKind
    evidence: CauseEvidence
    evidence_kind: EvidenceKind = "none"
    shares: tuple[Share, ...] = ()
    event_iteration: int | None = None  # the save's or evaluation's iteration

    def split(self, lost_s: float) -> list[tuple[str, float]]:
        """`lost_s` by cause kind: by the shares where their seconds are known, else all to
        `kind` (the strongest evidence's)."""
        if self.shares and all(share.seconds is not None for share in self.shares):
            return [(share.kind, share.seconds or 0.0) for share in self.shares]
        return [(self.kind, lost_s)]

    def events(self) -> list[tuple[str, int]]:
        """The saves and evaluations (kind, iteration) this cause names."""
        if self.shares:
            return [(share.kind, share.iteration) for share in self.shares]
        if self.event_iteration is not None:
            return [(self.kind, self.event_iteration)]
        return []


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
    evidence: EventAftermath
    evidence_kind: EvidenceKind = "line"


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

    def event_seconds(self, kind: str) -> dict[int, float]:
        """The seconds lost to each save or evaluation of `kind`, by its iteration: each event
        once, however many entries (a stall, the record after it) paid for it."""
        found: dict[int, float] = {}
        for entry in self.entries:
            named = [i for k, i in entry.cause.events() if k == kind]
            spent = sum(s for k, s in entry.cause.split(entry.lost_s) if k == kind)
            for rank, iteration in enumerate(named):
                found[iteration] = found.get(iteration, 0.0) + (spent if rank == 0 else 0.0)
        for cost in self.events:
            if cost.kind == kind:
                found[cost.event_iteration] = found.get(cost.event_iteration, 0.0) + cost.lost_s
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

    @cached_property
    def iterations(self) -> dict[str, list[int]]:
        """The iterations of the recorded saves and evaluations, sorted (looked up by bisect:
        a run can have thousands of slow steps and of evaluations)."""
        return {
            "checkpoint_save": sorted(self.events.saves),
            "evaluation": sorted(self.events.evaluations),
        }


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
    steps, stalls = analysis.slow.steps, analysis.stalls
    # log order: at one iteration, the stall after it before the record that follows
    order = sorted(
        [
            (s.segment, s.iteration - s.interval, 1, n, s.iteration, s.lost_s)
            for n, s in enumerate(steps)
        ]
        + [(s.segment, s.after_iteration, 0, n, s.iteration, s.gap_s) for n, s in enumerate(stalls)]
    )
    found = _claim_events(evidence, [(o[2], o[3], o[1], o[4], o[5]) for o in order])
    for _, low, kind, index, high, _ in order:
        if (kind, index) not in found and kind == 1:
            found[(kind, index)] = _time_cause(evidence, low + 1, high)
        cause = found.get((kind, index))
        if cause is None or cause.kind == "unknown":
            # the event an entry before it at this iteration took: the same one, counted once
            # (not where a timer gave the events their time: the rest is not theirs)
            again = _candidates(evidence, low, high)
            if again and not _timed(evidence, again, both=False):
                first = again[0]
                cause = Cause(first.kind, first, first.evidence_kind, (), first.iteration)
        found[(kind, index)] = cause or Cause("unknown", NothingFound("gap"))
    entries = [
        Attributed(
            "slow_step",
            s.segment,
            s.iteration - s.interval + 1,
            s.iteration,
            s.lost_s,
            found[(1, n)],
        )
        for n, s in enumerate(steps)
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
        Attributed("stall", s.segment, s.after_iteration, s.iteration, s.gap_s, found[(0, n)])
        for n, s in enumerate(stalls)
    ]
    launches = long.startup
    return Causes(
        entries=tuple(entries),
        events=_event_costs(analysis, table, events, _taken(found.values())),
        restarts=tuple(
            _restart_cause(r, events, launches.get(r.segment)) for r in analysis.restarts
        ),
    )


def _claim_events(
    evidence: _Evidence, entries: list[tuple[int, int, int, int, float]]
) -> dict[tuple[int, int], Cause]:
    """Each save and evaluation to one of `entries` (kind: 0 stall, 1 record; index; and the
    iterations `low`..`high` after which what it paid for ran), in log order, strongest
    evidence first. An event after iteration N lands in the stall or the record after N
    (first pass); in N's own record only where the framework saved before it logged and no
    entry after N took it (second pass). An entry that no other entry competes with takes a
    save and an evaluation both, as shares."""
    places = [
        (
            (kind, index),
            _candidates(evidence, low, high - 1),
            _candidates(evidence, high, high),
            lost,
        )
        for kind, index, low, high, lost in entries
    ]
    wanted: dict[tuple[str, int], int] = {}
    for _, first, second, _ in places:
        for event in {e.key for e in [*first, *second]}:
            wanted[event] = wanted.get(event, 0) + 1
    taken: set[tuple[str, int]] = set()
    found: dict[tuple[int, int], Cause] = {}
    for which in (1, 2):
        for key, first, second, lost in places:
            if key in found:
                continue
            free = [e for e in (first if which == 1 else second) if e.key not in taken]
            if not free:
                continue
            # a timer that times one of a save and an evaluation there says both ran here
            alone = all(wanted[e.key] == 1 for e in free) or (which == 1 and _timed(evidence, free))
            found[key] = _cause_of(evidence, free, lost, taken, alone)
    return found


def _timed(evidence: _Evidence, free: list[EventEvidence], both: bool = True) -> bool:
    """Whether a timer times one of `free` (and, with `both`, they are a save and an
    evaluation)."""
    events = evidence.events
    timers = {"checkpoint_save": events.save_timer_s, "evaluation": events.evaluation_timer_s}
    found = any(e.iteration in timers[e.kind] for e in free)
    return found and (not both or len({e.kind for e in free}) > 1)


def _taken(causes: Iterable[Cause]) -> set[tuple[str, int]]:
    return {event for cause in causes for event in cause.events()}


def _cause_of(
    evidence: _Evidence,
    free: list[EventEvidence],
    lost_s: float,
    taken: set[tuple[str, int]],
    alone: bool,
) -> Cause:
    """The cause of an entry from the events it can take (`free`, strongest first), marked
    `taken`; `alone` (no other entry wants them): a save and an evaluation both, as shares."""
    first = free[0]
    other = next((e for e in free[1:] if e.kind != first.kind), None)
    if not alone or other is None:
        taken.add(first.key)
        return Cause(first.kind, first, first.evidence_kind, (), first.iteration)
    taken.update({first.key, other.key})
    save, evaluation = (first, other) if first.kind == "checkpoint_save" else (other, first)
    timer = evidence.events.save_timer_s.get(save.iteration)
    timed = evidence.events.evaluation_timer_s.get(evaluation.iteration)
    seconds: tuple[float | None, float | None]
    by: Literal["save-checkpoint", "eval_runtime"] | None
    if timer is not None and lost_s > 0:
        save_s = min(timer, lost_s)
        seconds, by = (save_s, lost_s - save_s), "save-checkpoint"
    elif timed is not None and lost_s > 0:
        eval_s = min(timed, lost_s)
        seconds, by = (lost_s - eval_s, eval_s), "eval_runtime"
    else:
        seconds, by = (None, None), None
    shares = tuple(
        Share(e.kind, e.iteration, t, e.evidence_kind, e)
        for e, t in ((save, seconds[0]), (evaluation, seconds[1]))
    )
    both = SaveAndEvaluation(first, other, by, *seconds)
    kind = first.kind
    if seconds[0] is not None and seconds[1] is not None:
        kind = save.kind if seconds[0] >= seconds[1] else evaluation.kind
    return Cause(kind, both, first.evidence_kind, shares, first.iteration)


def _candidates(evidence: _Evidence, low: int, high: int) -> list[EventEvidence]:
    """The saves and evaluations after one of iterations `low`..`high`, strongest evidence
    first: those the logs record, else a multiple of the configured interval."""
    events, schedule = evidence.events, evidence.schedule
    found: list[EventEvidence] = []
    sources: list[tuple[EventKind, dict[int, int | None], dict[int, str], Interval | None]] = [
        ("checkpoint_save", events.saves, events.save_kinds, schedule.save),
        ("evaluation", events.evaluations, events.evaluation_kinds, schedule.evaluation),
    ]
    for kind, printed, kinds, interval in sources:
        known = evidence.iterations[kind]
        hits = known[bisect_left(known, low) : bisect_right(known, high)]
        for hit in hits:
            how = kinds.get(hit, "line")
            line = printed[hit] if how == "line" else None
            found.append(EventSeen(kind, hit, how, line))  # type: ignore[arg-type]
        if hits or interval is None:
            continue
        multiple = high - high % interval.iterations
        if multiple >= max(low, 1):
            found.append(IntervalMultiple(kind, multiple, interval.source))
    return sorted(
        found,
        key=lambda e: (EVIDENCE.index(e.evidence_kind), e.kind != "checkpoint_save", e.iteration),
    )


def _time_cause(evidence: _Evidence, first: int, last: int) -> Cause:
    """Straggler, data loading, overflow/NaN or a phase, from the records `first`..`last`."""
    spreads = evidence.spreads.between(first, last)
    if spreads:
        row = min(spreads, key=lambda r: (-r["excess"], r["metric"]))
        spread = RankSpread(
            row["metric"],
            row["iteration"],
            row["rank"],
            row["spread"],
            row["typical"],
            row["against"],
        )
        return Cause("straggler", spread, "timer")
    phases = evidence.phases.between(first, last)
    phase = max(phases, key=lambda r: r["phase_delta_ms"]) if phases else None
    if phase is not None and (phase["phase_detail"] or phase["phase"]) in DATA_PHASES:
        return Cause("data_loading", _grown(phase), "timer")
    flags = evidence.flags.between(first, last)
    skipped, nan = sum(r["skipped"] for r in flags), sum(r["nan"] for r in flags)
    if nan:
        return Cause("nan", FlaggedIterations("nan", nan, first, last), "timer")
    if skipped:
        return Cause("overflow", FlaggedIterations("skipped", skipped, first, last), "timer")
    if phase is not None and phase["phase_delta_ms"] > 0:
        return Cause("phase", _grown(phase), "timer")
    return Cause("unknown", NothingFound("records"))


def _grown(row: dict[str, Any]) -> PhaseGrowth:
    """A `phases.phase_growth` row as evidence (a child only where one is named)."""
    detail = row["phase_detail"] or None
    return PhaseGrowth(
        row["phase"],
        row["iteration"],
        row["phase_delta_ms"],
        detail,
        row["detail_delta_ms"] if detail else None,
    )


def _event_costs(
    analysis: Analysis, table: pl.DataFrame, events: Events, taken: set[tuple[str, int]]
) -> tuple[EventCost, ...]:
    """The excess over the pace of records that paid for a recorded save or evaluation but
    were neither warm-up, slow nor inside a sustained slowdown (the first record after the
    event, in log order: the attempt that printed it), for the events no slow step or stall
    was attributed (`taken`: each event is counted once)."""
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
    sources: list[tuple[EventKind, dict[int, int | None], dict[int, str]]] = [
        ("checkpoint_save", events.saves, events.save_kinds),
        ("evaluation", events.evaluations, events.evaluation_kinds),
    ]
    for kind, printed, kinds in sources:
        for iteration, line in printed.items():
            how = kinds.get(iteration, "line")
            if (kind, iteration) in taken:
                continue
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
            costs.append(
                EventCost(
                    kind=kind,
                    event_iteration=iteration,
                    segment=segment,
                    first_iteration=int(rec["first"]),
                    last_iteration=last,
                    lost_s=lost,
                    evidence_kind=how,  # type: ignore[arg-type]
                    evidence=EventAftermath(
                        kind,
                        iteration,
                        line if how == "line" else None,
                        int(rec["first"]),
                        last,
                        rec["step"],
                        pace,
                        lost,
                    ),
                )
            )
    return tuple(costs)


def _restart_cause(restart: Restart, events: Events, launch: StartUp | None) -> RestartCause:
    """A restart's gap split by the new launch's start-up timers, where it has a gap and
    prints them."""
    startup = load = other = None
    if restart.gap_s is not None and launch is not None:
        startup = min(launch.setup_s, restart.gap_s)
        load = min(launch.checkpoint_load_s, startup)
        other = restart.gap_s - startup
    gap = RestartGap(
        segment=restart.segment,
        after_iteration=restart.after_iteration,
        resumed_at=restart.resumed_at,
        from_save=restart.resumed_at in events.saves,
        save_line=events.saves.get(restart.resumed_at),
        gap_s=restart.gap_s,
        startup_s=startup,
        checkpoint_load_s=load,
        other_gap_s=other,
        redone_iterations=restart.lost_iterations,
        redone_s=restart.redone_s,
    )
    return RestartCause(
        segment=restart.segment,
        gap_s=restart.gap_s,
        startup_s=startup,
        checkpoint_load_s=load,
        other_gap_s=other,
        redone_iterations=restart.lost_iterations,
        redone_s=restart.redone_s,
        cause=Cause("restart", gap),
    )
