"""The task both engines map: read one folder of logs (or one W&B run) once, tell its runs
apart by the run-identity rules, analyse each exactly as `summary` does and write its folder
of the dataset. It never raises for a run that cannot be read: the error goes to the
manifest, and the index goes on with the other runs."""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from loganalyzer import __version__
from loganalyzer.errors import LogAnalyzerError, StorageError
from loganalyzer.fleet.discovery import FolderSpec, registry, shown
from loganalyzer.fleet.document import failed_row, run_row
from loganalyzer.fleet.layout import (
    INDEX_SCHEMA,
    ITERATIONS,
    METRICS,
    RECORD,
    REPORT,
    RUNS_DIR,
    SUMMARY,
    backup_name,
    run_id,
    run_key,
    temporary_name,
)
from loganalyzer.fleet.manifest import fingerprint
from loganalyzer.fleet.recovery import record_bytes
from loganalyzer.fleet.storage import Location, locate
from loganalyzer.load import Loaded, load_runs
from loganalyzer.model import Run
from loganalyzer.secrets import mask_frame, mask_secrets, mask_text, planted_secrets, run_secrets
from loganalyzer.spill import collect, scoped_folder
from loganalyzer.summary import SCHEMA as SUMMARY_SCHEMA
from loganalyzer.summary import build_summary


@dataclass(frozen=True)
class Settings:
    """What `summary` would be told: model and hardware options, warm-up, slow factor."""

    options: dict[str, dict[str, Any]]
    warmup: int | None = None
    slow_factor: float = 1.5

    def fingerprint(self) -> str:
        """Changes when the options do, so that `index` re-analyses every run then."""
        text = json.dumps(
            [self.options, self.warmup, self.slow_factor], sort_keys=True, default=repr
        )
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Task:
    """One folder (or W&B run) to read into the dataset at `dataset` (a path or URL); with
    `reports`, each run's HTML report is written beside its tables."""

    spec: FolderSpec
    dataset: str
    settings: Settings
    reports: bool = False


@dataclass(frozen=True)
class Outcome:
    """A run's manifest entry and its runs.parquet row."""

    entry: dict[str, Any]
    row: dict[str, Any]


def analyse_folder(task: Task) -> list[Outcome]:
    """Read a folder's files once, tell its runs apart by the run-identity rules (as
    `summary --split-runs` does), analyse each and write its folder of the dataset. A
    failure is recorded, not raised: the whole folder's when it cannot be read, else the
    run's; but a temporary folder that cannot take the long tables spilled past the memory
    budget (`StorageError`) is raised, as every later folder would fail alike. Long tables
    spilled on the way are removed once the folder's runs are written."""
    with scoped_folder():
        return _analysed(task)


def _analysed(task: Task) -> list[Outcome]:
    began = time.perf_counter()
    spec = task.spec
    sources: list[dict[str, Any]] = [
        {"url": f.shown, "size": f.size, "mtime": f.mtime, "format": f.format, "fingerprint": None}
        for f in spec.files
    ]
    if spec.uri is not None:  # a W&B run: its reference (as shown) is its source
        listed = shown(spec.uri)
        sources = [{"url": listed, "size": 0, "mtime": None, "format": None, "fingerprint": None}]
    paths: list[Path] = []
    outcomes: list[Outcome] = []
    try:
        with _local_copies(spec) as paths:
            for source, path in zip(sources, paths, strict=False):
                source["fingerprint"] = fingerprint(str(path))
            names = [spec.uri] if spec.uri is not None else [str(p) for p in paths]
            # detected again, not forced: a parser that finds nothing hands a file on
            runs = load_runs(names, registry())
            by_path = {str(p): source for p, source in zip(paths, sources, strict=False)}
            for number, loaded in enumerate(runs, start=1):
                read = dict.fromkeys(s.path for s in loaded.run.sources)
                mine = [by_path[p] for p in read if p in by_path]
                named = run_id(spec.folder, number, len(runs))
                outcomes.append(
                    _analyse(task, named, loaded, mine or sources, paths, began, len(runs))
                )
                began = time.perf_counter()
    except StorageError:
        raise  # every folder after this one would fail alike: the index stops (`indexer`)
    except (LogAnalyzerError, OSError) as exc:
        error = _with_urls(str(exc), paths, spec)
        outcomes = [_failed(task, spec.folder, error, sources, began)]
    except Exception as exc:  # one folder's bug must not stop the fleet; it is recorded
        message = f"internal error {type(exc).__name__}: {exc}"
        outcomes = [_failed(task, spec.folder, _with_urls(message, paths, spec), sources, began)]
    return outcomes


def _analyse(
    task: Task,
    name: str,
    loaded: Loaded,
    sources: list[dict[str, Any]],
    paths: list[Path],
    began: float,
    runs_in_folder: int,
) -> Outcome:
    """Analyse one run of a folder exactly as `summary` does and write its folder, its
    manifest entry and runs row in it (`recovery`)."""
    spec, key = task.spec, run_key(name)
    try:
        settings = task.settings
        document = build_summary(
            loaded, settings.options, warmup=settings.warmup, slow_factor=settings.slow_factor
        )
        document = json.loads(_with_urls(json.dumps(document), paths, spec))
        row = run_row(name, key, document, loaded.run)
        report = _with_urls(_report(document, loaded), paths, spec) if task.reports else None
        shown_as = _shown_sources(paths, spec)
        entry = _entry(task, name, row["status"], row["error"], sources, began, report is not None)
        record = record_bytes(entry, row, runs_in_folder)
        dataset = locate(task.dataset)
        _write_run(dataset, key, name, loaded.run, document, report, shown_as, record)
    except StorageError:
        raise
    except (LogAnalyzerError, OSError) as exc:
        return _failed(task, name, _with_urls(str(exc), paths, spec), sources, began)
    except Exception as exc:  # one run's bug must not stop the fleet; it is recorded
        message = f"internal error {type(exc).__name__}: {exc}"
        return _failed(task, name, _with_urls(message, paths, spec), sources, began)
    return Outcome(entry, row)


def lost(task: Task, why: str) -> list[Outcome]:
    """The outcome of a folder whose worker died (`worker died: signal 9`) or that ran past
    the time limit (`timed out after N s`): an error for the folder, as when it cannot be
    read, so that the index goes on with the others."""
    sources: list[dict[str, Any]] = [
        {"url": f.shown, "size": f.size, "mtime": f.mtime, "format": f.format, "fingerprint": None}
        for f in task.spec.files
    ]
    if task.spec.uri is not None:
        sources = [
            {"url": task.spec.uri, "size": 0, "mtime": None, "format": None, "fingerprint": None}
        ]
    return [_failed(task, run_id(task.spec.folder, 1, 1), why, sources, time.perf_counter())]


def _failed(
    task: Task, name: str, error: str, sources: list[dict[str, Any]], began: float
) -> Outcome:
    """A run recorded with its error; the error masked (a W&B error quotes the reference it
    could not read, password and all)."""
    key = run_key(name)
    if task.spec.uri is not None:
        error = mask_text(error, planted_secrets({"reference": task.spec.uri}))
    _remove(locate(task.dataset).join(RUNS_DIR, key))  # no stale figures beside an error
    error = mask_secrets(error)  # an error may quote the line it stopped at
    return Outcome(
        _entry(task, name, "error", error, sources, began, False), failed_row(name, key, error)
    )


def _entry(
    task: Task,
    name: str,
    status: str,
    error: str | None,
    sources: list[dict[str, Any]],
    began: float,
    report: bool,
) -> dict[str, Any]:
    return {
        "run_id": name,
        "key": run_key(name),
        "folder": task.spec.folder,
        "status": status,
        "error": error,
        "sources": sources,
        "bytes": sum(int(s["size"] or 0) for s in sources),
        "report": report,
        "index_schema": INDEX_SCHEMA,
        "summary_schema": SUMMARY_SCHEMA,
        "tool_version": __version__,
        "settings": task.settings.fingerprint(),
        "analysed_at": datetime.now(timezone.utc),
        "seconds": time.perf_counter() - began,
    }


def _report(document: dict[str, Any], loaded: Loaded) -> str:
    """The run's HTML report, as `loganalyzer report` writes it (jinja2 and plotly.js load
    only when reports are asked for)."""
    from loganalyzer.render.html import render_html
    from loganalyzer.render.view import build_view

    return render_html(build_view(document, loaded.run))


@contextlib.contextmanager
def _local_copies(spec: FolderSpec) -> Iterator[list[Path]]:
    """Local paths of the run's files: themselves when local, else downloaded into a
    temporary folder (parsers read local files) that is removed afterwards."""
    places = [locate(f.url) for f in spec.files]
    if all(p.local for p in places):
        yield [Path(p.path) for p in places]
        return
    folder = tempfile.mkdtemp(prefix="loganalyzer-")
    try:
        paths = []
        for n, place in enumerate(places):
            local = Path(folder) / str(n) / os.path.basename(place.path)
            local.parent.mkdir()
            place.fs.get_file(place.path, str(local))
            paths.append(local)
        yield paths
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _with_urls(text: str, paths: list[Path], spec: FolderSpec) -> str:
    """Text (JSON, HTML or a message) naming the files as found (URLs), not their temporary
    local copies, and a W&B reference as shown (`_shown_sources`), as written or escaped."""
    for old, new in _shown_sources(paths, spec).items():
        for old_form, new_form in zip(_written_forms(old), _written_forms(new), strict=True):
            text = text.replace(old_form, new_form)
    return text


def _written_forms(text: str) -> list[str]:
    """The forms a text takes in what a run's folder holds: as is, in JSON, in HTML (jinja's
    escaping, and `html.escape` that the charts' hover text goes through), and each of
    these in a report's script JSON (`script_json`, `&` as `\\u0026`). A password with
    `'` or `&` (legal in a URL) kept its HTML forms in the report's tables and hover text."""
    from markupsafe import escape

    from loganalyzer.render.html import script_json

    in_html = [str(escape(text)), html.escape(text)]
    return [
        text,
        json.dumps(text)[1:-1],
        *in_html,
        *(str(script_json(form))[1:-1] for form in [text, *in_html]),
    ]


def _shown_sources(paths: list[Path], spec: FolderSpec) -> dict[str, str]:
    """How the tables' `source` column names the run's inputs that it holds otherwise: the
    files as found (URLs), not their temporary local copies; a W&B reference as shown."""
    if spec.uri is not None:
        return {spec.uri: shown(spec.uri)}
    return {str(p): f.shown for p, f in zip(paths, spec.files, strict=False) if str(p) != f.shown}


def _write_run(
    dataset: Location,
    key: str,
    name: str,
    run: Run,
    document: dict[str, Any],
    report: str | None,
    shown_as: dict[str, str],
    record: bytes,
) -> None:
    """Write the run's folder under a temporary name, its record last, then rename it into
    place: an interrupted index leaves no half-written run, and the rename commits the run
    (`recovery`). The tables' sources are named as `shown_as` says. A dataset that cannot
    take it (full, not writable) stops the index."""
    runs = dataset.join(RUNS_DIR)
    temporary = runs.join(temporary_name(key, os.getpid()))
    try:
        _write_folder(dataset, runs, temporary, key, name, run, document, report, shown_as, record)
    except OSError as exc:
        with contextlib.suppress(OSError):
            _remove(temporary)
        reason = exc.strerror or str(exc)
        raise StorageError(
            f"{runs.url()}: cannot write the run {name} there ({reason}): free space there,"
            " or index into another --out"
        ) from exc


def _write_folder(
    dataset: Location,
    runs: Location,
    temporary: Location,
    key: str,
    name: str,
    run: Run,
    document: dict[str, Any],
    report: str | None,
    shown_as: dict[str, str],
    record: bytes,
) -> None:
    final = runs.join(key)
    fs = dataset.fs
    fs.makedirs(temporary.path, exist_ok=True)
    tag = pl.lit(name).alias("run_id")
    source = pl.col("source").replace(shown_as) if shown_as else pl.col("source")
    # the files' paths and the metrics' names, masked as the summary's are
    planted = run_secrets(run)
    iterations = mask_frame(run.table.with_columns(source), planted)
    _write_parquet(temporary.join(ITERATIONS), iterations.select(tag, pl.all()))
    # masked while categorical: each distinct value is found without hashing every row's text
    metrics = run.metrics
    if shown_as:  # a store's copy named as the store's URL (the rare case: as text)
        metrics = metrics.with_columns(pl.col("source").cast(pl.String).replace(shown_as))
    metrics = mask_frame(metrics, planted).with_columns(pl.col("name", "source").cast(pl.String))
    _write_parquet(temporary.join(METRICS), metrics.select(tag, pl.all()))
    with fs.open(temporary.join(SUMMARY).path, "w") as stream:
        json.dump(document, stream, indent=2, allow_nan=False, default=str)
    if report is not None:
        with fs.open(temporary.join(REPORT).path, "w", encoding="utf-8") as stream:
            stream.write(report)
    with fs.open(temporary.join(RECORD).path, "wb") as stream:
        stream.write(record)
    old = runs.join(backup_name(key, os.getpid()))
    if fs.exists(final.path):
        fs.mv(final.path, old.path, recursive=True)
    fs.mv(temporary.path, final.path, recursive=True)
    _remove(old)


def _write_parquet(target: Location, frame: pl.DataFrame | pl.LazyFrame) -> None:
    if target.local:
        if isinstance(frame, pl.LazyFrame):  # a spilled long table: streamed, never held
            frame.sink_parquet(target.path)
        else:
            frame.write_parquet(target.path)
        return
    frame = collect(frame)
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    with target.fs.open(target.path, "wb") as stream:
        stream.write(buffer.getvalue())


def _remove(target: Location) -> None:
    if target.fs.exists(target.path):
        target.fs.rm(target.path, recursive=True)
