"""The `summary --json` document (schema loganalyzer.summary/1), built from a loaded run.

This is the one place that decides what the summary says; the terminal renderer and the
JSON output both read the document it builds, so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from loganalyzer import __version__
from loganalyzer.analysis import Analysis, analyse
from loganalyzer.analysis.verdicts import MfuInputs, judge
from loganalyzer.flops.efficiency import Efficiency, RunFacts, measure, resolve_facts
from loganalyzer.flops.peaks import resolution_json
from loganalyzer.load import Loaded
from loganalyzer.model import MODEL_FACTS, PARALLELISM_FACTS, Run
from loganalyzer.secrets import mask_secrets

SCHEMA = "loganalyzer.summary/1"


def build_summary(
    loaded: Loaded,
    options: dict[str, dict[str, Any]],
    *,
    warmup: int | None = None,
    slow_factor: float = 1.5,
) -> dict[str, Any]:
    """The summary document. A figure the run does not allow to be known is null, with a
    warning saying what would supply it."""
    run = loaded.run
    warnings = list(run.warnings)
    analysis = analyse(run.table, run.metrics, warmup=warmup, slow_factor=slow_factor)
    if untimed := analysis.records - analysis.timed_records:
        warnings.append(
            f"{untimed} of {analysis.records} records have no usable step time (missing, nan, "
            "inf, zero or negative): they are counted, not timed"
        )
    facts = resolve_facts(run, options)
    warnings.extend(facts.warnings)
    median = analysis.step_time_s.median
    efficiency = measure(run, facts, median, analysis.time.stalls_s)
    warnings.extend(efficiency.warnings)
    tokens = (
        facts.global_batch_size * facts.shape.seq_length
        if facts.global_batch_size and facts.shape.seq_length
        else None
    )
    if tokens is None:
        warnings.append("tokens per iteration unknown: pass --global-batch-size and --seq-length")
    verdicts = judge(
        analysis,
        run.table,
        MfuInputs(
            mfu=efficiency.mfu,
            hardware_key=facts.gpu.accelerator.key if facts.gpu else None,
            dtype=facts.dtype,
            params=efficiency.params,
            num_gpus=facts.num_gpus,
            recomputed_over_reported=efficiency.recomputed_over_reported,
            expected_ratio=efficiency.expected_ratio,
        ),
    )
    document = {
        "schema": SCHEMA,
        "tool_version": __version__,
        "sources": [
            {"path": s.path, "format": s.format, "records": s.records} for s in run.sources
        ],
        "ignored": [dataclasses.asdict(skipped) for skipped in loaded.ignored],
        "run": _run(run, facts, efficiency, tokens),
        "iterations": {
            "logged": analysis.records,
            "first": analysis.first_iteration,
            "last": analysis.last_iteration,
            "segments": analysis.segments,
        },
        "step_time_s": {
            "median": median,
            "mean": analysis.step_time_s.mean,
            "p90": analysis.step_time_s.p90,
            "min": analysis.step_time_s.min,
            "max": analysis.step_time_s.max,
            "steady_records": analysis.step_time_s.steady_records,
        },
        "throughput": {
            "tokens_per_s": tokens / median if tokens and median else None,
            "samples_per_s": facts.global_batch_size / median
            if facts.global_batch_size and median
            else None,
        },
        "flops": _flops(efficiency, facts.formula),
        "reported": {
            "tflops_per_gpu": efficiency.reported_tflops_per_gpu,
            "recomputed_over_reported": efficiency.recomputed_over_reported,
            "explanation": efficiency.reported_explanation,
        },
        "peak": efficiency.peak,
        "warmup": [dataclasses.asdict(w) for w in analysis.warmup],
        "slow_steps": _slow_steps(analysis),
        "periodic": [dataclasses.asdict(p) for p in analysis.slow.periodic],
        "restarts": [dataclasses.asdict(r) for r in analysis.restarts],
        "stalls": [dataclasses.asdict(s) for s in analysis.stalls],
        "stragglers": [dataclasses.asdict(s) for s in analysis.stragglers],
        "time": _time(analysis),
        "verdicts": [dataclasses.asdict(v) for v in verdicts],
        "warnings": warnings,
    }
    safe: dict[str, Any] = mask_secrets(_finite(document))
    return safe


def _run(run: Run, facts: RunFacts, efficiency: Efficiency, tokens: int | None) -> dict[str, Any]:
    shape = facts.shape
    model: dict[str, Any] = {key: getattr(shape, key) for key in MODEL_FACTS if key != "seq_length"}
    model["padded_vocab_size"] = shape.vocab
    model["params"] = efficiency.params
    return {
        "framework": run.framework,
        "gpu": resolution_json(facts.gpu, facts.gpu_source) if facts.gpu else None,
        "num_gpus": facts.num_gpus,
        "dtype": facts.dtype,
        "global_batch_size": facts.global_batch_size,
        "seq_length": shape.seq_length,
        "tokens_per_iteration": tokens,
        "model": model,
        "parallelism": {name: run.get_int(key) for name, key in PARALLELISM_FACTS.items()},
        "recompute": facts.recompute,
        "provenance": facts.origins,
    }


def _flops(efficiency: Efficiency, formula: str) -> dict[str, Any]:
    """The `flops` object; every field null when the FLOPs cannot be computed."""
    result = efficiency.flops
    flops: dict[str, Any] = {
        "formula": result.formula if result else formula,
        "per_iteration": result.per_iteration if result else None,
        "hardware_per_iteration": result.hardware_per_iteration if result else None,
        "tflops_per_gpu": efficiency.tflops_per_gpu,
        "mfu": efficiency.mfu,
        "hfu": efficiency.hfu,
        "mfu_overall": efficiency.mfu_overall,
        "derivation": result.derivation if result else None,
        "assumptions": list(result.assumptions) if result else [],
    }
    if efficiency.mfu_vs_bf16 is not None:
        flops["mfu_vs_bf16"] = efficiency.mfu_vs_bf16
    return flops


def _slow_steps(analysis: Analysis) -> list[dict[str, Any]]:
    """Isolated and periodic slow records, then sustained slowdowns as single events."""
    steps: list[dict[str, Any]] = [dataclasses.asdict(s) for s in analysis.slow.steps]
    for event in analysis.slow.sustained:
        entry = dataclasses.asdict(event)
        entry["kind"] = "sustained"
        entry["iteration"] = event.start_iteration
        entry["ratio"] = event.factor
        steps.append(entry)
    return steps


def _time(analysis: Analysis) -> dict[str, Any]:
    time = analysis.time
    return {
        "logged_s": time.logged_s,
        "productive_s": time.productive_s,
        "lost_s": {
            "slow_steps": time.slow_steps_s,
            "restarts": time.restarts_s,
            "warmup": time.warmup_s,
            "stalls": time.stalls_s,
        },
        "summary": time.summary,
    }


def _finite(value: Any) -> Any:
    """The document with NaN and infinities as null: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
