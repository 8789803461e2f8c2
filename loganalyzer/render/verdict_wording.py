"""The messages of the run's verdicts, written in one place from the facts `analysis.verdicts`
finds (`Finding`), and the published reference band's scope that the verdict, the summary's
`reference` and the report's card all state.

A message carries the figures a reader needs to check its verdict by hand. `Verdict` is a
verdict as the document holds it (its `verdicts[]` entry, before `gpu_hours`), whichever
module found it: this one words `analysis.verdicts`' findings, `wording` the lever and
incident verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from loganalyzer.analysis.causes import Cause
from loganalyzer.analysis.steady import Drift
from loganalyzer.analysis.stragglers import RankSpread
from loganalyzer.analysis.verdicts import (
    IMPLAUSIBLE_MFU,
    TFLOPS_TOLERANCE,
    UNLIKE_SIZE_FACTOR,
    AgainstReference,
    Finding,
    ImplausibleMfu,
    MfuUnknown,
    NoReference,
    PeriodicSlowSteps,
    ReferenceBand,
    ReferenceRun,
    RestartsLost,
    Severity,
    SlowAtLossSpikes,
    SlowAtSkipped,
    SlowRecords,
    SustainedSlowdown,
    TflopsMismatch,
    UnexplainedStalls,
)
from loganalyzer.render.evidence import cause_evidence
from loganalyzer.render.numbers import (
    duration,
    iterations,
    listing,
    percent,
    plural,
    ratio,
    seconds,
)

# The published runs a reference verdict names; the band spans them all.
_LISTED = 3
# How an MFU stands against the published band, by the verdict's code.
_RELATION = {
    "MFU_ABOVE_REFERENCE": "above what",
    "MFU_WITHIN_REFERENCE": "within what",
    "MFU_BELOW_REFERENCE": "below what",
}
_USUAL_PERIODIC = "typically checkpoint saves or evaluation"
_PERIODIC_EVENTS = {"checkpoint_save": "checkpoint saves", "evaluation": "evaluations"}
# The inputs an unknown MFU can lack, as a reader names them.
_INPUTS = {
    "gpu": "GPU type",
    "peak": "GPU's peak at its precision",
    "num_gpus": "GPU count",
    "steady_step_time": "steady step time",
    "seq_length": "sequence length",
    "vocab_size": "vocabulary size",
    "num_attention_heads": "attention heads",
    "num_layers": "layer count",
}


@dataclass(frozen=True)
class Verdict:
    """One verdict, worded: `message` carries the numbers behind it."""

    severity: Severity
    code: str
    message: str
    lost_s: float | None = None  # the seconds at stake, where the verdict is about time


def worded(finding: Finding) -> Verdict:
    """The verdict `finding` is, with its message."""
    return Verdict(finding.severity, finding.code, finding_message(finding), finding.lost_s)


def finding_message(finding: Finding) -> str:
    """The message of a verdict of `analysis.verdicts`; a verdict on figures that rest on too
    few records says so, and why."""
    message = _message(finding)
    if finding.low_confidence is not None:
        message += f" (low confidence: {finding.low_confidence})"
    return message


def evidence_text(cause: Cause) -> str:
    """A cause's evidence, as a verdict quotes it after the cause's kind."""
    return cause_evidence(cause.evidence)


def reference_scope(band: ReferenceBand) -> str:
    """Which published runs the band spans: "bf16 on H100 of similar size"; or, where none is
    near this model's size, "bf16 on H100 (none within 10× of this model's size)"."""
    scope = _on(band.dtype, band.family)
    if band.similar_size:
        return f"{scope} of similar size"
    if band.size_unlike:
        return f"{scope} (none within {ratio(UNLIKE_SIZE_FACTOR, 0)} of this model's size)"
    return scope


def _on(dtype: str, family: str) -> str:
    return f"{dtype} on {family.upper()}"


def _message(finding: Finding) -> str:
    facts = finding.facts
    match facts:
        case ImplausibleMfu():
            return (
                f"MFU {percent(facts.mfu)} is above {percent(IMPLAUSIBLE_MFU)}, which no "
                "published GPU training run reaches: check the GPU count, the dtype's peak "
                "and the FLOP formula's inputs"
            )
        case NoReference():
            return (
                f"no published run of {_on(facts.dtype, facts.family)} to compare MFU "
                f"{percent(facts.mfu)} against"
            )
        case AgainstReference():
            return _against_reference(finding.code, facts)
        case MfuUnknown():
            return _mfu_unknown(facts)
        case TflopsMismatch():
            return (
                f"recomputed TFLOPS are {ratio(facts.found)} the framework's own figure where "
                f"the formula differences explain {ratio(facts.expected)}: "
                f"{'+' if facts.unexplained > 0 else ''}{percent(facts.unexplained)} "
                f"unexplained (tolerance {percent(TFLOPS_TOLERANCE)}); check the GPU count, "
                "the model shape and the batch size"
            )
        case SlowRecords():
            return _slow_records(facts)
        case PeriodicSlowSteps():
            return _periodic(facts)
        case SustainedSlowdown():
            return _sustained(facts)
        case SlowAtLossSpikes():
            return _at_loss_spikes(facts)
        case SlowAtSkipped():
            listed = ", ".join(
                f"iteration {at.iteration} ({at.skipped} skipped, {at.nan} NaN, step "
                f"{ratio(at.ratio)} the baseline)"
                for at in facts.examples
            )
            return f"{plural(facts.count, 'slow step')} skipped iterations or hit NaNs: {listed}"
        case Drift():
            return _drift(facts)
        case RestartsLost():
            return _restarts(facts)
        case UnexplainedStalls():
            return _stalls(facts)
        case RankSpread():
            return _rank_spread(facts)


def _against_reference(code: str, facts: AgainstReference) -> str:
    """An MFU against the published band: within, above or below what the runs reached."""
    band = facts.band
    name = "MFU against the bf16 peak" if facts.against_bf16 else "MFU"
    listed = "; ".join(_describe(ref) for ref in band.runs[:_LISTED])
    low, high = band.low, band.high
    shown = f"{percent(low)} to {percent(high)}" if low != high else percent(low)
    where = f"published runs of {reference_scope(band)} reached {shown} ({listed})"
    return f"{name} {percent(facts.mfu)} is {_RELATION[code]} {where}"


def _describe(ref: ReferenceRun) -> str:
    devices = f" on {ref.num_devices} devices" if ref.num_devices else ""
    return f"{ref.run} {percent(ref.mfu)}{devices}, {ref.source}"


def _mfu_unknown(facts: MfuUnknown) -> str:
    """What the run lacks for its MFU, and the options that supply it."""
    lacks = ", ".join(_INPUTS.get(name, name.replace("_", " ")) for name, _ in facts.missing)
    options = list(dict.fromkeys(option for _, option in facts.missing if option))
    passing = f"; pass {listing(options)}" if options else ""
    return f"MFU unknown: the run does not give its {lacks}{passing}"


def _share(lost_s: float, logged_s: float) -> str:
    """`lost_s` as a share of the logged time ("" when none was logged)."""
    if logged_s <= 0:
        return ""
    return f"{percent(lost_s / logged_s)} of the logged {duration(logged_s)}"


def _slow_records(facts: SlowRecords) -> str:
    """The isolated slow records' cost, and the worst one's with its cause, if any."""
    worst, cause = facts.worst, facts.cause
    span = iterations(worst.first_iteration, worst.last_iteration)
    took = "averaged" if worst.interval > 1 else "took"
    message = (
        f"{plural(facts.count, 'isolated slow record')} above the baseline cost "
        f"{duration(facts.lost_s)} ({_share(facts.lost_s, facts.logged_s)}); the worst, "
        f"{span}, {took} {seconds(worst.step_time_s)} against {seconds(worst.baseline_s)} "
        f"({ratio(worst.ratio)}): {duration(worst.lost_s)} lost"
    )
    if cause is not None and cause.kind != "unknown":
        return message + f", {cause.kind.replace('_', ' ')}: {evidence_text(cause)}"
    if worst.kind == "stall":
        return message + (
            f", most likely one iteration that stalled for {duration(worst.lost_s)} rather "
            f"than {worst.interval} slow ones; nothing in the logs says why"
        )
    return message + "; nothing in the logs says why"


def _periodic(facts: PeriodicSlowSteps) -> str:
    """The recurring slow steps, their cause (or the usual ones) and what the rest cost."""
    pattern, others, lost = facts.pattern, facts.explained, facts.lost_s
    which = plural(others, "of them is a save or an evaluation", "of them are saves or evaluations")
    said = f"; {which}, said in its own verdict" if others else ""
    return (
        f"{pattern.occurrences} slow steps recur every {pattern.period_iterations} "
        f"iterations ({iterations(pattern.first_iteration, pattern.last_iteration)}, median "
        f"{ratio(pattern.median_ratio)} the baseline), "
        f"{_period_cause(facts.shared)}{said}; "
        f"{'the rest cost' if others else 'they cost'} {duration(lost)} "
        f"({_share(lost, facts.logged_s)})"
    )


def _period_cause(shared: Cause | None) -> str:
    """What recurring slow steps are: the save or evaluation they share, with the first one's
    evidence, else what they usually are."""
    if shared is None:
        return _USUAL_PERIODIC
    return f"{_PERIODIC_EVENTS[shared.kind]} (first: {evidence_text(shared)})"


def _sustained(facts: SustainedSlowdown) -> str:
    """A lasting slowdown: its iterations (and records, where each averages several), pace
    and cost."""
    event = facts.event
    records = (
        f" ({plural(event.records, 'record')}, {event.first_record} to {event.last_record})"
        if event.interval > 1
        else ""
    )
    return (
        f"{iterations(event.start_iteration, event.end_iteration)}{records} ran at "
        f"{seconds(event.step_time_s)} per iteration, {ratio(event.factor)} the pace of "
        f"{seconds(event.baseline_s)}, for {plural(event.iterations, 'iteration')}: "
        f"{duration(event.lost_s)} lost ({_share(event.lost_s, facts.logged_s)})"
    )


def _at_loss_spikes(facts: SlowAtLossSpikes) -> str:
    listed = ", ".join(
        f"iteration {at.iteration} (loss {at.loss:.4g} against a local median of "
        f"{at.median:.4g}, step {ratio(at.ratio)} the baseline)"
        for at in facts.examples
    )
    return (
        f"{plural(facts.count, 'slow step')} "
        f"{'coincides' if facts.count == 1 else 'coincide'} with a loss spike: {listed}; "
        "a data or numerics problem can slow a step (recovery, re-tries) as well as the loss"
    )


def _drift(drift: Drift) -> str:
    taken = "median" if drift.pace_method == "median" else "pace (total time over iterations)"
    return (
        f"the steady step time rose {percent(drift.relative_change)}, from a {taken} of "
        f"{seconds(drift.first_median_s)} over {iterations(*drift.first_iterations)} to "
        f"{seconds(drift.last_median_s)} over {iterations(*drift.last_iterations)} (first and "
        f"last tenth of {drift.records} steady records)"
    )


def _restarts(facts: RestartsLost) -> str:
    gaps = (
        f"{duration(facts.gaps_s)} of gaps (known for {facts.gaps_known} of {facts.restarts})"
        if facts.gaps_known
        else "gaps unknown (no timestamps)"
    )
    return (
        f"{plural(facts.restarts, 'restart')} cost {duration(facts.lost_s)}: {gaps} and "
        f"{plural(facts.redone, 'redone iteration')} ({duration(facts.redone_s)} "
        f"at the steady pace of {seconds(facts.pace_s)})"
    )


def _stalls(facts: UnexplainedStalls) -> str:
    longest = facts.longest
    others = f" ({facts.explained} more explained by their causes)" if facts.explained else ""
    return (
        f"{plural(facts.count, 'stall')} inside a run segment{others} added "
        f"{duration(facts.lost_s)} that the step times do not show and nothing in the logs "
        f"explains; the longest, {duration(longest.gap_s)}, came between iterations "
        f"{longest.after_iteration} and {longest.iteration}"
    )


def _rank_spread(spread: RankSpread) -> str:
    slowest = spread.top[0]
    return (
        f"{spread.metric}: rank {slowest.rank} takes {slowest.value:.4g} ms, "
        f"{ratio(spread.spread)} the median rank's {spread.median:.4g} ms over {spread.ranks} "
        "ranks"
    )
