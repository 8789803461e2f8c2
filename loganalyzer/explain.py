"""Why: the causes, goodput budget, MFU waterfall and run health of a loaded run, as the plain
objects of the summary document (schema loganalyzer.summary/1.x).

One place joins the analysis (causes, budget, health) and the FLOPs layer (waterfall), so
`summary.py` only adds the objects it returns and attaches the causes to its entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.analysis import Analysis
from loganalyzer.analysis.causes import Cause, Causes, EventCost, attribute
from loganalyzer.analysis.events import Schedule
from loganalyzer.analysis.goodput import Goodput, Held, budget
from loganalyzer.analysis.health import assess
from loganalyzer.analysis.levers import LeverFacts, lever_verdicts
from loganalyzer.flops import waterfall
from loganalyzer.flops.efficiency import Efficiency, RunFacts, goodput_mfu
from loganalyzer.model import Run
from loganalyzer.render import wording
from loganalyzer.render.evidence import aftermath_evidence, cause_evidence, event_evidence
from loganalyzer.render.verdict_wording import Verdict


@dataclass(frozen=True)
class Explanation:
    """The document's `goodput`, `waterfall` and `health` objects, the causes to attach to its
    entries, and the verdicts that name a cause and its lever."""

    causes: Causes
    goodput: Goodput
    waterfall: waterfall.Waterfall
    objects: dict[str, Any]
    verdicts: list[dict[str, str]]


def explain(
    run: Run,
    analysis: Analysis,
    schedule: Schedule,
    facts: RunFacts,
    efficiency: Efficiency,
    tokens_per_s: float | None,
    held: Held | None = None,
) -> Explanation:
    """Causes, budget, waterfall and health of `run`; `held`: the hang before its ending."""
    causes = attribute(analysis, run.table, schedule)
    goodput = budget(analysis, causes, run.table, held)
    median = analysis.step_time_s.median
    shares = waterfall.timer_shares(analysis.long.timers.medians, median * 1000 if median else None)
    steps = waterfall.build(_inputs(run, analysis, facts, efficiency, goodput, shares))
    device = facts.gpu.accelerator.memory_gb if facts.gpu else None
    health = assess(run.table, run.metrics, shares, device, tokens_per_s, facts.num_gpus)
    objects = {
        "goodput": {
            **_budget_json(goodput),
            "attributed": [event_cost_json(cost) for cost in causes.events],
        },
        "waterfall": dataclasses.asdict(steps),
        "health": dataclasses.asdict(health),
    }
    levers = LeverFacts(
        arguments={key: value.value for key, value in run.config.items()},
        micro_batch_size=facts.micro_batch_size,
        data_parallel=_data_parallel(run, facts),
        pipeline=run.get_int("pipeline_model_parallel_size"),
    )
    verdicts = lever_verdicts(causes, goodput, steps, schedule, levers)
    return Explanation(
        causes,
        goodput,
        steps,
        objects,
        [
            dataclasses.asdict(Verdict(v.severity, v.code, wording.lever_message(v), v.lost_s))
            for v in verdicts
        ],
    )


def _budget_json(goodput: Goodput) -> dict[str, Any]:
    """The document's goodput budget: its facts and the sentences worded from them (its
    `beyond_clock` is left to the document's `invariants`, which says it)."""
    held = goodput.hang
    return {
        "wall_s": goodput.wall_s,
        "wall_clock": goodput.wall_clock,
        "lines": [dataclasses.asdict(line) for line in goodput.lines],
        "goodput": goodput.goodput,
        "summary": wording.goodput_summary(goodput),
        "hang": None
        if held is None
        else {
            "seconds": held.seconds,
            "bound": held.bound,
            "extends_s": held.extends_s,
            "note": wording.hang_note(held),
        },
    }


def attach_causes(document: dict[str, Any], explanation: Explanation) -> None:
    """Add a `cause` to each slow-step, stall and restart entry of `document`, by iteration
    range, whatever other fields the entries carry."""
    causes = explanation.causes
    for entry in document["slow_steps"]:
        first, last = _range(entry)
        cause = causes.for_range(entry.get("segment") or 0, first, last)
        entry["cause"] = cause_json(cause) if cause else None
    for stall in document["stalls"]:
        cause = causes.for_stall(stall.get("segment") or 0, stall["iteration"])
        stall["cause"] = cause_json(cause) if cause else None
    by_segment = {r.segment: r for r in causes.restarts}
    for restart in document["restarts"]:
        found = by_segment.get(int(restart["segment"]))
        restart["cause"] = cause_json(found.cause) if found else None
        if found is not None:
            restart["split"] = {
                "startup_s": found.startup_s,
                "checkpoint_load_s": found.checkpoint_load_s,
                "other_gap_s": found.other_gap_s,
                "redone_s": found.redone_s,
            }


def cause_json(cause: Cause) -> dict[str, Any]:
    """A cause as the document's `cause` object, its evidence worded (`render.evidence`)."""
    return {
        "kind": cause.kind,
        "evidence": cause_evidence(cause.evidence),
        "evidence_kind": cause.evidence_kind,
        "shares": [
            {
                "kind": share.kind,
                "iteration": share.iteration,
                "seconds": share.seconds,
                "evidence_kind": share.evidence_kind,
                "evidence": event_evidence(share.evidence),
            }
            for share in cause.shares
        ],
        "event_iteration": cause.event_iteration,
    }


def event_cost_json(cost: EventCost) -> dict[str, Any]:
    """A save's or evaluation's cost to a record not flagged slow, as the document's
    `goodput.attributed[]`, its evidence worded."""
    return {
        "kind": cost.kind,
        "event_iteration": cost.event_iteration,
        "segment": cost.segment,
        "first_iteration": cost.first_iteration,
        "last_iteration": cost.last_iteration,
        "lost_s": cost.lost_s,
        "evidence": aftermath_evidence(cost.evidence),
        "evidence_kind": cost.evidence_kind,
    }


def _range(entry: dict[str, Any]) -> tuple[int, int]:
    first = entry.get("first_iteration", entry.get("start_iteration"))
    last = entry.get("last_iteration", entry.get("end_iteration", entry["iteration"]))
    if first is None:
        first = entry["iteration"] - (entry.get("interval") or 1) + 1
    return int(first), int(last)


def _inputs(
    run: Run,
    analysis: Analysis,
    facts: RunFacts,
    efficiency: Efficiency,
    goodput: Goodput,
    shares: pl.DataFrame,
) -> waterfall.Inputs:
    peak = efficiency.peak["tflops_per_gpu"] if efficiency.peak else None
    peak = peak if isinstance(peak, (int, float)) else None
    mfu, source = efficiency.mfu, "recomputed FLOPs at the steady pace"
    name = "steady MFU"
    reported = efficiency.reported_tflops_per_gpu
    if mfu is None and reported is not None and peak:
        mfu, name = reported / peak, "framework MFU"
        source = "its printed TFLOPS/GPU over the peak, with its own FLOP count"
    median = analysis.step_time_s.median
    return waterfall.Inputs(
        mfu=mfu,
        hfu=efficiency.hfu,
        mfu_overall=efficiency.mfu_overall,
        mfu_source=source,
        pipeline=run.get_int("pipeline_model_parallel_size"),
        virtual_stages=_virtual_stages(run),
        micro_batches=_micro_batches(run, facts),
        step_ms=median * 1000 if median else None,
        goodput_mfu=mfu_goodput(analysis, efficiency, facts, goodput),
        timers=shares,
        hang_s=goodput.hang.seconds if goodput.hang and goodput.hang.seconds else 0.0,
        mfu_name=name,
    )


def mfu_goodput(
    analysis: Analysis, efficiency: Efficiency, facts: RunFacts, goodput: Goodput
) -> float | None:
    """The goodput MFU: the model FLOPs of the iterations kept (redone ones excluded) over the
    wall clock the log covers (the budget's, iterations not in the log left out as its
    goodput leaves them: their work is not counted either), the one figure the waterfall
    ends at and `flops.mfu_goodput` shows."""
    # no fewer than none: a counter that skipped ahead before a restart redoes iterations
    # that were never logged
    kept = max(0, analysis.iterations - sum(r.lost_iterations for r in analysis.restarts))
    return goodput_mfu(efficiency, facts.num_gpus, kept, goodput.covered_s)


def _micro_batches(run: Run, facts: RunFacts) -> int | None:
    """Micro-batches per pipeline per step: global batch / (micro batch × data parallel)."""
    micro = facts.micro_batch_size
    data = _data_parallel(run, facts)
    if not (facts.global_batch_size and micro and data):
        return None
    return facts.global_batch_size // (micro * data) or None


def _data_parallel(run: Run, facts: RunFacts) -> int | None:
    """The data-parallel size the run states, else the GPUs over the model-parallel ones."""
    data = run.get_int("data_parallel_size")
    if data is None and facts.num_gpus:
        model = 1
        for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size"):
            model *= run.get_int(key) or 1
        model *= run.get_int("context_parallel_size") or 1
        data = facts.num_gpus // model if facts.num_gpus % model == 0 else None
    return data


def _virtual_stages(run: Run) -> int | None:
    stated = run.get_int("virtual_pipeline_model_parallel_size")
    if stated:
        return stated
    per_stage = run.get_int("num_layers_per_virtual_pipeline_stage")
    layers, stages = run.get_int("num_layers"), run.get_int("pipeline_model_parallel_size")
    if per_stage and layers and stages:
        return layers // (stages * per_stage) or None
    return None
