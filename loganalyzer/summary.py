"""The `summary --json` document (schema loganalyzer.summary/1), built from a loaded run.

This is the one place that decides what the summary says; the terminal renderer and the
JSON output both read the document it builds, so the two can never disagree.
"""

from __future__ import annotations

from typing import Any

from loganalyzer import __version__
from loganalyzer.load import Loaded
from loganalyzer.stats import iteration_stats, step_time_stats, typical_global_batch

SCHEMA = "loganalyzer.summary/1"

MODEL_KEYS = (
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "padded_vocab_size",
    "swiglu",
    "num_experts",
    "moe_router_topk",
    "params",
)
PARALLELISM_KEYS = {
    "tensor": "tensor_model_parallel_size",
    "pipeline": "pipeline_model_parallel_size",
    "data": "data_parallel_size",
    "context": "context_parallel_size",
    "expert": "expert_model_parallel_size",
}


def build_summary(loaded: Loaded) -> dict[str, Any]:
    """The summary document; figures a later stage computes are null with a warning."""
    run = loaded.run
    table = run.table
    warnings = list(run.warnings)
    iterations = iteration_stats(table)
    steps = step_time_stats(table)
    batch = typical_global_batch(table) or _int(run.get("global_batch_size"))
    seq_length = _int(run.get("seq_length"))
    tokens_per_iteration = batch * seq_length if batch and seq_length else None
    if tokens_per_iteration is None:
        warnings.append("tokens per iteration unknown: pass --global-batch-size and --seq-length")
    median = _median_step(table)
    reported = table["reported_tflops_per_gpu"].drop_nulls()
    return {
        "schema": SCHEMA,
        "tool_version": __version__,
        "sources": [
            {"path": s.path, "format": s.format, "records": s.records} for s in run.sources
        ],
        "ignored": loaded.ignored,
        "run": {
            "framework": run.framework,
            "gpu": None,
            "num_gpus": _int(run.get("num_gpus")),
            "dtype": run.get("dtype"),
            "global_batch_size": batch,
            "seq_length": seq_length,
            "tokens_per_iteration": tokens_per_iteration,
            "model": {key: run.get(key) for key in MODEL_KEYS},
            "parallelism": {name: _int(run.get(key)) for name, key in PARALLELISM_KEYS.items()},
            "recompute": run.get("recompute"),
        },
        "iterations": {
            "logged": iterations.logged,
            "first": iterations.first,
            "last": iterations.last,
            "segments": iterations.segments,
        },
        "step_time_s": {
            "median": median,
            "mean": steps.mean,
            "p90": steps.p90,
            "min": steps.min,
            "max": steps.max,
        },
        "throughput": {
            "tokens_per_s": tokens_per_iteration / median
            if tokens_per_iteration and median
            else None,
            "samples_per_s": batch / median if batch and median else None,
        },
        "flops": None,
        "reported": {
            "tflops_per_gpu": float(reported.median()) if reported.len() else None,  # type: ignore[arg-type]
            "recomputed_over_reported": None,
        },
        "peak": None,
        "slow_steps": None,
        "restarts": None,
        "time": None,
        "verdicts": [],
        "warnings": warnings,
    }


def _median_step(table: Any) -> float | None:
    times = table["step_time_s"].drop_nulls()
    return float(times.median()) if times.len() else None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
