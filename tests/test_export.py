"""`export`: the per-iteration and metrics tables round-trip through Parquet, CSV and JSON
lines with the data model's columns in order, the per-iteration table followed by what the
report draws of each record (TFLOPS/GPU, MFU, slow step kind and cause, warm-up); the config
and its provenance go beside."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.analysis.per_record import PER_RECORD_SCHEMA
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
    assert back.columns == [*ITERATION_SCHEMA, *PER_RECORD_SCHEMA]
    assert back.select(list(ITERATION_SCHEMA)).equals(table)
    assert dict(back.select(list(PER_RECORD_SCHEMA)).schema) == dict(PER_RECORD_SCHEMA)


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
    csv = pl.read_csv(tmp_path / "run.csv", schema={**ITERATION_SCHEMA, **PER_RECORD_SCHEMA})
    assert csv.select(list(ITERATION_SCHEMA)).equals(table)
    _export(RESTARTS, "--to", "jsonl", "-o", str(tmp_path / "run.txt"))
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert len(lines) == table.height
    first = json.loads(lines[0])
    assert list(first) == [*ITERATION_SCHEMA, *PER_RECORD_SCHEMA]
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


def test_each_record_carries_what_the_report_draws_of_it(tmp_path: Path) -> None:
    """The bundled example on V100s: iteration 110 is the stall the summary explains by the
    validation at 100, the first record warm-up; each record's TFLOPS/GPU is the run's FLOPs
    over its own step time."""
    out = tmp_path / "run.csv"
    _export(EXAMPLE, "--gpu", "v100-sxm2", "-o", str(out))
    back = pl.read_csv(out, schema={**ITERATION_SCHEMA, **PER_RECORD_SCHEMA})
    summary = CliRunner().invoke(main, ["summary", "-q", "--json", EXAMPLE, "--gpu", "v100-sxm2"])
    document = json.loads(summary.stdout)
    (stall,) = document["slow_steps"]
    row = back.filter(pl.col("iteration") == stall["iteration"]).row(0, named=True)
    assert (
        (row["slow_kind"], row["cause"])
        == ("stall", stall["cause"]["kind"])
        == (
            "stall",
            "evaluation",
        )
    )
    assert back.filter(pl.col("slow_kind").is_not_null()).height == 1
    assert back["warmup"].to_list() == [True] + [False] * (back.height - 1)
    flops, gpus = document["flops"]["per_iteration"], document["run"]["num_gpus"]
    expected = flops / (back["step_time_s"] * gpus * 1e12)
    assert (back["tflops_per_gpu"] - expected).abs().max() < 1e-9
    assert (
        back["mfu"] - back["tflops_per_gpu"] / document["peak"]["tflops_per_gpu"]
    ).abs().max() < 1e-12


def test_without_the_hardware_the_utilisation_is_empty(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    _export(EXAMPLE, "-o", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["mfu"] is None for r in records)
    assert all(r["tflops_per_gpu"] is not None for r in records)
