"""HF Trainer saves and evaluations as evidence the analysis reads: an output_dir's
`checkpoint-N/` folders and trainer_state.json's `save_steps`/`eval_steps`, stdout's
`Saving model checkpoint to …/checkpoint-N` lines and `eval_*` dicts, under the names every
parser gives them (`event/checkpoint_save`, `validation/<key>`)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.parsers.hf_trainer import HfTrainerParser
from tests.conftest import ROOT


def _names(run_metrics: pl.DataFrame, name: str) -> list[int]:
    rows = run_metrics.filter(pl.col("name").cast(pl.String) == name)
    return sorted(rows["iteration"].to_list())


def test_output_dir_checkpoints_and_evaluations_explain_the_slow_steps(
    shared_logs: Path,
) -> None:
    """generated/hf_run: checkpoint-20/ and checkpoint-40/, eval_loss at 20 and 40,
    save_steps and eval_steps 20; iterations 21-25 paid for the evaluation and the save at 20
    (before: "unknown")."""
    out = shared_logs / "generated/hf_run/out"
    run = HfTrainerParser().parse(out / "trainer_state.json")
    assert _names(run.metrics, "event/checkpoint_save") == [20, 40]
    assert _names(run.metrics, "validation/eval_loss") == [20, 40]
    assert (run.get("save_steps"), run.get("eval_steps")) == (20, 20)
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(out)])
    assert result.exit_code == 0, result.output
    slow = {s["first_iteration"]: s["cause"] for s in json.loads(result.stdout)["slow_steps"]}
    assert slow[21]["kind"] == "checkpoint_save"
    assert "iteration 20" in slow[21]["evidence"]


def test_stdout_save_lines_and_evaluations(shared_logs: Path) -> None:
    saved = HfTrainerParser().parse(ROOT / "fixtures/hf_trainer/real/hef1023_seq2seq.log")
    saves = saved.metrics.filter(pl.col("name").cast(pl.String) == "event/checkpoint_save")
    assert saves["iteration"].to_list() == [500, 1000, 1500]
    assert saves["line"].to_list() == [10, 13, 16]
    evaluated = HfTrainerParser().parse(shared_logs / "generated/hf_run/stdout.bin")
    assert _names(evaluated.metrics, "validation/eval_loss") == [20, 40]
