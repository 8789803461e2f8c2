"""Finding the runs under the roots named.

Today a run is a folder holding files a parser recognises (the files directly in it, so that
`job-12/` and `job-12/eval/` are two runs); the files of a folder that no parser recognises
are left out of the run, as `summary DIR` ignores them. `split_folder` is the seam where the
run-identity rules take over (one folder may hold several runs: another shape or world size,
or an iteration counter restarting with no checkpoint load).
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from loganalyzer.errors import InputError, UnrecognisedSourceError
from loganalyzer.fleet.engines import Engine
from loganalyzer.fleet.storage import Location, locate, modified
from loganalyzer.registry import Registry, choose, load_registry
from loganalyzer.sources import HEAD_BYTES

# The format of a file two parsers claim equally (the run's analysis reports it, with the
# scores), and of one that no parser recognises.
AMBIGUOUS = "?"
NO_PARSER = ""


@dataclass(frozen=True)
class SourceFile:
    """One input file as found: where, how big, when last changed, and the parser that
    recognises it (NO_PARSER: none does; None: not yet asked)."""

    url: str
    size: int
    mtime: float | None
    format: str | None = None


@dataclass(frozen=True)
class RunSpec:
    """A run to analyse: its id (root name and relative folder) and its files, in order."""

    run_id: str
    files: tuple[SourceFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Discovery:
    """The runs found, every file seen (with its format), and how many folders held files
    but nothing a parser recognises."""

    runs: list[RunSpec]
    files: list[SourceFile]
    folders_passed_over: int


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The parsers, loaded once per process (engines' workers included)."""
    return load_registry()


def find_runs(
    roots: Iterable[str],
    known: Mapping[str, SourceFile],
    engine: Engine,
    exclude: str | None = None,
) -> Discovery:
    """The runs under each root. A file listed in `known` (every file a previous index saw)
    with the same size and modification time keeps the format found then; the others are
    detected (each new file's head is
    read) by the engine's workers, a folder per task. Paths under `exclude` (the dataset
    itself) and hidden names are skipped."""
    folders: list[tuple[str, tuple[SourceFile, ...]]] = []
    for root in roots:
        where = locate(root)
        if not where.fs.exists(where.path):
            raise InputError(f"{root}: no such file or directory")
        base = posixpath.basename(where.path.rstrip("/"))
        for folder, files in sorted(_folders(root, where, exclude).items()):
            relative = posixpath.relpath(folder, where.path)
            name = base if relative == "." else f"{base}/{relative}"
            folders.append((name, tuple(_known(f, known) for f in files)))
    asked = [(name, files) for name, files in folders if any(f.format is None for f in files)]
    detected = dict(engine.map(detect_folder, asked))
    runs: list[RunSpec] = []
    seen: list[SourceFile] = []
    passed_over = 0
    for name, listed in folders:
        found = detected.get(name, listed)
        seen.extend(found)
        recognised = [f for f in found if f.format]
        if not recognised:
            passed_over += 1
            continue
        runs.extend(split_folder(name, recognised))
    return Discovery(runs, seen, passed_over)


def detect_folder(
    folder: tuple[str, tuple[SourceFile, ...]],
) -> tuple[str, tuple[SourceFile, ...]]:
    """A folder's files with the format each is recognised as (the engines' detection task)."""
    name, files = folder
    return name, tuple(f if f.format is not None else _detected(f) for f in files)


def split_folder(name: str, files: list[SourceFile]) -> list[RunSpec]:
    """The runs one folder's recognised files make: one, for now."""
    return [RunSpec(name, tuple(files))]


def _folders(root: str, where: Location, exclude: str | None) -> dict[str, list[SourceFile]]:
    """Every file under `where` (the root `root` names), grouped by folder, in name order.
    Files are named by absolute path when local, else by the root's URL as written."""
    if where.fs.isfile(where.path):
        info = where.fs.info(where.path)
        name = where.path if where.local else root
        only = SourceFile(name, int(info.get("size") or 0), modified(info))
        return {posixpath.dirname(where.path): [only]}
    skip = None if exclude is None else locate(exclude).path.rstrip("/") + "/"
    folders: dict[str, list[SourceFile]] = {}
    found = where.fs.find(where.path, detail=True)
    for path in sorted(found):
        info = found[path]
        relative = posixpath.relpath(path, where.path)
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        if skip is not None and (path + "/").startswith(skip):
            continue
        name = path if where.local else f"{root.rstrip('/')}/{relative}"
        entry = SourceFile(name, int(info.get("size") or 0), modified(info))
        folders.setdefault(posixpath.dirname(path), []).append(entry)
    return folders


def _known(file: SourceFile, known: Mapping[str, SourceFile]) -> SourceFile:
    before = known.get(file.url)
    if before is not None and (before.size, before.mtime) == (file.size, file.mtime):
        return replace(file, format=before.format)
    return file


def _detected(file: SourceFile) -> SourceFile:
    place = locate(file.url)
    try:
        found = choose(registry(), Path(place.path)) if place.local else _choose_remote(file)
    except UnrecognisedSourceError:
        found = AMBIGUOUS
    except OSError:
        found = None  # vanished or unreadable: not a log of this run
    return replace(file, format=found or NO_PARSER)


def _choose_remote(file: SourceFile) -> str | None:
    """Detection reads a file's head only, so only the head is fetched, into a temporary
    file of the same name (a detector may look at the suffix)."""
    place = locate(file.url)
    with place.fs.open(place.path, "rb") as stream:
        head = stream.read(HEAD_BYTES)
    with tempfile.TemporaryDirectory(prefix="loganalyzer-") as folder:
        local = Path(folder) / os.path.basename(place.path)
        local.write_bytes(head)
        return choose(registry(), local)
