"""One TensorBoard event file into a Run: framed and decoded a chunk at a time into both
tables, the config from its text summaries and hparams. Imported by `TensorBoardParser.parse`
only, so that numpy and the protobuf decoding load when an event file is read."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from loganalyzer import jsontext
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
from loganalyzer.parsers.tensorboard.writer_folders import Child, children, owner
from loganalyzer.sources import note_read_along

# Text summaries holding JSON objects of settings (HF Trainer's TensorBoardCallback).
JSON_TEXTS = ("args/text_summary", "model_config/text_summary")
TEXT_SUFFIX = "/text_summary"


def read_event_file(path: Path, format_name: str) -> Run:
    """The Run of one event file and of the sub-folders its writer wrote beside it
    (`writer_folders`), its sources listed under `format_name`. An event file that is such
    a sub-folder's is refused (InputError): it is read with its writer's own file."""
    owned = owner(path)
    if owned is not None:
        reader, child = owned
        raise InputError(
            f"{path}: the {child.what} of the SummaryWriter of {reader.parent}, read as"
            f" part of {reader}; name {reader.parent} to read them together"
        )
    kids = children(path)
    for kid in kids:
        note_read_along(kid.path, True, f"as part of {path} ({kid.what})")
    data, mapping = read_file(path)
    source = str(path)
    read = _read(data, mapping, source, kids)
    # the file's pages count in the process's memory for as long as it is mapped
    del data
    if mapping is not None:
        mapping.close()
    tables, decoded = read.tables, read.decoded
    warnings = read.framing + tables.warnings
    config: dict[str, ConfigValue] = {}
    for where, found in [(source, decoded), *read.kids]:
        warnings += _decode_warnings(where, found)
        more, config_warnings = _config(where, found)
        warnings += config_warnings
        for key, value in more.items():
            config.setdefault(key, value)
    if tables.step_time_source:
        config["step_time_source"] = ConfigValue(
            tables.step_time_source, Provenance("tensorboard", source)
        )
    return Run(
        framework=tables.framework or "tensorboard",
        config=config,
        table=tables.table,
        metrics=tables.metrics,
        sources=[
            SourceInfo(source, format_name, tables.table.height, unit="record", tags=tables.tags)
        ],
        warnings=warnings,
    )


@dataclass
class _Read:
    tables: Tables
    decoded: Decoded
    framing: list[str]  # warnings about damaged or cut-off records
    kids: list[tuple[str, Decoded]]  # what each writer's sub-folder held besides scalars


def _read(data: U8Array, mapping: mmap.mmap | None, source: str, kids: list[Child]) -> _Read:
    """The file, then its writer's sub-folders, read chunk by chunk into both tables. A
    file logged against samples (DeepSpeed's monitor) is read twice: the samples per
    iteration are a property of the whole file, found by a first pass."""
    try:
        return _stream(data, mapping, source, Unknown.BATCH, kids)
    except NeedsSampleBatch:
        pass
    steps = [sample_steps(scalars(chunk, Decoded())) for chunk in Framer(data, mapping)]
    return _stream(data, mapping, source, sample_batch(pl.concat(steps)), kids)


def _stream(
    data: U8Array,
    mapping: mmap.mmap | None,
    source: str,
    batch: int | Unknown | None,
    kids: list[Child],
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
        source,
        framer.damage,
        framer.cut_at,
        framer.records,
        "bad CRC or length",
        framer.unsearched_from,
    )
    offset = framer.records
    kid_reads = []
    for kid in kids:
        records, kid_framing, kid_decoded = _stream_kid(kid, builder, offset)
        offset += records
        framing += kid_framing
        kid_reads.append((str(kid.path), kid_decoded))
    return _Read(builder.finish(), decoded, framing, kid_reads)


def _stream_kid(kid: Child, builder: TableBuilder, offset: int) -> tuple[int, list[str], Decoded]:
    """A writer's sub-folder file into the builder, its tag renamed to its series and its
    records numbered on from `offset`: how many records it held, the warnings about its
    framing, and what it held besides scalars."""
    data, mapping = read_file(kid.path)
    read = _kid_chunks(kid, builder, offset, data, mapping)
    del data  # then nothing holds the mapped pages
    if mapping is not None:
        mapping.close()
    return read


def _kid_chunks(
    kid: Child, builder: TableBuilder, offset: int, data: U8Array, mapping: mmap.mmap | None
) -> tuple[int, list[str], Decoded]:
    source = str(kid.path)
    framer = Framer(data, mapping)
    decoded = Decoded()
    for chunk in framer:
        frame = scalars(chunk, decoded)
        if kid.renamed:
            name = pl.col("name").cast(pl.String).replace(kid.renamed)
            frame = frame.with_columns(name.cast(pl.Categorical))
        builder.add(frame, source=source, line_offset=offset)
    framing = framing_warnings(
        source,
        framer.damage,
        framer.cut_at,
        framer.records,
        "bad CRC or length",
        framer.unsearched_from,
    )
    return framer.records, framing, decoded


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
                values = jsontext.loads(text.text)
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
    if decoded.hparams:
        hparams = decoded.hparams
        found, more = config_from_values(
            {key: value for key, (value, _) in hparams.items()},
            lambda key: Provenance(
                "tensorboard",
                f"{source} hparams record {hparams[key][1]}" if key in hparams else source,
            ),
        )
        warnings += more
        for key, value in found.items():
            config.setdefault(key, value)
    return config, warnings


def _provenance(source: str, text: Text) -> Provenance:
    return Provenance("tensorboard", f"{source} tag {text.tag!r} step {text.step}")


def _any(source: str) -> Provenance:
    return Provenance("tensorboard", f"{source} text summaries")
