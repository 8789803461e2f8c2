"""Finding what to read under the roots named: folders of logs, and W&B runs by reference.

The unit read is a folder holding files a parser recognises (the files directly in it, so
that `job-12/` and `job-12/eval/` are read apart); files no parser recognises are left out,
as `summary DIR` ignores them. Which runs a folder holds is decided when it is read, by the
run-identity rules (`loganalyzer.identity`, as `summary --split-runs` applies them): a folder
may hold several runs (another shape or world size, or an iteration counter starting again
from 1), and a run whose restarts are in several files is one. A root that is a text file of
W&B run references (`wandb:ENTITY/PROJECT/RUN_ID` or run URLs, one a line, `#` comments)
gives one unit per run, pulled through the W&B source and its cache. Units are named as the
layout says (`layout.unit_name`): a reference by its text with the password masked, so that
no name the dataset stores or prints holds it.

The dataset (`--out`) is never read as input, however its path is spelled: a local folder is
left out when its real path (symbolic links resolved) is the dataset's or under it.
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from pathlib import Path

from loganalyzer.errors import InputError, UnrecognisedSourceError, UsageProblem
from loganalyzer.fleet.engines import Engine
from loganalyzer.fleet.layout import unit_name
from loganalyzer.fleet.storage import Location, locate, modified
from loganalyzer.registry import Registry, choose, load_registry, uri_readers
from loganalyzer.secrets import mask_secrets, mask_text, url_password_masked
from loganalyzer.sources import HEAD_BYTES, shown_path

# The format of a file two parsers claim equally (the run's analysis reports it, with the
# scores), and of one that no parser recognises.
AMBIGUOUS = "?"
NO_PARSER = ""
# A list of W&B runs is read whole: larger files are logs.
LIST_BYTES = 1 << 20
# A comment starts a line or follows a space (a URL may hold a `#`).
_COMMENT = re.compile(r"(?:^|\s)#")


@dataclass(frozen=True)
class SourceFile:
    """One input file as found: where, how big, when last changed, and the parser that
    recognises it (NO_PARSER: none does; None: not yet asked)."""

    url: str
    size: int
    mtime: float | None
    format: str | None = None

    @property
    def shown(self) -> str:
        """How the dataset stores and shows the file: `url` with any password masked and
        any byte of its name that is not UTF-8 written `\\xff` (`url` itself, which opens
        the file, is held in memory only)."""
        return url_password_masked(shown_path(self.url))


@dataclass(frozen=True)
class FolderSpec:
    """What one task reads: a folder's recognised files, in order, named by the root's name
    and the folder's relative path; or one W&B run by reference (`uri`, no files), named by
    the reference. The runs it holds are named after it."""

    folder: str
    files: tuple[SourceFile, ...]
    uri: str | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Discovery:
    """The folders (and W&B runs) found, every file seen (with its format), and how many
    folders held files but nothing a parser recognises."""

    folders: list[FolderSpec]
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
    """The folders of logs under each root, and the W&B runs a root listing them names. A
    file listed in `known` (every file a previous index saw)
    with the same size and modification time keeps the format found then; the others are
    detected (each new file's head is
    read) by the engine's workers, a folder per task. Paths under `exclude` (the dataset
    itself) and hidden names are skipped."""
    folders: list[tuple[str, tuple[SourceFile, ...]]] = []
    by_reference: list[FolderSpec] = []
    for root in roots:
        where = locate(root)
        if not where.fs.exists(where.path):
            raise InputError(f"{root}: no such file or directory")
        references = wandb_references(root, where)
        if references is not None:
            by_reference.extend(FolderSpec(unit_name(shown(r)), (), r) for r in references)
            continue
        if where.fs.isdir(where.path) and _inside(exclude, where)(where.path):
            raise UsageProblem(
                f"{root}: inside the dataset {exclude}, which is never read as input;"
                " name a root outside it"
            )
        base = posixpath.basename(where.path.rstrip("/"))
        for folder, files in sorted(_folders(root, where, exclude).items()):
            relative = posixpath.relpath(folder, where.path)
            name = unit_name(shown_path(base if relative == "." else f"{base}/{relative}"))
            folders.append((name, tuple(_known(f, known) for f in files)))
    asked = [(name, files) for name, files in folders if any(f.format is None for f in files)]
    detected = dict(engine.map(detect_folder, asked))
    specs: list[FolderSpec] = []
    seen: list[SourceFile] = []
    passed_over = 0
    for name, listed in folders:
        found = detected.get(name, listed)
        seen.extend(found)
        recognised = tuple(f for f in found if f.format)
        if not recognised:
            passed_over += 1
            continue
        specs.append(FolderSpec(name, recognised))
    # a run listed twice (its URL once with a password, once without) is read once
    referenced = list({spec.folder: spec for spec in reversed(by_reference)}.values())[::-1]
    return Discovery(specs + referenced, seen, passed_over)


def shown(reference: str) -> str:
    """A W&B reference as the dataset stores and shows it: its password (and any other
    credential it holds) masked."""
    return mask_text(reference)


def detect_folder(
    folder: tuple[str, tuple[SourceFile, ...]],
) -> tuple[str, tuple[SourceFile, ...]]:
    """A folder's files with the format each is recognised as (the engines' detection task)."""
    name, files = folder
    return name, tuple(f if f.format is not None else _detected(f) for f in files)


def wandb_references(root: str, where: Location) -> list[str] | None:
    """The W&B runs a root names when it is a text file of references (one a line, blank
    lines and `#` comments allowed: `wandb:ENTITY/PROJECT/RUN_ID`, a run URL, or any scheme
    a parser claims), each as written; None when the root is anything else. A file of mostly
    references with other lines is an error naming the first other line."""
    if not where.fs.isfile(where.path) or int(where.fs.size(where.path) or 0) > LIST_BYTES:
        return None
    with where.fs.open(where.path, "rb") as stream:
        data = stream.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    found: list[str] = []
    others: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = _COMMENT.split(line, maxsplit=1)[0].strip()
        if not entry:
            continue
        if not uri_readers(registry(), entry):
            others.append((number, entry))
            continue
        found.append(entry)
    if len(found) <= len(others):  # a log that names a run here and there
        return None
    if others:
        number, line = others[0][0], mask_secrets(others[0][1])  # `export WANDB_API_KEY=…`
        raise InputError(
            f"{root} line {number}: {line[:80]!r} is no W&B run reference; a list of runs"
            " holds one `wandb:ENTITY/PROJECT/RUN_ID` or run URL a line (# for comments)"
        )
    return list(dict.fromkeys(found))


def _folders(root: str, where: Location, exclude: str | None) -> dict[str, list[SourceFile]]:
    """Every file under `where` (the root `root` names), grouped by folder, in name order.
    Files are named by absolute path when local, else by the root's URL as written."""
    if where.fs.isfile(where.path):
        info = where.fs.info(where.path)
        name = where.path if where.local else root
        only = SourceFile(name, int(info.get("size") or 0), modified(info))
        return {posixpath.dirname(where.path): [only]}
    inside = _inside(exclude, where)
    folders: dict[str, list[SourceFile]] = {}
    found = where.fs.find(where.path, detail=True)
    for path in sorted(found):
        info = found[path]
        relative = posixpath.relpath(path, where.path)
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        if inside(posixpath.dirname(path)):
            continue
        name = path if where.local else f"{root.rstrip('/')}/{relative}"
        entry = SourceFile(name, int(info.get("size") or 0), modified(info))
        folders.setdefault(posixpath.dirname(path), []).append(entry)
    return folders


def _inside(exclude: str | None, where: Location) -> Callable[[str], bool]:
    """Whether a folder found under `where` is the dataset `exclude` names or lies under it:
    by real path for local folders (however either is spelled, through any symbolic link),
    by normalised path in the same store otherwise."""
    if exclude is None:
        return lambda folder: False
    dataset = locate(exclude)
    if where.local and dataset.local:
        real = os.path.realpath(dataset.path)

        @cache
        def inside(folder: str) -> bool:
            return _under(os.path.realpath(folder), real)

        return inside
    if type(dataset.fs) is not type(where.fs):
        return lambda folder: False
    normal = posixpath.normpath(dataset.path)
    return lambda folder: _under(posixpath.normpath(folder), normal)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _known(file: SourceFile, known: Mapping[str, SourceFile]) -> SourceFile:
    before = known.get(file.shown)
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
