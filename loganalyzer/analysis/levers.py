"""Verdicts that name a cause and the lever that shrinks it, only where the evidence is direct:
the goodput budget's lines (saves, evaluations, stragglers, data loading, restarts) and the
waterfall's measured steps (pipeline bubble, exposed communication)."""

from __future__ import annotations

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


def lever_verdicts(
    causes: Causes, goodput: Goodput, steps: Waterfall, schedule: Schedule
) -> list[Verdict]:
    """The cause-and-lever verdicts of one run."""
    verdicts = [
        *_event_verdict(causes, goodput, schedule, "checkpoint_save"),
        *_event_verdict(causes, goodput, schedule, "evaluation"),
        *_straggler_verdict(causes, goodput),
        *_data_verdict(causes, goodput),
        *_waterfall_verdicts(steps),
    ]
    return verdicts


def _severity(share: float | None) -> Severity:
    return "warning" if share is not None and share > WARNING_SHARE else "info"


def _line(goodput: Goodput, name: str) -> tuple[float, float | None]:
    line = next(line for line in goodput.lines if line.name == name)
    return line.seconds, line.share


def _event_verdict(
    causes: Causes, goodput: Goodput, schedule: Schedule, kind: str
) -> list[Verdict]:
    costs = [e.lost_s for e in causes.entries if e.cause.kind == kind]
    costs += [c.lost_s for c in causes.events if c.kind == kind]
    if not costs:
        return []
    name = "checkpoint saves" if kind == "checkpoint_save" else "evaluation"
    seconds, share = _line(goodput, name)
    if share is None or share < MIN_RUN_SHARE:
        return []
    interval = schedule.save if kind == "checkpoint_save" else schedule.evaluation
    every = f" every {interval.iterations} iterations" if interval else ""
    what = "save" if kind == "checkpoint_save" else "evaluation"
    lever = (
        "asynchronous saving (`--async-save`) would hide most of it"
        if kind == "checkpoint_save"
        else "fewer (`--eval-interval`) or shorter (`--eval-iters`) evaluations shrink it"
    )
    message = (
        f"{name}{every} cost {percent(share)} of the run ({plural(len(costs), what)} attributed, "
        f"{duration(median(costs))} each at the median, {duration(seconds)} in all); {lever}"
    )
    code = "CHECKPOINT_SAVE_COST" if kind == "checkpoint_save" else "EVALUATION_COST"
    return [Verdict(_severity(share), code, message)]


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
    return [Verdict(_severity(share), "STRAGGLER_COST", message)]


def _data_verdict(causes: Causes, goodput: Goodput) -> list[Verdict]:
    found = [e for e in causes.entries if e.cause.kind == "data_loading"]
    if not found:
        return []
    seconds, share = _line(goodput, "data loading")
    message = (
        f"{plural(len(found), 'slow step')} waited on the data loader, {duration(seconds)} "
        f"({percent(share)}); more loader workers (`--num-workers`) or a faster dataset "
        "store shrink it"
    )
    return [Verdict(_severity(share), "DATA_LOADING_COST", message)]


def _waterfall_verdicts(steps: Waterfall) -> list[Verdict]:
    verdicts = []
    for step in steps.steps:
        given = step.inputs
        if step.name == "pipeline bubble" and given["bubble_share"] >= MIN_STEP_SHARE:
            virtual = f" and {given['v']} virtual stages" if given["v"] > 1 else ""
            message = (
                f"the pipeline bubble idles {percent(given['bubble_share'])} of each step at "
                f"PP={given['p']} with {given['m']} micro-batches per step{virtual} "
                "((p-1)/(m·v + p-1)); more micro-batches per step (a smaller "
                "`--micro-batch-size` or a larger global batch) or interleaving "
                "(`--num-layers-per-virtual-pipeline-stage`) shrink it"
            )
            severity: Severity = "warning" if given["bubble_share"] > BUBBLE_WARNING else "info"
            verdicts.append(Verdict(severity, "PIPELINE_BUBBLE", message))
        if step.name == "exposed communication" and given["c"] >= MIN_STEP_SHARE:
            timers = sorted(given["timers_ms"].items(), key=lambda kv: -kv[1])
            largest = ", ".join(f"{name} {number(ms, ',.0f', ' ms')}" for name, ms in timers[:3])
            message = (
                f"communication timers take {percent(given['w'])} of the "
                f"{number(given['step_ms'], ',.0f', ' ms')} step, {percent(given['c'])} beyond "
                f"what the pipeline bubble explains (largest: {largest}); overlapping it "
                "with compute (`--overlap-grad-reduce` and `--overlap-param-gather` for "
                "data-parallel reductions, `--overlap-p2p-communication` for pipeline sends) "
                f"shrinks it ({TIMES}{step.factor:.2f} on MFU)"
            )
            verdicts.append(Verdict(_severity(given["c"]), "EXPOSED_COMMUNICATION", message))
    return verdicts
