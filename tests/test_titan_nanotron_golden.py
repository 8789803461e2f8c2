"""Golden files of the torchtitan and nanotron fixtures: per-iteration table, long metrics
table, summary document and terminal summary.

Regenerate with LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest tests/test_titan_nanotron_golden.py,
then review the diff like any other change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, ROOT, assert_golden

CASES = sorted([*(FIXTURES / "torchtitan").glob("*.log"), *(FIXTURES / "nanotron").glob("*.log")])


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_tables_match_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run = load_run([str(path.relative_to(ROOT))], load_registry()).run
    assert_golden(_name(path) + ".table.csv", run.table.write_csv())
    assert_golden(_name(path) + ".metrics.csv", run.metrics.write_csv())


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_summary_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", str(path.relative_to(ROOT))]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert_golden(_name(path) + ".json", result.stdout)
    assert_golden(_name(path) + ".txt", CliRunner().invoke(main, args).stdout)
