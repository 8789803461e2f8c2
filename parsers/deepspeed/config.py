"""The run config from the engine's printout and a `ds_config*.json` beside the log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from loganalyzer import jsontext
from loganalyzer.model import ConfigValue, Provenance
from loganalyzer.parsers.run_config import typed
from loganalyzer.sources import note_read_along

# Engine printout names → the run config's (Megatron-style) names.
ENGINE_NAMES = {
    "train_batch_size": "global_batch_size",
    "train_micro_batch_size_per_gpu": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "zero_optimization_stage": "zero_stage",
    "steps_per_print": "steps_per_print",
    "wall_clock_breakdown": "wall_clock_breakdown",
    "log_level": "deepspeed_log_level",
    "world_size": "data_parallel_size",
    "dist_world_size": "num_gpus",
}


# DeepSpeed-Chat's own statements (`lines.chat_facts`): used where the engine states nothing.
CHAT_NAMES = {"chat_max_seq_len": "seq_length", "chat_micro_batch": "micro_batch_size"}


# The printout's precision flags (`fp16_enabled True`; DeepSpeed >= 0.15 prints the sections,
# `float16_config enabled=True ...`) and the printed JSON's sections (`lines.json_precision`).
PRECISION_FLAGS = (
    "fp16_enabled",
    "float16_config",
    "bfloat16_enabled",
    "bfloat16_config",
    "json_fp16",
    "json_bf16",
)


def _enabled(raw: str) -> bool | None:
    """`enabled=True ...` (DeepSpeed >= 0.15 prints configs as pydantic reprs) or `True`."""
    found = re.match(r"(?:enabled=)?(True|False)\b", raw)
    return None if found is None else found.group(1) == "True"


def engine_config(rows: pl.DataFrame, source: str) -> dict[str, ConfigValue]:
    """The first printout's values (a relaunch prints the same again), with file and line."""
    config: dict[str, ConfigValue] = {}
    precision: dict[str, tuple[bool, int]] = {}
    chat: dict[str, ConfigValue] = {}
    for line, key, raw in rows.select("line", "key", "value").sort("line").iter_rows():
        where = Provenance("log", source, line)
        if key in CHAT_NAMES and CHAT_NAMES[key] not in chat:
            chat[CHAT_NAMES[key]] = ConfigValue(typed(raw), where)
        elif key in ENGINE_NAMES and ENGINE_NAMES[key] not in config:
            config[ENGINE_NAMES[key]] = ConfigValue(typed(raw), where)
        elif key in PRECISION_FLAGS:
            enabled = _enabled(raw)
            name = "fp16" if key.startswith(("fp16", "float16", "json_fp16")) else "bf16"
            if enabled is not None and name not in precision:
                precision[name] = (enabled, line)
    for name in ("bf16", "fp16"):
        if precision.get(name, (False, 0))[0]:
            config["dtype"] = ConfigValue(name, Provenance("log", source, precision[name][1]))
            break
    else:
        if precision:
            line = min(line for _, line in precision.values())
            config["dtype"] = ConfigValue("fp32", Provenance("log", source, line))
    for key, value in chat.items():
        config.setdefault(key, value)
    return config


# The engine's groups summary (DeepSpeed >= 0.17): sizes of its process groups.
GROUP_SIZES = ("dp_world_size", "mp_world_size", "seq_dp_world_size", "sequence_parallel_size")


def _pipeline_gpus(dp: int, width: int) -> str:
    """The note on a pipelined run's GPU count: what it rests on."""
    return (
        f"GPU count = the engine printout's world_size {dp} (the data-parallel size) x {width},"
        " the ranks of the pipeline engine's model-parallel group (their STAGE_PARAMS add up to"
        " its TOTAL_PARAMS)"
    )


# The GPU count read from the printout's world_size, and what that rests on.
DP_AS_GPUS = (
    "GPU count from the engine printout's world_size, which is the data-parallel size: no"
    " model, sequence or pipeline parallelism is printed, so it is taken as every GPU"
)


def pipeline_width(stages: pl.DataFrame, starts: pl.DataFrame) -> int | None:
    """The size of the pipeline engine's model-parallel group (stages x tensor slices), from
    its first launch's layout lines: each rank of the group prints its own parameters and
    the group's sum (TOTAL_PARAMS), so when the ranks printed add up to that sum they are
    the whole group. None when they do not (a line missing, another node's file)."""
    if stages.height == 0:
        return None
    second = starts["line"].sort().gather(1) if starts.height > 1 else None
    first = stages if second is None else stages.filter(pl.col("line") < second[0])
    if first.height == 0 or first["total_params"].n_unique() != 1:
        return None
    # the copies of a rank's line (pdsh, tee) come once; a line without its rank counts alone
    ranked = first["stage_rank"].null_count() == 0
    ranks = first.unique("stage_rank") if ranked else first
    total = int(first["total_params"][0])
    return ranks.height if total > 0 and int(ranks["stage_params"].sum()) == total else None


def gpu_count(
    rows: pl.DataFrame, config: dict[str, ConfigValue], pipeline: int | None, source: str
) -> tuple[ConfigValue | None, str | None]:
    """The GPU count where the launcher's `dist_world_size` is missing: the groups summary's
    (sequence-)data-parallel size x model-parallel size, else the printout's `world_size`
    (data-parallel) when nothing shows model parallelism (a note says so). A pipelined run
    (`pipeline` = 0 when the width of its model-parallel group is unknown) has the printout's
    data-parallel size x that width (`pipeline_width`), else its count stays unknown."""
    if "num_gpus" in config or pipeline == 0:
        return None, None
    if pipeline is not None:
        world = config.get("data_parallel_size")
        if world is None or not isinstance(world.value, int) or world.value < 1:
            return None, None
        note = _pipeline_gpus(world.value, pipeline)
        return ConfigValue(world.value * pipeline, world.provenance), note
    sizes: dict[str, tuple[int, int]] = {}
    for line, key, raw in rows.filter(pl.col("key").is_in(GROUP_SIZES)).iter_rows():
        if raw.isdigit():
            sizes.setdefault(key, (int(raw), line))
    data = sizes.get("seq_dp_world_size") or sizes.get("dp_world_size")
    if data is not None:
        model = sizes.get("mp_world_size", (1, data[1]))[0]
        return ConfigValue(data[0] * model, Provenance("log", source, data[1])), None
    world = config.get("data_parallel_size")
    if world is None or not isinstance(world.value, int) or world.value < 1:
        return None, None
    return ConfigValue(world.value, world.provenance), DP_AS_GPUS


def json_config(log: Path) -> tuple[dict[str, ConfigValue], list[str]]:
    """Facts from the first `ds_config*.json` (by name) in the log's folder that reads as a
    JSON object, and warnings for one that cannot be read. HF's `"auto"` values are left
    to the trainer."""
    warnings: list[str] = []
    found: dict[str, ConfigValue] = {}
    used: Path | None = None
    for path in sorted(log.parent.glob("ds_config*.json")):
        if used is not None:
            note_read_along(path, False, f"{log}'s DeepSpeed settings came from {used}")
            continue
        try:
            data = jsontext.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            warnings.append(f"{path}: not read ({exc}); its DeepSpeed settings are not used")
            note_read_along(path, False, f"a DeepSpeed config that cannot be read ({exc})")
            continue
        if isinstance(data, dict):
            found, used = _from_json(data, str(path)), path
            note_read_along(path, True, f"as part of {log}: the DeepSpeed settings beside it")
    return found, warnings


def _from_json(data: dict[str, Any], source: str) -> dict[str, ConfigValue]:
    where = Provenance("config", source)
    found: dict[str, object] = {
        "global_batch_size": data.get("train_batch_size"),
        "micro_batch_size": data.get("train_micro_batch_size_per_gpu"),
        "gradient_accumulation_steps": data.get("gradient_accumulation_steps"),
        "steps_per_print": data.get("steps_per_print"),
        "wall_clock_breakdown": data.get("wall_clock_breakdown"),
        "deepspeed_log_level": data.get("log_level"),
    }
    zero = data.get("zero_optimization")
    if isinstance(zero, dict):
        found["zero_stage"] = zero.get("stage")
    for name in ("bf16", "fp16"):
        section = data.get(name)
        if isinstance(section, dict) and section.get("enabled") is True:
            found["dtype"] = name
            break
    return {
        key: ConfigValue(value, where)
        for key, value in found.items()
        if value is not None and value != "auto"
    }
