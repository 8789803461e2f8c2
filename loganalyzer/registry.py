"""Discovers parser plugins through entry points and picks the parser for each source."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from loganalyzer.errors import UnrecognisedSourceError
from loganalyzer.plugin import Parser

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
    """Load every parser registered in the ``loganalyzer.parsers`` entry-point group."""
    parsers: dict[str, LoadedParser] = {}
    broken: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else "?"
        try:
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
    best = max(found.values(), default=0.0)
    if best <= 0.0:
        return None
    winners = sorted(name for name, score in found.items() if score == best)
    if len(winners) > 1:
        raise UnrecognisedSourceError(
            f"{path}: parsers {', '.join(winners)} claim it equally ({format_scores(found)}); "
            "pass --format NAME"
        )
    return winners[0]


def format_scores(found: dict[str, float]) -> str:
    """Scores as 'name=0.90, other=0.00' for messages."""
    return ", ".join(f"{name}={score:.2f}" for name, score in sorted(found.items()))
