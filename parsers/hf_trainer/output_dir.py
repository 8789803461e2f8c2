"""An HF Trainer output_dir: `trainer_state.json` (top level and `checkpoint-*/` copies), the
model's `config.json`, `all_results.json`/`train_results.json` and a PEFT `adapter_config.json`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import polars as pl

from loganalyzer import jsontext
from loganalyzer.errors import InputError
from loganalyzer.flops.shape import ModelShape, shape_from_hf_config, shape_from_preset
from loganalyzer.model import ConfigValue, Provenance
from loganalyzer.parsers.hf_trainer import base_model
from loganalyzer.parsers.hf_trainer.entries import ENTRY_SCHEMA
from loganalyzer.sources import note_read_along

STATE = "trainer_state.json"
CHECKPOINT = re.compile(r"checkpoint-(\d+)$")

# Shape fields a Megatron-named run config carries (what the FLOPs engine reads back).
SHAPE_FACTS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "ffn_hidden_size",
    "padded_vocab_size",
    "vocab_size",
    "swiglu",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "max_position_embeddings",
    "add_bias_linear",
    "add_qkv_bias",
    "normalization",
    "position_embedding_type",
    "untie_embeddings_and_output_weights",
)


def run_root(state: Path) -> Path:
    """The output_dir a trainer_state.json belongs to (a checkpoint's parent)."""
    return state.parent.parent if CHECKPOINT.search(state.parent.name) else state.parent


def state_copies(root: Path) -> list[Path]:
    """Every trainer_state.json of an output_dir, newest first: the top-level one (written
    after training), then the checkpoints from the highest step down."""
    checkpoints = sorted(
        (p for p in root.glob(f"checkpoint-*/{STATE}") if CHECKPOINT.search(p.parent.name)),
        key=lambda p: -int(CHECKPOINT.search(p.parent.name).group(1)),  # type: ignore[union-attr]
    )
    top = root / STATE
    return ([top] if top.is_file() else []) + checkpoints


def is_newest_copy(path: Path) -> bool:
    """True for the copy that stands for the whole output_dir (the others only fill gaps)."""
    copies = state_copies(run_root(path))
    return bool(copies) and copies[0].resolve() == path.resolve()


def _load(path: Path) -> dict[str, Any]:
    """A JSON object; `#` comment lines (a copy annotated with where it came from) skipped."""
    try:
        text = path.read_text(encoding="utf-8")
        if text.startswith("#"):
            text = "".join(line for line in text.splitlines(True) if not line.startswith("#"))
        data = jsontext.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from exc
    except jsontext.TooDeepError as exc:
        raise InputError(f"{path}: {exc}; not read") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); is the file whole?") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a JSON object")
    return data


def log_entries(path: Path) -> tuple[pl.DataFrame, dict[str, Any], list[str]]:
    """The output_dir's log entries as a long frame, the newest state's top-level fields,
    and notes. A step is taken whole from the newest copy that logged it (a resumed run
    may log more keys for a step than the checkpoint it resumed from did: the entries are
    the same step, not another one); steps the newer copies lack come from older ones.
    `line` is null (JSON has no lines that mean anything here)."""
    copies = state_copies(run_root(path)) if path.name == STATE else [path]
    taken: set[int] = set()
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    newest: dict[str, Any] = {}
    for position, copy in enumerate(copies):
        state = _load(copy)
        if position == 0:
            newest = state
        history = state.get("log_history")
        if not isinstance(history, list):
            notes.append(f"{copy}: no log_history list; not used")
            continue
        entries = [
            item
            for item in history
            if isinstance(item, dict)
            and isinstance(item.get("step"), int)
            and not isinstance(item["step"], bool)
            and item["step"] not in taken
        ]
        for item in entries:
            entry = len(rows)
            rows.extend(
                {"entry": entry, "step": item["step"], "line": None, "key": k, "value": float(v)}
                for k, v in item.items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
            )
        taken.update(item["step"] for item in entries)
        added = len(entries)
        if position > 0 and added:
            notes.append(f"{copy}: {added} log entries the newer state lacks were taken from it")
        if position > 0:
            what = f"{added} log entries the newer state lacks" if added else "nothing"
            _read(copy, f"an older trainer_state.json ({what} taken from it)")
    frame = pl.DataFrame(rows, schema=ENTRY_SCHEMA).with_columns(
        # entries in step order, whichever copy they came from
        entry=pl.struct("step", "entry").rank("dense").cast(pl.Int64)
    )
    return frame, newest, notes


def state_config(state: dict[str, Any], source: str) -> dict[str, ConfigValue]:
    """trainer_state.json's own facts: per-device batch, logging interval, steps, total_flos."""
    where = Provenance("config", source)
    names = {
        "train_batch_size": "micro_batch_size",
        "logging_steps": "log_interval",
        "max_steps": "train_iters",
        "global_step": "global_step",
        "total_flos": "reported_total_flos",
        # the analysis reads these under the Trainer's own names (analysis.events)
        "save_steps": "save_steps",
        "eval_steps": "eval_steps",
    }
    return {
        ours: ConfigValue(state[theirs], where)
        for theirs, ours in names.items()
        if isinstance(state.get(theirs), (int, float)) and state.get(theirs)
    }


def checkpoint_saves(root: Path) -> pl.DataFrame:
    """The output_dir's `checkpoint-N/` folders: a save at step N each (step, line, source)."""
    steps = [
        (int(found.group(1)), str(folder))
        for folder in root.glob("checkpoint-*")
        if folder.is_dir() and (found := CHECKPOINT.search(folder.name))
    ]
    return pl.DataFrame(
        {
            "step": [step for step, _ in steps],
            "line": [None] * len(steps),
            "source": [folder for _, folder in steps],
        },
        schema={"step": pl.Int64, "line": pl.Int64, "source": pl.String},
    ).sort("step")


def results(root: Path) -> tuple[dict[str, float], str | None]:
    """`all_results.json` (else `train_results.json`): the final train metrics."""
    for name in ("all_results.json", "train_results.json"):
        path = root / name
        if path.is_file():
            data = _load(path)
            numbers = {
                k: float(v)
                for k, v in data.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            _read(path, "the final train metrics")
            other = root / "train_results.json"
            if name == "all_results.json" and other.is_file():
                note_read_along(other, False, f"{path} holds the same metrics and was read")
            return numbers, str(path)
    return {}, None


def model_config(root: Path) -> tuple[dict[str, ConfigValue], list[str]]:
    """The model's shape from `config.json` at the top, else in the newest checkpoint, named
    as the run config names it (Megatron's argument names), with the file as provenance.
    A PEFT output_dir often has no config.json: its adapter's base model then gives the
    shape (`base_model`: a local path or the Hugging Face cache, offline), else a preset
    whose name is exactly the base model's (the part after the hub owner)."""
    candidates = [root / "config.json"] + [c.parent / "config.json" for c in state_copies(root)]
    adapter = adapter_config(root)
    for path in candidates:
        if path.is_file():
            how = "the base model's, beside the adapter" if adapter else None
            for copy in candidates:
                if copy != path and copy.is_file():
                    note_read_along(
                        copy, False, f"another copy of the model's config: {path} was read"
                    )
            _read(path, "the model's shape")
            return _shape_from_file(path, how)
    if not adapter:
        return {}, []
    base = adapter.get("peft_base_model")
    name = base.value if base is not None and isinstance(base.value, str) else None
    source = adapter["lora"].provenance.source
    if name is None:
        return {}, [
            f"{source}: the LoRA adapter names no base model"
            " (base_model_name_or_path is null) and no config.json is beside it: the model"
            " shape is unknown; pass --model with the base model's config.json (or a preset)"
        ]
    revision = adapter.get("peft_base_revision")
    found, looked = base_model.find_base_config(
        root, name, revision.value if revision is not None else None
    )
    if found is not None:
        return _shape_from_file(found.path, found.how)
    preset = name.rstrip("/").rsplit("/", 1)[-1]
    try:
        shape = shape_from_preset(preset)
    except ValueError:
        return {}, [
            f"{source}: the LoRA adapter's base model {name}: {looked},"
            " and it is not a preset; pass --model with its config.json (or a preset)"
        ]
    where = Provenance("preset", f"{preset.lower()} (the adapter's base model {name})")
    return shape_facts(shape, where), []


def _shape_from_file(path: Path, how: str | None) -> tuple[dict[str, ConfigValue], list[str]]:
    """Shape facts from a config.json, with the file (and how it was found) as provenance."""
    try:
        shape = shape_from_hf_config(_load(path))
    except (ValueError, KeyError, TypeError) as exc:
        return {}, [f"{path}: model shape not read ({exc}); pass --model or the shape flags"]
    source = f"{path} ({how})" if how else str(path)
    return shape_facts(shape, Provenance("config", source)), []


def shape_facts(shape: ModelShape, where: Provenance) -> dict[str, ConfigValue]:
    """A shape as the run config's Megatron-named facts, each with `where`."""
    values = dataclasses.asdict(shape)
    found = {
        key: ConfigValue(values[key], where) for key in SHAPE_FACTS if values.get(key) is not None
    }
    if shape.num_query_groups is not None:
        found["group_query_attention"] = ConfigValue(True, where)
    return found


def adapter_config(root: Path) -> dict[str, ConfigValue]:
    """A PEFT LoRA adapter's facts (the base weights are frozen): the output_dir's
    adapter_config.json, else the newest checkpoint's (a run that died before saving)."""
    name = "adapter_config.json"
    copies = [root / name] + [c.parent / name for c in state_copies(root) if c.parent != root]
    copies = [copy for copy in copies if copy.is_file()]
    if not copies:
        return {}
    path = copies[0]
    data = _load(path)
    _read(path, "the PEFT adapter (LoRA rank, target modules, base model)")
    for copy in copies[1:]:
        note_read_along(copy, False, f"a checkpoint's copy of {path}, which was read")
    where = Provenance("config", str(path))
    found: dict[str, object] = {"lora": str(data.get("peft_type", "LORA")).upper() == "LORA"}
    for theirs, ours in (
        ("r", "lora_rank"),
        ("lora_alpha", "lora_alpha"),
        ("target_modules", "lora_target_modules"),
        ("base_model_name_or_path", "peft_base_model"),
        ("revision", "peft_base_revision"),
    ):
        value = data.get(theirs)
        if value is not None:
            found[ours] = sorted(value) if isinstance(value, list) else value
    return {k: ConfigValue(v, where) for k, v in found.items()}


def _read(path: Path, what: str) -> None:
    """Say that `path` was read as part of its output_dir, and for what."""
    note_read_along(path, True, f"as part of the output_dir {run_root(path)}: {what}")
