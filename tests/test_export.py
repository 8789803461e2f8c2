"""`export`: the per-iteration and metrics tables round-trip through Parquet, CSV and JSON
lines with the data model's columns in order; the config and its provenance go beside."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.model import ITERATION_SCHEMA, METRICS_SCHEMA
from tests.conftest import FIXTURES
from tests.report_helpers import loaded_run

RESTARTS = str(FIXTURES / "megatron" / "restart_dir")
EXAMPLE = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")


def _export(*args: str) -> None:
    result = CliRunner().invoke(main, ["export", "-q", *args])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("source", [RESTARTS, EXAMPLE])
def test_parquet_gives_back_the_same_rows_and_values(source: str, tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    _export(source, "-o", str(out))
    back = pl.read_parquet(out)
    table = loaded_run([source]).table
    assert back.columns == list(ITERATION_SCHEMA)
    assert back.schema == table.schema
    assert back.equals(table)


def test_metrics_table_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "metrics.parquet"
    _export(EXAMPLE, "--metrics", "-o", str(out))
    back = pl.read_parquet(out)
    metrics = loaded_run([EXAMPLE]).metrics
    assert back.columns == list(METRICS_SCHEMA)
    assert back.height == metrics.height > 0
    assert back.equals(metrics)


def test_csv_and_jsonl_by_extension_and_by_choice(tmp_path: Path) -> None:
    table = loaded_run([RESTARTS]).table
    _export(RESTARTS, "-o", str(tmp_path / "run.csv"))
    csv = pl.read_csv(tmp_path / "run.csv", schema=dict(ITERATION_SCHEMA))
    assert csv.equals(table)
    _export(RESTARTS, "--to", "jsonl", "-o", str(tmp_path / "run.txt"))
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert len(lines) == table.height
    first = json.loads(lines[0])
    assert list(first) == list(ITERATION_SCHEMA)
    assert first["iteration"] == table["iteration"][0]
    assert first["step_time_s"] == table["step_time_s"][0]


def test_config_with_provenance_beside_the_table(tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    _export(EXAMPLE, "-o", str(out))
    config = json.loads((tmp_path / "run.parquet.config.json").read_text())
    run = loaded_run([EXAMPLE])
    assert config["framework"] == run.framework
    assert config["config"]["num_layers"] == {
        "value": 48,
        "provenance": {"kind": "log", "source": EXAMPLE, "line": 98},
    }
    assert len(config["config"]) == len(run.config)


def test_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["export", "-q", EXAMPLE, "-o", str(tmp_path / "run.xls")])
    assert result.exit_code == 2
    assert "--to" in result.stderr
    assert not (tmp_path / "run.xls").exists()
