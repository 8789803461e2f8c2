"""The manifest: which inputs each run was analysed from, by which tool and schema, and how
it went; and the decision, per run, of whether a new `index` must analyse it again."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.fleet.discovery import RunSpec, SourceFile
from loganalyzer.fleet.layout import FILES, INDEX_SCHEMA, MANIFEST
from loganalyzer.fleet.storage import Location, locate, write_bytes_atomic
from loganalyzer.model import UTC_MICROS
from loganalyzer.summary import SCHEMA as SUMMARY_SCHEMA

SOURCE = pl.Struct(
    {
        "url": pl.String(),
        "size": pl.Int64(),
        "mtime": pl.Float64(),
        "format": pl.String(),
        "fingerprint": pl.String(),
    }
)
# Every file an index saw under its roots, and the parser that recognises it ("" for none):
# a second index reads the head only of files that are new or changed.
FILES_SCHEMA: Mapping[str, pl.DataType] = {
    "url": pl.String(),
    "size": pl.Int64(),
    "mtime": pl.Float64(),
    "format": pl.String(),
}
MANIFEST_SCHEMA: Mapping[str, pl.DataType] = {
    "run_id": pl.String(),
    "key": pl.String(),
    "status": pl.String(),
    "error": pl.String(),
    "sources": pl.List(SOURCE),
    "bytes": pl.Int64(),
    "index_schema": pl.String(),
    "summary_schema": pl.String(),
    "tool_version": pl.String(),
    "settings": pl.String(),
    "analysed_at": UTC_MICROS,
    "seconds": pl.Float64(),
}
FINGERPRINT_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class Decision:
    """Whether a run is analysed (and why), or kept as indexed (with its entry refreshed
    when only modification times changed)."""

    spec: RunSpec
    reason: str | None
    entry: dict[str, Any] | None


def fingerprint(url: str) -> str:
    """The content fingerprint of a file: BLAKE2b-128 of its bytes, as stored."""
    where = locate(url)
    digest = hashlib.blake2b(digest_size=16)
    with where.fs.open(where.path, "rb") as stream:
        while block := stream.read(FINGERPRINT_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def read_table(dataset: Location, name: str) -> pl.DataFrame | None:
    """A top-level table of the dataset, None when there is none yet."""
    where = dataset.join(name)
    if not where.fs.exists(where.path):
        return None
    with where.fs.open(where.path, "rb") as stream:
        return pl.read_parquet(stream.read())


def write_table(dataset: Location, name: str, frame: pl.DataFrame) -> None:
    """Write a top-level table atomically (temporary name, then rename)."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_bytes_atomic(dataset.join(name), buffer.getvalue())


def read_manifest(dataset: Location) -> dict[str, dict[str, Any]]:
    """The entries of the dataset's manifest by run id (empty for a new dataset)."""
    frame = read_table(dataset, MANIFEST)
    return {} if frame is None else {row["run_id"]: row for row in frame.to_dicts()}


def manifest_frame(entries: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    rows = [{name: entry.get(name) for name in MANIFEST_SCHEMA} for entry in entries.values()]
    frame = pl.DataFrame(rows, schema=dict(MANIFEST_SCHEMA), orient="row")
    return frame.sort("run_id")


def read_files(dataset: Location) -> dict[str, SourceFile]:
    """Every file a previous index saw, by URL."""
    frame = read_table(dataset, FILES)
    rows = [] if frame is None else frame.to_dicts()
    return {r["url"]: SourceFile(r["url"], r["size"], r["mtime"], r["format"]) for r in rows}


def files_frame(files: Mapping[str, SourceFile]) -> pl.DataFrame:
    rows = [(f.url, f.size, f.mtime, f.format) for f in files.values()]
    return pl.DataFrame(rows, schema=dict(FILES_SCHEMA), orient="row").sort("url")


def decide(
    spec: RunSpec, entry: Mapping[str, Any] | None, settings: str, rebuild: bool
) -> Decision:
    """Analyse a run that is new, asked for (`--rebuild`), analysed by another schema or with
    other options, or whose files changed. A file whose size and modification time are
    unchanged is taken as unchanged; one whose time alone changed is fingerprinted, and an
    unchanged fingerprint keeps the run (its entry takes the new times)."""
    if entry is None:
        return Decision(spec, "new", None)
    if rebuild:
        return Decision(spec, "rebuild", None)
    if (entry["index_schema"], entry["summary_schema"]) != (INDEX_SCHEMA, SUMMARY_SCHEMA):
        return Decision(spec, "older schema", None)
    if entry["settings"] != settings:
        return Decision(spec, "other options", None)
    before = {s["url"]: s for s in entry["sources"]}
    if set(before) != {f.url for f in spec.files}:
        return Decision(spec, "files added or removed", None)
    sources = []
    for file in spec.files:
        old = before[file.url]
        if old["size"] != file.size:
            return Decision(spec, "changed", None)
        if old["mtime"] != file.mtime and fingerprint(file.url) != old["fingerprint"]:
            return Decision(spec, "changed", None)
        sources.append({**old, "mtime": file.mtime})
    return Decision(spec, None, {**entry, "sources": sources})
