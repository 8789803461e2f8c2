"""Run config from the key/value sets metrics stores hold: Megatron's arguments (TensorBoard
text summaries, W&B config), HF Trainer's TrainingArguments and model config.

Every key is kept as it was logged; the facts the data model names (dtype, recompute,
micro-batch size, the model's shape) are added beside them, with the same provenance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from loganalyzer.flops.shape import ModelShape, shape_from_hf_config
from loganalyzer.model import MODEL_FACTS, ConfigValue, Provenance
from loganalyzer.parsers.megatron.config import _derive_config, _typed

# HF TrainingArguments names → the data model's (Megatron-LM) names.
HF_RENAMES = {"per_device_train_batch_size": "micro_batch_size"}


def typed(value: object) -> object:
    """A logged value as Python: printed arguments ("None", "True", "4096") become values."""
    return _typed(value.strip()) if isinstance(value, str) else value


def config_from_values(
    values: Mapping[str, object], provenance: Callable[[str], Provenance]
) -> tuple[dict[str, ConfigValue], list[str]]:
    """The run config of one key/value set; warnings for what could not be interpreted."""
    config = {key: ConfigValue(typed(value), provenance(key)) for key, value in values.items()}
    warnings: list[str] = []
    for hf_name, name in HF_RENAMES.items():
        if hf_name in config and name not in config:
            config[name] = config[hf_name]
    if "model_type" in values:
        try:
            shape = shape_from_hf_config(dict(values))
        except (ValueError, KeyError, TypeError) as exc:
            warnings.append(f"{provenance('model_type')}: model config not interpreted ({exc})")
            shape = ModelShape()
        for fact in MODEL_FACTS:
            found = getattr(shape, fact, None)
            if found is not None and fact not in config:
                config[fact] = ConfigValue(found, provenance("model_type"))
    _derive_config(config)
    return config, warnings
