"""The one place that reads a summary document (and its run) into a fleet row.

Time comes from the document's goodput budget (`goodput`, schema loganalyzer.summary/1.x),
read only in `budget_seconds`: its lines sum to the wall clock exactly, so the fleet's figures
are the run's own:

    wall_s        = goodput.wall_s
    gpu_hours     = num_gpus · wall_s / 3600
    lost_<cause>  = num_gpus · (the budget line of that cause) / 3600
    lost_gpu_hours = num_gpus · Σ lost lines / 3600   (every line but the productive steady
                    steps and the iterations not in the log, which are unknown, not lost)

Goodput MFU is the summary's own (`flops.mfu_goodput`).

How the run ended comes from the document's `outcome` (schema loganalyzer.summary/1.2), read
only in `ending_columns`: its status, reason, exception, first failing rank and host, last
iteration, hang and error line (masked, as the document has it), and

    lost_hang_gpu_hours = lost_hang_before_the_ending_gpu_hours (the budget's line: the time
                          from the last progress to the ending event, which the wall clock
                          reaches), so part of `gpu_hours` and `lost_gpu_hours`

A document without `outcome` (an older schema) gives null ending columns; one without
`incidents` a null count.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from loganalyzer.analysis.goodput import (
    HANG,
    LOST_CAUSES,
    LOST_LINES,
    PRODUCTIVE,
    UNLOGGED,
    line_slug,
)
from loganalyzer.model import UTC_MICROS, Run
from loganalyzer.render.ending import ending_sentence
from loganalyzer.secrets import mask_config

HANG_CAUSE = line_slug(HANG)
SEVERITIES = ("critical", "warning", "info")
# The status of a run that was read but logged no iteration (it died before its first):
# analysed, yet not a success; its `error` says how it ended.
NO_ITERATIONS = "no_iterations"
# The outcome's fields a row keeps, as outcome_<field>.
OUTCOME_FIELDS: Mapping[str, pl.DataType] = {
    "status": pl.String(),
    "reason": pl.String(),
    "exception": pl.String(),
    "rank": pl.Int64(),
    "host": pl.String(),
    "last_iteration": pl.Int64(),
    "message": pl.String(),
}

# One row per run in runs.parquet, the table `fleet` reads.
RUNS_SCHEMA: Mapping[str, pl.DataType] = {
    "run_id": pl.String(),
    "key": pl.String(),
    "status": pl.String(),
    "error": pl.String(),
    **{f"outcome_{field}": kind for field, kind in OUTCOME_FIELDS.items()},
    "hang_s": pl.Float64(),
    "lost_hang_gpu_hours": pl.Float64(),
    "incidents": pl.Int64(),
    "framework": pl.String(),
    "model": pl.String(),
    "params": pl.Int64(),
    "num_gpus": pl.Int64(),
    "device": pl.String(),
    "dtype": pl.String(),
    "parallelism": pl.String(),
    "global_batch_size": pl.Int64(),
    "config_key": pl.String(),
    "config_label": pl.String(),
    "config": pl.String(),
    "started": UTC_MICROS,
    "ended": UTC_MICROS,
    "records": pl.Int64(),
    "segments": pl.Int64(),
    "restarts": pl.Int64(),
    "step_time_s": pl.Float64(),
    "tokens_per_s": pl.Float64(),
    "tflops_per_gpu": pl.Float64(),
    "mfu": pl.Float64(),
    "goodput_mfu": pl.Float64(),
    "wall_s": pl.Float64(),
    "productive_s": pl.Float64(),
    "unlogged_s": pl.Float64(),
    "gpu_hours": pl.Float64(),
    **{f"lost_{cause}_s": pl.Float64() for cause in LOST_CAUSES},
    **{f"lost_{cause}_gpu_hours": pl.Float64() for cause in LOST_CAUSES},
    "lost_s": pl.Float64(),
    "lost_gpu_hours": pl.Float64(),
    **{f"verdicts_{severity}": pl.Int64() for severity in SEVERITIES},
    "warnings": pl.Int64(),
}


def budget_seconds(document: Mapping[str, Any]) -> tuple[float, float, float, dict[str, float]]:
    """From the goodput budget: the wall clock, the productive steady steps, the iterations
    not in the log, and the seconds lost per cause (LOST_CAUSES)."""
    goodput = document["goodput"]
    lines = {line["name"]: float(line["seconds"] or 0.0) for line in goodput["lines"]}
    lost = {cause: lines.get(name, 0.0) for cause, name in LOST_LINES.items()}
    return (
        float(goodput["wall_s"] or 0.0),
        lines.get(PRODUCTIVE, 0.0),
        lines.get(UNLOGGED, 0.0),
        lost,
    )


def _gpu_hours(gpus: int | None, seconds: float) -> float | None:
    return gpus * seconds / 3600 if gpus else None


def run_row(run_id: str, key: str, document: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """The runs.parquet row of a run that was analysed."""
    facts = document["run"]
    gpus = facts["num_gpus"]
    wall, productive, unlogged, lost = budget_seconds(document)
    mfu = document["flops"]["mfu"]
    stamps = run.table.get_column("timestamp").drop_nulls()
    logged = document["iterations"]["logged"]
    row: dict[str, Any] = {
        "run_id": run_id,
        "key": key,
        # a run with no iteration record is a run that failed, its error how it ended
        "status": "ok" if logged else NO_ITERATIONS,
        "error": None if logged else _ending(document),
        "framework": facts["framework"],
        "model": _model(facts["model"], facts["seq_length"]),
        "params": facts["model"].get("params"),
        "num_gpus": gpus,
        "device": facts["gpu"]["name"] if facts["gpu"] else None,
        "dtype": facts["dtype"],
        "parallelism": _parallelism(facts["parallelism"]),
        "global_batch_size": facts["global_batch_size"],
        "config_key": config_key(facts),
        "config_label": config_label(facts),
        "config": json.dumps(mask_config({k: v.value for k, v in run.config.items()}), default=str),
        "started": stamps.min() if stamps.len() else None,
        "ended": stamps.max() if stamps.len() else None,
        "records": document["iterations"]["logged"],
        "segments": document["iterations"]["segments"],
        "restarts": len(document["restarts"]),
        "step_time_s": document["step_time_s"]["median"],
        "tokens_per_s": document["throughput"]["tokens_per_s"],
        "tflops_per_gpu": document["flops"]["tflops_per_gpu"],
        "mfu": mfu,
        "goodput_mfu": document["flops"]["mfu_goodput"],
        "wall_s": wall,
        "productive_s": productive,
        "unlogged_s": unlogged,
        "gpu_hours": _gpu_hours(gpus, wall),
        "warnings": len(document["warnings"]),
        **ending_columns(document),
    }
    for cause, seconds in lost.items():
        row[f"lost_{cause}_s"] = seconds
        row[f"lost_{cause}_gpu_hours"] = _gpu_hours(gpus, seconds)
    row["lost_hang_gpu_hours"] = row[f"lost_{HANG_CAUSE}_gpu_hours"]
    row["lost_s"] = math.fsum(lost.values())
    row["lost_gpu_hours"] = _gpu_hours(gpus, row["lost_s"])
    for severity in SEVERITIES:
        row[f"verdicts_{severity}"] = sum(
            1 for v in document["verdicts"] if v["severity"] == severity
        )
    return row


def ending_columns(document: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome's columns and the incident count; null where the document predates them."""
    incidents = document.get("incidents")
    columns: dict[str, Any] = {"incidents": None if incidents is None else len(incidents)}
    outcome = document.get("outcome")
    if not outcome:
        return columns
    columns |= {f"outcome_{field}": outcome.get(field) for field in OUTCOME_FIELDS}
    columns["hang_s"] = outcome.get("hang_s")
    return columns


def _ending(document: Mapping[str, Any]) -> str:
    outcome = document.get("outcome")
    if not outcome:
        return "no iteration records"
    return f"no iteration records: {ending_sentence(outcome)}"


def failed_row(run_id: str, key: str, error: str) -> dict[str, Any]:
    """The row of a run that could not be analysed: its error, no figures."""
    return {"run_id": run_id, "key": key, "status": "error", "error": error}


def runs_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows as a table of RUNS_SCHEMA (absent fields null), in run-id order."""
    frame = pl.DataFrame(
        [{name: row.get(name) for name in RUNS_SCHEMA} for row in rows],
        schema=dict(RUNS_SCHEMA),
        orient="row",
    )
    return frame.sort("run_id")


def _identity(facts: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two runs the same configuration: model shape, parallelism, GPUs and
    device, precision, batch."""
    model = {k: v for k, v in facts["model"].items() if k != "params"}
    return {
        "model": model,
        "seq_length": facts["seq_length"],
        "parallelism": facts["parallelism"],
        "num_gpus": facts["num_gpus"],
        "device": facts["gpu"]["key"] if facts["gpu"] else None,
        "dtype": facts["dtype"],
        "global_batch_size": facts["global_batch_size"],
    }


def config_key(facts: Mapping[str, Any]) -> str:
    text = json.dumps(_identity(facts), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def config_label(facts: Mapping[str, Any]) -> str:
    """The configuration in one short line, for people."""
    device = facts["gpu"]["name"] if facts["gpu"] else "unknown device"
    gpus = facts["num_gpus"] if facts["num_gpus"] is not None else "?"
    return (
        f"{_model(facts['model'], facts['seq_length'])} · {_parallelism(facts['parallelism'])}"
        f" · {gpus} × {device} · {facts['dtype'] or '?'} · B={facts['global_batch_size'] or '?'}"
    )


def _model(model: Mapping[str, Any], seq_length: int | None) -> str:
    names = (("num_layers", "l"), ("hidden_size", "h"), ("num_attention_heads", "a"))
    parts = [f"{short}={model[key]}" for key, short in names if model.get(key) is not None]
    if model.get("num_experts"):
        parts.append(f"E={model['num_experts']}")
    if seq_length is not None:
        parts.append(f"s={seq_length}")
    return " ".join(parts) or "unknown shape"


def _parallelism(parallelism: Mapping[str, Any]) -> str:
    short = {"tensor": "TP", "pipeline": "PP", "data": "DP", "context": "CP", "expert": "EP"}
    return " ".join(
        f"{short[name]}{value}" for name, value in parallelism.items() if value is not None
    )
