"""What a fuzzer runs for each parser: bytes into a file, the file through the whole pipeline.

A target passes when the input yields a summary or one of loganalyzer's own errors (a
one-line message and a documented exit code); any other exception is a finding. Targets are
made for every parser registered in the ``loganalyzer.parsers`` entry-point group, so a new
parser is fuzzed without editing anything here. Each is seeded with the fixtures its parser
claims, and its input file is named like them (some formats are recognised by name).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loganalyzer.errors import LogAnalyzerError
from loganalyzer.load import load_run
from loganalyzer.registry import Registry, load_registry
from loganalyzer.render.text import render_summary
from loganalyzer.summary import build_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Seeds must look like the format: the hostile corpus would only teach the fuzzer to fail early.
SEED_EXCLUDE = ("bad",)
DEFAULT_NAME = "fuzz.log"


@dataclass(frozen=True)
class Target:
    """One parser's fuzz target: its seeds, and the name its input file is given."""

    parser: str
    seeds: list[Path]
    file_name: str

    def runner(self, workdir: Path, registry: Registry) -> Callable[[bytes], None]:
        """A function of the input bytes that raises only on a finding."""
        path = workdir / self.file_name

        def run(data: bytes) -> None:
            path.write_bytes(data)
            run_pipeline(path, registry, self.parser)

        return run


def run_pipeline(path: Path, registry: Registry, parser: str) -> None:
    """Detection, parsing, the summary document, its JSON and its terminal rendering.

    Loganalyzer's own errors are answers, not findings, and are swallowed here.
    """
    registry.get(parser).detect(path)
    try:
        loaded = load_run([str(path)], registry, forced_format=parser)
        document = build_summary(loaded, {"shape": {}, "run": {}})
    except LogAnalyzerError:
        return
    json.dumps(document, allow_nan=False, default=str)
    render_summary(document)


def discover(registry: Registry | None = None) -> dict[str, Target]:
    """A target per registered parser, seeded with the fixtures that parser claims."""
    registry = registry or load_registry()
    fixtures = sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.relative_to(FIXTURES).parts[0] not in SEED_EXCLUDE
    )
    targets = {}
    for name, loaded in sorted(registry.parsers.items()):
        seeds = [p for p in fixtures if _claims(loaded.parser.detect, p)] or [
            # a fallback parser claims with a low score by design: its own fixtures seed it
            p
            for p in fixtures
            if p.relative_to(FIXTURES).parts[0] == name and _claims(loaded.parser.detect, p, 0.0)
        ]
        file_name = seeds[0].name if seeds else DEFAULT_NAME
        targets[name] = Target(name, seeds, file_name)
    return targets


def _claims(detect: Callable[[Path], float], path: Path, above: float = 0.5) -> bool:
    try:
        score = detect(path)
        return score >= above if above else score > 0
    except Exception:  # a detector that raises claims nothing; the fuzzer will find it
        return False
