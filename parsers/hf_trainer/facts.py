"""Run facts the Trainer does not print as such but states exactly through others; each is
kept with provenance `derived` naming what it came from, and only when the numbers agree."""

from __future__ import annotations

from loganalyzer.model import ConfigValue, Provenance


def add_derived(config: dict[str, ConfigValue], source: str) -> None:
    """GPUs and sequence length from what the run printed, where it lacks them.

    - GPUs = total train batch / (per-device batch x accumulation steps);
    - seq_length = tokens per step (from num_input_tokens_seen) / global batch.
    """
    values = {k: v.value for k, v in config.items()}
    total, micro, accumulation = (
        values.get("global_batch_size"),
        values.get("micro_batch_size"),
        values.get("gradient_accumulation_steps"),
    )
    if (
        "num_gpus" not in config
        and isinstance(total, int)
        and isinstance(micro, int)
        and isinstance(accumulation, int)
        and micro * accumulation
        and total % (micro * accumulation) == 0
    ):
        config["num_gpus"] = ConfigValue(
            total // (micro * accumulation),
            Provenance(
                "derived", f"total train batch / (per-device batch x accumulation) in {source}"
            ),
        )
    tokens = values.get("tokens_per_step")
    if (
        "seq_length" not in config
        and isinstance(tokens, int)
        and isinstance(total, int)
        and total
        and tokens % total == 0
    ):
        config["seq_length"] = ConfigValue(
            tokens // total,
            Provenance("derived", f"tokens per step / global batch in {source}"),
        )
