"""What makes the dataset survive a kill at any instant. Each run's folder carries its own
manifest entry and runs row (`entry.json`), written with its tables under the temporary
name and renamed into place with them: the rename commits the run. The manifest and the
runs table are the compaction of those records, saved as the index goes and at its end.
The next index first clears what a killed one left (temporary folders and files), then,
when the last one did not finish, reads the records back: every run whose folder was
renamed into place is kept, and every manifest entry whose folder is gone is dropped (its
folder is read again)."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.fleet.document import RUNS_SCHEMA, failed_row, runs_frame
from loganalyzer.fleet.layout import RECORD, RUNS_DIR, is_leftover
from loganalyzer.fleet.manifest import MANIFEST_SCHEMA, manifest_frame
from loganalyzer.fleet.storage import Location


@dataclass(frozen=True)
class Record:
    """A run's manifest entry and runs row, as written in its folder, and how many runs its
    folder's task found (a folder cut short by a kill has fewer records)."""

    entry: dict[str, Any]
    row: dict[str, Any]
    runs_in_folder: int


def record_bytes(entry: dict[str, Any], row: dict[str, Any], runs_in_folder: int) -> bytes:
    """The record as JSON (2 KB; Parquet's per-column metadata made it 30): the entry and row
    as polars writes them, read back with their schemas."""
    manifest = manifest_frame({entry["run_id"]: entry})
    record = {
        "runs_in_folder": runs_in_folder,
        "entry": json.loads(_ndjson(manifest)),
        "row": json.loads(_ndjson(runs_frame([row]))),
    }
    return json.dumps(record).encode()


def _ndjson(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ndjson(buffer)
    return buffer.getvalue()


def _one_row(value: Any, schema: Mapping[str, pl.DataType]) -> dict[str, Any]:
    frame = pl.read_ndjson(io.BytesIO(json.dumps(value).encode()), schema=dict(schema))
    return frame.row(0, named=True)


def read_record(folder: Location) -> Record | None:
    """A run folder's record; None for a folder without one (written by an older version)
    or whose record cannot be read."""
    where = folder.join(RECORD)
    try:
        with where.fs.open(where.path, "rb") as stream:
            record = json.loads(stream.read())
        entry = _one_row(record["entry"], MANIFEST_SCHEMA)
        row = _one_row(record["row"], RUNS_SCHEMA)
        return Record(entry, row, int(record["runs_in_folder"]))
    except (OSError, ValueError, pl.exceptions.PolarsError, KeyError, TypeError, IndexError):
        return None


def clear_leftovers(dataset: Location) -> int:
    """Remove what an interrupted index left: run folders being written or replaced, and
    top-level files being written (`*.tmp`). Returns how many there were."""
    removed = 0
    runs = dataset.join(RUNS_DIR)
    places = [(dataset, False), (runs, True)]
    for place, folders in places:
        if not place.fs.exists(place.path):
            continue
        for path in place.fs.ls(place.path, detail=False):
            name = str(path).rstrip("/").rsplit("/", 1)[-1]
            if (folders and is_leftover(name)) or (not folders and name.endswith(".tmp")):
                place.fs.rm(str(path), recursive=True)
                removed += 1
    return removed


@dataclass
class Recovery:
    """What the records changed: runs taken from their folders, entries dropped (their
    folder gone), run folders removed (no entry names them)."""

    recovered: int = 0
    dropped: int = 0
    removed: int = 0


def recover(
    dataset: Location,
    entries: dict[str, dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    thorough: bool,
) -> Recovery:
    """Make the manifest (`entries`), the runs table (`rows`) and the run folders in place
    agree, in place. Thorough (the last index did not finish): every folder's record is
    read, and one newer than its entry replaces it; else only folders no entry names. A run
    without its row takes it from its record (the runs table may not have been saved)."""
    result = Recovery()
    runs = dataset.join(RUNS_DIR)
    present = set()
    if runs.fs.exists(runs.path):
        present = {
            str(p).rstrip("/").rsplit("/", 1)[-1] for p in runs.fs.ls(runs.path, detail=False)
        }
    present = {name for name in present if not name.startswith(".")}
    named = {e["key"] for e in entries.values()}
    latest: dict[str, Any] = {}  # each folder's newest entry: an older record is stale
    for run_id, entry in entries.items():
        folder = entry.get("folder") or run_id
        latest[folder] = max(latest.get(folder, entry["analysed_at"]), entry["analysed_at"])
    newer: dict[str, list[Record]] = defaultdict(list)
    for key in sorted(present if thorough else present - named):
        record = read_record(runs.join(key))
        if record is None or record.entry["key"] != key:
            continue
        folder = record.entry.get("folder") or record.entry["run_id"]
        if folder in latest and latest[folder] >= record.entry["analysed_at"]:
            continue  # recorded already, or replaced since (a folder that now holds others)
        newer[folder].append(record)
    for folder, records in newer.items():
        began = min(r.entry["analysed_at"] for r in records)
        complete = len(records) >= max(r.runs_in_folder for r in records)
        for run_id, entry in list(entries.items()):
            if (entry.get("folder") or run_id) != folder:
                continue
            if entry["analysed_at"] < began or not complete:
                del entries[run_id]  # replaced by the folder's newer runs, or read again
                rows.pop(run_id, None)
                result.dropped += 1
        if complete:
            for record in records:
                entries[record.entry["run_id"]] = record.entry
                rows[record.entry["run_id"]] = record.row
                result.recovered += 1
    for run_id, entry in list(entries.items()):
        if entry["status"] != "error" and entry["key"] not in present:
            del entries[run_id]  # its folder is gone: it is read again
            rows.pop(run_id, None)
            result.dropped += 1
    for run_id, entry in list(entries.items()):
        if run_id in rows:
            continue
        if entry["status"] == "error":  # the only status without a folder
            rows[run_id] = failed_row(run_id, entry["key"], entry["error"] or "")
            continue
        record = read_record(runs.join(entry["key"]))  # the runs table was not saved
        if record is not None and record.entry["run_id"] == run_id:
            rows[run_id] = record.row
        else:
            del entries[run_id]
            result.dropped += 1
    for run_id in set(rows) - set(entries):
        del rows[run_id]
    for key in sorted(present - {e["key"] for e in entries.values()}):
        runs.fs.rm(runs.join(key).path, recursive=True)  # no entry names it
        result.removed += 1
    return result
