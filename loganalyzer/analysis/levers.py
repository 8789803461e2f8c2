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
from typing import TYPE_CHECKING

from loganalyzer.analysis.causes import Causes
from loganalyzer.analysis.events import Schedule
from loganalyzer.analysis.goodput import Goodput
from loganalyzer.analysis.verdicts import Severity, Verdict
from loganalyzer.render.numbers import TIMES, duration, number, percent, plural

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

    def flag(self, argument: str, flag: str) -> str | None:
        """`flag`, quoted, where the run's arguments list `argument` and it is not set."""
        if argument not in self.arguments or self.arguments[argument] is True:
            return None
        return f"`{flag}`"


def lever_verdicts(
    causes: Causes,
    goodput: Goodput,
    steps: Waterfall,
    schedule: Schedule,
    facts: LeverFacts | None = None,
) -> list[Verdict]:
    """The cause-and-lever verdicts of one run."""
    known = facts or LeverFacts()
    steady_s, _ = _line(goodput, "productive steady steps")
    verdicts = [
        *_event_verdict(causes, goodput, schedule, "checkpoint_save", known),
        *_event_verdict(causes, goodput, schedule, "evaluation", known),
        *_straggler_verdict(causes, goodput),
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
) -> list[Verdict]:
    # each save or evaluation once, however many entries paid for it
    costs = list(causes.event_seconds(kind).values())
    if not costs:
        return []
    name = "checkpoint saves" if kind == "checkpoint_save" else "evaluation"
    seconds, share = _line(goodput, name)
    if share is None or share < MIN_RUN_SHARE:
        return []
    interval = schedule.save if kind == "checkpoint_save" else schedule.evaluation
    every = f" every {interval.iterations} iterations" if interval else ""
    what = "save" if kind == "checkpoint_save" else "evaluation"
    if kind == "checkpoint_save":
        flag = facts.flag("async_save", "--async-save")
        lever = f"asynchronous saving{f' ({flag})' if flag else ''} would hide most of it"
    else:
        fewer, shorter = (
            facts.flag("eval_interval", "--eval-interval"),
            facts.flag("eval_iters", "--eval-iters"),
        )
        lever = (
            f"fewer{f' ({fewer})' if fewer else ''} or shorter{f' ({shorter})' if shorter else ''}"
            " evaluations shrink it"
        )
    message = (
        f"{name}{every} cost {percent(share)} of the run ({plural(len(costs), what)} attributed, "
        f"{duration(median(costs))} each at the median, {duration(seconds)} in all); {lever}"
    )
    code = "CHECKPOINT_SAVE_COST" if kind == "checkpoint_save" else "EVALUATION_COST"
    return [Verdict(_severity(share), code, message, seconds)]


def _straggler_verdict(causes: Causes, goodput: Goodput) -> list[Verdict]:
    found = [e for e in causes.entries if e.cause.kind == "straggler"]
    if not found:
        return []
    seconds, share = _line(goodput, "stragglers")
    worst = max(found, key=lambda e: e.lost_s)
    message = (
        f"{plural(len(found), 'slow step')} trace to a straggling rank, {duration(seconds)} "
        f"({percent(share)}); the worst: {worst.cause.evidence}. Check that rank's node "
        "(thermals, ECC errors, a slow link) or exclude it"
    )
    return [Verdict(_severity(share), "STRAGGLER_COST", message, seconds)]


def _data_verdict(causes: Causes, goodput: Goodput, facts: LeverFacts) -> list[Verdict]:
    found = [e for e in causes.entries if e.cause.kind == "data_loading"]
    if not found:
        return []
    seconds, share = _line(goodput, "data loading")
    workers = facts.flag("num_workers", "--num-workers")
    message = (
        f"{plural(len(found), 'slow step')} waited on the data loader, {duration(seconds)} "
        f"({percent(share)}); more loader workers{f' ({workers})' if workers else ''} or a "
        "faster dataset store shrink it"
    )
    return [Verdict(_severity(share), "DATA_LOADING_COST", message, seconds)]


def _waterfall_verdicts(steps: Waterfall, facts: LeverFacts, steady_s: float) -> list[Verdict]:
    verdicts = []
    for step in steps.steps:
        given = step.inputs
        if step.name == "pipeline bubble" and given["bubble_share"] >= MIN_STEP_SHARE:
            virtual = f" and {given['v']} virtual stages" if given["v"] > 1 else ""
            message = (
                f"the pipeline bubble idles {percent(given['bubble_share'])} of each step at "
                f"PP={given['p']} with {given['m']} micro-batches per step{virtual} "
                f"((p-1)/(m·v + p-1)); {_bubble_lever(facts)}"
            )
            severity: Severity = "warning" if given["bubble_share"] > BUBBLE_WARNING else "info"
            lost = given["bubble_share"] * steady_s
            verdicts.append(Verdict(severity, "PIPELINE_BUBBLE", message, lost))
        if step.name == "exposed communication" and given["c"] >= MIN_STEP_SHARE:
            timers = sorted(given["timers_ms"].items(), key=lambda kv: -kv[1])
            largest = ", ".join(f"{name} {number(ms, ',.0f', ' ms')}" for name, ms in timers[:3])
            message = (
                f"communication timers take {percent(given['w'])} of the "
                f"{number(given['step_ms'], ',.0f', ' ms')} step, {percent(given['c'])} beyond "
                f"what the pipeline bubble explains (largest: {largest}); "
                f"{_overlap_lever(facts)} shrinks it "
                f"({TIMES}{step.factor:.2f} on MFU)"
            )
            lost = given["c"] * steady_s
            verdicts.append(Verdict(_severity(given["c"]), "EXPOSED_COMMUNICATION", message, lost))
    return verdicts


def _bubble_lever(facts: LeverFacts) -> str:
    """More micro-batches per step: a smaller micro-batch only where it is above 1."""
    more = ["a larger global batch"]
    if facts.micro_batch_size is None or facts.micro_batch_size > 1:
        flag = facts.flag("micro_batch_size", "--micro-batch-size")
        more.insert(0, f"a smaller micro-batch{f' ({flag})' if flag else ''}")
    flag = facts.flag(
        "num_layers_per_virtual_pipeline_stage", "--num-layers-per-virtual-pipeline-stage"
    )
    return (
        f"more micro-batches per step ({' or '.join(more)}) or an interleaved schedule"
        f"{f' ({flag})' if flag else ''} shrink it"
    )


def _overlap_lever(facts: LeverFacts) -> str:
    """Overlapping communication with compute, with the flags the run's version has, for the
    reductions data parallelism does (DP > 1) and the sends a pipeline does (PP > 1)."""
    parts = []
    if facts.data_parallel is None or facts.data_parallel > 1:
        flags = [
            f
            for f in (
                facts.flag("overlap_grad_reduce", "--overlap-grad-reduce"),
                facts.flag("overlap_param_gather", "--overlap-param-gather"),
            )
            if f
        ]
        parts.append(
            "the data-parallel reductions" + (f" ({' and '.join(flags)})" if flags else "")
        )
    if facts.pipeline is None or facts.pipeline > 1:
        flag = facts.flag("overlap_p2p_comm", "--overlap-p2p-communication")
        parts.append("the pipeline sends" + (f" ({flag})" if flag else ""))
    what = " and ".join(parts) if parts else "the communication"
    return f"overlapping {what} with compute"
