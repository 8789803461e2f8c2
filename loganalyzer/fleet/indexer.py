"""`index`: find the folders of logs (and W&B runs listed), decide which changed, read those
with an engine (each folder parsed once, its runs told apart and analysed in the same task),
and keep the manifest and the runs table up to date as folders finish (checkpointed, so that
an interrupted index keeps what it finished)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loganalyzer import __version__, jsontext
from loganalyzer.errors import StorageError, UsageProblem
from loganalyzer.fleet.discovery import find_runs
from loganalyzer.fleet.document import runs_frame
from loganalyzer.fleet.engines import Engine
from loganalyzer.fleet.layout import (
    DATASET_JSON,
    FILES,
    INDEX_SCHEMA,
    MANIFEST,
    RUNS,
    RUNS_DIR,
    is_leftover,
)
from loganalyzer.fleet.manifest import (
    decide,
    entries_by_folder,
    files_frame,
    folder_of,
    manifest_frame,
    read_files,
    read_manifest,
    read_table,
    write_table,
)
from loganalyzer.fleet.storage import Location, locate, write_bytes_atomic
from loganalyzer.fleet.worker import Outcome, Settings, Task, analyse_folder

CHECKPOINT_RUNS = 200
CHECKPOINT_S = 60.0


@dataclass
class IndexResult:
    """What one `index` did."""

    found: int = 0
    analysed: int = 0
    skipped: int = 0
    reports: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    folders_passed_over: int = 0
    bytes_analysed: int = 0
    seconds: float = 0.0


def build_index(
    roots: Sequence[str],
    dataset_url: str,
    settings: Settings,
    engine: Engine,
    *,
    rebuild: bool = False,
    reports: bool = False,
    planned: Callable[[int, int], None] | None = None,
    finished: Callable[[list[Outcome]], None] | None = None,
) -> IndexResult:
    """Index the runs under `roots` into the dataset at `dataset_url`, with `engine`'s
    workers detecting new files and analysing runs (writing each run's HTML report too with
    `reports`). `planned(folders, bytes)` is told what will be read, `finished` each folder's
    outcomes as they arrive."""
    with engine:
        return _index(roots, dataset_url, settings, engine, rebuild, reports, planned, finished)


def _index(
    roots: Sequence[str],
    dataset_url: str,
    settings: Settings,
    engine: Engine,
    rebuild: bool,
    reports: bool,
    planned: Callable[[int, int], None] | None,
    finished: Callable[[list[Outcome]], None] | None,
) -> IndexResult:
    began = time.perf_counter()
    dataset = locate(dataset_url)
    _check_dataset(dataset)
    entries = read_manifest(dataset)
    previous_rows = read_table(dataset, RUNS)
    rows: dict[str, dict[str, Any]] = (
        {} if previous_rows is None else {r["run_id"]: r for r in previous_rows.to_dicts()}
    )
    files = read_files(dataset)
    discovery = find_runs(roots, files, engine, exclude=dataset_url)
    _refuse_duplicates([spec.folder for spec in discovery.folders])
    _prepare(dataset)
    files.update((f.url, f) for f in discovery.files)
    result = IndexResult(folders_passed_over=discovery.folders_passed_over)
    settings_print = settings.fingerprint()
    by_folder = entries_by_folder(entries)
    tasks: list[Task] = []
    for spec in discovery.folders:
        decision = decide(spec, by_folder.get(spec.folder, []), settings_print, rebuild, reports)
        if decision.reason is None:
            result.skipped += len(decision.entries)
            entries.update((e["run_id"], e) for e in decision.entries)
            continue
        result.reasons[decision.reason] += 1
        tasks.append(Task(spec, dataset_url, settings, reports))
    result.bytes_analysed = sum(t.spec.bytes for t in tasks)
    if planned is not None:
        planned(len(tasks), result.bytes_analysed)
    since, last_write = 0, time.monotonic()
    stopped: StorageError | None = None
    try:
        for outcomes in engine.map(analyse_folder, tasks):
            _replace_folder(dataset, entries, rows, outcomes)
            for outcome in outcomes:
                run_id = outcome.entry["run_id"]
                result.analysed += 1
                result.reports += bool(outcome.entry["report"])
                if outcome.entry["status"] != "ok":
                    result.failed.append((run_id, outcome.entry["error"]))
            if finished is not None:
                finished(outcomes)
            since += 1
            if since >= CHECKPOINT_RUNS or time.monotonic() - last_write > CHECKPOINT_S:
                _save(dataset, entries, rows)
                since, last_write = 0, time.monotonic()
    except StorageError as exc:  # every folder after would fail alike
        stopped = exc
    finally:
        try:
            _save(dataset, entries, rows)
            write_table(dataset, FILES, files_frame(files))
        except OSError:
            if stopped is None:  # else the disk that is full may be the dataset's too
                raise
    if stopped is not None:
        raise StorageError(
            f"{stopped}; the index stopped after {result.analysed} runs, which are kept: the"
            " next `index` goes on from there"
        ) from stopped
    result.found = result.skipped + result.analysed
    result.seconds = time.perf_counter() - began
    return result


def _check_dataset(dataset: Location) -> None:
    """Refuse to write into a folder that holds something else than a dataset."""
    marker = dataset.join(DATASET_JSON)
    if dataset.fs.exists(marker.path):
        with dataset.fs.open(marker.path, "r") as stream:
            try:
                marked = jsontext.loads(stream.read())
            except ValueError:  # not JSON, or nested past reading: not ours
                marked = None
        found = marked.get("schema") if isinstance(marked, dict) else None
        if not str(found).startswith("loganalyzer.index/"):
            raise UsageProblem(f"{dataset.url()}: not a loganalyzer dataset ({DATASET_JSON})")
    elif dataset.fs.exists(dataset.path) and dataset.fs.ls(dataset.path):
        raise UsageProblem(
            f"{dataset.url()}: exists and is not a loganalyzer dataset; name a new folder"
        )


def _prepare(dataset: Location) -> None:
    """Create the dataset, and clear what an interrupted index left."""
    marker = dataset.join(DATASET_JSON)
    dataset.fs.makedirs(dataset.join(RUNS_DIR).path, exist_ok=True)
    marker_text = json.dumps({"schema": INDEX_SCHEMA, "tool_version": __version__})
    write_bytes_atomic(marker, marker_text.encode())
    runs = dataset.join(RUNS_DIR)
    for path in runs.fs.ls(runs.path, detail=False):
        name = str(path).rstrip("/").rsplit("/", 1)[-1]
        if is_leftover(name):
            runs.fs.rm(path, recursive=True)


def _replace_folder(
    dataset: Location,
    entries: dict[str, dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    outcomes: list[Outcome],
) -> None:
    """Put a folder's new outcomes in place of what it held before: runs it no longer holds
    (a folder that now tells two runs apart, or one again) leave the manifest, the runs table
    and the dataset."""
    folder = outcomes[0].entry["folder"]
    now = {outcome.entry["run_id"] for outcome in outcomes}
    for run_id, entry in list(entries.items()):
        if folder_of(entry) == folder and run_id not in now:
            del entries[run_id]
            rows.pop(run_id, None)
            _remove(dataset.join(RUNS_DIR, entry["key"]))
    for outcome in outcomes:
        before = entries.get(outcome.entry["run_id"])
        if before is not None and before["key"] != outcome.entry["key"]:  # an older key's
            _remove(dataset.join(RUNS_DIR, before["key"]))
        entries[outcome.entry["run_id"]] = outcome.entry
        rows[outcome.entry["run_id"]] = outcome.row


def _remove(folder: Location) -> None:
    if folder.fs.exists(folder.path):
        folder.fs.rm(folder.path, recursive=True)


def _refuse_duplicates(run_ids: list[str]) -> None:
    twice = sorted(run_id for run_id, n in Counter(run_ids).items() if n > 1)
    if twice:
        raise UsageProblem(
            f"two roots give runs the same id ({', '.join(twice[:3])}): "
            "roots must have different folder names"
        )


def _save(
    dataset: Location, entries: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]]
) -> None:
    write_table(dataset, MANIFEST, manifest_frame(entries))
    write_table(dataset, RUNS, runs_frame(list(rows.values())))
