"""Facts for comparing runs: what each run is (its identity), which of those facts differ,
the config differences ranked by what they change, per-iteration rates that do not depend
on how long each log is, and the largest difference with the facts that likely explain it.

Facts only; `render.compare` puts them in words. Everything is read from each run's summary
document, except the micro batch and the ZeRO stage, which the document does not carry and
are read from the run's config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loganalyzer.model import MODEL_FACTS, PARALLELISM_FACTS, ConfigValue

# What a config difference changes, most consequential first: the first six change the FLOPs
# of an iteration or how the work is split (the brief of a comparison), the next two what the
# work runs on and with; the rest (paths, logging, tuning knobs) are folded.
KINDS = (
    "model",
    "sequence",
    "batch",
    "parallelism",
    "precision",
    "recompute",
    "hardware",
    "framework",
    "other",
)
FOLDED = "other"
# Config names by kind, in the order they are listed within it. Names are the parsers'
# (Megatron-LM argument names, see `model.Run`) and the frameworks' own where a parser keeps
# them as printed (DeepSpeed's and HF Trainer's).
_NAMES: dict[str, tuple[str, ...]] = {
    "model": (
        "params",
        "active_params",
        *(name for name in MODEL_FACTS if name != "seq_length"),
        "num_hidden_layers",
        "intermediate_size",
        "num_key_value_heads",
        "vocab_size",
        "num_moe_experts",
    ),
    "sequence": (
        "seq_length",
        "encoder_seq_length",
        "decoder_seq_length",
        "max_seq_length",
        "max_seq_len",
        "block_size",
    ),
    "batch": (
        "global_batch_size",
        "micro_batch_size",
        "batch_size",
        "rampup_batch_size",
        "gradient_accumulation_steps",
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "deepspeed_train_batch_size",
        "deepspeed_train_micro_batch_size_per_gpu",
        "deepspeed_gradient_accumulation_steps",
        "per_device_train_batch_size",
    ),
    "parallelism": (
        "num_gpus",
        "world_size",
        *PARALLELISM_FACTS.values(),
        "model_parallel_size",
        "zero_stage",
        "zero_optimization_stage",
        "virtual_pipeline_model_parallel_size",
        "num_layers_per_virtual_pipeline_stage",
        "sequence_parallel",
        "use_distributed_optimizer",
    ),
    "precision": ("dtype", "fp16", "bf16", "fp8", "fp8_format", "params_dtype", "precision"),
    "recompute": (
        "recompute",
        "recompute_granularity",
        "recompute_method",
        "recompute_num_layers",
        "checkpoint_activations",
        "checkpoint_num_layers",
        "deepspeed_activation_checkpointing",
        "activations_checkpoint_method",
        "activations_checkpoint_granularity",
        "gradient_checkpointing",
        "partition_activations",
        "checkpoint_in_cpu",
    ),
    "hardware": ("gpu_name", "gpu"),
    "framework": ("framework", "framework_version", "deepspeed"),
}
_RANK = {
    name: (k, n) for k, kind in enumerate(KINDS) for n, name in enumerate(_NAMES.get(kind, ()))
}

# The identity facts, in the order a comparison lists them and looks for a reason in.
IDENTITY = (
    "model",
    "seq_length",
    "global_batch_size",
    "micro_batch_size",
    "parallelism",
    "precision",
    "recompute",
    "num_gpus",
    "gpu",
    "framework",
    "deepspeed",
)
# Rates a headline may name, in the order a tie is broken in; for each, whether more is
# better. Totals (wall clock, time lost) depend on how long each log is and are not here.
RATES = {
    "tokens_per_s": True,
    "mfu": True,
    "step_time": False,
    "time_per_iteration": False,
}


def config_kind(name: str) -> str:
    """What a config value changes (one of `KINDS`)."""
    return KINDS[_RANK[name][0]] if name in _RANK else FOLDED


def config_order(name: str, stated_by_all: bool = True) -> tuple[bool, bool, int, int, str]:
    """The sort key that lists config differences most consequential first: those that
    change something before the folded rest, and among them those every run states (two
    values) before those only some state (an argument one framework has and another not)."""
    kind, position = _RANK.get(name, (len(KINDS) - 1, 0))
    return (KINDS[kind] == FOLDED, not stated_by_all, kind, position, name)


@dataclass(frozen=True)
class Parallelism:
    """How the work is split; pipeline, context and expert sizes a log leaves out are 1 (as
    the summary's data-parallel size assumes), a tensor or data size it leaves out unknown."""

    tensor: int | None
    pipeline: int
    data: int | None
    context: int
    expert: int
    zero_stage: int | None  # 1-3 where the DeepSpeed engine runs ZeRO, else None


@dataclass(frozen=True)
class RunIdentity:
    """What a run is, as far as its logs say (None: unknown)."""

    framework: str | None
    # whether Megatron-DeepSpeed's `--deepspeed` engine ran (None: the config does not say)
    deepspeed: bool | None
    num_gpus: int | None
    gpu: str | None
    params: float | None
    shape: tuple[tuple[str, int], ...]  # (name, value) of the stated shape facts
    seq_length: int | None
    global_batch_size: int | None
    micro_batch_size: int | None
    parallelism: Parallelism
    precision: str | None
    recompute: str | None
    # the iterations logged: records, the iterations they cover, the first and last
    records: int
    covered: int | None
    first: int | None
    last: int | None
    wall_s: float | None
    # why the steady figures are low-confidence (the summary's `confidence_reason`), or None
    low_confidence: str | None

    @property
    def time_per_iteration(self) -> float | None:
        """Wall clock over the iterations logged: comparable between logs of any length."""
        if not self.wall_s or not self.covered:
            return None
        return self.wall_s / self.covered

    def value(self, fact: str) -> object:
        """The identity fact `fact` (one of `IDENTITY`), comparable with `==`."""
        if fact == "model":  # stated when its size and shape are
            return (self.params, self.shape) if self.params is not None and self.shape else None
        if fact == "parallelism":  # stated when its tensor or data size is
            split = self.parallelism
            return split if split.tensor is not None or split.data is not None else None
        return getattr(self, fact)


def identity_of(document: Mapping[str, Any], config: Mapping[str, ConfigValue]) -> RunIdentity:
    """A run's identity from its summary document (and the two facts only its config has)."""
    run = document.get("run") or {}
    model = run.get("model") or {}
    split = run.get("parallelism") or {}
    iterations = document.get("iterations") or {}
    deepspeed = _value(config, "deepspeed")
    engine = deepspeed if isinstance(deepspeed, bool) else None
    return RunIdentity(
        framework=run.get("framework"),
        deepspeed=engine,
        num_gpus=_int(run.get("num_gpus")),
        gpu=(run.get("gpu") or {}).get("name"),
        params=_number(model.get("params")),
        shape=tuple(
            (key, int(model[key]))
            # the FFN size is left out: a log that does not state it assumes 4h, and the
            # parameter count carries it
            for key in ("num_layers", "hidden_size", "num_attention_heads")
            if isinstance(model.get(key), int)
        ),
        seq_length=_int(run.get("seq_length")),
        global_batch_size=_int(run.get("global_batch_size")),
        micro_batch_size=_int(_value(config, "micro_batch_size")),
        parallelism=Parallelism(
            tensor=_int(split.get("tensor")),
            pipeline=_int(split.get("pipeline")) or 1,
            data=_int(split.get("data")),
            context=_int(split.get("context")) or 1,
            expert=_int(split.get("expert")) or 1,
            zero_stage=zero_stage(config),
        ),
        precision=run.get("dtype"),
        recompute=None if run.get("recompute_assumed") else run.get("recompute"),
        records=int(iterations.get("logged") or 0),
        covered=_int(iterations.get("covered")),
        first=_int(iterations.get("first")),
        last=_int(iterations.get("last")),
        wall_s=_number((document.get("goodput") or {}).get("wall_s")),
        low_confidence=document.get("confidence_reason")
        if document.get("confidence") == "low"
        else None,
    )


def differing(identities: Sequence[RunIdentity]) -> tuple[str, ...]:
    """The identity facts that runs state differently. A fact only some runs state does not
    make them differ (as `loganalyzer.identity` tells runs apart): "unknown" is what the log
    leaves out, not what the run did."""
    return tuple(
        fact
        for fact in IDENTITY
        if len({repr(v) for i in identities if (v := i.value(fact)) is not None}) > 1
    )


@dataclass(frozen=True)
class Difference:
    """The largest difference in a rate between a run and the baseline (the first run), and
    the identity facts, known in both, that differ between the two: its likely reasons."""

    figure: str  # a key of `RATES`
    run: int  # the run's index; the baseline's is 0
    baseline_value: float
    value: float
    # value over the baseline's, and whether that is the better direction
    ratio: float
    better: bool
    reasons: tuple[str, ...]


def largest_difference(
    identities: Sequence[RunIdentity], rates: Sequence[Mapping[str, float | None]]
) -> Difference | None:
    """The rate (of `RATES`) that differs most, by ratio, between a run and the baseline;
    None when no rate is known in the baseline and another run."""
    best: tuple[float, Difference] | None = None
    for index in range(1, len(rates)):
        for figure, more_is_better in RATES.items():
            base, value = rates[0].get(figure), rates[index].get(figure)
            if not base or not value or base <= 0 or value <= 0:
                continue
            size = abs(math.log(value / base))
            if best is not None and size <= best[0] + 1e-12:
                continue
            reasons = differing([identities[0], identities[index]])
            found = Difference(
                figure, index, base, value, value / base, (value > base) == more_is_better, reasons
            )
            best = (size, found)
    return best[1] if best else None


def zero_stage(config: Mapping[str, ConfigValue]) -> int | None:
    """The ZeRO stage a run trained with: 1-3 where the DeepSpeed engine runs ZeRO; None for
    stage 0 (no ZeRO), a stage the config does not state, or Megatron-DeepSpeed without its
    `--deepspeed` engine (its `--zero-stage` then goes unused)."""
    stage = _int(_value(config, "zero_stage"))
    if stage not in (1, 2, 3) or _value(config, "deepspeed") is False:
        return None
    return stage


def _value(config: Mapping[str, ConfigValue], name: str) -> object:
    found = config.get(name)
    return None if found is None else found.value


def _int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
