"""The manifest: which inputs each run was analysed from, by which tool and schema, and how
it went; and the decision, per run, of whether a new `index` must analyse it again."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.fleet.discovery import FolderSpec, SourceFile, shown
from loganalyzer.fleet.layout import FILES, INDEX_SCHEMA, MANIFEST, run_key, unit_name
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
    "folder": pl.String(),
    "status": pl.String(),
    "error": pl.String(),
    "sources": pl.List(SOURCE),
    "bytes": pl.Int64(),
    "report": pl.Boolean(),
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
    """Whether a folder is read again (and why), or its runs kept as indexed (with their
    entries refreshed when only modification times changed)."""

    spec: FolderSpec
    reason: str | None
    entries: list[dict[str, Any]]


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
    rows = [(f.shown, f.size, f.mtime, f.format) for f in files.values()]
    return pl.DataFrame(rows, schema=dict(FILES_SCHEMA), orient="row").sort("url")


def entries_by_folder(
    entries: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Mapping[str, Any]]]:
    """The manifest's entries grouped by the folder (or W&B run) they were read from."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries.values():
        grouped.setdefault(folder_of(entry), []).append(entry)
    return grouped


def folder_of(entry: Mapping[str, Any]) -> str:
    """The folder (or W&B run) an entry was read from, named as `find_runs` names it now.
    An entry of an older layout (its key not the id's `run_key`) holds the name as written
    then, `%` and `#` unescaped and a reference's password in clear: named as now, the
    folder's runs read again replace it instead of joining it under a second id."""
    folder = str(entry.get("folder") or entry["run_id"])
    if entry["key"] == run_key(entry["run_id"]):
        return folder
    # an older layout's W&B run had its reference as its only source
    referenced = any(source["url"] == folder for source in entry.get("sources") or ())
    return unit_name(shown(folder) if referenced else folder)


def decide(
    spec: FolderSpec,
    entries: list[Mapping[str, Any]],
    settings: str,
    rebuild: bool,
    reports: bool = False,
) -> Decision:
    """Read a folder again when it is new, asked for (`--rebuild`), read by another schema,
    kept under a key of an older layout (one the clean-up of leftovers might take) or read
    with other options, without the reports now asked for, or when its files changed (for a
    W&B run: when it failed before). A file whose size and modification time are unchanged
    is taken as unchanged; one whose time alone changed is fingerprinted, and an unchanged
    fingerprint keeps the runs (their entries take the new times)."""
    if not entries:
        return Decision(spec, "new", [])
    if rebuild:
        return Decision(spec, "rebuild", [])
    if any(
        (e["index_schema"], e["summary_schema"]) != (INDEX_SCHEMA, SUMMARY_SCHEMA) for e in entries
    ):
        return Decision(spec, "older schema", [])
    if any(e["key"] != run_key(e["run_id"]) for e in entries):  # named by an older layout
        return Decision(spec, "older key", [])
    if any(e["settings"] != settings for e in entries):
        return Decision(spec, "other options", [])
    if reports and any(e["status"] != "error" and not e.get("report") for e in entries):
        return Decision(spec, "report asked for", [])
    if spec.uri is not None:
        failed = any(e["status"] == "error" for e in entries)
        return Decision(spec, "failed before" if failed else None, [dict(e) for e in entries])
    before = {s["url"]: s for e in entries for s in e["sources"]}
    if set(before) != {f.shown for f in spec.files}:
        return Decision(spec, "files added or removed", [])
    now: dict[str, float | None] = {}
    for file in spec.files:
        old = before[file.shown]
        if old["size"] != file.size:
            return Decision(spec, "changed", [])
        if old["mtime"] != file.mtime and fingerprint(file.url) != old["fingerprint"]:
            return Decision(spec, "changed", [])
        now[file.shown] = file.mtime
    kept = [
        {**e, "sources": [{**s, "mtime": now[s["url"]]} for s in e["sources"]]} for e in entries
    ]
    return Decision(spec, None, kept)
