"""A W&B run into a Run: a run folder's `.wandb` transaction log, or a run pulled by ID.
Imported by `WandbParser.parse` only, so that numpy, the protobuf classes and the API client
load when a W&B run is read."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from loganalyzer import jsontext
from loganalyzer.errors import InputError
from loganalyzer.model import ConfigValue, EndingFact, Endings, Provenance, Run, SourceInfo
from loganalyzer.parsers.framing import framing_warnings
from loganalyzer.parsers.run_config import config_from_values
from loganalyzer.parsers.scalar_table import build_tables
from loganalyzer.parsers.tensorboard.tfrecord import read_file
from loganalyzer.parsers.wandb.history import history_frame, system_metrics
from loganalyzer.parsers.wandb.records import RunRecords, decode_records, records_from_api
from loganalyzer.parsers.wandb.remote import parse_ref, pull
from loganalyzer.parsers.wandb.transaction_log import read_log


def read_run_folder(path: Path, format_name: str) -> Run:
    """The Run of a run folder's `run-<id>.wandb` log (no network)."""
    data, _mapping = read_file(path)
    try:
        log = read_log(data)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from exc
    source = str(path)
    found = decode_records(log.records)
    warnings = framing_warnings(
        source, log.damage, log.cut_at, len(log.records), "bad CRC or chunk header"
    )
    return run_from_records(found, source, format_name, warnings, path)


def read_pulled_run(source: str, format_name: str) -> Run:
    """The Run of a run named by ID or URL, pulled through the W&B API or read from the
    cache."""
    ref = parse_ref(source)
    if ref is None:
        raise InputError(
            f"{source}: not a W&B run; write wandb:ENTITY/PROJECT/RUN_ID or the run's URL"
        )
    pulled = pull(source, ref)
    found = records_from_api(
        pulled.config, pulled.summary, pulled.metadata, pulled.history, pulled.state
    )
    notes = [f"{source}: read from the local cache (--refresh pulls it again)"] * (
        pulled.from_cache
    )
    run = run_from_records(found, source, format_name, notes, None)
    if not found.finished:
        run.warnings.append(f"{source}: the run's state is {pulled.state!r}")
    return run


def run_from_records(
    found: RunRecords, source: str, format_name: str, warnings: list[str], folder_of: Path | None
) -> Run:
    """A Run from decoded records (shared by run folders and runs pulled by ID)."""
    history, axis, history_warnings = history_frame(found.history, source)
    tables = build_tables(history, source)
    warnings = warnings + history_warnings + tables.warnings
    if found.not_scalar:
        names = ", ".join(sorted(found.not_scalar)[:5])
        warnings.append(
            f"{source}: {sum(found.not_scalar.values())} history values are not numbers"
            f" (media, tables, histograms: {names}); not read"
        )
    if found.undecodable:
        warnings.append(f"{source}: {found.undecodable} records could not be decoded; skipped")
    if not found.finished and folder_of is not None:
        warnings.append(
            f"{source}: no exit record: the run was killed, crashed or is still running"
        )
    config, config_warnings = config_from_values(
        found.config, lambda key: Provenance("wandb", f"{source} config {key!r}")
    )
    warnings += config_warnings
    environment = dict(found.environment)
    if folder_of is not None:
        environment = {**_metadata_file(folder_of), **environment}
    for key, value in environment.items():
        config[key] = ConfigValue(value, Provenance("wandb", "metadata", None))
    for key, value in found.summary.items():
        config.setdefault(f"summary/{key}", ConfigValue(value, Provenance("wandb", source)))
    for key, value in found.run.items():
        if value:
            config.setdefault(f"wandb_{key}", ConfigValue(value, Provenance("wandb", source)))
    if tables.step_time_source:
        config["step_time_source"] = ConfigValue(
            tables.step_time_source, Provenance("wandb", source)
        )
    config["iteration_source"] = ConfigValue(axis, Provenance("wandb", source))
    metrics = pl.concat([tables.metrics, system_metrics(found.system, history, source)])
    return Run(
        endings=_endings(found, source),
        framework=tables.framework or "wandb",
        config=config,
        table=tables.table,
        metrics=metrics,
        sources=[
            SourceInfo(source, format_name, tables.table.height, unit="record", tags=tables.tags)
        ],
        warnings=warnings,
    )


def _endings(found: RunRecords, source: str) -> Endings:
    """How the run ended as W&B recorded it: the exit record's code (0: the script's own
    end), or the state the API gives (finished, crashed, failed, killed)."""
    if found.end_record is None:
        return Endings()
    line = found.end_record
    if found.exit_code is not None:
        code = found.exit_code
        text = f"W&B exit record: exit code {code}"
        kind, detail = ("done", {"said": 3}) if code == 0 else ("exit", {"code": code})
    elif found.state in WANDB_STATES:
        kind, detail = WANDB_STATES[found.state]
        text = f"W&B run state: {found.state}"
    else:
        return Endings()
    fact = EndingFact(source, line, kind, text, detail=dict(detail))
    return Endings((fact,), {kind: 1})


# The API's final run states as ending facts: `killed` is a stop from outside (the UI, a
# SIGTERM); `crashed` (the heartbeat lost) and `failed` (a non-zero exit) are failures.
WANDB_STATES: dict[str, tuple[str, dict[str, str | int]]] = {
    "finished": ("done", {"said": 3}),
    "crashed": ("exit", {"state": "crashed"}),
    "failed": ("exit", {"state": "failed", "code": 1}),
    "killed": ("signal", {"signal": "SIGTERM"}),
}


def _metadata_file(path: Path) -> dict[str, object]:
    """GPU facts from `files/wandb-metadata.json` beside the log (written by wandb before
    0.2x, and by synced runs)."""
    meta = path.parent / "files" / "wandb-metadata.json"
    try:
        values = jsontext.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, object] = {}
    if isinstance(values, dict):
        if values.get("gpu"):
            found["gpu_name"] = values["gpu"]
        if values.get("gpu_count"):
            found["num_gpus"] = values["gpu_count"]
    return found
