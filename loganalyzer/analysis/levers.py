"""Verdicts that name a cause and the lever that shrinks it, only where the evidence is direct:
the goodput budget's lines (saves, evaluations, stragglers, data loading, restarts) and the
waterfall's measured steps (pipeline bubble, exposed communication).

Advice only where the run's facts allow it (`LeverFacts`): a flag is named only where the
run's printed arguments list it (an arguments dump lists every argument its version has, so
a flag it lacks is one that framework and version never had) and it is not already set; a
value is suggested smaller only where it is not already the smallest; a data-parallel lever
only with more than one data-parallel rank. Otherwise the lever is stated generally."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any

from loganalyzer.analysis.causes import CauseEvidence, Causes
from loganalyzer.analysis.events import Schedule
from loganalyzer.analysis.goodput import Goodput
from loganalyzer.analysis.verdicts import Severity

if TYPE_CHECKING:
    from loganalyzer.flops.waterfall import Waterfall

# Above this share of the wall clock (or of a step), a cost is a warning, not information.
WARNING_SHARE = 0.05
# A pipeline bubble above this share of the step is a warning: below it, it is what a
# well-tuned pipeline run (many micro-batches per step) carries anyway.
BUBBLE_WARNING = 0.15
# A cost below this share of the wall clock is noise, not a finding.
MIN_RUN_SHARE = 0.001
# A waterfall step removing less than this share of the step is not worth a verdict.
MIN_STEP_SHARE = 0.02


@dataclass(frozen=True)
class LeverFacts:
    """What the log shows about the levers: the arguments it printed (name → value, as
    Megatron names them) and the run's micro-batch, data-parallel and pipeline-parallel sizes."""

    arguments: Mapping[str, object] = field(default_factory=dict)
    micro_batch_size: int | None = None
    data_parallel: int | None = None
    pipeline: int | None = None

    def unset(self, argument: str) -> bool:
        """Whether the run's arguments list `argument` and it is not set: its flag can be
        named as the lever."""
        return argument in self.arguments and self.arguments[argument] is not True


@dataclass(frozen=True)
class Lever:
    """A verdict that names a cause and its lever, as facts: `code` the cause, `seconds` and
    `share` what the budget line holds (of the wall clock), `count` the events or slow steps
    attributed, `median_s` an event's median cost, `every` the iterations between saves or
    evaluations, `evidence` the worst straggler's, `inputs` and `factor` the waterfall step's
    (pipeline bubble, exposed communication), `facts` what the run shows about the levers.
    `render.wording.lever_message` words it."""

    severity: Severity
    code: str
    lost_s: float
    facts: LeverFacts
    seconds: float = 0.0
    share: float | None = None
    count: int = 0
    median_s: float | None = None
    every: int | None = None
    evidence: CauseEvidence | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    factor: float = 1.0


def lever_verdicts(
    causes: Causes,
    goodput: Goodput,
    steps: Waterfall,
    schedule: Schedule,
    facts: LeverFacts | None = None,
) -> list[Lever]:
    """The cause-and-lever verdicts of one run."""
    known = facts or LeverFacts()
    steady_s, _ = _line(goodput, "productive steady steps")
    verdicts = [
        *_event_verdict(causes, goodput, schedule, "checkpoint_save", known),
        *_event_verdict(causes, goodput, schedule, "evaluation", known),
        *_straggler_verdict(causes, goodput, known),
        *_data_verdict(causes, goodput, known),
        *_waterfall_verdicts(steps, known, steady_s),
    ]
    return verdicts


def _severity(share: float | None) -> Severity:
    return "warning" if share is not None and share > WARNING_SHARE else "info"


def _line(goodput: Goodput, name: str) -> tuple[float, float | None]:
    line = next(line for line in goodput.lines if line.name == name)
    return line.seconds, line.share


def _event_verdict(
    causes: Causes, goodput: Goodput, schedule: Schedule, kind: str, facts: LeverFacts
) -> list[Lever]:
    # each save or evaluation once, however many entries paid for it
    costs = list(causes.event_seconds(kind).values())
    if not costs:
        return []
    name = "checkpoint saves" if kind == "checkpoint_save" else "evaluation"
    seconds, share = _line(goodput, name)
    if share is None or share < MIN_RUN_SHARE:
        return []
    interval = schedule.save if kind == "checkpoint_save" else schedule.evaluation
    code = "CHECKPOINT_SAVE_COST" if kind == "checkpoint_save" else "EVALUATION_COST"
    return [
        Lever(
            _severity(share),
            code,
            seconds,
            facts,
            seconds=seconds,
            share=share,
            count=len(costs),
            median_s=median(costs),
            every=interval.iterations if interval else None,
        )
    ]


def _straggler_verdict(causes: Causes, goodput: Goodput, facts: LeverFacts) -> list[Lever]:
    found = [e for e in causes.entries if e.cause.kind == "straggler"]
    if not found:
        return []
    seconds, share = _line(goodput, "stragglers")
    worst = max(found, key=lambda e: e.lost_s)
    return [
        Lever(
            _severity(share),
            "STRAGGLER_COST",
            seconds,
            facts,
            seconds=seconds,
            share=share,
            count=len(found),
            evidence=worst.cause.evidence,
        )
    ]


def _data_verdict(causes: Causes, goodput: Goodput, facts: LeverFacts) -> list[Lever]:
    found = [e for e in causes.entries if e.cause.kind == "data_loading"]
    if not found:
        return []
    seconds, share = _line(goodput, "data loading")
    return [
        Lever(
            _severity(share),
            "DATA_LOADING_COST",
            seconds,
            facts,
            seconds=seconds,
            share=share,
            count=len(found),
        )
    ]


def _waterfall_verdicts(steps: Waterfall, facts: LeverFacts, steady_s: float) -> list[Lever]:
    verdicts = []
    for step in steps.steps:
        given = step.inputs
        if step.name == "pipeline bubble" and given["bubble_share"] >= MIN_STEP_SHARE:
            severity: Severity = "warning" if given["bubble_share"] > BUBBLE_WARNING else "info"
            lost = given["bubble_share"] * steady_s
            verdicts.append(Lever(severity, "PIPELINE_BUBBLE", lost, facts, inputs=given))
        if step.name == "exposed communication" and given["c"] >= MIN_STEP_SHARE:
            lost = given["c"] * steady_s
            verdicts.append(
                Lever(
                    _severity(given["c"]),
                    "EXPOSED_COMMUNICATION",
                    lost,
                    facts,
                    inputs=given,
                    factor=step.factor,
                )
            )
    return verdicts
