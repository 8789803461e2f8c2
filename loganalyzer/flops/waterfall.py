"""The MFU waterfall: from 100 % of the peak down to the achieved MFU in named, measured steps.

The steps MULTIPLY: each step's `value_after = value_before × factor`, the first
`value_before` is 1 (the peak) and the last `value_after` is the achieved (goodput) MFU,
exactly. A step is listed only where the run's facts allow it:

1. pipeline bubble: share `b = (p-1)/(m·v + p-1)` of the step idles (1F1B with `p` stages,
   `m` micro-batches per step, `v` virtual stages); factor `1 - b`;
2. exposed communication: the send/receive/all-reduce timers' share `w` of the step, beyond
   the bubble (pipeline waits show up in those timers, so only `c = max(0, w - b)` is new);
   factor `(1 - b - c)/(1 - b)`;
3. data loading: the data timers' share `d`; factor `(1 - b - c - d)/(1 - b - c)` (steps 1-3
   together remove `b + c + d` of the step);
4. recomputation: work the hardware redoes, `MFU/HFU`;
5. kernel efficiency and everything unmeasured: what remains to the steady MFU;
6. slow steps, warm-up, stalls and noise: overall MFU (mean pace) over steady MFU (median);
7. restarts, start-up and untimed gaps (and the hang before the ending, where the run held
   its GPUs after its last progress: the wall clock reaches the ending): goodput MFU (unique
   iterations over the wall clock) over overall MFU.

When the model shape is unknown but the framework printed its TFLOPS, the waterfall ends at
the framework's MFU (the printed figure over the peak), named so: the steady MFU is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from loganalyzer.analysis.causes import DATA_PHASES
from loganalyzer.analysis.phases import OUTSIDE_STEP, parent_of

LAST_STEP = "restarts, start-up and untimed gaps"
COMMUNICATION = re.compile(r"recv|send|all-?reduce|all-?gather|reduce-scatter|grads-sync|comm")


@dataclass(frozen=True)
class Inputs:
    """What the waterfall needs, each None where the run does not say."""

    mfu: float | None
    hfu: float | None
    mfu_overall: float | None
    mfu_source: str
    pipeline: int | None
    virtual_stages: int | None
    micro_batches: int | None
    step_ms: float | None
    goodput_mfu: float | None
    timers: pl.DataFrame = field(default_factory=pl.DataFrame)
    hang_s: float = 0.0  # the budget's hang before the ending, which the last step includes
    # what `mfu` is: the steady MFU recomputed here, or the framework's own figure (its
    # printed TFLOPS over the peak, its FLOP count), which is never called the steady MFU
    mfu_name: str = "steady MFU"


@dataclass(frozen=True)
class Step:
    """One step of the waterfall."""

    name: str
    formula: str
    inputs: dict[str, Any]
    factor: float
    value_before: float
    value_after: float


@dataclass(frozen=True)
class Waterfall:
    """The steps from the peak to `achieved`; `combine` says how they chain."""

    combine: str
    steps: tuple[Step, ...]
    achieved: float | None
    achieved_label: str
    notes: tuple[str, ...]


def timer_shares(medians: pl.DataFrame, step_ms: float | None) -> pl.DataFrame:
    """Per logged leaf timer of the step: its median (ms) and share of the median step;
    `medians` are the run's timer medians (`phases.Timers.medians`). Timers run outside an
    iteration (`phases.OUTSIDE_STEP`: a 30 s save is 4,226 % of a 0.7 s step) are left out."""
    if medians.is_empty() or not step_ms:
        return pl.DataFrame(
            schema={"phase": pl.String, "median_ms": pl.Float64, "share": pl.Float64}
        )
    logged = set(medians["phase"].to_list())
    parents = {parent_of(p, logged) for p in logged} - {None}
    return (
        medians.filter(~pl.col("phase").is_in(list(parents | OUTSIDE_STEP)))
        .select("phase", median_ms="median")
        .with_columns((pl.col("median_ms") / step_ms).alias("share"))
        .sort("median_ms", descending=True)
    )


def build(inputs: Inputs) -> Waterfall:
    """The waterfall of one run (no steps when the steady MFU is unknown)."""
    notes: list[str] = []
    if inputs.mfu is None:
        return Waterfall("multiply", (), None, "unknown", ("steady MFU unknown",))
    steps: list[Step] = []
    value = 1.0

    def add(name: str, formula: str, given: dict[str, Any], factor: float) -> None:
        nonlocal value
        steps.append(Step(name, formula, given, factor, value, value * factor))
        value *= factor

    bubble = 0.0
    p, m, v = inputs.pipeline, inputs.micro_batches, inputs.virtual_stages or 1
    if p is not None and p > 1 and m:
        bubble = (p - 1) / (m * v + p - 1)
        add(
            "pipeline bubble",
            "1 - (p-1)/(m·v + p-1)",
            {"p": p, "m": m, "v": v, "bubble_share": bubble},
            1 - bubble,
        )
    timers = inputs.timers
    if timers.height:
        comm = timers.filter(pl.col("phase").str.contains(COMMUNICATION.pattern))
        data = timers.filter(pl.col("phase").is_in(list(DATA_PHASES)))
        waits = float(comm["share"].sum())
        exposed = max(0.0, waits - bubble)
        if comm.height:
            add(
                "exposed communication",
                "(1 - b - c)/(1 - b), c = max(0, w - b)",
                {
                    "w": waits,
                    "b": bubble,
                    "c": exposed,
                    "timers_ms": dict(zip(comm["phase"], comm["median_ms"], strict=True)),
                    "step_ms": inputs.step_ms,
                },
                (1 - bubble - exposed) / (1 - bubble),
            )
        if data.height:
            share = float(data["share"].sum())
            kept = 1 - bubble - exposed
            add(
                "data loading",
                "(1 - b - c - d)/(1 - b - c)",
                {"d": share, "timers_ms": dict(zip(data["phase"], data["median_ms"], strict=True))},
                (kept - share) / kept if kept > 0 else 1.0,
            )
    if inputs.hfu and inputs.hfu != inputs.mfu:
        add(
            "recomputation",
            "MFU / HFU",
            {"mfu": inputs.mfu, "hfu": inputs.hfu},
            inputs.mfu / inputs.hfu,
        )
    residual = inputs.mfu / value
    if residual > 1:
        notes.append(
            "the measured shares overlap (timers that run concurrently): the remainder exceeds 1"
        )
    name = inputs.mfu_name
    add("kernel efficiency and everything unmeasured", f"{name} / value before", {}, residual)
    steps[-1] = _exact(steps[-1], inputs.mfu)
    value, label = inputs.mfu, f"{name} ({inputs.mfu_source})"
    if inputs.mfu_overall is not None:
        add(
            "slow steps, warm-up, stalls and noise",
            "overall MFU / steady MFU",
            {"mfu_overall": inputs.mfu_overall, "mfu_steady": inputs.mfu},
            inputs.mfu_overall / inputs.mfu,
        )
        steps[-1] = _exact(steps[-1], inputs.mfu_overall)
        value, label = inputs.mfu_overall, "overall MFU (all logged step time)"
        if inputs.goodput_mfu is not None:
            hang = " and the hang before the ending" if inputs.hang_s > 0 else ""
            add(
                f"restarts, start-up, untimed gaps{hang}" if hang else LAST_STEP,
                "goodput MFU / overall MFU",
                {"mfu_goodput": inputs.goodput_mfu, "mfu_overall": inputs.mfu_overall},
                inputs.goodput_mfu / inputs.mfu_overall,
            )
            steps[-1] = _exact(steps[-1], inputs.goodput_mfu)
            value, label = inputs.goodput_mfu, "goodput MFU (unique iterations over wall clock)"
    return Waterfall("multiply", tuple(steps), value, label, tuple(notes))


def _exact(step: Step, value: float) -> Step:
    """`step` ending exactly on `value` (the product can differ in the last bit)."""
    return Step(step.name, step.formula, step.inputs, step.factor, step.value_before, value)
