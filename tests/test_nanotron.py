"""nanotron stdout through the CLI (`summary FILE --json`), on real logs of three dates.

Truth read by hand from each fixture (fixtures/README.md gives every file's source):
- nanotron_2024_08_tiny_llama.log: the printed Config (ParallelismArgs dp=1 pp=1 tp=1,
  LlamaConfig hidden_size=16, intermediate_size=64, num_attention_heads=4,
  num_hidden_layers=2, num_key_value_heads=4, tie_word_embeddings=True, vocab_size=256,
  dtype=torch.bfloat16, TokensArgs sequence_length=256 micro_batch_size=2), `[Start
  training] ... global_batch_size: 2 | sequence_length: 256`, 15 iteration lines;
  iteration 1 `elapsed_time_per_iteration_ms: 4.71K`, iteration 2 `11.8`, `consumed_tokens:
  1.02K`, `tokens_per_sec: 43.2K`, `model_tflops_per_gpu: 0.00744`; `Total number of
  parameters: 12.4K`.
- nanotron_2024_01_pr23.log: iterations 991-993 of 1000, `elapsed_time_per_iteration_ms: 45`,
  `tokens_per_sec: 14.2K`, `cuda_max_memory_reserved: 547M`, `hd_total_memory_tb: 312G`.
- nanotron_2025_10_long_run.log: iterations 327281-327284, `11.5K` ms, `consumed_tokens:
  85.8G`, `model_tflops_per_gpu: 38.3`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES

NANOTRON = FIXTURES / "nanotron"


def _summary(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path), *args])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _metric(path: Path, name: str, iteration: int) -> list[float]:
    metrics = load_run([str(path)], load_registry()).run.metrics
    assert isinstance(metrics, pl.DataFrame)
    found = metrics.filter((pl.col("name") == name) & (pl.col("iteration") == iteration))
    return found["value"].to_list()


def test_a_run_with_its_printed_config_end_to_end() -> None:
    path = NANOTRON / "nanotron_2024_08_tiny_llama.log"
    doc = _summary(path)
    assert doc["sources"][0]["format"] == "nanotron"
    assert doc["iterations"] == {"logged": 15, "first": 1, "last": 15, "segments": 1, "covered": 15}
    model = doc["run"]["model"]
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (2, 16, 64)
    assert (model["num_attention_heads"], model["num_query_groups"]) == (4, 4)
    assert model["padded_vocab_size"] == 256
    assert model["params"] == pytest.approx(12_400, rel=0.005)  # printed `12.4K`
    run = doc["run"]
    assert (run["global_batch_size"], run["seq_length"], run["num_gpus"]) == (2, 256, 1)
    assert (run["dtype"], run["dtype_assumed"]) == ("bf16", False)
    assert doc["outcome"]["status"] == "completed"  # iteration 15 of its 15
    table = load_run([str(path)], load_registry()).run.table
    assert table["step_time_s"][:2].to_list() == pytest.approx([4.71, 0.0118])
    assert table["tokens_per_s"][1] == pytest.approx(43_200)
    assert table["reported_tflops_per_gpu"][1] == pytest.approx(0.00744)
    assert table["loss"][1] == pytest.approx(5.29)
    assert _metric(path, "consumed_tokens", 2) == [1020.0]


def test_its_own_tflops_are_reported_and_the_ratio_explained() -> None:
    doc = _summary(NANOTRON / "nanotron_2024_08_tiny_llama.log")
    # nanotron's get_flops per token: 3 x (qkv, q·k, ·v, out, gated MLP, logits) forward
    layers, h, a, s, f, v, kv = 2, 16, 4, 256, 64, 256, 4
    d = h // a
    forward = (
        2 * layers * h * (a * d + 2 * kv * d)
        + 2 * layers * a * s * d * 2
        + 2 * layers * a * d * h
        + 4 * layers * h * f
        + 2 * layers * f * h
        + 2 * h * v
    )
    theirs = 3 * forward
    ours = doc["flops"]["per_iteration"] / (2 * 256)
    explanation = doc["reported"]["explanation"]
    assert explanation.startswith("nanotron's model_tflops_per_gpu counts")
    assert f"expected ratio {ours / theirs:.3f}" in explanation
    codes = [verdict["code"] for verdict in doc["verdicts"]]
    assert "REPORTED_TFLOPS_MISMATCH" not in codes


@pytest.mark.parametrize(
    ("name", "first", "step", "metric", "value"),
    [
        ("nanotron_2024_01_pr23.log", 991, 0.045, "cuda_max_memory_reserved", 547e6),
        ("nanotron_2024_01_pr23.log", 991, 0.045, "hd_total_memory_tb", 312e9),
        ("nanotron_2025_10_long_run.log", 327281, 11.5, "consumed_tokens", 85.8e9),
    ],
)
def test_figures_with_suffixes(
    name: str, first: int, step: float, metric: str, value: float
) -> None:
    path = NANOTRON / name
    table = load_run([str(path)], load_registry()).run.table
    assert table["iteration"][0] == first
    assert table["step_time_s"][0] == pytest.approx(step)
    assert _metric(path, metric, first) == [pytest.approx(value)]
    doc = _summary(path)
    assert any("3 significant digits" in w for w in doc["warnings"])


def test_detection_claims_only_what_it_reads(tmp_path: Path) -> None:
    parser = load_registry().get("nanotron")
    other = tmp_path / "other.log"
    other.write_text("iteration: 3 / 10 | loss: 2.0\n", encoding="utf-8")
    assert parser.detect(other) == 0.0
    assert parser.detect(NANOTRON / "nanotron_2025_10_long_run.log") >= 0.9


def test_the_current_wording() -> None:
    """Since March 2025: `time_per_iteration_ms`, `global_batch_size` in tokens (524K: not
    exact, kept in the long table as global_batch_tokens), `eta: 0:03:56` (no figure), the
    logger's date without its year (no timestamp), the start line after a separator."""
    path = NANOTRON / "synthetic_2025_current_wording.log"
    doc = _summary(path)
    assert doc["iterations"] == {"logged": 4, "first": 1, "last": 4, "segments": 1, "covered": 4}
    assert (doc["run"]["global_batch_size"], doc["run"]["seq_length"]) == (128, 4096)
    run = load_run([str(path)], load_registry()).run
    assert run.table["step_time_s"].to_list() == pytest.approx([7.94, 2.41, 2.4, 2.42])
    assert run.table["global_batch_size"].null_count() == 4
    assert run.table["timestamp"].null_count() == 4
    assert run.table["grad_norm"].to_list() == pytest.approx([0.92, 1.2, 1.34, 1.1])
    assert _metric(path, "global_batch_tokens", 2) == [524_000.0]
    assert _metric(path, "eta", 2) == []


def test_a_printed_batch_of_1000_or_more_is_not_taken_as_exact(tmp_path: Path) -> None:
    """human_format prints 1024 sequences as `1.02K`: the exact batch is the config's."""
    line = (NANOTRON / "nanotron_2025_10_long_run.log").read_text().splitlines()[0]
    log = tmp_path / "run.log"
    log.write_text(line.replace("global_batch_size: 64", "global_batch_size: 1.02K") + "\n")
    table = load_run([str(log)], load_registry()).run.table
    assert table["global_batch_size"].to_list() == [None]
    assert _metric(log, "global_batch_size", 327281) == [1020.0]


def test_a_checkpoint_save_is_tied_to_the_iteration_before_it() -> None:
    path = NANOTRON / "nanotron_2024_08_tiny_llama.log"  # `Saving checkpoint at checkpoints/10`
    assert _metric(path, "event/checkpoint_save", 10) == [1.0]
