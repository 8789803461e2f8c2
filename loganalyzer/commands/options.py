"""The model, run and hardware options every command that computes FLOPs shares.

Named like Megatron-LM's arguments so that a user can paste them; `model_options` adds them to
a click command, `overrides_from_options` sorts their values into shape and run facts that
override what a log says.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from loganalyzer.flops import peaks
from loganalyzer.flops.formulas import (
    FORMULAS,
    RECOMPUTE,
)
from loganalyzer.flops.shape import (
    ModelShape,
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
    if value is not None and peaks.resolve(value) is None:
        raise click.BadParameter(peaks.unknown_message(value), ctx, param)
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
    click.option(
        "--trainable-params",
        callback=_count,
        help="Trainable parameters: LoRA adapters with --lora (6 FLOPs each), else the unfrozen"
        " part of the model (the rest frozen).",
    ),
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


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["debug"] = True


# `--debug` is the group's option; this lets it follow the subcommand too.
debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help="Show tracebacks instead of one-line errors.",
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


# The reading and analysis options every command that summarises a run takes, defined once.
_format_name_option = click.option(
    "--format", "forced_format", metavar="NAME", help="Skip detection and use this parser."
)


def _declare(ctx: click.Context, param: click.Parameter, value: tuple[Path, ...]) -> None:
    """Load and check each --format-file before any input is read; the formats join the
    registry for this command only (`loganalyzer.declared`)."""
    if not value:
        return
    from loganalyzer.declared import load_format_file
    from loganalyzer.declared.parser import GIVEN

    token = GIVEN.set(tuple(load_format_file(path) for path in value))
    ctx.call_on_close(lambda: GIVEN.reset(token))


_format_file_option = click.option(
    "--format-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    expose_value=False,
    callback=_declare,
    metavar="FILE",
    help="A declared format (TOML: a line pattern and its fields, see docs/declared-formats.md)"
    " read beside the registered parsers; repeatable.",
)


def format_option(command: F) -> F:
    """`--format NAME` and `--format-file FILE`: how the sources are read."""
    return _format_name_option(_format_file_option(command))


warmup_option = click.option(
    "--warmup",
    type=click.IntRange(min=0),
    help="Iterations from each segment's start excluded from steady state (default: detected).",
)
slow_factor_option = click.option(
    "--slow-factor",
    type=click.FloatRange(min=1, min_open=True),
    default=1.5,
    show_default=True,
    help="A step this many times its local baseline is slow.",
)


# Which of several runs the sources hold a command reports (`loganalyzer.identity`), and
# whether W&B runs are pulled again: the same options, with the same meaning, for summary,
# report, export (and --refresh for compare).
def split_runs_option(what: str) -> Callable[[F], F]:
    """`--split-runs`; `what` says what the command makes of each run."""
    return click.option(
        "--split-runs", is_flag=True, help=f"Sources that hold several runs: {what}."
    )


run_option = click.option(
    "--run",
    "run_number",
    type=click.IntRange(min=1),
    metavar="N",
    help="Sources that hold several runs: use the N-th one listed.",
)
refresh_option = click.option(
    "--refresh",
    is_flag=True,
    help="Pull W&B runs again instead of reading them from the local cache.",
)
quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No progress or warnings on stderr."
)
