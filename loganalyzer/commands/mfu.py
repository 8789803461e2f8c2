"""`loganalyzer mfu`: FLOPs, TFLOPS/GPU, MFU and HFU from numbers given on the command line."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from loganalyzer.commands.options import debug_option, model_options, overrides_from_options
from loganalyzer.flops import peaks
from loganalyzer.flops.formulas import (
    FlopsResult,
    ShapeError,
    achieved,
    compute_flops,
)
from loganalyzer.flops.shape import (
    ModelShape,
    layered_shape,
)
from loganalyzer.render.numbers import UNKNOWN, number, percent
from loganalyzer.terminal import echo

_MFU_HELP = """Compute FLOPs per iteration, TFLOPS/GPU, MFU and HFU from numbers.

\b
Examples:
  loganalyzer mfu --model llama3-8b --seq-length 8192 --global-batch-size 128 \\
      --step-time 6.1 --num-gpus 64 --gpu h100-sxm
  loganalyzer mfu --params 7e9 --formula 6n --seq-length 4096 --global-batch-size 8 \\
      --step-time 1.2 --num-gpus 8 --gpu "NVIDIA H100 80GB HBM3" --json
  loganalyzer mfu --flops-per-iteration 6.24e14 --step-time 4 --gpu a100-sxm4-80gb
"""


@click.command("mfu", help=_MFU_HELP)
@model_options
@click.option("--step-time", type=click.FloatRange(min=0, min_open=True), help="Seconds/step.")
@click.option(
    "--tokens-per-second",
    type=click.FloatRange(min=0, min_open=True),
    help="Throughput of the whole job, instead of --step-time.",
)
@click.option(
    "--flops-per-iteration",
    type=click.FloatRange(min=0, min_open=True),
    help="Model FLOPs of one iteration; skips the model.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the loganalyzer.mfu/1 document.")
@debug_option
def mfu(
    step_time: float | None,
    tokens_per_second: float | None,
    flops_per_iteration: float | None,
    as_json: bool,
    **options: Any,
) -> None:
    facts = overrides_from_options(**options)
    run = facts["run"]
    if step_time is not None and tokens_per_second is not None:
        raise click.UsageError("give --step-time or --tokens-per-second, not both")
    shape = layered_shape(None, run.get("model"), facts["shape"])
    batch = run.get("global_batch_size")
    result = _flops(shape, batch, run, flops_per_iteration)
    warnings = []
    requested = run.get("formula", "megatron")
    if flops_per_iteration is None and result.formula != requested:
        warnings.append(f"{requested} needs more of the model: fell back to {result.formula}")
    tokens = batch * shape.seq_length if batch and shape.seq_length else None
    if tokens_per_second is not None:
        if tokens is None:
            raise click.UsageError("--tokens-per-second needs --global-batch-size and --seq-length")
        step_time = tokens / tokens_per_second
    num_gpus = run.get("num_gpus")
    if num_gpus is None and step_time is not None:
        raise click.UsageError(
            "--num-gpus is required with a step time or throughput: MFU is per GPU, and a "
            "guessed GPU count would scale it by the same error"
        )
    dtype = run.get("dtype")
    if dtype is None:
        dtype = "bf16"
        warnings.append("precision not given: bf16 assumed (pass --dtype)")
    resolution = _resolve_gpu(run.get("gpu"))
    if resolution is not None:
        warnings.extend(resolution.warnings)
    peak = peaks.peak_json(resolution, dtype, run.get("peak_tflops"))
    if peak is None and resolution is not None:
        warnings.append(f"{resolution.accelerator.key} has no {dtype} peak: pass --peak-tflops")
    elif peak is None:
        warnings.append("GPU type unknown: pass --gpu or --peak-tflops")
    flops = _flops_json(result, step_time, num_gpus, peak, resolution, dtype)
    inputs = {
        "model": {k: list(v) if isinstance(v, tuple) else v for k, v in _shape_dict(shape)},
        "global_batch_size": batch,
        "micro_batch_size": run.get("micro_batch_size"),
        "tokens_per_iteration": tokens,
        "step_time_s": step_time,
        "tokens_per_second": tokens_per_second,
        "num_gpus": num_gpus,
        "gpu": None if resolution is None else peaks.resolution_json(resolution, "flag"),
        "dtype": dtype,
        "recompute": run.get("recompute", "none"),
        "lora": bool(run.get("lora")),
    }
    document = {
        "schema": "loganalyzer.mfu/1",
        "formula": result.formula,
        "flops": flops,
        "peak": peak,
        "inputs": inputs,
        "derivation": result.derivation,
        "assumptions": list(result.assumptions),
        "warnings": warnings,
    }
    if as_json:
        echo(json.dumps(document, indent=2))
        return
    for warning in warnings:
        echo(f"warning: {warning}", err=True)
    echo(_mfu_text(flops, peak))
    echo()
    echo(result.derivation)
    for assumption in result.assumptions:
        echo(f"assumes:  {assumption}")


def _flops(
    shape: ModelShape, batch: int | None, run: dict[str, Any], given: float | None
) -> FlopsResult:
    if given is not None:
        return FlopsResult(
            formula="given",
            per_iteration=given,
            hardware_per_iteration=given,
            derivation=f"F = {given:.6e} FLOPs per iteration (--flops-per-iteration)",
            assumptions=("hardware FLOPs taken equal to the given model FLOPs",),
        )
    if batch is None:
        raise click.UsageError("--global-batch-size is required (or --flops-per-iteration)")
    try:
        return compute_flops(
            shape,
            batch,
            formula=run.get("formula", "megatron"),
            recompute=run.get("recompute", "none"),
            lora=bool(run.get("lora")),
        )
    except ShapeError as exc:
        raise click.UsageError(str(exc)) from exc


def _resolve_gpu(name: str | None) -> peaks.Resolution | None:
    if name is None:
        return None
    resolution = peaks.resolve(name)
    if resolution is None:
        raise click.BadParameter(peaks.unknown_message(name), param_hint="--gpu")
    return resolution


def _shape_dict(shape: ModelShape) -> list[tuple[str, Any]]:
    return [(f.name, getattr(shape, f.name)) for f in dataclasses.fields(shape)]


def _flops_json(
    result: FlopsResult,
    step_time: float | None,
    num_gpus: int | None,
    peak: dict[str, object] | None,
    resolution: peaks.Resolution | None,
    dtype: str,
) -> dict[str, object]:
    peak_value = peak["tflops_per_gpu"] if peak is not None else None
    bf16 = resolution.peak_tflops("bf16") if resolution is not None and dtype == "fp8" else None
    figures = achieved(
        result, step_time, num_gpus, peak_value if isinstance(peak_value, float) else None, bf16
    )
    flops: dict[str, object] = {
        "formula": result.formula,
        "per_iteration": result.per_iteration,
        "hardware_per_iteration": result.hardware_per_iteration,
        "tflops_per_gpu": figures.tflops_per_gpu,
        "mfu": figures.mfu,
        "hfu": figures.hfu,
        "mfu_overall": None,
    }
    if dtype == "fp8":
        flops["mfu_vs_bf16"] = figures.mfu_vs_bf16
    return flops


def _mfu_text(flops: dict[str, object], peak: dict[str, object] | None) -> str:
    rows = [
        ("formula", str(flops["formula"])),
        ("FLOPs/iteration", number(flops["per_iteration"], ".4e")),
        ("hardware FLOPs/iter", number(flops["hardware_per_iteration"], ".4e")),
        ("TFLOPS/GPU", number(flops["tflops_per_gpu"], ".1f")),
        (
            "peak TFLOPS/GPU",
            UNKNOWN if peak is None else f"{peak['tflops_per_gpu']:g} ({peak['dtype']})",
        ),
        ("MFU", percent(flops["mfu"])),
        ("HFU", percent(flops["hfu"])),
    ]
    if "mfu_vs_bf16" in flops:
        rows.append(("MFU vs bf16 peak", percent(flops["mfu_vs_bf16"])))
    return "\n".join(f"{label:<20} {value}" for label, value in rows)
