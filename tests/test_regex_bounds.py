"""No pattern of a parser (or of textlog) takes long on a hostile line: for each, the worst
1 MB lines of near-matches that can be built from the pattern itself parse in well under a
second. Patterns are found, not listed: every registered parser's package is searched, so a
new parser's patterns are checked without editing this file.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from loganalyzer import textlog
from loganalyzer.registry import load_registry

if sys.version_info >= (3, 11):
    from re import _constants as sre_constants  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover
    import sre_constants
    import sre_parse

LINE_BYTES = 1 << 20
# CPU seconds (all threads) for the patterns, which other work on a busy machine does not
# inflate as it does wall time (a linear pattern measured 0.59 s of wall time at load 22).
WELL_UNDER_A_SECOND = 0.5


def _modules() -> Iterator[ModuleType]:
    yield textlog
    for loaded in load_registry().parsers.values():
        package = importlib.import_module(type(loaded.parser).__module__.rsplit(".", 1)[0])
        yield package
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), package.__name__ + "."):
            yield importlib.import_module(info.name)


def _patterns() -> dict[str, re.Pattern[str] | str]:
    """Module-level regular expressions: compiled ones (run by `re`) and upper-case string
    constants holding regex syntax (run by polars)."""
    found: dict[str, re.Pattern[str] | str] = {}
    for module in _modules():
        for name, value in vars(module).items():
            where = f"{module.__name__}.{name}"
            values = value if isinstance(value, tuple) else (value,)
            for k, item in enumerate(values):
                item = item[0] if isinstance(item, tuple) and item else item
                key = where if len(values) == 1 else f"{where}[{k}]"
                if _is_regex(name, item):
                    found[key] = item
    return found


def _is_regex(name: str, item: object) -> bool:
    if isinstance(item, re.Pattern):
        return True
    return name.isupper() and isinstance(item, str) and bool(re.search(r"\\[dsw]|\(", item))


def minimal_match(pattern: str) -> str:
    """The shortest text the pattern's parse tree spells (first branch, fewest repeats)."""
    return _spell(sre_parse.parse(pattern))


def _spell(tree: object) -> str:
    out = []
    for op, arg in tree:  # type: ignore[attr-defined]
        if op is sre_constants.LITERAL:
            out.append(chr(arg))
        elif op is sre_constants.NOT_LITERAL:
            out.append("a" if chr(arg) != "a" else "b")
        elif op is sre_constants.ANY:
            out.append("a")
        elif op is sre_constants.IN:
            out.append(_spell_class(arg))
        elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            low, _, body = arg
            out.append(_spell(body) * max(low, 1))
        elif op is sre_constants.SUBPATTERN:
            out.append(_spell(arg[-1]))
        elif op is sre_constants.BRANCH:
            out.append(_spell(arg[1][0]))
    return "".join(out)


def _spell_class(items: list[tuple[object, object]]) -> str:
    op, arg = items[0]
    if op is sre_constants.NEGATE:
        return "a"
    if op is sre_constants.LITERAL:
        return chr(arg)  # type: ignore[arg-type]
    if op is sre_constants.RANGE:
        return chr(arg[0])  # type: ignore[index]
    if op is sre_constants.CATEGORY:
        return {"CATEGORY_DIGIT": "7", "CATEGORY_SPACE": " "}.get(str(arg), "a")
    return "a"


def worst_lines(pattern: str) -> dict[str, str]:
    """1 MB lines that almost match, over and over: the match cut short of its end, and of
    its middle; one match's head followed by the class of characters its repeats eat, and by
    spaces then two words (a lazy group before a colon and a greedy token before `$`
    backtracked over each space: `a` + 64 KB of spaces + `x y` took 96 s)."""
    match = minimal_match(pattern) or "a"
    cut = match[:-1] or match
    half = match[: max(len(match) // 2, 1)]
    return {
        "cut": (cut * (LINE_BYTES // len(cut) + 1))[:LINE_BYTES],
        "half": (half * (LINE_BYTES // len(half) + 1))[:LINE_BYTES],
        "head+spaces": (half + " " * LINE_BYTES)[:LINE_BYTES],
        "head+digits": (half + "7" * LINE_BYTES)[:LINE_BYTES],
        "head+spaces+words": (match[:1] + " " * LINE_BYTES)[: LINE_BYTES - 3] + "x y",
    }


PATTERNS = _patterns()


def test_patterns_are_found_in_every_parser() -> None:
    assert any(".parsers.megatron." in name for name in PATTERNS)
    assert "loganalyzer.textlog.LAUNCHER_PREFIX" in PATTERNS


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_a_megabyte_of_near_matches_parses_well_under_a_second(name: str) -> None:
    pattern = PATTERNS[name]
    source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    for kind, line in worst_lines(source).items():
        start = time.process_time()
        if isinstance(pattern, re.Pattern):
            pattern.search(line)
        elif "(" in pattern:
            pl.Series([line]).str.extract_groups(pattern)
        else:
            pl.Series([line]).str.contains(pattern)
        took = time.process_time() - start
        assert took < WELL_UNDER_A_SECOND, f"{name} on {kind}: {took:.2f} s"


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, list[str]]:
    """Every pattern's cut and half lines as files, each distinct line written once for
    every parser's detection, with the patterns and kinds it stands for (each parser's test
    built and wrote all 366 of them again: a second of its 2-6)."""
    folder = tmp_path_factory.mktemp("heads")
    files: dict[str, Path] = {}
    found: dict[Path, list[str]] = {}
    for name, pattern in PATTERNS.items():
        lines = worst_lines(pattern.pattern if isinstance(pattern, re.Pattern) else pattern)
        for kind in ("cut", "half"):
            path = files.get(lines[kind])
            if path is None:
                path = files[lines[kind]] = folder / f"head-{len(files)}.log"
                path.write_text(lines[kind])
            found.setdefault(path, []).append(f"{name} {kind}")
    return found


@pytest.mark.parametrize("parser", sorted(load_registry().parsers))
def test_detection_of_near_matching_heads_is_fast(
    parser: str, heads: dict[Path, list[str]]
) -> None:
    detect = load_registry().get(parser).detect
    for path, names in heads.items():
        start = time.process_time()
        detect(path)
        took = time.process_time() - start
        assert took < WELL_UNDER_A_SECOND, f"{parser}.detect, {' = '.join(names)}: {took:.2f} s"
