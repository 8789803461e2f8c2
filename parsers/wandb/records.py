"""Decoding a W&B run's records (`wandb_internal_pb2.Record`, from a `.wandb` file) into what
loganalyzer reads: history scalars, config, summary, the hardware record, system metrics.

The protobuf classes are the installed `wandb`'s own; the fields read here exist in every
version from 0.16 to today.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from loganalyzer import jsontext

# Columns of the long history table (one row per logged scalar).
HISTORY_COLUMNS = ("name", "step", "wall_time", "value", "record")


@dataclass
class RunRecords:
    """What a run's records say, in the order they were written."""

    history: dict[str, list[Any]] = field(
        default_factory=lambda: {column: [] for column in HISTORY_COLUMNS}
    )
    config: dict[str, object] = field(default_factory=dict)
    summary: dict[str, object] = field(default_factory=dict)
    environment: dict[str, object] = field(default_factory=dict)
    system: dict[str, list[Any]] = field(
        default_factory=lambda: {"name": [], "wall_time": [], "value": [], "record": []}
    )
    run: dict[str, object] = field(default_factory=dict)
    exit_code: int | None = None
    finished: bool = False
    # where the run's end is stated: the exit record's index, or (a run pulled through the
    # API) after the last history row, with the run's state
    end_record: int | None = None
    state: str | None = None
    not_scalar: Counter[str] = field(default_factory=Counter)
    undecodable: int = 0


def key_of(item: Any) -> str:
    """An item's key: `key`, or its `nested_key` path joined with '/'. A one-part path (what
    wandb writes today) is taken as it is: `join` over a protobuf list costs three times more,
    once per value of every record."""
    if item.key:
        return str(item.key)
    nested = item.nested_key
    return str(nested[0]) if len(nested) == 1 else "/".join(nested)


def loads(text: str) -> object:
    """A `value_json` (JSON with NaN and Infinity, as Python's json writes them)."""
    try:
        return jsontext.loads(text)
    except ValueError:
        return text


def history_value(text: str) -> object:
    """A history `value_json`: a number read with `float` (a JSON number, what wandb writes
    for scalars, ends with a digit and reads the same either way), anything else with json."""
    if text[-1:].isdigit():
        try:
            return float(text)
        except ValueError:
            pass
    return loads(text)


def number(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def decode_records(records: list[bytes]) -> RunRecords:
    """Every record of a run, through the installed wandb's protobuf classes."""
    from wandb.proto import wandb_internal_pb2

    found = RunRecords()
    # Summary and config values as written (JSON), the last of each key kept and decoded
    # once at the end: wandb rewrites the whole summary at every step.
    summary: dict[str, str] = {}
    config: dict[str, str] = {}
    for index, raw in enumerate(records):
        try:
            record = wandb_internal_pb2.Record.FromString(raw)  # type: ignore[attr-defined]
        except Exception:  # a record with a good CRC that is not a Record: counted
            found.undecodable += 1
            continue
        kind = record.WhichOneof("record_type")
        if kind == "history":
            _history(record.history, index, found)
        elif kind == "config":
            _updates(record.config.update, config)
        elif kind == "summary":
            _updates(record.summary.update, summary)
        elif kind == "run":
            run = record.run
            found.run.update(
                run_id=run.run_id,
                project=run.project,
                entity=run.entity,
                display_name=run.display_name,
                start_time=run.start_time.seconds or None,
            )
            _updates(run.config.update, config)
        elif kind == "environment":
            _environment(record.environment, found.environment)
        elif kind == "stats":
            _stats(record.stats, index, found)
        elif kind == "exit":
            found.exit_code = record.exit.exit_code
            found.end_record = index
            found.finished = True
    found.config.update(_decoded(config))
    found.summary.update(_decoded(summary))
    return found


def _history(history: Any, index: int, found: RunRecords) -> None:
    values = {key_of(item): history_value(item.value_json) for item in history.item}
    fallback = float(history.step.num) if history.HasField("step") else None
    history_row(values, fallback, index, found)


def history_row(
    values: dict[str, object], fallback_step: float | None, index: int, found: RunRecords
) -> None:
    """One history row's scalars into the long history; what is not a number is counted."""
    step = number(values.get("_step"))
    if step is None:
        step = fallback_step
    wall = number(values.get("_timestamp"))
    names: list[str] = []
    scalars: list[float] = []
    for name, value in values.items():
        if name in ("_step", "_timestamp"):
            continue
        scalar = value if type(value) is float else number(value)
        if scalar is None:
            found.not_scalar[name] += 1
            continue
        names.append(name)
        scalars.append(scalar)
    # the step itself, so that the iteration can come from it when nothing better exists
    if step is not None:
        names.append("_step")
        scalars.append(step)
    # one extend per column and row, not one append per value
    columns = found.history
    count = len(names)
    columns["name"].extend(names)
    columns["step"].extend([None if step is None else int(step)] * count)
    columns["wall_time"].extend([wall] * count)
    columns["value"].extend(scalars)
    columns["record"].extend([index] * count)


def _updates(updates: Any, into: dict[str, str]) -> None:
    for item in updates:
        key = key_of(item)
        if not key.startswith("_wandb"):  # W&B's own bookkeeping
            into[key] = item.value_json


def _decoded(updates: dict[str, str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for key, text in updates.items():
        value = loads(text)
        # config.yaml's {desc, value} form
        values[key] = value["value"] if _wrapped(value) else value  # type: ignore[index]
    return values


def _environment(env: Any, into: dict[str, object]) -> None:
    if env.gpu_type:
        into["gpu_name"] = env.gpu_type
    if env.gpu_count:
        into["num_gpus"] = env.gpu_count
    names = [gpu.name for gpu in getattr(env, "gpu_nvidia", []) if gpu.name]
    if names and "gpu_name" not in into:
        into["gpu_name"] = names[0]
    if names and "num_gpus" not in into:
        into["num_gpus"] = len(names)


def _stats(stats: Any, index: int, found: RunRecords) -> None:
    wall = stats.timestamp.seconds + stats.timestamp.nanos / 1e9
    for item in stats.item:
        value = number(loads(item.value_json))
        if value is None:
            continue
        found.system["name"].append("system/" + key_of(item))
        found.system["wall_time"].append(wall)
        found.system["value"].append(value)
        found.system["record"].append(index)


def records_from_api(
    config: dict[str, Any],
    summary: dict[str, Any],
    metadata: dict[str, Any],
    history: list[dict[str, Any]],
    state: str,
) -> RunRecords:
    """The same view of a run pulled through the public API."""
    found = RunRecords()
    for index, row in enumerate(history):
        history_row(row, None, index, found)
    for key, value in config.items():
        if not key.startswith("_wandb"):
            found.config[key] = value["value"] if _wrapped(value) else value
    found.summary.update({k: v for k, v in summary.items() if not k.startswith("_wandb")})
    if metadata.get("gpu"):
        found.environment["gpu_name"] = metadata["gpu"]
    if metadata.get("gpu_count"):
        found.environment["num_gpus"] = metadata["gpu_count"]
    found.finished = state in ("finished", "crashed", "failed", "killed")
    found.state, found.end_record = state, len(history)
    return found


def _wrapped(value: object) -> bool:
    return isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}
