"""The run config from MaxText's dump, named as the FLOPs formula and the summary read it.

MaxText prints every key of its config (`Config param KEY: VALUE`); they are all kept as
printed. The model's shape, batch, devices, precision and parallelism are also stated under
the Megatron-LM names the rest of loganalyzer speaks (see `loganalyzer.model.MODEL_FACTS`),
each with the line it came from.
"""

from __future__ import annotations

import re

import polars as pl

from loganalyzer.model import ConfigValue, Provenance
from loganalyzer.parsers.run_config import typed

# Megatron name <- MaxText keys, the first printed wins: the effective sizes (`emb_dim`,
# which pyconfig derives from `base_emb_dim` and `global_parameter_scale`), else the base
# ones where the scale is 1 or not printed.
SHAPE_KEYS = {
    "num_layers": ("num_decoder_layers", "base_num_decoder_layers"),
    "hidden_size": ("emb_dim", "base_emb_dim"),
    "ffn_hidden_size": ("mlp_dim", "base_mlp_dim"),
    "num_attention_heads": ("num_query_heads", "base_num_query_heads"),
    "num_query_groups": ("num_kv_heads", "base_num_kv_heads"),
    "kv_channels": ("head_dim",),
    "seq_length": ("max_target_length",),
    # MaxText's embedding has exactly `vocab_size` rows: no padding rule applies
    "padded_vocab_size": ("vocab_size",),
}
BASE_KEYS = {"base_num_decoder_layers", "base_emb_dim", "base_mlp_dim", "base_num_query_heads"}
BASE_KEYS |= {"base_num_kv_heads"}
# jax dtype names -> the peak table's
DTYPES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}
# The mesh's axes that split the batch (MaxText's data, fsdp and fsdp_transpose axes), and
# those named as Megatron's parallelism.
DATA_AXES = ("data", "fsdp", "fsdp_transpose")
MESH_PARALLELISM = {
    "tensor_model_parallel_size": ("tensor",),
    "pipeline_model_parallel_size": ("stage",),
    "context_parallel_size": ("context",),
    "expert_model_parallel_size": ("expert",),
    "data_parallel_size": DATA_AXES,
}
# Without the mesh: an axis's ici x dcn sizes, when neither is -1 (filled in at start-up).
STATED_PARALLELISM = {
    "tensor_model_parallel_size": "tensor",
    "pipeline_model_parallel_size": "pipeline",
    "context_parallel_size": "context",
    "expert_model_parallel_size": "expert",
}


def run_config(rows: pl.DataFrame, source: str) -> tuple[dict[str, ConfigValue], list[str]]:
    """Every printed key at its first statement, then the Megatron-named facts, and notes on
    what was assumed."""
    first = rows.sort("line", maintain_order=True).unique("key", keep="first", maintain_order=True)
    printed = {
        key: ConfigValue(typed(value), Provenance("log", source, line))
        for line, key, value in first.select("line", "key", "value").iter_rows()
    }
    config = dict(printed)
    notes: list[str] = []
    _shape(printed, config)
    _devices(printed, config, source, notes)
    _batch(printed, config, notes)
    _precision(printed, config)
    _parallelism(printed, config)
    _planned(printed, config)
    notes.extend(_unlike_the_formula(printed))
    config["framework"] = ConfigValue("maxtext", Provenance("log", source))
    return config, notes


def _int(found: ConfigValue | None) -> int | None:
    value = None if found is None else found.value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _whole(printed: dict[str, ConfigValue], key: str) -> ConfigValue | None:
    """The printed key when its value is a whole number, else None."""
    found = printed.get(key)
    return found if _int(found) is not None else None


def _shape(printed: dict[str, ConfigValue], config: dict[str, ConfigValue]) -> None:
    scale = printed.get("global_parameter_scale")
    base_allowed = scale is None or scale.value == 1
    for name, keys in SHAPE_KEYS.items():
        for key in keys:
            found = _whole(printed, key)
            if found is not None and (base_allowed or key not in BASE_KEYS):
                config[name] = found
                break
    if "num_query_groups" in config:
        # the formula reads `num_query_groups` only with Megatron's GQA flag
        config["group_query_attention"] = ConfigValue(True, config["num_query_groups"].provenance)
    activations = printed.get("mlp_activations")
    if activations is not None:
        # a gated MLP (`['silu', 'linear']`, `['gelu', 'linear']`) has three matrices
        gated = len(re.findall(r"'[^']*'", str(activations.value))) >= 2
        config["swiglu"] = ConfigValue(gated, activations.provenance)
    experts = printed.get("num_experts")
    count = _int(experts)
    if experts is not None and count is not None and count > 1:
        config["num_experts"] = experts
        if (topk := printed.get("num_experts_per_tok")) is not None:
            config["moe_router_topk"] = topk
        for key in ("moe_mlp_dim", "base_moe_mlp_dim", "mlp_dim", "base_mlp_dim"):
            if (size := _whole(printed, key)) is not None:
                config["moe_ffn_hidden_size"] = size
                break
    else:
        config.pop("num_experts", None)  # MaxText's `num_experts: 1` is the dense MLP


def _devices(
    printed: dict[str, ConfigValue],
    config: dict[str, ConfigValue],
    source: str,
    notes: list[str],
) -> None:
    if (devices := _whole(printed, "num_devices")) is not None:
        config["num_gpus"] = devices
    kind = printed.get("device_kind")
    if kind is not None:
        config["gpu_name"] = kind
        return
    backend = printed.get("jax_backend")
    if backend is not None:
        notes.append(
            f"the log names no accelerator model (JAX backend {backend.value!r},"
            f" {backend.provenance}): pass --gpu for the peak and MFU"
        )


def _batch(
    printed: dict[str, ConfigValue], config: dict[str, ConfigValue], notes: list[str]
) -> None:
    """The global batch MaxText states (`global_batch_size_to_train_on`), else the per-device
    batch times the devices (times the accumulation steps), stated as derived; Megatron's
    micro batch (a device's) is MaxText's `per_device_batch_size`, not its own
    `micro_batch_size` (pipeline microbatching, -1 when unset)."""
    config.pop("micro_batch_size", None)
    per_device_batch = printed.get("per_device_batch_size")
    if per_device_batch is not None and isinstance(per_device_batch.value, (int, float)):
        size = per_device_batch.value
        if size > 0 and size == int(size) and not isinstance(size, bool):
            config["micro_batch_size"] = ConfigValue(int(size), per_device_batch.provenance)
    stated = _whole(printed, "global_batch_size_to_train_on")
    if stated is not None:
        config["global_batch_size"] = stated
        return
    per_device, devices = printed.get("per_device_batch_size"), _whole(printed, "num_devices")
    if per_device is None or devices is None:
        return
    if not isinstance(per_device.value, (int, float)) or isinstance(per_device.value, bool):
        return
    accumulation = printed.get("gradient_accumulation_steps")
    steps = _int(accumulation) or 1
    total = per_device.value * int(str(devices.value)) * steps
    if total <= 0 or total != int(total):
        return
    how = f"per_device_batch_size {per_device.value} ({per_device.provenance}) x {devices.value}"
    how += f" devices ({devices.provenance})"
    if steps > 1 and accumulation is not None:
        how += f" x gradient_accumulation_steps {steps} ({accumulation.provenance})"
    config["global_batch_size"] = ConfigValue(int(total), Provenance("derived", how))
    notes.append(f"global batch size {int(total)} assumed: {how} (the dump does not state it)")


def _precision(printed: dict[str, ConfigValue], config: dict[str, ConfigValue]) -> None:
    """The matmuls' precision: a quantization's (fp8, int8) when set, else `dtype`; and
    `remat_policy: full` as full recomputation (MaxText's other policies save some of the
    matmuls, which none of the formula's kinds describe)."""
    quantization = printed.get("quantization")
    mode = str(quantization.value).lower() if quantization is not None else ""
    dtype = printed.get("dtype")
    if quantization is not None and ("fp8" in mode or "int8" in mode):
        config["dtype"] = ConfigValue("fp8" if "fp8" in mode else "int8", quantization.provenance)
    elif dtype is not None and str(dtype.value) in DTYPES:
        config["dtype"] = ConfigValue(DTYPES[str(dtype.value)], dtype.provenance)
    remat = printed.get("remat_policy")
    if remat is not None and remat.value == "full":
        config["recompute"] = ConfigValue("full", remat.provenance)


def _parallelism(printed: dict[str, ConfigValue], config: dict[str, ConfigValue]) -> None:
    """Each parallelism from the device mesh's shape where `mesh_axes` names its axes (the
    sizes the `-1`s were filled in with), else from `ici_X x dcn_X` where both are stated."""
    axes, shape = printed.get("mesh_axes"), printed.get("mesh_shape")
    if axes is not None and shape is not None:
        names = re.findall(r"'([^']*)'", str(axes.value))
        sizes = [int(size) for size in re.findall(r"\d+", str(shape.value))]
        if names and len(names) == len(sizes):
            mesh = dict(zip(names, sizes, strict=True))
            for name, parts in MESH_PARALLELISM.items():
                if any(part in mesh for part in parts):
                    product = 1
                    for part in parts:
                        product *= mesh.get(part, 1)
                    config[name] = ConfigValue(product, shape.provenance)
            return
    for name, axis in STATED_PARALLELISM.items():
        ici, dcn = printed.get(f"ici_{axis}_parallelism"), printed.get(f"dcn_{axis}_parallelism")
        within, across = _int(ici), _int(dcn)
        if ici is not None and within is not None and within > 0 and (across or 1) > 0:
            config[name] = ConfigValue(within * (across or 1), ici.provenance)


def _planned(printed: dict[str, ConfigValue], config: dict[str, ConfigValue]) -> None:
    """The last step the run was to reach, as Megatron's `train_iters` (its last iteration's
    number): MaxText runs `steps` steps numbered from 0, so the last is `steps - 1`."""
    steps = _whole(printed, "steps")
    if steps is not None and isinstance(steps.value, int) and steps.value > 0:
        how = f"steps {steps.value} ({steps.provenance}): MaxText numbers its steps from 0"
        config["train_iters"] = ConfigValue(steps.value - 1, Provenance("derived", how))


def _unlike_the_formula(printed: dict[str, ConfigValue]) -> list[str]:
    """What the dump states that the one FLOPs formula does not count: DeepSeek's
    multi-head latent attention (`attention_type: mla`, low-rank query and key/value
    projections) is counted as standard attention over the query heads."""
    attention = printed.get("attention_type")
    if attention is None or not str(attention.value).lower().endswith("mla"):
        return []
    return [
        f"attention_type {attention.value} ({attention.provenance}): multi-head latent"
        " attention is counted as standard attention over the query heads; the recomputed"
        " FLOPs of its attention projections are approximate"
    ]
