"""Bounded memory for the long metrics table: parts held in memory up to a budget, written to
temporary Parquet files beyond it, and the whole read back as a lazy scan.

A log's long table grows with the file (the 2021 Megatron-LM format prints 32 ranks' memory
lines: 22 M rows, 0.8 GB in memory, for a 1 GB log), while the per-iteration table and
everything the analysis derives stay small. A parser hands its rows over in parts
(`SpillingTable.add`); while the parts held stay under the budget nothing touches the disk
and `finish` gives the usual DataFrame. Past the budget the parts held are written to a file
and dropped, and `finish` gives a LazyFrame scanning those files, which every consumer
reads through `collect` (polars' streaming engine, a batch at a time): peak memory is then
the budget plus what a query keeps, whatever the size of the log.

Parquet rather than Arrow IPC, by measurement (22 M rows in files of 2 M): polars' streaming
scan of IPC files holds several whole files at once (130-250 MB for a filter) and reads
790 MB; of Parquet it reads a row group at a time (about 100 MB for the same filter, three
times as fast), from 370 MB of files, and skips row groups by their statistics (a filter on
rows without an iteration number reads none). A memory-mapped IPC DataFrame would not bound
the peak either: every page a query touches counts in the process's resident memory, and
polars 2 copies IPC into memory when it reads it eagerly.

The files live in one folder per command, under the system's temporary folder (TMPDIR),
never beside the input; it is removed when the process that made it exits. Worker processes
(`loganalyzer.readfiles`) write into their parent's folder (named to them in the
environment, see `share_with_workers`), so the runs they send back still find their files.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl

from loganalyzer.errors import StorageError
from loganalyzer.model import Metrics

# Bytes of long-table rows held in memory before they are written to disk (the budget).
BUDGET_BYTES = 16 << 20
BUDGET_ENV = "LOGANALYZER_METRICS_BUDGET_BYTES"
# Bytes polars' group-by holds per group while it runs (measured: 1.3 GB for 10 M groups of
# an integer and a category key).
GROUP_BYTES = 128
# The fewest rows in a slice, whatever the budget: a query per handful of rows costs more
# than the rows.
MIN_SLICE_ROWS = 64
# Rows per Parquet row group: what a scan reads at a time.
ROW_GROUP_ROWS = 1 << 17
# The folder spilled files go to, named by the process that removes it at exit.
FOLDER_ENV = "LOGANALYZER_SPILL_DIR"
# Its name in the temporary folder: the prefix, then that process's id.
FOLDER_PREFIX = "loganalyzer-spill-"

_files = itertools.count()


def budget_bytes() -> int:
    """The budget: `BUDGET_ENV` (bytes) when set to a whole number, else `BUDGET_BYTES`."""
    stated = os.environ.get(BUDGET_ENV, "").strip()
    return int(stated) if stated.isdigit() else BUDGET_BYTES


def share_with_workers() -> None:
    """Name this process's spill folder in the environment before starting worker processes:
    they inherit the name and write there, and this process removes the folder at exit (a
    worker's own folder would go with the worker, before its runs are read). The folders
    of earlier commands that could not remove theirs (killed: out of memory, `kill -9`) go
    now."""
    if os.environ.get(FOLDER_ENV) is None:
        temporary = Path(tempfile.gettempdir())
        remove_orphaned_folders(temporary)
        name = f"{FOLDER_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        folder = temporary / name
        os.environ[FOLDER_ENV] = str(folder)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


@contextlib.contextmanager
def scoped_folder() -> Iterator[None]:
    """Spill into a folder of its own while the block runs, removed when it ends: for work
    whose tables are no longer read afterwards (`index` writes each run's tables to its
    dataset), so that a process reading many runs holds one run's spilled files at a time,
    not every run's until it exits. Worker processes started inside share it."""
    share_with_workers()
    outer = os.environ[FOLDER_ENV]
    folder = Path(outer) / f"scope-{secrets.token_hex(6)}"
    os.environ[FOLDER_ENV] = str(folder)
    try:
        yield
    finally:
        os.environ[FOLDER_ENV] = outer
        shutil.rmtree(folder, ignore_errors=True)


def remove_orphaned_folders(temporary: Path) -> None:
    """Remove this user's spill folders in `temporary` whose process has ended (the process
    id in the name no longer runs). A folder whose id a running process has (its own, or
    the id reused) is left."""
    try:
        found = list(temporary.glob(f"{FOLDER_PREFIX}*"))
    except OSError:
        return
    for folder in found:
        owner = folder.name[len(FOLDER_PREFIX) :].split("-", 1)[0]
        try:
            mine = folder.is_dir() and folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and owner.isdigit() and not _running(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    """Whether a process with this id runs (any user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _spill_path() -> Path:
    """Where the next spilled file goes, in this command's folder (not yet made)."""
    share_with_workers()
    return Path(os.environ[FOLDER_ENV]) / f"metrics-{os.getpid()}-{next(_files):05d}.parquet"


class SpillingTable:
    """Parts of one long table, in order, held in memory up to the budget and written to
    disk beyond it. Parts must share one schema."""

    def __init__(self, budget: int | None = None) -> None:
        self._budget = budget_bytes() if budget is None else budget
        self._held: list[pl.DataFrame] = []
        self._held_bytes = 0
        self._files: list[Path] = []

    @property
    def spilled(self) -> bool:
        """Whether any part has gone to disk."""
        return bool(self._files)

    def add(self, part: pl.DataFrame) -> None:
        """Keep `part`; past the budget, write every part held to one file and drop them."""
        self._held.append(part)
        self._held_bytes += int(part.estimated_size())
        if self._held_bytes > self._budget:
            self._write_held()

    def finish(self, empty: pl.DataFrame) -> Metrics:
        """The whole table: a DataFrame of the parts (`empty` when there are none) if nothing
        was spilled, else a LazyFrame scanning the files in order."""
        if not self._files:
            return pl.concat(self._held, rechunk=False) if self._held else empty
        self._write_held()
        return pl.scan_parquet(self._files, glob=False)  # TMPDIR may hold `[` or `?`

    def _write_held(self) -> None:
        if not self._held:
            return
        held = pl.concat(self._held, rechunk=False)
        try:
            path = _spill_path()
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            held.write_parquet(path, compression="uncompressed", row_group_size=ROW_GROUP_ROWS)
        except (OSError, pl.exceptions.ComputeError) as exc:
            if not _is_storage_failure(exc):
                raise
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StorageError(
                f"{os.environ.get(FOLDER_ENV, 'the temporary folder')}: cannot write the "
                f"metrics held beyond the memory budget ({first_line}); make room there or "
                f"point TMPDIR at another folder, or set {BUDGET_ENV} to a larger number of "
                "bytes to hold more in memory"
            ) from exc
        self._files.append(path)
        self._held, self._held_bytes = [], 0


def _is_storage_failure(exc: Exception) -> bool:
    """An error of the file system: an OSError, or polars' ComputeError around one (a full
    disk is "underlying IO error: No space left on device (os error 28)"), not polars'
    refusal of the data itself, which is a bug to report."""
    return isinstance(exc, OSError) or "(os error " in str(exc)


def to_disk(frame: pl.DataFrame) -> Metrics:
    """A long table held in memory written to disk now, and scanned from there (an empty
    one stays as it is)."""
    table = SpillingTable(budget=0)
    table.add(frame)
    return table.finish(frame)


def collect(frame: Metrics) -> pl.DataFrame:
    """A query on the long table (or the table itself) as a DataFrame. One that reads a
    spilled file is run by polars' streaming engine: the file is read a batch at a time,
    never whole. One on tables held in memory (within the budget) is run by the in-memory
    engine, which gives the same rows for a third of the CPU on a small table (0.17 against
    0.5 ms a query, some twenty queries a summary)."""
    query = frame.lazy()
    return query.collect(engine="streaming" if _reads_files(query) else "in-memory")


def _reads_files(query: pl.LazyFrame) -> bool:
    """Whether the query's plan scans a file (polars prints every file source as `... SCAN`);
    in doubt, it does."""
    try:
        return "SCAN" in query.explain(optimized=False).upper()
    except pl.exceptions.PolarsError:
        return True


def concat(frames: Sequence[Metrics]) -> Metrics:
    """Long tables one after another: a DataFrame when every one is in memory, else lazy."""
    if all(isinstance(frame, pl.DataFrame) for frame in frames):
        return pl.concat(frames)  # type: ignore[type-var]
    return pl.concat([frame.lazy() for frame in frames])


def metric_names(metrics: Metrics) -> list[str]:
    """The distinct metric names of a long table, as text (matched once each by callers, not
    row by row), sorted: polars' `unique` gives them in an order that varies between runs."""
    found = collect(metrics.lazy().select(pl.col("name").unique().cast(pl.String)))
    return sorted(str(name) for name in found["name"])


def slices(metrics: Metrics, row_bytes: int = GROUP_BYTES) -> list[pl.LazyFrame]:
    """The long table in slices of at most `slice_rows(row_bytes)` rows, in order: an
    aggregation with as many groups as rows (per iteration and metric) is run a slice at a
    time, its group-by table bounded by the budget rather than by the log. A query that
    holds fewer bytes a row than a group-by says so with `row_bytes`, and gets fewer, longer
    slices (each slice is a query: 5 to 25 ms over a spilled table)."""
    rows = int(collect(metrics.lazy().select(pl.len())).item())
    step = slice_rows(row_bytes)
    return [metrics.lazy().slice(start, step) for start in range(0, rows, step)]


def slice_rows(row_bytes: int = GROUP_BYTES) -> int:
    """Rows of the long table in one slice: a polars group-by holds about 100 bytes a group
    (`GROUP_BYTES`), so a slice's aggregation stays within the budget."""
    return max(MIN_SLICE_ROWS, budget_bytes() // row_bytes)
