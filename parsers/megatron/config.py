"""The run config from the arguments dump and the start-up lines, with provenance."""

from __future__ import annotations

import re

import polars as pl

from loganalyzer.model import (
    ConfigValue,
    Provenance,
)

# Fields only Megatron-DeepSpeed prints.
DEEPSPEED_FIELDS = {
    "consumed tokens",
    "tflops",
    "samples per second",
    "tokens per gpu per second (tgs)",
    "tokens per gpu per second(tgs)",
    "actual seqlen",
    "elapsed time per iteration (s)",
    "curriculum seqlen",
}


# The DeepSpeed engine's config printout (`  train_batch_size ............. 1024`).
DEEPSPEED_BATCH_KEYS = (
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
)


# Names 2021-era Megatron(-DeepSpeed) arguments used for what is now called otherwise.
RENAMED_ARGUMENTS = {
    "model_parallel_size": "tensor_model_parallel_size",
    "pipe_parallel_size": "pipeline_model_parallel_size",
    "deepspeed_train_batch_size": "global_batch_size",
    "deepspeed_train_micro_batch_size_per_gpu": "micro_batch_size",
    "topk": "moe_router_topk",  # Megatron-DeepSpeed's MoE router
    # Megatron-DeepSpeed's `--moe-expert-parallel-size` (DeepSpeed's MoE `ep_size`).
    "moe_expert_parallel_size": "expert_model_parallel_size",
}


def changes_only(facts: pl.DataFrame) -> pl.DataFrame:
    """The facts (line, launch, key, value) in line order without the statements that repeat
    the value their key was last stated with: the copies several ranks print of a start-up
    line, and a relaunch's arguments that did not change. A value stated again after another
    (TP 1, then 2, then 1 again) is kept each time: each launch's facts are those stated
    before it (`segment_config` carries them on from launch to launch)."""
    ordered = facts.sort("line", maintain_order=True)
    previous = pl.col("value").shift(1).over("key")
    kept: pl.DataFrame = ordered.filter(previous.is_null() | (pl.col("value") != previous))
    return kept


def _typed(raw: str) -> object:
    """An argument's printed value as Python: None, bool, int, float, or the string."""
    if raw == "None":
        return None
    if raw in ("True", "False"):
        return raw == "True"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def run_config(
    facts: pl.DataFrame, printed_keys: frozenset[str], source: str
) -> tuple[dict[str, ConfigValue], str, list[str]]:
    """The run config: every argument of the first dump, then the start-up facts it lacks;
    an echoed launch command's options where no dump or start-up line states them (the
    arguments printed are those the script used, defaults and corrections included)."""
    warnings: list[str] = []
    config: dict[str, ConfigValue] = {}
    order = [pl.col("command").fill_null(False), "line"] if "command" in facts.columns else ["line"]
    first = facts.sort(order).unique("key", keep="first", maintain_order=True)
    for key, value, line in first.select("key", "value", "line").iter_rows():
        # `None` is kept: "recompute_granularity ... None" says there was no recomputation
        config[key] = ConfigValue(_typed(value), Provenance("log", source, line))
    _derive_config(config)
    # Only Megatron-DeepSpeed has a `deepspeed` argument (False when run without the engine).
    deepspeed_fork = "deepspeed" in config or bool(printed_keys & DEEPSPEED_FIELDS)
    framework = "megatron-deepspeed" if deepspeed_fork else "megatron-lm"
    return config, framework, warnings


def segment_config(
    facts: pl.DataFrame, config: dict[str, ConfigValue], table: pl.DataFrame, source: str
) -> dict[int, dict[str, ConfigValue]]:
    """By segment, the facts that hold for it otherwise than `config` (the first launch's):
    those stated by the start-up lines before the segment's first record (a later launch's
    arguments, its iteration lines' total), and those stated for an earlier segment and not
    since (a launch restates only what changed: see `changes_only`). Which of them make it
    another run is for the loader to decide."""
    if table.height == 0 or facts.height == 0:
        return {}
    starts = table.group_by("segment", maintain_order=True).agg(pl.col("line").first()).sort("line")
    placed = (
        facts.sort("line")
        .join_asof(starts, on="line", strategy="forward", check_sortedness=False)
        .drop_nulls("segment")
    )
    stated: dict[int, dict[str, ConfigValue]] = {}
    for segment, key, value, line in placed.select("segment", "key", "value", "line").iter_rows():
        stated.setdefault(segment, {})[key] = ConfigValue(
            _typed(value), Provenance("log", source, line)
        )
    changed = {}
    holding = {k: v for k, v in config.items() if k not in _DERIVED}
    for segment in starts.get_column("segment"):
        holding = holding | stated.get(segment, {})
        derived = dict(holding)
        _derive_config(derived)
        differing = {
            key: value for key, value in derived.items() if _value(config.get(key)) != value.value
        }
        if differing:
            changed[segment] = differing
    return changed


def with_totals(facts: pl.DataFrame, totals: pl.DataFrame) -> pl.DataFrame:
    """The facts with each segment's iteration total (`iteration K/ N`) stated as
    `train_iters` at its first record, changes only."""
    stated = totals.drop_nulls("total").select(
        pl.col("line").cast(facts.schema["line"]),
        launch=pl.lit(None, dtype=facts.schema["launch"]),
        key=pl.lit("train_iters"),
        value=pl.col("total").cast(pl.String),
    )
    return changes_only(pl.concat([facts, stated], how="diagonal_relaxed"))


def counted_to(
    config: dict[str, ConfigValue], totals: pl.DataFrame, source: str
) -> dict[str, ConfigValue]:
    """`config` with `train_iters` from the first iteration lines' total where the arguments
    do not state it (no dump, or `train_iters None` beside `train_samples`)."""
    stated = config.get("train_iters")
    first = totals.drop_nulls("total").head(1)
    if (stated is not None and stated.value is not None) or first.height == 0:
        return config
    line, total = first.select("line", "total").row(0)
    return config | {"train_iters": ConfigValue(total, Provenance("log", source, line))}


# Facts `_derive_config` names from the arguments.
_DERIVED = ("dtype", "recompute", "num_gpus")


def _value(found: ConfigValue | None) -> object:
    return None if found is None else found.value


def _derive_config(config: dict[str, ConfigValue]) -> None:
    """Name the facts the data model asks for (dtype, recompute, num_gpus) from Megatron args."""

    def flag(name: str) -> ConfigValue | None:
        found = config.get(name)
        return found if found is not None and found.value not in (False, None) else None

    if "dtype" not in config:
        for arg, dtype in (("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "fp16")):
            if (found := flag(arg)) is not None:
                config["dtype"] = ConfigValue(dtype, found.provenance)
                break
        else:
            torch_dtype = config.get("params_dtype")
            names = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}
            if torch_dtype is not None and str(torch_dtype.value) in names:
                config["dtype"] = ConfigValue(names[str(torch_dtype.value)], torch_dtype.provenance)
    granularity = flag("recompute_granularity")
    checkpointing = flag("checkpoint_activations") or flag("recompute_activations")
    if granularity is not None:
        config["recompute"] = ConfigValue(str(granularity.value), granularity.provenance)
    elif checkpointing is not None:
        kind = "selective" if checkpointing is config.get("recompute_activations") else "full"
        config["recompute"] = ConfigValue(kind, checkpointing.provenance)
    elif "recompute_granularity" in config or "checkpoint_activations" in config:
        source = (
            config.get("recompute_granularity") or config["checkpoint_activations"]
        ).provenance
        config["recompute"] = ConfigValue("none", source)
    for old, new in RENAMED_ARGUMENTS.items():
        if flag(old) is not None and flag(new) is None:
            config[new] = config[old]
    _deepspeed_experts(config)
    if flag("world_size") is not None:
        config["num_gpus"] = config["world_size"]


def _deepspeed_experts(config: dict[str, ConfigValue]) -> None:
    """Megatron-DeepSpeed's experts in Megatron-LM's terms: `num_experts` is a list (`[1]`,
    the default, is the dense MLP; `[128]` 128 experts in every MoE layer), and the MoE layers
    are those whose number (from 1) is a multiple of `expert_interval` (megatron/model/
    transformer.py: `if layer_num % args.expert_interval == 0`), which `moe_layer_freq`
    states as a pattern. A list of different counts is left as printed (no one count)."""
    interval = config.get("expert_interval")
    experts = config.get("num_experts")
    if interval is None or experts is None:
        return
    counts = {int(n) for n in re.findall(r"\d+", str(experts.value))}
    if len(counts) != 1:
        return
    (count,) = counts
    config["num_experts"] = ConfigValue(count, experts.provenance)
    layers = _value(config.get("num_layers"))
    every = interval.value
    stated = count > 1 and "moe_layer_freq" not in config
    if stated and isinstance(every, int) and every > 0 and isinstance(layers, int):
        pattern = [int((layer + 1) % every == 0) for layer in range(layers)]
        config["moe_layer_freq"] = ConfigValue(str(pattern), interval.provenance)
