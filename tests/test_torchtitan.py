"""torchtitan stdout through the CLI (`summary FILE --json`), on real logs of each wording.

Truth read by hand from each fixture (fixtures/README.md gives every file's source):
- titan_2025_11_debugmodel_h200.log: 10 step lines, steps 1-10; step 2 at 19:45:01,496 and
  step 1 at 01,441: 0.055 s; `Building llama3 debugmodel with TransformerModelArgs(dim=256,
  n_layers=6, n_heads=16, n_kv_heads=None, vocab_size=2048, multiple_of=256,
  ffn_dim_multiplier=None, ...)`: FFN int(2·4·256/3) = 682 up to a multiple of 256 = 768;
  `Model llama3 debugmodel size: 6,163,712 total parameters`; mesh `['dp_shard'], [8]`;
  `local batch size 8, global batch size 64, ..., sequence length 2048, total steps 10`;
  `CUDA capacity: NVIDIA H200`; `Training completed`.
- titan_2025_02_llama3_8b_h200.log: 11 step lines (1, 10, ..., 100), `tps:` and `mfu:`
  without `tflops:` (and a `mmemory:` typo on step 10); steps 1 to 10 from 11:33:35,026 to
  11:33:45,521: 10.495 s / 9; `Peak FLOPS used for computing MFU: 9.890e+14`.
- titan_2024_10_wps_llama2_7b.log: `wps:` (before November 2024), no `[titan]` tag, no
  launcher label; step 2 4.177 s after step 1.
- titan_2026_02_every_rank.log: step 4 printed by 7 ranks without a label, then step 5.
- titan_2025_10_every_rank_labelled.log: step 1 printed by [rank3], [rank0], [rank1],
  [rank2]; step 10 by [rank2] only (the paste stops there).
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

TITAN = FIXTURES / "torchtitan"


def _summary(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path), *args])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _table(path: Path) -> pl.DataFrame:
    return load_run([str(path)], load_registry()).run.table


def test_a_current_run_end_to_end() -> None:
    path = TITAN / "titan_2025_11_debugmodel_h200.log"
    doc = _summary(path)
    assert doc["sources"][0]["format"] == "torchtitan"
    assert doc["iterations"] == {"logged": 10, "first": 1, "last": 10, "segments": 1, "covered": 9}
    run = doc["run"]
    assert run["model"]["num_layers"] == 6
    assert run["model"]["hidden_size"] == 256
    assert run["model"]["num_attention_heads"] == 16
    assert run["model"]["num_query_groups"] == 16  # n_kv_heads=None: one per head
    assert run["model"]["ffn_hidden_size"] == 768
    assert run["model"]["padded_vocab_size"] == 2048
    # the parameters the shape gives are those torchtitan printed
    assert run["model"]["params"] == 6_163_712
    assert (run["num_gpus"], run["parallelism"]["data"]) == (8, 8)
    assert (run["global_batch_size"], run["seq_length"]) == (64, 2048)
    assert run["gpu"]["matched"] == "NVIDIA H200"
    assert doc["outcome"]["status"] == "completed"
    table = _table(path)
    assert table["step_time_s"][1] == pytest.approx(0.055)
    assert table["step_time_s"][0] is None
    assert table["grad_norm"][0] == pytest.approx(1.4604)
    assert table["reported_tflops_per_gpu"].to_list()[:3] == [0.41, 21.55, 25.74]


def test_its_own_figures_are_reported_and_the_ratio_explained() -> None:
    doc = _summary(TITAN / "titan_2025_11_debugmodel_h200.log")
    steady = [21.55, 25.74, 24.89, 24.22, 22.72, 23.58, 26.11, 25.14, 23.21]
    assert doc["reported"]["tflops_per_gpu"] == pytest.approx(sorted(steady)[4], abs=0.5)
    assert doc["reported"]["mfu"] == pytest.approx(0.0245, abs=0.002)
    # torchtitan per token: 6·(N - embedding) + 12·l·a·d·s
    theirs = 6 * (6_163_712 - 2048 * 256) + 12 * 6 * 16 * 16 * 2048
    # the project's: 6·l·(h·(q+2k) + q·h) + 6·l·q·s + 6·l·3·h·f + 6·h·V
    ours = 6 * 6 * (256 * 768 + 256 * 256) + 6 * 6 * 256 * 2048 + 6 * 6 * 3 * 256 * 768
    ours += 6 * 256 * 2048
    assert doc["flops"]["per_iteration"] == ours * 64 * 2048
    explanation = doc["reported"]["explanation"]
    assert "torchtitan counts" in explanation
    assert f"expected ratio {ours / theirs:.3f}" in explanation


def test_a_log_that_prints_mfu_without_tflops() -> None:
    path = TITAN / "titan_2025_02_llama3_8b_h200.log"
    doc = _summary(path)
    assert doc["iterations"] == {
        "logged": 11,
        "first": 1,
        "last": 100,
        "segments": 1,
        "covered": 99,
    }
    model = doc["run"]["model"]
    assert (model["num_layers"], model["hidden_size"], model["num_query_groups"]) == (32, 4096, 8)
    assert model["ffn_hidden_size"] == 14336  # 1.3 x int(2·16384/3), up to 1024
    assert model["padded_vocab_size"] == 128256
    assert (doc["run"]["global_batch_size"], doc["run"]["seq_length"]) == (8, 8192)
    assert doc["reported"]["mfu"] == pytest.approx(0.4129, abs=0.002)
    # the TFLOPS its MFU stands for, against the peak it printed (989.0)
    assert doc["reported"]["tflops_per_gpu"] == pytest.approx(0.4129 * 989.0, rel=0.005)
    observed = doc["reported"]["recomputed_over_reported"]
    assert f"expected ratio {observed:.3f}" in doc["reported"]["explanation"]
    table = _table(path)
    assert table["step_time_s"][1] == pytest.approx(10.495 / 9)
    assert table["interval"].to_list() == [1, 9, *[10] * 9]


def test_the_older_wps_wording() -> None:
    path = TITAN / "titan_2024_10_wps_llama2_7b.log"
    run = load_run([str(path)], load_registry()).run
    assert run.table.height == 10
    assert run.table["step_time_s"][1] == pytest.approx(4.177)
    assert run.table["loss"][0] == pytest.approx(10.8235)
    assert run.table["rank"].null_count() == 10
    per_device = run.metrics.filter(
        (pl.col("name") == "tokens_per_s_per_device") & (pl.col("iteration") == 2)
    )
    assert per_device["value"].to_list() == [1962.0]


@pytest.mark.parametrize(
    ("name", "iterations", "copies"),
    [
        ("titan_2026_02_every_rank.log", [4, 5], 6),
        ("titan_2025_10_every_rank_labelled.log", [1, 10], 3),
    ],
)
def test_the_copies_every_rank_prints_count_once(
    name: str, iterations: list[int], copies: int
) -> None:
    doc = _summary(TITAN / name)
    table = _table(TITAN / name)
    assert table["iteration"].to_list() == iterations
    assert any(f"{copies} copies of step lines" in w for w in doc["warnings"])
    if name.endswith("labelled.log"):
        assert table["rank"].to_list() == [0, 2]


def test_a_current_start_up_names_a_preset_flavor() -> None:
    """The start-up of a current torchtitan prints `Building llama3 8B` and no ModelArgs;
    torchtitan fixes that flavor's shape (torchtitan/models/llama3/__init__.py): the preset
    gives the parameters the log prints."""
    doc = _summary(TITAN / "synthetic_current_startup_llama3_8b.log")
    model = doc["run"]["model"]
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (
        32,
        4096,
        14336,
    )
    assert model["params"] == 8_030_261_248
    assert doc["run"]["provenance"]["num_layers"] == "preset torchtitan llama3 8B"
    assert (doc["run"]["global_batch_size"], doc["run"]["seq_length"]) == (8, 8192)
    assert doc["run"]["num_gpus"] == 8
    assert doc["run"]["gpu"]["key"] == "h100-sxm"
    # the steps are PR 1287's llama3 8B on H100: its own count explains the ratio
    observed = doc["reported"]["recomputed_over_reported"]
    assert f"expected ratio {observed:.3f}" in doc["reported"]["explanation"]


@pytest.mark.parametrize(
    "echo",
    [
        # a TOML file printed before the run (`cat llama3_8b.toml`)
        '[model]\nname = "llama3"\nflavor = "8B"  # a comment\n\n[training]\nseq_len = 8192\n',
        # `--debug.print_config` (trainer.py: json.dumps(to_dict(), indent=2))
        "[titan] 2026-05-18 16:04:20,000 - root - INFO - Running with configs: {\n"
        '  "model_spec": {\n    "name": "llama3",\n    "flavor": "8B",\n    "model": {\n'
        '      "dim": 4096\n    }\n  },\n  "training": {\n    "max_context_length": 8192,\n'
        '    "steps": 1000\n  }\n}\n',
        # `--job.print_args` (train.py, December 2024: logger.info of job_config.to_dict())
        "[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - Running with args: "
        "{'job': {'config_file': 'llama3_8b.toml', 'description': 'Llama 3 8B training'}, "
        "'model': {'name': 'llama3', 'flavor': '8B', 'norm_type': 'rmsnorm'}, "
        "'training': {'batch_size': 1, 'seq_len': 8192, 'steps': 1000}}\n",
    ],
    ids=["toml", "json", "args"],
)
def test_an_echoed_job_config_names_the_flavor(tmp_path: Path, echo: str) -> None:
    log = tmp_path / "run.log"
    log.write_text(echo + (TITAN / "titan_2026_05_grad_norm.log").read_text(), encoding="utf-8")
    doc = _summary(log, "--global-batch-size", "8", "--num-gpus", "8")
    model = doc["run"]["model"]
    assert (model["num_layers"], model["num_query_groups"], model["padded_vocab_size"]) == (
        32,
        8,
        128256,
    )
    assert doc["run"]["seq_length"] == 8192


def test_detection_claims_only_what_it_reads(tmp_path: Path) -> None:
    registry = load_registry()
    parser = registry.get("torchtitan")
    other = tmp_path / "other.log"
    other.write_text("step: 10 loss: 2.0\nvalidate step: 10  loss: 2.1\n", encoding="utf-8")
    assert parser.detect(other) == 0.0
    assert parser.detect(TITAN / "titan_2024_10_wps_llama2_7b.log") >= 0.9


# metrics.py's validator line and the checkpointer's save line (2025 wording), between
# step lines of PR 1884's form.
EVENTS = (
    "[rank0]:[titan] 2025-10-15 10:37:07,957 - root - INFO - step: 10  loss: 10.2391"
    "  grad_norm: 16.1413  memory: 44.84GiB(47.19%)  tps: 5,615  tflops: 325.20  mfu: 32.88%\n"
    "[rank0]:[titan] 2025-10-15 10:37:08,000 - root - INFO - Saving the checkpoint (or"
    " staging if async is enabled).\n"
    "[rank0]:[titan] 2025-10-15 10:37:19,000 - root - INFO - \x1b[33mvalidate step: 10"
    "  \x1b[32mloss:  9.8765  \x1b[36mmemory: 44.84GiB(47.19%)  \x1b[34mtps: 12,000\x1b[39m\n"
    "[rank0]:[titan] 2025-10-15 10:37:29,957 - root - INFO - step: 20  loss: 10.1000"
    "  grad_norm: 16.1413  memory: 44.84GiB(47.19%)  tps: 5,615  tflops: 325.20  mfu: 32.88%\n"
)


def test_saves_and_validations_go_to_the_long_table(tmp_path: Path) -> None:
    """A save is tied to the step line before it, a validation to the step it names; the
    validator's `validate step:` is no training step."""
    log = tmp_path / "run.log"
    log.write_text(EVENTS, encoding="utf-8")
    run = load_run([str(log)], load_registry()).run
    assert run.table["iteration"].to_list() == [10, 20]
    assert isinstance(run.metrics, pl.DataFrame)
    events = run.metrics.filter(pl.col("name").cast(pl.String).str.contains("/"))
    assert events.select("iteration", "name", "value").rows() == [
        (10, "event/checkpoint_save", 1.0),
        (10, "validation/loss", 9.8765),
    ]
