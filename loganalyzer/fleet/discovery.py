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
from dataclasses import dataclass
from pathlib import Path

from loganalyzer.errors import InputError, UnrecognisedSourceError
from loganalyzer.fleet.storage import Location, locate, modified
from loganalyzer.registry import Registry, choose
from loganalyzer.sources import HEAD_BYTES


@dataclass(frozen=True)
class SourceFile:
    """One input file as found: where, how big, when last changed."""

    url: str
    size: int
    mtime: float | None


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
    """The runs found, and how many folders held files but nothing a parser recognises."""

    runs: list[RunSpec]
    folders_passed_over: int


def find_runs(
    roots: Iterable[str],
    registry: Registry,
    known: Mapping[str, SourceFile],
    exclude: str | None = None,
) -> Discovery:
    """The runs under each root. A file listed in `known` with the same size and modification
    time was recognised before and is not read again (detection reads each new file's head).
    Paths under `exclude` (the dataset itself) and hidden names are skipped."""
    runs: list[RunSpec] = []
    passed_over = 0
    for root in roots:
        where = locate(root)
        if not where.fs.exists(where.path):
            raise InputError(f"{root}: no such file or directory")
        for folder, files in sorted(_folders(root, where, exclude).items()):
            recognised = [f for f in files if _recognised(where, f, registry, known)]
            if not recognised:
                passed_over += 1
                continue
            base = posixpath.basename(where.path.rstrip("/"))
            relative = posixpath.relpath(folder, where.path)
            name = base if relative == "." else f"{base}/{relative}"
            runs.extend(split_folder(name, recognised))
    return Discovery(runs, passed_over)


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


def _recognised(
    where: Location, file: SourceFile, registry: Registry, known: Mapping[str, SourceFile]
) -> bool:
    before = known.get(file.url)
    if before is not None and (before.size, before.mtime) == (file.size, file.mtime):
        return True
    try:
        if where.local:
            return choose(registry, Path(file.url)) is not None
        return _choose_remote(file, registry)
    except UnrecognisedSourceError:
        return True  # two parsers claim it: the run's analysis reports it, with the scores


def _choose_remote(file: SourceFile, registry: Registry) -> bool:
    """Detection reads a file's head only, so only the head is fetched, into a temporary
    file of the same name (a detector may look at the suffix)."""
    place = locate(file.url)
    with place.fs.open(place.path, "rb") as stream:
        head = stream.read(HEAD_BYTES)
    with tempfile.TemporaryDirectory(prefix="loganalyzer-") as folder:
        local = Path(folder) / os.path.basename(place.path)
        local.write_bytes(head)
        return choose(registry, local) is not None
