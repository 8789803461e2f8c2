"""The TensorBoard plugin: detection, and one event file into a Run.

A folder of event files is read file by file (the loader expands folders) and merged as one
run, each file a segment, as restarts write a new file.
"""

from __future__ import annotations

import json
import mmap
import struct
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

FILE_MARKER = "tfevents"
# Text summaries holding JSON objects of settings (HF Trainer's TensorBoardCallback).
JSON_TEXTS = ("args/text_summary", "model_config/text_summary")
TEXT_SUFFIX = "/text_summary"


class TensorBoardParser:
    """TensorBoard event files (the plugin API is in loganalyzer.plugin)."""

    name = "tensorboard"
    description = (
        "TensorBoard event files: every scalar (simple and TF2 tensor), text and hparams "
        "(Megatron-LM, DeepSpeed monitor, HF Trainer, torchtitan, Lightning)"
    )

    def detect(self, path: Path) -> float:
        if not path.is_file():
            return 0.0
        try:
            with path.open("rb") as stream:
                head = stream.read(64)
        except OSError:
            return 0.0
        if len(head) < 16 or not _first_record_is_event(head):
            return 0.0
        return 0.95 if FILE_MARKER in path.name else 0.8

    def parse(self, path: Path) -> Run:
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
            sources=[SourceInfo(source, self.name, tables.table.height)],
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


def _first_record_is_event(head: bytes) -> bool:
    """The first record's length CRC checks and its data starts like an Event."""
    import numpy as np

    from loganalyzer.parsers.crc import CRC32C_POLY, crc_many, masked_crc32c

    data = np.frombuffer(head, dtype=np.uint8)
    crc = masked_crc32c(
        crc_many(data, np.array([0], dtype=np.int64), np.array([8], dtype=np.int64), CRC32C_POLY)
    )
    return bool(struct.unpack_from("<I", head, 8)[0] == int(crc[0])) and head[12] == 0x09


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
