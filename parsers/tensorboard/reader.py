"""One TensorBoard event file into a Run: framed and decoded a chunk at a time into both
tables, the config from its text summaries and hparams. Imported by `TensorBoardParser.parse`
only, so that numpy and the protobuf decoding load when an event file is read."""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from loganalyzer.errors import InputError
from loganalyzer.model import ConfigValue, Provenance, Run, SourceInfo
from loganalyzer.parsers.crc import U8Array
from loganalyzer.parsers.framing import framing_warnings
from loganalyzer.parsers.run_config import config_from_values
from loganalyzer.parsers.scalar_table import (
    NeedsSampleBatch,
    TableBuilder,
    Tables,
    Unknown,
    release_freed_memory,
    sample_batch,
    sample_steps,
)
from loganalyzer.parsers.tensorboard.events import Decoded, Text, scalars
from loganalyzer.parsers.tensorboard.tfrecord import Framer, read_file

# Text summaries holding JSON objects of settings (HF Trainer's TensorBoardCallback).
JSON_TEXTS = ("args/text_summary", "model_config/text_summary")
TEXT_SUFFIX = "/text_summary"


def read_event_file(path: Path, format_name: str) -> Run:
    """The Run of one event file, its sources listed under `format_name`."""
    data, mapping = read_file(path)
    source = str(path)
    read = _read(data, mapping, source)
    # the file's pages count in the process's memory for as long as it is mapped
    del data
    if mapping is not None:
        mapping.close()
    tables, decoded = read.tables, read.decoded
    warnings = read.framing + tables.warnings + _decode_warnings(source, decoded)
    config, config_warnings = _config(source, decoded)
    warnings += config_warnings
    if tables.step_time_source:
        config["step_time_source"] = ConfigValue(
            tables.step_time_source, Provenance("tensorboard", source)
        )
    return Run(
        framework=tables.framework or "tensorboard",
        config=config,
        table=tables.table,
        metrics=tables.metrics,
        sources=[SourceInfo(source, format_name, tables.table.height)],
        warnings=warnings,
    )


@dataclass
class _Read:
    tables: Tables
    decoded: Decoded
    framing: list[str]  # warnings about damaged or cut-off records


def _read(data: U8Array, mapping: mmap.mmap | None, source: str) -> _Read:
    """The file read chunk by chunk into both tables. A file logged against samples
    (DeepSpeed's monitor) is read twice: the samples per iteration are a property of the
    whole file, found by a first pass."""
    try:
        return _stream(data, mapping, source, Unknown.BATCH)
    except NeedsSampleBatch:
        pass
    steps = [sample_steps(scalars(chunk, Decoded())) for chunk in Framer(data, mapping)]
    return _stream(data, mapping, source, sample_batch(pl.concat(steps)))


def _stream(
    data: U8Array, mapping: mmap.mmap | None, source: str, batch: int | Unknown | None
) -> _Read:
    framer = Framer(data, mapping)
    builder = TableBuilder(source, batch)
    decoded = Decoded()
    for chunk in framer:
        builder.add(scalars(chunk, decoded))
        release_freed_memory()
    if framer.records == 0:
        raise InputError(f"{source}: no intact TensorBoard record; is it an event file?")
    framing = framing_warnings(
        source, framer.damage, framer.cut_at, framer.records, "bad CRC or length"
    )
    return _Read(builder.finish(), decoded, framing)


def _decode_warnings(source: str, decoded: Decoded) -> list[str]:
    warnings = []
    if decoded.other:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(decoded.other.items()))
        warnings.append(f"{source}: summaries that are not scalars or text were not read: {kinds}")
    if decoded.undecodable:
        warnings.append(
            f"{source}: {decoded.undecodable} records with good CRCs are not TensorBoard events"
            " and were skipped"
        )
    return warnings


def _config(source: str, decoded: Decoded) -> tuple[dict[str, ConfigValue], list[str]]:
    """Config from the text summaries (Megatron: one per argument; HF Trainer: JSON objects)
    and torch's hparams, each value traced to its file, tag and step."""
    config: dict[str, ConfigValue] = {}
    warnings: list[str] = []
    plain: dict[str, tuple[str, Text]] = {}
    for text in decoded.texts:
        if text.tag in JSON_TEXTS:
            try:
                values = json.loads(text.text)
            except ValueError:
                warnings.append(f"{source}: text summary {text.tag!r} is not JSON; not read")
                continue
            if isinstance(values, dict):
                found, more = config_from_values(values, _provenance(source, text))
                warnings += more
                for key, value in found.items():
                    config.setdefault(key, value)
        elif text.tag.endswith(TEXT_SUFFIX):
            plain.setdefault(text.tag.removesuffix(TEXT_SUFFIX), (text.text, text))
    if plain:
        args = {key: value for key, (value, _) in plain.items()}
        found, more = config_from_values(
            args, lambda key: _provenance(source, plain[key][1]) if key in plain else _any(source)
        )
        warnings += more
        for key, value in found.items():
            config.setdefault(key, value)
    for key, (value, record) in decoded.hparams.items():
        config.setdefault(
            key, ConfigValue(value, Provenance("tensorboard", f"{source} hparams record {record}"))
        )
    return config, warnings


def _provenance(source: str, text: Text) -> Provenance:
    return Provenance("tensorboard", f"{source} tag {text.tag!r} step {text.step}")


def _any(source: str) -> Provenance:
    return Provenance("tensorboard", f"{source} text summaries")
