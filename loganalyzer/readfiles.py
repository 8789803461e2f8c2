"""Reading the files of the sources named: each detected and parsed on its own, in a pool of
processes when there are several sizeable ones (a run directory of rank logs), one after
another otherwise, the outcomes always given back in the order of the files.

Why processes: parsing is mostly polars, but detection, line splitting and the parsers'
own glue are Python, which one interpreter runs on one core at a time. Workers are spawned,
never forked: polars' thread pool is already running in this process and a forked copy of
it can deadlock; and spawned workers are this process's own children, so their CPU time is
counted in its own (`time`, `wait4`). Starting workers costs about a second, so small
inputs (the fixtures, a single log) keep the serial path.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from loganalyzer.cores import usable_cores
from loganalyzer.errors import InputError, NothingReadError, UnrecognisedSourceError
from loganalyzer.model import Run, compact_table
from loganalyzer.registry import Registry, claimants, format_scores, scores
from loganalyzer.sources import READ_ALONG, READ_NOTES, READ_PROGRESS, check_readable
from loganalyzer.spill import budget_bytes, share_with_workers, to_disk

# A pool pays off from two files of at least SIZEABLE_BYTES that together hold POOL_BYTES:
# below that, starting the workers costs more than the parsing they share.
SIZEABLE_BYTES = 1 << 20
POOL_BYTES = 32 << 20
# Files handed to the pool ahead of the one being waited for, per worker: enough to keep
# every worker busy, few enough that finished runs do not pile up out of order.
AHEAD_PER_WORKER = 2

Progress = Callable[[str], None]
ReadProgress = Callable[[Path, int, int | None], None]
Shared = tuple[Registry, Progress | None, ReadProgress | None]


@dataclass(frozen=True)
class FileTask:
    """One file to read: named on the command line (`explicit`: errors are fatal) or found
    inside a directory (errors only list it as ignored), and the format forced, if any."""

    path: Path
    explicit: bool
    forced_format: str | None


@dataclass(frozen=True)
class FileOutcome:
    """What reading one file gave: its Run, or the reason it was passed over, and the files
    its parser read as part of it (`sources.note_read_along`), by path."""

    path: Path
    run: Run | None = None
    ignored_reason: str | None = None
    read_along: dict[str, tuple[bool, str]] = field(default_factory=dict)


def read_files(
    tasks: Sequence[FileTask],
    registry: Registry,
    progress: Progress | None = None,
    jobs: int | None = None,
) -> Iterator[FileOutcome]:
    """Each task's outcome, in the order of `tasks`, read by `jobs` processes (by default
    the cores this process may use, when `worth_a_pool`). An error that is fatal for a file
    named explicitly is raised when its turn comes, as the serial path would. The long
    tables held in memory stay within one budget over all the files (`_within_budget`)."""
    return _within_budget(map(_compacted, _outcomes(tasks, registry, progress, jobs)))


def _outcomes(
    tasks: Sequence[FileTask],
    registry: Registry,
    progress: Progress | None,
    jobs: int | None,
) -> Iterator[FileOutcome]:
    """`read_files`' outcomes, read in a pool or one after another."""
    workers = min(len(tasks), usable_cores() if jobs is None else jobs)
    if workers < 2 or (jobs is None and not worth_a_pool([t.path for t in tasks])):
        for task in tasks:
            yield read_file(task, registry, progress)
        return
    shared: Shared = (registry, progress, READ_PROGRESS.get())
    try:
        pickle.dumps(shared)
    except (pickle.PicklingError, TypeError, AttributeError):
        # A registry or progress callback that cannot be sent to a worker (a parser object
        # built in a test, a lambda): read here, as before.
        for task in tasks:
            yield read_file(task, registry, progress)
        return
    yield from _pooled(tasks, shared, workers)


def _within_budget(outcomes: Iterator[FileOutcome]) -> Iterator[FileOutcome]:
    """The outcomes, each run's long table written to disk once the ones held in memory
    before it would pass the budget (`spill.budget_bytes`) with it: each parser keeps its
    own table within the budget, so a directory of many files would otherwise hold one
    budget per file (64 rank logs: 283 MB)."""
    held = 0
    for outcome in outcomes:
        run = outcome.run
        if run is not None and isinstance(run.metrics, pl.DataFrame):
            size = int(run.metrics.estimated_size())
            if held + size > budget_bytes():
                metrics = to_disk(run.metrics)
                outcome = dataclasses.replace(
                    outcome, run=dataclasses.replace(run, metrics=metrics)
                )
            else:
                held += size
        yield outcome


def worth_a_pool(paths: Sequence[Path]) -> bool:
    """True when at least two files are sizeable and those hold enough bytes to share."""
    sizes = []
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size >= SIZEABLE_BYTES:
            sizes.append(size)
    return len(sizes) >= 2 and sum(sizes) >= POOL_BYTES


def read_file(task: FileTask, registry: Registry, progress: Progress | None) -> FileOutcome:
    """Detect and parse one file (`_handed_on`); an error is fatal for a file named
    explicitly, else the file is listed as ignored with the reason."""
    path = task.path
    if not path.is_file():  # reading a FIFO or a device could block or never end
        reason = "not a regular file (a pipe, socket, device, or a broken or looping link)"
        if task.explicit:
            raise InputError(f"{path}: {reason}; save its content to a file and name that")
        return FileOutcome(path, ignored_reason=reason)
    if task.explicit:
        check_readable(path)
    forced = task.forced_format
    order = [[forced]] if forced is not None else claimants(registry, path)
    if not order:
        if task.explicit:
            found = format_scores(scores(registry, path))
            raise UnrecognisedSourceError(
                f"{path}: no registered parser recognises this file ({found}); "
                "`loganalyzer parsers` lists the formats read (a parser plugin adds others)"
            )
        return FileOutcome(path, ignored_reason="no parser recognises it")
    along: dict[str, tuple[bool, str]] = {}
    try:
        return _handed_on(task, registry, progress, order, along)
    except InputError as exc:
        if task.explicit:
            raise
        return FileOutcome(path, ignored_reason=str(exc), read_along=along)


def _handed_on(
    task: FileTask,
    registry: Registry,
    progress: Progress | None,
    order: list[list[str]],
    failed_along: dict[str, tuple[bool, str]],
) -> FileOutcome:
    """The file read by the first parser, in the order of their claims, that finds records
    in it: one that finds nothing of its format (`NothingReadError`) or no records (a run
    with an empty table: a banner, a config) hands it on, and the run's warnings say so.
    Parsers that claim it equally are all tried: one that reads records wins, two are a tie
    (exit 3, as before). When none finds records, the first group that found something
    gives the run (a config alone: a run that died before its first step)."""
    path = task.path
    passed: list[str] = []
    partial: dict[str, FileOutcome] = {}
    for group in order:
        read: dict[str, FileOutcome] = {}
        empty: dict[str, FileOutcome] = {}
        for name in group:
            try:
                outcome = _parsed(path, name, registry, progress, failed_along)
            except NothingReadError as exc:
                if task.forced_format is not None or sum(map(len, order)) == 1:
                    raise  # the one parser's own words: nothing was handed on
                passed.append(f"{name}: {_without_path(str(exc), path)}")
                continue
            assert outcome.run is not None
            if outcome.run.table.height or task.forced_format is not None:
                read[name] = outcome
            else:
                empty[name] = outcome
                passed.append(f"{name}: no records")
        if not read and not partial:
            partial = empty
        if len(read) == 1:
            name, outcome = next(iter(read.items()))
            if passed and outcome.run is not None:
                outcome.run.warnings.append(
                    f"{path}: read as {name}; the parsers that claimed it before or beside it"
                    f" found nothing to read ({'; '.join(passed)})"
                )
            return outcome
        if read:
            raise _tie(registry, path, read)
    if len(partial) == 1:
        return next(iter(partial.values()))
    if partial:
        raise _tie(registry, path, partial)
    raise NothingReadError(
        f"{path}: no parser that claims it found anything to read ({'; '.join(passed)})"
    )


def _without_path(message: str, path: Path) -> str:
    """A parser's message without the path it starts with, which the combined one names."""
    return message.removeprefix(f"{path}: ")


def _tie(registry: Registry, path: Path, read: dict[str, FileOutcome]) -> UnrecognisedSourceError:
    return UnrecognisedSourceError(
        f"{path}: parsers {', '.join(sorted(read))} claim it equally"
        f" ({format_scores(scores(registry, path))}) and each reads it; pass --format NAME"
    )


def _parsed(
    path: Path,
    name: str,
    registry: Registry,
    progress: Progress | None,
    failed_along: dict[str, tuple[bool, str]],
) -> FileOutcome:
    """One parser's reading of the file; damage met on the way (READ_NOTES) joins its
    warnings, and the files it read as part of it (READ_ALONG) its outcome, or
    `failed_along` when it fails (a parser that found nothing read nothing beside it)."""
    if progress is not None:
        progress(f"reading {path} ({name})")
    notes: list[str] = []
    along: dict[str, tuple[bool, str]] = {}
    token, along_token = READ_NOTES.set(notes), READ_ALONG.set(along)
    try:
        run = registry.get(name).parse(path)
    except NothingReadError:
        raise
    except InputError:
        failed_along.update(along)
        raise
    finally:
        READ_NOTES.reset(token)
        READ_ALONG.reset(along_token)
    run.warnings.extend(notes)
    return FileOutcome(path, run=run, read_along=along)


def _pooled(
    tasks: Sequence[FileTask],
    shared: Shared,
    workers: int,
) -> Iterator[FileOutcome]:
    """The outcomes in order, at most AHEAD_PER_WORKER files per worker handed out ahead."""
    # the process machinery loads only when a pool is worth it, not for one small log
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    share_with_workers()  # a long table a worker spills must outlive the worker
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=shared
    ) as pool:
        pending: deque[Future[FileOutcome]] = deque()
        waiting = iter(tasks)
        try:
            for task in waiting:
                pending.append(pool.submit(_read_in_worker, task))
                if len(pending) >= workers * AHEAD_PER_WORKER:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # an error raised for one file: the files after it are not read
            for future in pending:
                future.cancel()


def _compacted(outcome: FileOutcome) -> FileOutcome:
    """An outcome with its run's table compacted (`model.compact_table`): whatever parser
    read it, and again after a worker sent it back (a DataFrame is sent as Arrow IPC, which
    writes a literal column out in full: the file's path as text in every record, the
    columns of nulls, about 117 bytes a record of a Megatron table)."""
    run = outcome.run
    if run is None:
        return outcome
    return dataclasses.replace(
        outcome, run=dataclasses.replace(run, table=compact_table(run.table))
    )


# Set once per worker process by `_start_worker`: what every file it reads needs.
_worker_registry: Registry | None = None
_worker_progress: Progress | None = None


def _start_worker(
    registry: Registry,
    progress: Progress | None,
    read_progress: ReadProgress | None,
) -> None:
    global _worker_registry, _worker_progress
    _worker_registry, _worker_progress = registry, progress
    READ_PROGRESS.set(read_progress)  # the worker's tasks run in this same context


def _read_in_worker(task: FileTask) -> FileOutcome:
    assert _worker_registry is not None, "the pool's initializer sets the registry"
    return read_file(task, _worker_registry, _worker_progress)
