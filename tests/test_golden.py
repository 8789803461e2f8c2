"""Golden files: each fixture's per-iteration table, long metrics table and summary document.

Regenerate with LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest tests/test_golden.py, then
review the diff like any other change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, ROOT, assert_golden

# Every input the built-in parsers claim: single files, and run directories read whole.
CASES = sorted(
    [p for p in (FIXTURES / "megatron").glob("*") if p.is_file()]
    + [p for p in (FIXTURES / "megatron_deepspeed").glob("*") if p.is_file()]
    + sorted((FIXTURES / "megatron" / "quirks").glob("*"))
    + [FIXTURES / "megatron" / "restart_dir"]
)


def _name(path: Path) -> str:
    return "megatron/" + path.relative_to(FIXTURES).as_posix().replace("/", "__")


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_tables_match_golden(path: Path) -> None:
    run = load_run([str(path.relative_to(ROOT))], load_registry()).run
    assert_golden(_name(path) + ".table.csv", run.table.write_csv())
    assert_golden(_name(path) + ".metrics.csv", run.metrics.write_csv())


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_summary_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path.relative_to(ROOT))])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert_golden(_name(path) + ".json", result.stdout)
    text = CliRunner().invoke(main, ["summary", "-q", str(path.relative_to(ROOT))])
    assert_golden(_name(path) + ".txt", text.stdout)
