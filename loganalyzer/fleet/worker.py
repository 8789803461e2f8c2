"""The task both engines map: read one folder of logs (or one W&B run) once, tell its runs
apart by the run-identity rules, analyse each exactly as `summary` does and write its folder
of the dataset. It never raises for a run that cannot be read: the error goes to the
manifest, and the index goes on with the other runs."""

from __future__ import annotations

import contextlib
import hashlib
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
from loganalyzer.fleet.discovery import FolderSpec, registry
from loganalyzer.fleet.document import failed_row, run_row
from loganalyzer.fleet.layout import (
    INDEX_SCHEMA,
    ITERATIONS,
    METRICS,
    REPORT,
    RUNS_DIR,
    SUMMARY,
    run_key,
)
from loganalyzer.fleet.manifest import fingerprint
from loganalyzer.fleet.storage import Location, locate
from loganalyzer.load import Loaded, load_runs
from loganalyzer.model import Run
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
        {"url": f.url, "size": f.size, "mtime": f.mtime, "format": f.format, "fingerprint": None}
        for f in spec.files
    ]
    if spec.uri is not None:  # a W&B run: its reference is its source
        sources = [{"url": spec.uri, "size": 0, "mtime": None, "format": None, "fingerprint": None}]
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
                run_id = spec.folder if len(runs) == 1 else f"{spec.folder}#{number}"
                read = dict.fromkeys(s.path for s in loaded.run.sources)
                mine = [by_path[p] for p in read if p in by_path]
                outcomes.append(_analyse(task, run_id, loaded, mine or sources, paths, began))
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
    run_id: str,
    loaded: Loaded,
    sources: list[dict[str, Any]],
    paths: list[Path],
    began: float,
) -> Outcome:
    """Analyse one run of a folder exactly as `summary` does and write its folder."""
    spec, key = task.spec, run_key(run_id)
    try:
        settings = task.settings
        document = build_summary(
            loaded, settings.options, warmup=settings.warmup, slow_factor=settings.slow_factor
        )
        document = json.loads(_with_urls(json.dumps(document), paths, spec))
        row = run_row(run_id, key, document, loaded.run)
        report = _with_urls(_report(document, loaded), paths, spec) if task.reports else None
        _write_run(locate(task.dataset), key, run_id, loaded.run, document, report)
    except StorageError:
        raise
    except (LogAnalyzerError, OSError) as exc:
        return _failed(task, run_id, _with_urls(str(exc), paths, spec), sources, began)
    except Exception as exc:  # one run's bug must not stop the fleet; it is recorded
        message = f"internal error {type(exc).__name__}: {exc}"
        return _failed(task, run_id, _with_urls(message, paths, spec), sources, began)
    entry = _entry(task, run_id, row["status"], row["error"], sources, began, report is not None)
    return Outcome(entry, row)


def _failed(
    task: Task, run_id: str, error: str, sources: list[dict[str, Any]], began: float
) -> Outcome:
    key = run_key(run_id)
    _remove(locate(task.dataset).join(RUNS_DIR, key))  # no stale figures beside an error
    return Outcome(
        _entry(task, run_id, "error", error, sources, began, False), failed_row(run_id, key, error)
    )


def _entry(
    task: Task,
    run_id: str,
    status: str,
    error: str | None,
    sources: list[dict[str, Any]],
    began: float,
    report: bool,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "key": run_key(run_id),
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
    """Text (JSON or a message) naming the files as found (URLs), not their temporary local
    copies."""
    for path, file in zip(paths, spec.files, strict=False):
        if str(path) != file.url:
            text = text.replace(json.dumps(str(path))[1:-1], json.dumps(file.url)[1:-1])
    return text


def _write_run(
    dataset: Location,
    key: str,
    run_id: str,
    run: Run,
    document: dict[str, Any],
    report: str | None,
) -> None:
    """Write the run's folder under a temporary name, then rename it into place: an
    interrupted index leaves no half-written run."""
    runs = dataset.join(RUNS_DIR)
    temporary = runs.join(f".tmp-{key}-{os.getpid()}")
    final = runs.join(key)
    fs = dataset.fs
    fs.makedirs(temporary.path, exist_ok=True)
    tag = pl.lit(run_id).alias("run_id")
    _write_parquet(temporary.join(ITERATIONS), run.table.select(tag, pl.all()))
    metrics = run.metrics.with_columns(pl.col("name", "source").cast(pl.String))
    _write_parquet(temporary.join(METRICS), metrics.select(tag, pl.all()))
    with fs.open(temporary.join(SUMMARY).path, "w") as stream:
        json.dump(document, stream, indent=2, allow_nan=False, default=str)
    if report is not None:
        with fs.open(temporary.join(REPORT).path, "w", encoding="utf-8") as stream:
            stream.write(report)
    old = runs.join(f".old-{key}-{os.getpid()}")
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
