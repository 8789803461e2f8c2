"""`mfu` and `hardware`: the calculator commands, and the shared model/run/hardware options.

`model_options` and `overrides_from_options` are reused by `summary`, `report`, `compare` and
`export`, which merge the user's facts over what a log says.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from loganalyzer import hardware
from loganalyzer.flops import (
    FORMULAS,
    RECOMPUTE,
    FlopsResult,
    ShapeError,
    achieved,
    compute_flops,
)
from loganalyzer.model_shape import (
    ModelShape,
    merge_shape,
    parse_moe_layer_freq,
    shape_from_hf_config,
    shape_from_preset,
)

F = TypeVar("F", bound=Callable[..., Any])

SHAPE_OPTIONS = (
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "seq_length",
    "vocab_size",
    "padded_vocab_size",
    "make_vocab_size_divisible_by",
    "tensor_model_parallel_size",
    "swiglu",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size",
    "moe_layer_freq",
    "params",
    "trainable_params",
)
RUN_OPTIONS = (
    "global_batch_size",
    "micro_batch_size",
    "model",
    "lora",
    "recompute",
    "gpu",
    "num_gpus",
    "dtype",
    "peak_tflops",
    "formula",
)
_POSITIVE = click.IntRange(min=1)
# Precisions a training run computes in (int8/fp4 peaks exist, but not as training dtypes).
TRAINING_DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")


def _layer_freq(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> int | tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return parse_moe_layer_freq(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


def _model(ctx: click.Context, param: click.Parameter, value: str | None) -> ModelShape | None:
    if value is None:
        return None
    if not Path(value).is_file():
        try:
            return shape_from_preset(value)
        except (ValueError, KeyError) as exc:
            raise click.BadParameter(str(exc), ctx, param) from exc
    try:
        return shape_from_hf_config(value)
    except KeyError as exc:
        raise click.BadParameter(f"{value} lacks {exc}, needed for the shape", ctx, param) from exc
    except (ValueError, OSError) as exc:  # json.JSONDecodeError is a ValueError
        message = f"{value}: not a Hugging Face config.json ({exc})"
        raise click.BadParameter(message, ctx, param) from exc


def _known_gpu(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse an unknown accelerator before any input is read."""
    if value is not None and hardware.resolve(value) is None:
        raise click.BadParameter(hardware.unknown_message(value), ctx, param)
    return value


def _count(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A positive count that may be written in float notation (7e9)."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a number", ctx, param) from exc
    if number <= 0 or not number.is_integer():
        raise click.BadParameter(f"{value!r} is not a positive whole number", ctx, param)
    return int(number)


def _int_option(name: str, help_text: str) -> Callable[[F], F]:
    return click.option(name, type=_POSITIVE, default=None, help=help_text)


_OPTIONS: tuple[Callable[[F], F], ...] = (
    _int_option("--num-layers", "Transformer layers (l)."),
    _int_option("--hidden-size", "Hidden size (h)."),
    _int_option("--ffn-hidden-size", "MLP hidden size (f; default 4h)."),
    _int_option("--num-attention-heads", "Attention heads (a)."),
    _int_option("--num-query-groups", "KV heads for GQA (g; default a)."),
    _int_option("--kv-channels", "Head dimension (d; default h/a)."),
    _int_option("--seq-length", "Sequence length (s)."),
    _int_option("--vocab-size", "Vocabulary before Megatron's padding."),
    _int_option("--padded-vocab-size", "Padded vocabulary (V), as the log's 'padded vocab'."),
    _int_option("--make-vocab-size-divisible-by", "Padding multiple (default 128)."),
    _int_option("--tensor-model-parallel-size", "TP size (used by the padding rule)."),
    click.option("--swiglu/--no-swiglu", default=None, help="Gated (SwiGLU) MLP."),
    _int_option("--num-experts", "MoE experts (E)."),
    _int_option("--moe-router-topk", "Experts per token (t; Megatron default 2)."),
    _int_option("--moe-ffn-hidden-size", "Expert FFN size (f_e; default f)."),
    _int_option("--moe-shared-expert-intermediate-size", "Shared-expert FFN size (f_sh)."),
    click.option(
        "--moe-layer-freq",
        callback=_layer_freq,
        help="Every N-th layer is MoE, or a 0/1 list: 2, [0,1,1,1], ([0]*1+[1]*26).",
    ),
    _int_option("--global-batch-size", "Sequences per iteration (B)."),
    _int_option("--micro-batch-size", "Sequences per micro-batch per rank."),
    click.option("--params", callback=_count, help="Total parameters (N), for the 6N fallback."),
    click.option(
        "--model",
        callback=_model,
        help="A preset (llama3-8b, gpt3-175b, ...) or a Hugging Face config.json.",
    ),
    click.option("--lora", is_flag=True, default=None, help="Base weights frozen (4N for them)."),
    click.option("--trainable-params", callback=_count, help="Trainable parameters (frozen rest)."),
    click.option("--recompute", type=click.Choice(RECOMPUTE), help="Activation recomputation."),
    click.option(
        "--gpu",
        callback=_known_gpu,
        help="Table key (h100-sxm) or device name ('NVIDIA H100 80GB HBM3').",
    ),
    _int_option("--num-gpus", "World size (TP x PP x DP x CP)."),
    click.option("--dtype", type=click.Choice(TRAINING_DTYPES), help="Training precision."),
    click.option(
        "--peak-tflops", type=click.FloatRange(min=0, min_open=True), help="Override the peak."
    ),
    click.option("--formula", type=click.Choice(FORMULAS), help="FLOPs formula (megatron)."),
)


def model_options(command: F) -> F:
    """Add the model, run and hardware options of cli.md to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def overrides_from_options(**kwargs: Any) -> dict[str, dict[str, Any]]:
    """Split option values into ModelShape overrides and run facts, dropping unset ones.

    `{"shape": {...}, "run": {...}}`; `run["model"]` is the --model shape (or absent).
    """
    shape = {k: kwargs[k] for k in SHAPE_OPTIONS if kwargs.get(k) is not None}
    run = {k: kwargs[k] for k in RUN_OPTIONS if kwargs.get(k) is not None}
    return {"shape": shape, "run": run}


def shape_from_options(
    facts: dict[str, dict[str, Any]], base: ModelShape | None = None
) -> ModelShape:
    """The log's shape (or an empty one), then --model, then the explicit options."""
    shape = base or ModelShape()
    model = facts["run"].get("model")
    if model is not None:
        shape = merge_shape(shape, dataclasses.asdict(model))
    return merge_shape(shape, facts["shape"])


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
    shape = shape_from_options(facts)
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
        num_gpus = 1
        warnings.append("--num-gpus not given: 1 GPU assumed")
    dtype = run.get("dtype")
    if dtype is None:
        dtype = "bf16"
        warnings.append("precision not given: bf16 assumed (pass --dtype)")
    resolution = _resolve_gpu(run.get("gpu"))
    if resolution is not None:
        warnings.extend(resolution.warnings)
    peak = hardware.peak_json(resolution, dtype, run.get("peak_tflops"))
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
        "gpu": None if resolution is None else hardware.resolution_json(resolution, "flag"),
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
        click.echo(json.dumps(document, indent=2))
        return
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(_mfu_text(flops, peak))
    click.echo()
    click.echo(result.derivation)
    for assumption in result.assumptions:
        click.echo(f"assumes:  {assumption}")


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


def _resolve_gpu(name: str | None) -> hardware.Resolution | None:
    if name is None:
        return None
    resolution = hardware.resolve(name)
    if resolution is None:
        raise click.BadParameter(hardware.unknown_message(name), param_hint="--gpu")
    return resolution


def _shape_dict(shape: ModelShape) -> list[tuple[str, Any]]:
    return [(f.name, getattr(shape, f.name)) for f in dataclasses.fields(shape)]


def _flops_json(
    result: FlopsResult,
    step_time: float | None,
    num_gpus: int | None,
    peak: dict[str, object] | None,
    resolution: hardware.Resolution | None,
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


def _pct(value: object) -> str:
    return "n/a" if not isinstance(value, float) else f"{100 * value:.2f} %"


def _num(value: object, fmt: str) -> str:
    return "n/a" if not isinstance(value, (int, float)) else format(value, fmt)


def _mfu_text(flops: dict[str, object], peak: dict[str, object] | None) -> str:
    rows = [
        ("formula", str(flops["formula"])),
        ("FLOPs/iteration", _num(flops["per_iteration"], ".4e")),
        ("hardware FLOPs/iter", _num(flops["hardware_per_iteration"], ".4e")),
        ("TFLOPS/GPU", _num(flops["tflops_per_gpu"], ".1f")),
        (
            "peak TFLOPS/GPU",
            "n/a" if peak is None else f"{peak['tflops_per_gpu']:g} ({peak['dtype']})",
        ),
        ("MFU", _pct(flops["mfu"])),
        ("HFU", _pct(flops["hfu"])),
    ]
    if "mfu_vs_bf16" in flops:
        rows.append(("MFU vs bf16 peak", _pct(flops["mfu_vs_bf16"])))
    return "\n".join(f"{label:<20} {value}" for label, value in rows)


_HARDWARE_HELP = """Show the peak table, or which entry a device name resolves to.

Peaks are dense TFLOP/s (never the 'with sparsity' figures).

\b
Examples:
  loganalyzer hardware
  loganalyzer hardware "NVIDIA H100 80GB HBM3"
  loganalyzer hardware mi300x --json
  loganalyzer hardware --json
"""


@click.command("hardware", help=_HARDWARE_HELP)
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print loganalyzer.hardware/1 JSON.")
def hardware_command(name: str | None, as_json: bool) -> None:
    if name is None:
        rows = hardware.accelerators()
        if as_json:
            click.echo(json.dumps([hardware.accelerator_json(a) for a in rows], indent=2))
            return
        click.echo(f"{'key':<16} {'bf16':>8} {'fp8':>8} {'fp16':>8}  name")
        for acc in rows:
            peaks = [_num(acc.peaks[d], "g") for d in ("bf16", "fp8", "fp16")]
            click.echo(f"{acc.key:<16} {peaks[0]:>8} {peaks[1]:>8} {peaks[2]:>8}  {acc.name}")
        return
    resolution = hardware.resolve(name)
    if resolution is None:
        raise click.ClickException(hardware.unknown_message(name))
    acc = resolution.accelerator
    for warning in resolution.warnings:
        click.echo(f"warning: {warning}", err=True)
    document = hardware.accelerator_json(acc, resolution.matched, resolution.scale)
    if as_json:
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(
        f"{'key':<12} {acc.key}\n{'name':<12} {acc.name}\n{'matched':<12} {resolution.matched}"
    )
    for dtype in hardware.DTYPES:
        peak = resolution.peak_tflops(dtype)
        click.echo(f"{dtype:<12} {_num(peak, 'g')}")
    click.echo(f"{'memory':<12} {_num(acc.memory_gb, 'g')} GB, {_num(acc.mem_bw_tbs, 'g')} TB/s")
    click.echo(f"{'source':<12} {acc.source}")
