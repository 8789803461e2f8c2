"""torchtitan's printed facts as the run config, in the data model's (Megatron-LM) names.

The model's shape comes from the `Building <model> <flavor> with ModelArgs(...)` line when
the log has it (2024 to 2025); else from the flavor (`Building llama3 8B`, the only model line
since 2026, or an echoed TOML's `flavor`), for the flavors whose shape torchtitan fixes
(`FLAVORS`); a ModelArgs vocabulary of -1 is the tokenizer's (`TikTokenizer built: #words N`).
Each value keeps the line it was read from, a preset its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from loganalyzer.model import ConfigValue, Provenance

# Flavors whose shape torchtitan fixes (pytorch/torchtitan torchtitan/models/llama3/__init__.py
# and qwen3/__init__.py @ b5bcd76c; llama2 until its removal in December 2024): layers, dim,
# heads, kv heads, FFN width, vocabulary, head_dim (None: dim / heads), tied embeddings.
# Before 2026 the vocabulary was the tokenizer's: the released ones have these sizes.
Flavor = tuple[int, int, int, int, int, int, int | None, bool]
FLAVORS: Mapping[tuple[str, str], Flavor] = {
    ("llama3", "debugmodel"): (6, 256, 16, 16, 768, 2048, None, False),
    ("llama3", "1B"): (16, 2048, 32, 8, 8192, 128256, None, False),
    ("llama3", "3B"): (28, 3072, 24, 8, 8192, 128256, None, False),
    ("llama3", "8B"): (32, 4096, 32, 8, 14336, 128256, None, False),
    ("llama3", "70B"): (80, 8192, 64, 8, 28672, 128256, None, False),
    ("llama3", "405B"): (126, 16384, 128, 8, 53248, 128256, None, False),
    ("llama2", "7B"): (32, 4096, 32, 32, 11008, 32000, None, False),
    ("llama2", "13B"): (40, 5120, 40, 40, 13824, 32000, None, False),
    ("llama2", "70B"): (80, 8192, 64, 8, 28672, 32000, None, False),
    ("qwen3", "0.6B"): (28, 1024, 16, 8, 3072, 151936, 128, True),
    ("qwen3", "1.7B"): (28, 2048, 16, 8, 6144, 151936, 128, True),
    ("qwen3", "4B"): (36, 2560, 32, 8, 9728, 151936, 128, True),
    ("qwen3", "8B"): (36, 4096, 32, 8, 12288, 151936, 128, False),
    ("qwen3", "14B"): (40, 5120, 40, 8, 17408, 151936, 128, False),
    ("qwen3", "32B"): (64, 5120, 64, 8, 25600, 151936, 128, False),
}

# Mesh dimension names (old `['dp', 'tp']` lists and the `pp=1, dp_shard=8, ...` line) →
# the data model's parallelism facts; `ep`/`etp` borrow ranks of the others.
MESH_DIMS = {
    "pp": "pipeline_model_parallel_size",
    "tp": "tensor_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
}
DATA_DIMS = ("dp", "dp_replicate", "dp_shard")
WORLD_DIMS = ("pp", "tp", "cp", *DATA_DIMS)

# Echoed job-config keys read (`cfg.<section>.<key>`), as torchtitan named them over time.
ECHOED_KEYS = {
    "cfg.model.name": "model_name",
    "cfg.model.flavor": "flavor",
    "cfg.model_spec.name": "model_name",
    "cfg.model_spec.flavor": "flavor",
    "cfg.training.seq_len": "seq_length",
    "cfg.training.max_context_length": "seq_length",
    "cfg.training.local_batch_size": "local_batch_size",
    "cfg.training.batch_size": "local_batch_size",
    "cfg.training.global_batch_size": "global_batch_size",
    "cfg.training.steps": "train_iters",
    "cfg.training.mixed_precision_param": "mixed_precision_param",
    "cfg.parallelism.mixed_precision_param": "mixed_precision_param",
    "cfg.activation_checkpoint.mode": "activation_checkpoint",
}
ECHOED_DEGREES = {
    "tensor_parallel_degree": "tensor_model_parallel_size",
    "pipeline_parallel_degree": "pipeline_model_parallel_size",
    "context_parallel_degree": "context_parallel_size",
    "expert_parallel_degree": "expert_model_parallel_size",
}
PRECISIONS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def first_statements(facts: pl.DataFrame) -> pl.DataFrame:
    """Each key's first statement (line, key, value): every rank prints the same start-up."""
    return facts.sort("line").unique("key", keep="first", maintain_order=True)


def run_config(facts: pl.DataFrame, source: str) -> tuple[dict[str, ConfigValue], list[str]]:
    """The run config from the facts' first statements; warnings for what was assumed."""
    stated = {key: (value, line) for line, key, value in first_statements(facts).rows()}

    def at(key: str) -> Provenance:
        return Provenance("log", source, stated[key][1])

    config: dict[str, ConfigValue] = {
        "framework": ConfigValue("torchtitan", Provenance("log", source))
    }
    warnings: list[str] = []
    for key, (value, _) in stated.items():
        name = ECHOED_KEYS.get(key, key)
        if key.startswith("cfg.") and name not in stated and name != key:
            config.setdefault(name, ConfigValue(_typed(value), at(key)))
        elif not key.startswith(("cfg.", "model_args.", "mesh", "run_start")):
            config[name] = ConfigValue(_typed(value), at(key))
    _parallelism(stated, config, at)
    _batch(config)
    _precision(config)
    _shape(stated, config, at, warnings, source)
    # torchtitan sets ModelArgs.max_seq_len from training.seq_len before it prints them
    # (train.py from April 2024, ModelArgs.update_from_config from March 2025): where no
    # start-up line states the sequence length, that one does
    if "seq_length" not in config and "model_args.max_seq_len" in stated:
        config["seq_length"] = ConfigValue(
            int(stated["model_args.max_seq_len"][0]), at("model_args.max_seq_len")
        )
    return config, warnings


def _typed(value: str) -> object:
    text = value.replace(",", "") if value.replace(",", "").isdigit() else value
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return value


def _parallelism(
    stated: Mapping[str, tuple[str, int]], config: dict[str, ConfigValue], at: Any
) -> None:
    """Degrees from the mesh line (either wording), else the echoed TOML; the world size is
    the product of the mesh's own dimensions."""
    degrees: dict[str, int] = {}
    where = None
    if "mesh" in stated:
        where = at("mesh")
        for pair in stated["mesh"][0].split(","):
            name, _, size = pair.strip().partition("=")
            if size.strip().isdigit():
                degrees[name.strip()] = int(size)
    elif "mesh_names" in stated:
        where = at("mesh_names")
        names = [n.strip(" '\"") for n in stated["mesh_names"][0].split(",")]
        sizes = [s.strip() for s in stated["mesh_sizes"][0].split(",")]
        degrees = {n: int(s) for n, s in zip(names, sizes, strict=False) if s.isdigit()}
    if where is not None:
        for dim, name in MESH_DIMS.items():
            config[name] = ConfigValue(degrees.get(dim, 1), where)
        data = 1
        for dim in DATA_DIMS:
            data *= degrees.get(dim, 1)
        config["data_parallel_size"] = ConfigValue(data, where)
        world = 1
        for dim in WORLD_DIMS:
            world *= degrees.get(dim, 1)
        config["world_size"] = ConfigValue(world, where)
        config["num_gpus"] = ConfigValue(world, where)
        return
    for section in ("parallelism", "training", "experimental"):
        for echoed, name in ECHOED_DEGREES.items():
            key = f"cfg.{section}.{echoed}"
            if key in stated and name not in config:
                config[name] = ConfigValue(_typed(stated[key][0]), at(key))


def _batch(config: dict[str, ConfigValue]) -> None:
    """The global batch in sequences where no line states it: the tokens of a train step
    over the context length (the wording since 2026), else the local batch times the data
    parallel degree and the accumulation steps."""
    if "global_batch_size" in config:
        return
    tokens, seq = config.get("tokens_per_step"), config.get("seq_length")
    if tokens is not None and seq is not None:
        step, length = tokens.value, seq.value
        if isinstance(step, int) and isinstance(length, int) and length and step % length == 0:
            where = Provenance(
                "derived", f"tokens per train step / context length ({tokens.provenance})"
            )
            config["global_batch_size"] = ConfigValue(step // length, where)
            return
    local, data = config.get("local_batch_size"), config.get("data_parallel_size")
    steps = config.get("gradient_accumulation_steps")
    if local is not None and data is not None:
        values = [local.value, data.value, steps.value if steps is not None else 1]
        if all(isinstance(v, int) and v > 0 for v in values):
            batch = values[0] * values[1] * values[2]  # type: ignore[operator]
            where = Provenance("derived", "local batch x data-parallel degree x accumulation")
            config["global_batch_size"] = ConfigValue(batch, where)


def _precision(config: dict[str, ConfigValue]) -> None:
    found = config.get("mixed_precision_param")
    if found is not None and "dtype" not in config and str(found.value) in PRECISIONS:
        config["dtype"] = ConfigValue(PRECISIONS[str(found.value)], found.provenance)
    checkpointing = config.get("activation_checkpoint")
    if checkpointing is not None and str(checkpointing.value).lower() == "full":
        config["recompute"] = ConfigValue("full", checkpointing.provenance)


def _shape(
    stated: Mapping[str, tuple[str, int]],
    config: dict[str, ConfigValue],
    at: Any,
    warnings: list[str],
    source: str,
) -> None:
    """The model's shape, from ModelArgs or a flavor preset."""
    args = {
        k.removeprefix("model_args."): v
        for k, (v, _) in stated.items()
        if k.startswith("model_args.")
    }
    model = str(config["model_name"].value) if "model_name" in config else None
    flavor = str(config["flavor"].value) if "flavor" in config else None
    preset = FLAVORS.get((model or "", flavor or ""))
    if {"dim", "n_layers", "n_heads"} <= args.keys():
        where = at("model_args.dim")
        hf = _from_model_args(args)
    elif preset is not None:
        where = Provenance("preset", f"torchtitan {model} {flavor}")
        layers, dim, heads, kv, ffn, vocab, head_dim, tied = preset
        hf = _hf(layers, dim, heads, kv, ffn)
        hf["vocab_size"] = vocab
        if head_dim is not None:
            hf["kv_channels"] = head_dim
        hf["untie_embeddings_and_output_weights"] = not tied
    else:
        if model and flavor:
            warnings.append(
                f"{source}: model {model} {flavor}: the log prints no ModelArgs and torchtitan"
                " does not fix this flavor's shape in a form the FLOPs formula reads; pass"
                " --model or the shape flags"
            )
        return
    if int(hf.get("vocab_size", 0)) <= 0:
        if "tokenizer_words" in config:
            hf["vocab_size"] = int(str(config["tokenizer_words"].value))
        else:
            hf.pop("vocab_size", None)
            warnings.append(
                f"{where}: the model's vocabulary is the tokenizer's, which the log does not"
                " print: pass --vocab-size"
            )
    if "vocab_size" in hf:
        hf["padded_vocab_size"] = hf["vocab_size"]
    for name, value in hf.items():
        config.setdefault(name, ConfigValue(value, where))


def _from_model_args(args: Mapping[str, str]) -> dict[str, Any]:
    """The shape torchtitan's printed ModelArgs give: the FFN width by
    torchtitan's rule (2/3 of 4·dim, times ffn_dim_multiplier, up to a multiple_of) unless
    printed (`hidden_dim`), heads of `head_dim` where printed."""
    dim = int(args["dim"])
    heads = int(args["n_heads"])
    kv = args.get("n_kv_heads", "None")
    if "hidden_dim" in args and args["hidden_dim"].isdigit():
        ffn = int(args["hidden_dim"])
    else:
        multiplier = args.get("ffn_dim_multiplier", "None")
        ffn = _ffn(
            dim,
            int(args.get("multiple_of", "256")),
            None if multiplier == "None" else float(multiplier),
        )
    hf = _hf(int(args["n_layers"]), dim, heads, heads if kv == "None" else int(kv), ffn)
    if args.get("vocab_size", "").lstrip("-").isdigit():
        hf["vocab_size"] = int(args["vocab_size"])
    if args.get("head_dim", "").isdigit():
        hf["kv_channels"] = int(args["head_dim"])
    return hf


def _hf(layers: int, dim: int, heads: int, kv: int, ffn: int) -> dict[str, Any]:
    """A llama-style shape (SwiGLU, RMSNorm, RoPE, no biases, untied output) in the data
    model's names; torchtitan's embedding is exactly the tokenizer's size (no padding)."""
    return {
        "num_layers": layers,
        "hidden_size": dim,
        "num_attention_heads": heads,
        "group_query_attention": True,
        "num_query_groups": kv,
        "ffn_hidden_size": ffn,
        "swiglu": True,
        "normalization": "RMSNorm",
        "position_embedding_type": "rope",
        "add_bias_linear": False,
        "untie_embeddings_and_output_weights": True,
    }


def _ffn(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """torchtitan's FeedForward width (models/llama*/model.py)."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)
