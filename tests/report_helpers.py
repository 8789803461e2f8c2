"""Building a report's inputs in tests exactly as the commands do: the document from
`summary --json`, the run from `load_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.model import Run
from loganalyzer.registry import load_registry
from tests.conftest import ROOT

EXAMPLE = ROOT / "fixtures" / "megatron" / "bigscience_gpt2_tp4_pp8.out"
EXAMPLE_ARGS = ["--gpu", "v100-sxm2"]


def summary_json(sources: list[str], args: list[str]) -> dict[str, Any]:
    """The document `summary --json` prints."""
    result = CliRunner().invoke(main, ["summary", "-q", *sources, *args, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def loaded_run(sources: list[str]) -> Run:
    return load_run(sources, load_registry()).run


def write_report(sources: list[str], args: list[str], output: Path) -> Path:
    result = CliRunner().invoke(main, ["report", "-q", *sources, *args, "-o", str(output)])
    assert result.exit_code == 0, result.output
    return output
