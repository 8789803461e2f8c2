"""From the SOURCE arguments to validated Runs: expand, detect, parse, tell runs apart, merge."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loganalyzer.combine import combine_views
from loganalyzer.errors import InputError, SeveralRunsError
from loganalyzer.identity import describe_runs, group_runs, split_parts
from loganalyzer.merge import merge_runs
from loganalyzer.model import Run, validate_run
from loganalyzer.placeholders import without_placeholders
from loganalyzer.readfiles import FileTask, read_files
from loganalyzer.registry import Registry, choose_uri, uri_readers
from loganalyzer.sources import NOT_UTF8, expand_sources, is_utf8_path, shown_path


@dataclass(frozen=True)
class Ignored:
    """A file found inside a named directory that was not read, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class ReadAlong:
    """A file read as part of another source rather than on its own (an HF output_dir's
    config.json), and how."""

    path: str
    how: str


@dataclass
class Loaded:
    """The merged run, and what was passed over on the way (listed, never silently dropped)."""

    run: Run
    ignored: list[Ignored] = field(default_factory=list)
    read_along: list[ReadAlong] = field(default_factory=list)


def load_run(
    names: Sequence[str],
    registry: Registry,
    forced_format: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Loaded:
    """Read every source named into one Run; sources that hold several runs (see
    `loganalyzer.identity`) are refused with the runs listed (SeveralRunsError, exit 1)."""
    runs = load_runs(names, registry, forced_format, progress)
    if len(runs) > 1:
        raise SeveralRunsError(describe_runs([loaded.run for loaded in runs]), ", ".join(names))
    return runs[0]


def load_runs(
    names: Sequence[str],
    registry: Registry,
    forced_format: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Loaded]:
    """Read every source named into the runs they hold, in the order the runs started; each
    run's files and launches merged into one Run (restarts as segments).

    A file named explicitly that no parser recognises is an error (exit 3, with the scores),
    and one that cannot be read or holds nothing usable is an error too (exit 1). A file found
    inside a named directory is only listed in `ignored` in either case: a run directory
    holds scripts and notes beside its logs.
    """
    if forced_format is not None:
        registry.get(forced_format)  # an unknown name fails before anything is read
    uris = [n for n in names if uri_readers(registry, n)]
    names = [n for n in names if n not in uris]
    explicit = {Path(n) for n in names if not Path(n).is_dir()}
    runs: list[Run] = []
    ignored: list[Ignored] = []
    along: dict[str, tuple[bool, str]] = {}
    for uri in uris:  # sources a parser claims by scheme (a W&B run ID): read as named
        reader = choose_uri(registry, uri)
        if progress is not None:
            progress(f"reading {uri} ({reader.name})")
        runs.append(reader.parse(uri))
    tasks = []
    for path in expand_sources(names):
        if is_utf8_path(path):
            tasks.append(FileTask(path, path in explicit, forced_format))
        elif path in explicit:
            raise InputError(f"{shown_path(path)}: {NOT_UTF8}")
        else:
            ignored.append(Ignored(shown_path(path), NOT_UTF8))
    for outcome in read_files(tasks, registry, progress):
        if outcome.run is not None:
            runs.append(outcome.run)
        else:
            ignored.append(Ignored(str(outcome.path), outcome.ignored_reason or ""))
        along.update(outcome.read_along)
    ignored, read_along = _read_along(ignored, along)
    if not runs:
        raise InputError(
            f"{', '.join([*uris, *map(shown_path, names)])}: no file any parser could read"
            + (f" ({len(ignored)} ignored{_first_reason(ignored)})" if ignored else "")
            + "; see `loganalyzer parsers` for the formats read"
        )
    parts = [part for run in combine_views(runs) for part in split_parts(run)]
    loaded = []
    for grouped in group_runs(parts):
        run = without_placeholders(merge_runs(grouped))
        validate_run(run)
        loaded.append(Loaded(run, ignored, read_along))
    return loaded


def _read_along(
    ignored: list[Ignored], along: dict[str, tuple[bool, str]]
) -> tuple[list[Ignored], list[ReadAlong]]:
    """Files no parser reads on their own that a parser read as part of another source,
    and the reason given for those it left unread, instead of "no parser recognises it"."""
    kept: list[Ignored] = []
    read: list[ReadAlong] = []
    for item in ignored:
        found = along.get(os.path.normpath(item.path))
        if found is None:
            kept.append(item)
        elif found[0]:
            read.append(ReadAlong(item.path, found[1]))
        else:
            kept.append(Ignored(item.path, found[1]))
    return kept, read


def _first_reason(ignored: list[Ignored]) -> str:
    """Why the files were passed over, where one reason holds for all of them."""
    reasons = {item.reason for item in ignored}
    return f": {reasons.pop()}" if len(reasons) == 1 and "" not in reasons else ""
