"""Figures a reader quotes: over the right records, named for what they are, with their
confidence, and with the command line's overrides said out loud."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.flops.efficiency import measure, resolve_facts
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from loganalyzer.summary import build_summary
from tests.conftest import FIXTURES, ROOT

LLAMA = FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log"
BIGSCIENCE = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"


def summary(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_reported_tflops_are_taken_over_the_steady_records() -> None:
    run = load_run([str(LLAMA)], load_registry()).run
    facts = resolve_facts(run, {"shape": {}, "run": {"gpu": "h100-sxm"}})
    steady_rows = pl.Series([0, 1, 2], dtype=pl.get_index_type())
    efficiency = measure(run, facts, float(run.table["step_time_s"][0]), (3, 1.0), steady_rows)
    assert (
        efficiency.reported_tflops_per_gpu == run.table["reported_tflops_per_gpu"].head(3).median()
    )
    # the ratio shown is the ratio of the two figures shown
    assert efficiency.recomputed_over_reported == pytest.approx(
        (efficiency.tflops_per_gpu or 0) / (efficiency.reported_tflops_per_gpu or 1)
    )


def test_logged_time_is_the_same_whatever_the_cores() -> None:
    """Sums of 500,000 step times (the logged time, the segments' clock), summed by polars
    with one, two and four threads: the same numbers to the last bit (an expression's sum
    and a hashed group's cut their column by thread)."""
    code = (
        "import numpy as np; from tests.analysis_factories import make_table;"
        "from loganalyzer.model import empty_metrics; from loganalyzer.analysis import analyse;"
        "from loganalyzer.analysis.goodput import segments_clock;"
        "steps = np.random.default_rng(1).lognormal(0, 0.3, 500_000).tolist();"
        "table = make_table(steps, iterations=range(1, 500_001));"
        "print(analyse(table, empty_metrics()).time.logged_s.hex(), segments_clock(table))"
    )
    printed = {
        subprocess.run(
            [sys.executable, "-c", code],
            env=os.environ | {"POLARS_MAX_THREADS": threads, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for threads in ("1", "2", "4")
    }
    assert len(printed) == 1, printed


def test_goodput_mfu_counts_kept_work_over_the_wall_clock() -> None:
    """restart_dir: 120 iterations logged, 20 redone; a 29.5-minute gap between attempts."""
    doc = summary(str(FIXTURES / "megatron" / "restart_dir"), "--gpu", "h100-sxm")
    flops, time = doc["flops"], doc["time"]
    wall = time["logged_s"] + time["lost_s"]["stalls"] + doc["restarts"][0]["gap_s"]
    peak = doc["peak"]["tflops_per_gpu"]
    expected = flops["per_iteration"] * 100 / (wall * 8 * 1e12) / peak
    assert flops["mfu_goodput"] == pytest.approx(expected, rel=1e-9)
    assert flops["mfu_goodput"] < flops["mfu_overall"] / 10  # the gap dwarfs the work


def test_few_steady_records_mark_the_figures_low_confidence() -> None:
    doc = summary(str(FIXTURES / "megatron" / "core_v0_6_mixtral_throughput.txt"),
                  "--model", "mixtral-8x7b", "--seq-length", "4096", "--num-gpus", "16",
                  "--gpu", "h100-sxm", "--dtype", "bf16")  # fmt: skip
    assert doc["confidence"] == "low"
    assert "rest on 8 records (fewer than 10)" in doc["confidence_reason"]
    mfu_verdicts = [v for v in doc["verdicts"] if v["code"].startswith(("MFU_", "REPORTED_"))]
    assert mfu_verdicts and all(v["severity"] == "info" for v in mfu_verdicts)
    assert all("low confidence" in v["message"] for v in mfu_verdicts)


def test_enough_steady_records_are_normal_confidence() -> None:
    doc = summary(str(BIGSCIENCE), "--gpu", "v100-sxm2")
    assert (doc["confidence"], doc["confidence_reason"]) == ("normal", None)
    assert any(v["severity"] == "warning" for v in doc["verdicts"])


def test_an_option_that_overrides_the_log_is_a_warning_naming_both() -> None:
    doc = summary(str(BIGSCIENCE), "--gpu", "v100-sxm2", "--hidden-size", "8192",
                  "--num-gpus", "64")  # fmt: skip
    warnings = doc["warnings"]
    assert any(
        w.startswith(f"hidden_size = 8192 from the command line overrides 7168 ({BIGSCIENCE}:")
        for w in warnings
    ), warnings
    assert any(w.startswith("--num-gpus 64 overrides the log's 32 (") for w in warnings), warnings


def test_the_same_value_on_the_command_line_is_no_warning() -> None:
    doc = summary(str(BIGSCIENCE), "--gpu", "v100-sxm2", "--hidden-size", "7168")
    assert not any("overrides" in w for w in doc["warnings"])


def test_step_time_line_separates_steady_from_all_records() -> None:
    result = CliRunner().invoke(main, ["summary", "-q", str(BIGSCIENCE), "--gpu", "v100-sxm2"])
    assert "step time   steady median 1.617 s over 18 records\n" in result.stdout
    assert "all records: mean 1.702 s, p90 1.64 s, min 1.573 s, max 3.171 s" in result.stdout


def test_no_advice_to_lower_warmup_without_records(shared_logs: Path) -> None:
    """megatron_1.txt holds the start-up only: no record, so no --warmup to lower."""
    doc = summary(str(shared_logs / "excerpts/megatron_1.txt"), "--gpu", "h100-sxm")
    assert "no timed iteration record: steady TFLOPS and MFU unknown" in doc["warnings"]
    assert not any("--warmup" in w for w in doc["warnings"])


def test_advice_to_lower_warmup_where_warmup_covers_the_run() -> None:
    doc = summary(str(BIGSCIENCE), "--gpu", "v100-sxm2", "--warmup", "1000")
    assert any(w.endswith("lower --warmup") for w in doc["warnings"])


def test_zero_run_derives_dp_from_the_world_size(shared_logs: Path) -> None:
    """64 V100s, TP=4, ZeRO (no pipeline): DP = 64 / 4 = 16."""
    path = shared_logs / "bigscience/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16_nbs48_ms48.out"
    doc = summary(str(path), "--gpu", "v100-sxm2")
    assert doc["run"]["parallelism"]["tensor"] == 4
    assert doc["run"]["parallelism"]["data"] == 16
    assert doc["run"]["provenance"]["data_parallel_size"].startswith("derived: GPUs / (TP")


def test_moe_shows_and_compares_active_parameters() -> None:
    doc = summary(str(FIXTURES / "megatron" / "core_v0_6_mixtral_throughput.txt"),
                  "--model", "mixtral-8x7b", "--seq-length", "4096", "--num-gpus", "16",
                  "--gpu", "h100-sxm", "--dtype", "bf16")  # fmt: skip
    model = doc["run"]["model"]
    assert model["params"] == 46_702_792_704
    assert model["active_params"] == 12_879_925_248
    (reference,) = [v for v in doc["verdicts"] if v["code"].startswith("MFU_")]
    assert "of similar size" in reference["message"]  # 12.9B active: MPT-7B .. 70B


def test_a_2021_arguments_dump_without_swiglu_is_no_assumption() -> None:
    doc = summary(str(BIGSCIENCE), "--gpu", "v100-sxm2")
    assert not any("swiglu" in w for w in doc["warnings"])


def test_an_assumed_precision_is_shown_where_the_figure_is() -> None:
    # a log that states no precision and whose loss scale (1.0) proves none
    args = [
        "summary",
        "-q",
        str(FIXTURES / "bad" / "lone_cr.log"),
        "--gpu",
        "h100-sxm",
    ]
    result = CliRunner().invoke(main, args)
    assert "precision    bf16 (assumed)" in result.stdout
    assert "precision unknown: bf16 assumed; pass --dtype" in result.stdout


def test_a_warning_is_given_once_per_run() -> None:
    """Each file of a run may say the same thing: the summary says it once."""
    loaded = load_run([str(FIXTURES / "megatron" / "restart_dir")], load_registry())
    loaded.run.warnings.extend(["the same note from each file"] * 2)
    doc = build_summary(loaded, {"shape": {}, "run": {"gpu": "h100-sxm"}})
    assert doc["warnings"].count("the same note from each file") == 1
