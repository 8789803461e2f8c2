"""The tables the docs hold are generated, and current: the formats from the registered parsers,
the benchmark table from the last measurement kept in bench/results.json.

`LOGANALYZER_UPDATE_GOLDENS=1` writes them again (the troubleshooting table is checked by
tests/test_bad_inputs.py the same way).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.harness import load_rows, table
from loganalyzer.cli import main
from tests.conftest import ROOT, UPDATE


def formats_markdown() -> str:
    """One row per registered parser: what it reads and the versions its tests read."""
    listed = json.loads(CliRunner().invoke(main, ["parsers", "--json"]).stdout)["parsers"]
    lines = ["| parser | reads | tested on |", "|---|---|---|"]
    for row in listed:
        tested = ", ".join(row["tested_on"]) or "—"
        cells = (f"`{row['name']}`", row["description"], tested)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _check(path: Path, marker: str, generated: str) -> None:
    text = path.read_text(encoding="utf-8")
    section = re.compile(f"({re.escape(marker)}\n)(.*?)(<!-- end -->)", re.S)
    found = section.search(text)
    assert found, f"{path.name} lost its generated table ({marker})"
    if UPDATE:
        path.write_text(section.sub(lambda m: m[1] + generated + m[3], text), encoding="utf-8")
        return
    assert found[2] == generated, f"{path.name} is stale: LOGANALYZER_UPDATE_GOLDENS=1"


@pytest.mark.parametrize("page", ["README.md", "docs/inputs.md"])
def test_formats_table_lists_every_registered_parser(page: str) -> None:
    _check(
        ROOT / page,
        "<!-- formats table: generated from `loganalyzer parsers` -->",
        formats_markdown(),
    )


def test_performance_table_is_the_last_measurement() -> None:
    generated = table(load_rows(ROOT / "bench" / "results.json")) + "\n"
    _check(
        ROOT / "docs" / "performance.md",
        "<!-- bench table: generated from bench/results.json -->",
        generated,
    )
