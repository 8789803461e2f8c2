"""nanotron's printed config as the run config, in the data model's (Megatron-LM) names.

nanotron's model configs use Hugging Face's names (`num_hidden_layers`, `intermediate_size`,
`num_key_value_heads`, ...): its llama is read as a Hugging Face llama config. The sequence
length and micro-batch come from `TokensArgs`, the degrees from `ParallelismArgs`, the global
batch from the `[Start training]` line (else dp x micro-batch x accumulation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from loganalyzer.flops.shape import shape_from_hf_config
from loganalyzer.model import MODEL_FACTS, ConfigValue, Provenance

# Model fields as a Hugging Face config takes them.
HF_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
)
DEGREES = {
    "dp": "data_parallel_size",
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "expert_parallel_size": "expert_model_parallel_size",
    "context_parallel_size": "context_parallel_size",
}
START_KEYS = {
    "start.global_batch_size": "global_batch_size",
    "start.sequence_length": "seq_length",
    "start.mbs": "micro_batch_size",
    "start.grad_accum": "gradient_accumulation_steps",
    "start.train_steps": "train_iters",
}
PRECISIONS = {
    "torch.bfloat16": "bf16",
    "bfloat16": "bf16",
    "torch.float16": "fp16",
    "float16": "fp16",
    "torch.float32": "fp32",
    "float32": "fp32",
}


def run_config(facts: pl.DataFrame, source: str) -> tuple[dict[str, ConfigValue], list[str]]:
    """The run config from each fact's first statement; warnings for what was not read."""
    first = facts.sort("line").unique("key", keep="first", maintain_order=True)
    stated = {key: (value, line) for line, key, value in first.rows()}

    def at(key: str) -> Provenance:
        return Provenance("log", source, stated[key][1])

    def value(key: str) -> Any:
        return _typed(stated[key][0])

    config = {"framework": ConfigValue("nanotron", Provenance("log", source))}
    warnings: list[str] = []
    for key, name in START_KEYS.items():
        if key in stated:
            config[name] = ConfigValue(value(key), at(key))
    for key, name in (
        ("sequence_length", "seq_length"),
        ("micro_batch_size", "micro_batch_size"),
        ("batch_accumulation_per_replica", "gradient_accumulation_steps"),
        ("train_steps", "train_iters"),
    ):
        if key in stated and name not in config:
            config[name] = ConfigValue(value(key), at(key))
    for key, name in DEGREES.items():
        if key in stated:
            config[name] = ConfigValue(value(key), at(key))
    degrees = [config.get(name) for name in DEGREES.values()]  # dp, tp, pp first
    if all(d is not None for d in degrees[:3]):
        world = 1
        for found in degrees:
            world *= int(found.value) if found is not None else 1  # type: ignore[call-overload]
        where = at("dp")
        config["world_size"] = ConfigValue(world, where)
        config["num_gpus"] = ConfigValue(world, where)
    if "global_batch_size" not in config and all(
        name in config
        for name in ("data_parallel_size", "micro_batch_size", "gradient_accumulation_steps")
    ):
        batch = 1
        for name in ("data_parallel_size", "micro_batch_size", "gradient_accumulation_steps"):
            batch *= int(config[name].value)  # type: ignore[call-overload]
        config["global_batch_size"] = ConfigValue(
            batch, Provenance("derived", "dp x mbs x accumulation")
        )
    if "dtype" in stated and str(stated["dtype"][0]) in PRECISIONS:
        config["dtype"] = ConfigValue(PRECISIONS[str(stated["dtype"][0])], at("dtype"))
    if "recompute_layer" in stated and value("recompute_layer") is True:
        config["recompute"] = ConfigValue("full", at("recompute_layer"))
    _shape(stated, config, at, warnings, source)
    return config, warnings


def _typed(text: str) -> object:
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _shape(
    stated: Mapping[str, tuple[str, int]],
    config: dict[str, ConfigValue],
    at: Any,
    warnings: list[str],
    source: str,
) -> None:
    """The model's shape from the printed model config, read as a Hugging Face llama's."""
    hf: dict[str, Any] = {k: _typed(stated[k][0]) for k in HF_FIELDS if k in stated}
    if "num_hidden_layers" not in hf:
        return
    where = at("num_hidden_layers")
    experts = next((k for k in ("moe_num_experts", "num_experts") if k in stated), None)
    if experts is not None and int(str(stated[experts][0])) > 1:
        warnings.append(
            f"{where}: a mixture-of-experts model config: its shape is read as a dense llama's"
            " for want of nanotron's MoE fields in the FLOPs; pass the MoE flags"
        )
    try:
        shape = shape_from_hf_config({"model_type": "llama", **hf})
    except (ValueError, KeyError, TypeError) as exc:
        warnings.append(f"{source}: model config not interpreted ({exc}); pass --model")
        return
    for fact in MODEL_FACTS:
        found = getattr(shape, fact, None)
        if found is not None and fact != "seq_length":
            config.setdefault(fact, ConfigValue(found, where))
    config.setdefault("vocab_size", ConfigValue(shape.vocab_size, where))
    config.setdefault("group_query_attention", ConfigValue(True, where))
    config.setdefault("normalization", ConfigValue("RMSNorm", where))
    config.setdefault("position_embedding_type", ConfigValue("rope", where))
    config.setdefault("add_bias_linear", ConfigValue(False, where))
    config.setdefault(
        "untie_embeddings_and_output_weights",
        ConfigValue(bool(shape.untie_embeddings_and_output_weights), where),
    )
