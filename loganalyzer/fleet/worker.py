"""The per-run task both engines map: analyse one run exactly as `summary` does and write
its folder of the dataset. It never raises for a run that cannot be read: the error goes to
the manifest, and the index goes on with the other runs."""

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
from loganalyzer.errors import LogAnalyzerError
from loganalyzer.fleet.discovery import AMBIGUOUS, RunSpec, registry
from loganalyzer.fleet.document import failed_row, run_row
from loganalyzer.fleet.layout import INDEX_SCHEMA, ITERATIONS, METRICS, RUNS_DIR, SUMMARY, run_key
from loganalyzer.fleet.manifest import fingerprint
from loganalyzer.fleet.storage import Location, locate
from loganalyzer.load import load_run
from loganalyzer.model import Run
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
    """One run to analyse into the dataset at `dataset` (a path or URL)."""

    spec: RunSpec
    dataset: str
    settings: Settings


@dataclass(frozen=True)
class Outcome:
    """The run's manifest entry and its runs.parquet row."""

    entry: dict[str, Any]
    row: dict[str, Any]


def analyse_run(task: Task) -> Outcome:
    """Analyse one run and write its folder; a failure is recorded, not raised."""
    began = time.perf_counter()
    spec, key = task.spec, run_key(task.spec.run_id)
    dataset = locate(task.dataset)
    sources: list[dict[str, Any]] = [
        {"url": f.url, "size": f.size, "mtime": f.mtime, "format": f.format, "fingerprint": None}
        for f in spec.files
    ]
    formats = {f.format for f in spec.files}
    forced = formats.pop() if len(formats) == 1 and AMBIGUOUS not in formats else None
    paths: list[Path] = []
    try:
        with _local_copies(spec) as paths:
            for source, path in zip(sources, paths, strict=True):
                source["fingerprint"] = fingerprint(str(path))
            loaded = load_run([str(p) for p in paths], registry(), forced)
            settings = task.settings
            document = build_summary(
                loaded, settings.options, warmup=settings.warmup, slow_factor=settings.slow_factor
            )
            document = json.loads(_with_urls(json.dumps(document), paths, spec))
            row = run_row(spec.run_id, key, document, loaded.run)
            _write_run(dataset, key, spec.run_id, loaded.run, document)
        status, error = "ok", None
    except (LogAnalyzerError, OSError) as exc:
        status, error = "error", _with_urls(str(exc), paths, spec)
    except Exception as exc:  # one run's bug must not stop the fleet; it is recorded
        message = f"internal error {type(exc).__name__}: {exc}"
        status, error = "error", _with_urls(message, paths, spec)
    if error is not None:
        _remove(dataset.join(RUNS_DIR, key))  # no stale figures beside an error
        row = failed_row(spec.run_id, key, error)
    entry = {
        "run_id": spec.run_id,
        "key": key,
        "status": status,
        "error": error,
        "sources": sources,
        "bytes": spec.bytes,
        "index_schema": INDEX_SCHEMA,
        "summary_schema": SUMMARY_SCHEMA,
        "tool_version": __version__,
        "settings": task.settings.fingerprint(),
        "analysed_at": datetime.now(timezone.utc),
        "seconds": time.perf_counter() - began,
    }
    return Outcome(entry, row)


@contextlib.contextmanager
def _local_copies(spec: RunSpec) -> Iterator[list[Path]]:
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


def _with_urls(text: str, paths: list[Path], spec: RunSpec) -> str:
    """Text (JSON or a message) naming the files as found (URLs), not their temporary local
    copies."""
    for path, file in zip(paths, spec.files, strict=False):
        if str(path) != file.url:
            text = text.replace(json.dumps(str(path))[1:-1], json.dumps(file.url)[1:-1])
    return text


def _write_run(
    dataset: Location, key: str, run_id: str, run: Run, document: dict[str, Any]
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
    old = runs.join(f".old-{key}-{os.getpid()}")
    if fs.exists(final.path):
        fs.mv(final.path, old.path, recursive=True)
    fs.mv(temporary.path, final.path, recursive=True)
    _remove(old)


def _write_parquet(target: Location, frame: pl.DataFrame) -> None:
    if target.local:
        frame.write_parquet(target.path)
        return
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    with target.fs.open(target.path, "wb") as stream:
        stream.write(buffer.getvalue())


def _remove(target: Location) -> None:
    if target.fs.exists(target.path):
        target.fs.rm(target.path, recursive=True)
