"""`index`: find the folders of logs (and W&B runs listed), decide which changed, read those
with an engine (each folder parsed once, its runs told apart and analysed in the same task),
and keep the manifest and the runs table up to date as folders finish. Each run's folder
carries its own record, so that an index killed at any instant keeps every run it renamed
into place (`recovery`); the manifest is their compaction, saved as runs finish and at the
end. One index at a time writes a dataset (`lock`)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from loganalyzer import __version__, jsontext
from loganalyzer.errors import StorageError, UsageProblem
from loganalyzer.fleet.discovery import SourceFile, find_runs
from loganalyzer.fleet.document import runs_frame
from loganalyzer.fleet.engines import Engine
from loganalyzer.fleet.layout import (
    DATASET_JSON,
    FILES,
    INDEX_SCHEMA,
    LOCK,
    MANIFEST,
    PENDING,
    RUNS,
    RUNS_DIR,
)
from loganalyzer.fleet.lock import hold_lock
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
from loganalyzer.fleet.recovery import clear_leftovers, recover
from loganalyzer.fleet.shield import shielded
from loganalyzer.fleet.storage import Location, locate, write_bytes_atomic
from loganalyzer.fleet.worker import Outcome, Settings, Task, analyse_folder, lost

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
    wait: bool = False,
    planned: Callable[[int, int], None] | None = None,
    finished: Callable[[list[Outcome]], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> IndexResult:
    """Index the runs under `roots` into the dataset at `dataset_url`, with `engine`'s
    workers detecting new files and analysing runs (writing each run's HTML report too with
    `reports`), holding the dataset's lock (waiting for another index that holds it with
    `wait`, else refusing). `planned(folders, bytes)` is told what will be read, `finished`
    each folder's outcomes as they arrive, `say` the warnings (a lock taken over, runs
    recovered)."""
    tell = say or (lambda _: None)
    dataset = locate(dataset_url)
    _check_dataset(dataset)
    try:
        dataset.fs.makedirs(dataset.path, exist_ok=True)
    except OSError as exc:
        raise _unwritable(dataset, "", exc) from exc
    with hold_lock(dataset, wait, tell) as unfinished, engine:
        return _index(
            roots,
            dataset_url,
            settings,
            engine,
            rebuild,
            reports,
            unfinished,
            planned,
            finished,
            tell,
        )


def _index(
    roots: Sequence[str],
    dataset_url: str,
    settings: Settings,
    engine: Engine,
    rebuild: bool,
    reports: bool,
    unfinished: bool,
    planned: Callable[[int, int], None] | None,
    finished: Callable[[list[Outcome]], None] | None,
    say: Callable[[str], None],
) -> IndexResult:
    began = time.perf_counter()
    dataset = locate(dataset_url)
    clear_leftovers(dataset)  # first: a full disk gets its space back before any write
    unfinished = unfinished or dataset.fs.exists(dataset.join(PENDING).path)
    entries, rows = _read_tables(dataset)
    recovery = recover(dataset, entries, rows, thorough=unfinished)
    if recovery.recovered or recovery.dropped:
        say(
            f"{dataset_url}: {recovery.recovered} runs recovered from their folders (an index"
            f" stopped before it saved them), {recovery.dropped} whose folder is gone to be"
            " read again"
        )
    files = _read_files(dataset)
    discovery = find_runs(roots, files, engine, exclude=dataset_url)
    _refuse_duplicates([spec.folder for spec in discovery.folders])
    _prepare(dataset)
    files.update((f.shown, f) for f in discovery.files)
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
    completed = False
    try:
        for outcomes in engine.map(analyse_folder, tasks, failed=lost):
            try:
                _replace_folder(dataset, entries, rows, outcomes)
            except OSError as exc:
                raise _unwritable(dataset, RUNS_DIR, exc) from exc
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
                with shielded():
                    _save(dataset, entries, rows)
                since, last_write = 0, time.monotonic()
        completed = True
    except StorageError as exc:  # every folder after would fail alike
        stopped = exc
    finally:
        failure = _compact(dataset, entries, rows, files, completed)
        stopped = stopped or failure
    if stopped is not None:
        raise StorageError(
            f"{stopped}; the index stopped after {result.analysed} runs, which are kept: the"
            " next `index` goes on from there"
        ) from stopped
    result.found = result.skipped + result.analysed
    result.seconds = time.perf_counter() - began
    return result


def _compact(
    dataset: Location,
    entries: dict[str, dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    files: dict[str, SourceFile],
    completed: bool,
) -> StorageError | None:
    """Save the manifest, runs and files tables: the compaction of the runs' records. An
    index stopped early (Ctrl-C, SIGTERM, a full disk) first takes the runs its workers
    renamed into place as they were stopped, and stays marked as not finished: a worker may
    have replaced a run's folder and not told it, which the next index reads back. Returns
    the error of a dataset that cannot be written (the runs are in their folders then, and
    the next index recovers them)."""
    try:
        with shielded():
            if not completed:
                recover(dataset, entries, rows, thorough=False)
            _save(dataset, entries, rows)
            write_table(dataset, FILES, files_frame(files))
            if completed:
                dataset.fs.rm(dataset.join(PENDING).path)
    except StorageError as exc:
        return exc
    except OSError as exc:
        return _unwritable(dataset, "", exc)
    return None


def _unwritable(dataset: Location, name: str, exc: OSError) -> StorageError:
    """A write into the dataset that failed (full, not writable), as one line naming where."""
    where = dataset.join(name) if name else dataset
    return StorageError(
        f"{where.url()}: cannot write there ({exc.strerror or exc}): free space there, or"
        " index into another --out"
    )


def _read_tables(
    dataset: Location,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The manifest's entries and the runs table's rows by run id; empty when missing or
    unreadable (a store that does not rename atomically): the run folders' records and the
    next analyses make them again."""
    try:
        entries = read_manifest(dataset)
        previous_rows = read_table(dataset, RUNS)
    except pl.exceptions.PolarsError:
        return {}, {}
    rows = {} if previous_rows is None else {r["run_id"]: r for r in previous_rows.to_dicts()}
    return entries, rows


def _read_files(dataset: Location) -> dict[str, SourceFile]:
    try:
        return read_files(dataset)
    except pl.exceptions.PolarsError:
        return {}


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
    elif dataset.fs.exists(dataset.path) and _other_than_lock(dataset):
        raise UsageProblem(
            f"{dataset.url()}: exists and is not a loganalyzer dataset; name a new folder"
        )


def _prepare(dataset: Location) -> None:
    """Create the dataset's folders and marker, and mark the index as not finished until
    its manifest is saved (`recovery`)."""
    marker = dataset.join(DATASET_JSON)
    marker_text = json.dumps({"schema": INDEX_SCHEMA, "tool_version": __version__})
    try:
        dataset.fs.makedirs(dataset.join(RUNS_DIR).path, exist_ok=True)
        if not _holds(marker, marker_text):
            write_bytes_atomic(marker, marker_text.encode())
        write_bytes_atomic(dataset.join(PENDING), b"")
    except OSError as exc:
        raise _unwritable(dataset, "", exc) from exc


def _holds(where: Location, text: str) -> bool:
    if not where.fs.exists(where.path):
        return False
    with where.fs.open(where.path, "rb") as stream:
        return bool(stream.read() == text.encode())


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


def _other_than_lock(dataset: Location) -> bool:
    """Whether a folder holds more than the lock of an index that is creating it."""
    names = {
        str(p).rstrip("/").rsplit("/", 1)[-1] for p in dataset.fs.ls(dataset.path, detail=False)
    }
    return bool(names - {LOCK})


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
    for name, frame in (
        (MANIFEST, manifest_frame(entries)),
        (RUNS, runs_frame(list(rows.values()))),
    ):
        try:
            write_table(dataset, name, frame)
        except OSError as exc:
            raise _unwritable(dataset, name, exc) from exc
