"""The run config from the arguments dump and the start-up lines, with provenance."""

from __future__ import annotations

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
}


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
    """The run config: every argument of the first dump, then the start-up facts it lacks."""
    warnings: list[str] = []
    config: dict[str, ConfigValue] = {}
    first = facts.sort("line").unique("key", keep="first", maintain_order=True)
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
    """By segment, the facts stated otherwise than `config` (the first launch's) by the
    start-up lines before the segment's first record (a later launch's arguments); which of
    them make it another run is for the loader to decide."""
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
    for segment, values in stated.items():
        derived = {k: v for k, v in config.items() if k not in _DERIVED} | values
        _derive_config(derived)
        differing = {
            key: value
            for key, value in derived.items()
            if (key in values or key in _DERIVED) and _value(config.get(key)) != value.value
        }
        if differing:
            changed[segment] = differing
    return changed


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
    if flag("world_size") is not None:
        config["num_gpus"] = config["world_size"]
