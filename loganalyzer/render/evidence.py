"""The evidence of a cause, in words: the one place that writes the sentences behind a slow
step's, a stall's, a restart's or an event's cause (`analysis.causes` returns them as facts),
so that the document, the verdicts and every renderer say them alike.
"""

from __future__ import annotations

from loganalyzer.analysis.causes import (
    CauseEvidence,
    EventAftermath,
    EventEvidence,
    EventSeen,
    FlaggedIterations,
    IntervalMultiple,
    NothingFound,
    PhaseGrowth,
    RankSpread,
    RestartGap,
    SaveAndEvaluation,
)
from loganalyzer.render.numbers import TIMES, duration, iterations, number, plural

# What a printed line of each event says (quoted), what records it at a step, and its name.
_PRINTED = {"checkpoint_save": "saving checkpoint", "evaluation": "validation"}
_RECORDED = {"checkpoint_save": "a save", "evaluation": "a validation metric"}
_NAMES = {"checkpoint_save": "a checkpoint save", "evaluation": "an evaluation"}
_NOTHING = {
    "gap": "no save, evaluation or timer explains the gap",
    "records": "no save, evaluation, rank spread, NaN or timer growth logged there",
}


def cause_evidence(evidence: CauseEvidence) -> str:
    """A cause's evidence as the document's `cause.evidence` says it."""
    if isinstance(evidence, (EventSeen, IntervalMultiple)):
        return event_evidence(evidence)
    if isinstance(evidence, SaveAndEvaluation):
        return _save_and_evaluation(evidence)
    if isinstance(evidence, RankSpread):
        return _rank_spread(evidence)
    if isinstance(evidence, PhaseGrowth):
        return _phase_growth(evidence)
    if isinstance(evidence, FlaggedIterations):
        return _flagged(evidence)
    if isinstance(evidence, NothingFound):
        return _NOTHING[evidence.looked_at]
    return _restart_gap(evidence)


def event_evidence(event: EventEvidence) -> str:
    """What shows a save or an evaluation: its line, metric or folder, or the interval."""
    if isinstance(event, IntervalMultiple):
        return f"iteration {event.iteration} is a multiple of {event.interval}"
    if event.evidence_kind == "line":
        where = f" (line {event.line})" if event.line is not None else ""
        return f"'{_PRINTED[event.kind]}' at iteration {event.iteration}{where}"
    if event.evidence_kind == "folder":
        return f"a checkpoint folder of iteration {event.iteration}"
    return f"{_RECORDED[event.kind]} recorded at step {event.iteration}"


def aftermath_evidence(cost: EventAftermath) -> str:
    """What a save or evaluation cost the record after it (the goodput's `attributed`)."""
    where = f" (line {cost.line})" if cost.line is not None else ""
    return (
        f"after the {cost.kind.replace('_', ' ')} at iteration {cost.iteration}{where}, "
        f"iterations {cost.first}-{cost.last} ran at {number(cost.step_s, '.4g', ' s')} per "
        f"step against the pace of {number(cost.pace_s, '.4g', ' s')}: "
        f"{duration(cost.lost_s)} more"
    )


def _save_and_evaluation(both: SaveAndEvaluation) -> str:
    first, other = both.first, both.other
    if both.timer == "save-checkpoint":
        how = (
            f"the save-checkpoint timer gives the save {duration(both.save_s)}, the evaluation "
            f"the other {duration(both.evaluation_s)}"
        )
    elif both.timer == "eval_runtime":
        how = (
            f"eval_runtime gives the evaluation {duration(both.evaluation_s)}, the save the "
            f"other {duration(both.save_s)}"
        )
    else:
        how = "the log does not time them apart"
    return (
        f"{_NAMES[first.kind]} ({event_evidence(first)}) and {_NAMES[other.kind]} "
        f"({event_evidence(other)}) after the same iteration: {how}"
    )


def _rank_spread(spread: RankSpread) -> str:
    who = f"rank {spread.rank}" if spread.rank is not None else "the slowest rank"
    return (
        f"{spread.metric} at iteration {spread.iteration}: {who} at "
        f"{number(spread.spread, '.2f')}{TIMES} the {spread.against}, against "
        f"{number(spread.typical, '.2f')}{TIMES} typically"
    )


def _phase_growth(growth: PhaseGrowth) -> str:
    text = f"{growth.phase} grew by {number(growth.delta_ms, ',.0f', ' ms')}"
    if growth.detail:
        text += f" ({growth.detail} +{number(growth.detail_delta_ms, ',.0f', ' ms')})"
    return f"{text} at iteration {growth.iteration}, against its run median"


def _flagged(flagged: FlaggedIterations) -> str:
    span = iterations(flagged.first, flagged.last)
    if flagged.flag == "nan":
        return f"{plural(flagged.count, 'NaN iteration')} logged in {span}"
    return f"{plural(flagged.count, 'skipped iteration')} (fp16 overflow) logged in {span}"


def _restart_gap(restart: RestartGap) -> str:
    if restart.from_save:
        line = f" (line {restart.save_line})" if restart.save_line is not None else ""
        source = f"resumed from the checkpoint saved at iteration {restart.resumed_at}{line}"
    else:
        source = f"resumed at iteration {restart.resumed_at + 1}"
    if restart.gap_s is None:
        gap = "a gap of unknown length (no timestamps either side)"
    elif restart.startup_s is None:
        gap = (
            f"a gap of {duration(restart.gap_s)} (start-up, queueing and checkpoint load: the "
            "log prints no start-up timers to split it)"
        )
    else:
        gap = (
            f"a gap of {duration(restart.gap_s)}: start-up {duration(restart.startup_s)} (its "
            f"setup timers, checkpoint load {duration(restart.checkpoint_load_s)} of it) and "
            f"{duration(restart.other_gap_s)} before it (launch, queueing)"
        )
    return (
        f"the attempt before segment {restart.segment} stopped after iteration "
        f"{restart.after_iteration}; {source}: {gap}, and "
        f"{plural(restart.redone_iterations, 'iteration')} redone ({duration(restart.redone_s)})"
    )
