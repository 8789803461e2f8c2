"""Discovers parser plugins through entry points and picks the parser for each source."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from loganalyzer.errors import InputError, UnrecognisedSourceError
from loganalyzer.plugin import Parser, UriParser

# `scheme:` at the start of a source; two letters at least, so `C:\\logs` stays a path.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")

ENTRY_POINT_GROUP = "loganalyzer.parsers"


@dataclass(frozen=True)
class LoadedParser:
    """A parser and the distribution that registered it."""

    parser: Parser
    distribution: str
    entry_point: str


@dataclass(frozen=True)
class Registry:
    """The parsers that loaded, and the plugins that failed to (reported, not fatal)."""

    parsers: dict[str, LoadedParser]
    broken: dict[str, str]

    def get(self, name: str) -> Parser:
        if name not in self.parsers:
            known = ", ".join(sorted(self.parsers)) or "none"
            raise UnrecognisedSourceError(f"unknown format {name!r}; registered parsers: {known}")
        return self.parsers[name].parser


def load_registry() -> Registry:
    """Load every parser registered in the ``loganalyzer.parsers`` entry-point group (an
    entry point naming a ``.toml`` resource is a declared format, `loganalyzer.declared`),
    and the formats given with ``--format-file`` to the command running."""
    from loganalyzer import declared  # polars: not needed for `--help`

    found = _registered(entry_points, tuple(sys.path))
    parsers = dict(found.parsers)
    for given in declared.given_formats():
        if given.name in parsers:
            taken = parsers[given.name]
            raise InputError(
                f"{given.format.origin}: name {given.name!r} is already registered"
                f" ({taken.distribution}: {taken.entry_point}); give the format another name"
            )
        parsers[given.name] = LoadedParser(given, "--format-file", given.format.origin)
    return Registry(parsers, dict(found.broken))


@lru_cache(maxsize=8)
def _registered(
    discover: Callable[..., Iterable[EntryPoint]], search_path: tuple[str, ...]
) -> Registry:
    """The entry points' parsers, read once per process and search path (as Python imports
    a module once): reading every distribution's metadata and parsing the declared formats
    took 30 ms, paid again by every command a process runs. `discover` is in the key so that
    a replaced `entry_points` (a test's plugin) is read afresh."""
    from loganalyzer import declared

    parsers: dict[str, LoadedParser] = {}
    broken: dict[str, str] = {}
    for ep in sorted(discover(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else "?"
        try:
            if ep.value.endswith(".toml"):
                parser: object = declared.from_entry_point(ep)
            else:
                obj = ep.load()
                parser = obj() if isinstance(obj, type) else obj
        except Exception as exc:  # a broken third-party plugin must not break the others
            broken[ep.name] = f"{dist}: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(parser, Parser):
            broken[ep.name] = f"{dist}: {ep.value} lacks name/description/detect/parse"
            continue
        parsers.setdefault(parser.name, LoadedParser(parser, dist, ep.value))
    return Registry(parsers, broken)


def scores(registry: Registry, path: Path) -> dict[str, float]:
    """Every parser's confidence for `path`; a detector that raises scores 0."""
    result: dict[str, float] = {}
    for name, loaded in registry.parsers.items():
        try:
            result[name] = max(0.0, min(1.0, float(loaded.parser.detect(path))))
        except Exception:  # detect() must never raise; treat a buggy one as "not mine"
            result[name] = 0.0
    return result


def choose(registry: Registry, path: Path) -> str | None:
    """The name of the parser that reads `path`, None if none claims it.

    Raises UnrecognisedSourceError when two parsers claim it equally.
    """
    found = scores(registry, path)
    order = _ranked(found)
    if not order:
        return None
    winners = order[0]
    if len(winners) > 1:
        raise UnrecognisedSourceError(
            f"{path}: parsers {', '.join(winners)} claim it equally ({format_scores(found)}); "
            "pass --format NAME"
        )
    return winners[0]


def claimants(registry: Registry, path: Path) -> list[list[str]]:
    """The parsers that claim `path`, in groups of equal score, the most confident first:
    the order in which they are handed the file, each group's members on an equal footing
    (`readfiles.read_file` passes the file on from a parser that finds nothing in it)."""
    return _ranked(scores(registry, path))


def _ranked(found: dict[str, float]) -> list[list[str]]:
    """The names with a score above zero, in groups of equal score, the highest first."""
    levels = sorted({score for score in found.values() if score > 0.0}, reverse=True)
    return [sorted(n for n, score in found.items() if score == level) for level in levels]


def format_scores(found: dict[str, float]) -> str:
    """Scores as 'name=0.90, other=0.00' for messages."""
    return ", ".join(f"{name}={score:.2f}" for name, score in sorted(found.items()))


def schemes_of(loaded: LoadedParser) -> tuple[str, ...]:
    """The URI schemes a parser claims (none for a parser of files only)."""
    parser = loaded.parser
    return tuple(parser.schemes) if isinstance(parser, UriParser) else ()


def uri_readers(registry: Registry, source: str) -> dict[str, UriParser]:
    """The parsers that list the scheme `source` starts with; empty when it is a path."""
    found = _SCHEME.match(source)
    if found is None or Path(source).exists():
        return {}
    scheme = found.group(1).lower()
    readers: dict[str, UriParser] = {}
    for name, loaded in registry.parsers.items():
        parser: object = loaded.parser
        if isinstance(parser, UriParser) and scheme in schemes_of(loaded):
            readers[name] = parser
    return readers


def choose_uri(registry: Registry, source: str) -> UriParser:
    """The parser that reads a URI source, by the same rules as files."""
    readers = uri_readers(registry, source)
    found: dict[str, float] = {}
    for name, parser in readers.items():
        try:
            found[name] = max(0.0, min(1.0, float(parser.detect(source))))
        except Exception:  # detect() must never raise
            found[name] = 0.0
    best = max(found.values(), default=0.0)
    winners = sorted(name for name, score in found.items() if score == best and best > 0)
    if len(winners) != 1:
        claim = "claim it equally" if winners else "recognises it"
        raise UnrecognisedSourceError(
            f"{source}: {'parsers ' + ', '.join(winners) if winners else 'no parser'} {claim}"
            f" ({format_scores(found)}); see `loganalyzer parsers` for the schemes read"
        )
    return readers[winners[0]]
