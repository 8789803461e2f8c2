"""NeMo 1, NeMo 2 and Megatron-Bridge stdout through the CLI: records, step times, config,
reported figures and the FLOPs/MFU computed from the printed config.

Each fixture's source and hand-read truth are in fixtures/README.md; the expected numbers
below were read off the files by eye (or grep), not from the parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import choose, load_registry, scores
from tests.conftest import FIXTURES, ROOT, assert_golden

NEMO = FIXTURES / "nemo"
BRIDGE = NEMO / "bridge_0_2_llama32_1b.log"
NEMO1 = NEMO / "nemo1_gpt_bars.log"
PERF = NEMO / "nemo2_perf_tflops.txt"
BIONEMO = NEMO / "nemo2_bionemo_val_loss.txt"


def summary(path: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path), *extra])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_nemo2_progress_lines_with_flops_callback() -> None:
    # amanshanbhag/NeMo-AWS:PERF_README.md (NeMo v2.5.0rc0 performance scripts):
    # "Training epoch 0, iteration 74/99 | lr: 1.124e-05 | global_batch_size: 128 |
    #  global_step: 74 | ... | train_step_timing in s: 8.768 | TFLOPS_per_GPU: 865.7 | ..."
    doc = summary(PERF)
    assert doc["sources"] == [
        {"path": str(PERF), "format": "nemo", "records": 3, "unit": "line", "tags": {}}
    ]
    # numbered from 1 as Megatron counts: global_step 74 is the 75th step
    assert doc["iterations"] == {"logged": 3, "first": 75, "last": 77, "segments": 1, "covered": 3}
    assert doc["step_time_s"]["min"] == 8.748
    assert doc["step_time_s"]["max"] == 8.768
    assert doc["reported"]["tflops_per_gpu"] == pytest.approx(866.9)  # median of 865.7/867.7/866.9
    assert doc["run"]["framework"] == "nemo2"
    assert doc["run"]["global_batch_size"] == 128
    assert doc["outcome"]["train_iters"] == 100  # "iteration 74/99": steps 0..99
    assert doc["outcome"]["status"] == "unknown"  # an excerpt: no line says how it ended
    # max_memory_allocated: 62777982976 bytes = 58.47 GiB
    assert doc["health"]["memory"]["max_allocated_gb"] == pytest.approx(62777982976 / 2**30)


def test_nemo2_fields_without_a_column_go_to_the_long_table() -> None:
    # NVIDIA-BioNeMo/bionemo-recipes PR 740: "... | reduced_train_loss: 1.233 |
    # train_step_timing in s: 0.03146 | val_loss: 4.106"
    run = load_run([str(BIONEMO)], load_registry()).run
    table = run.table
    assert table.get_column("iteration").to_list() == [121, 122, 123, 124, 125, 126]
    assert table.get_column("loss").to_list() == [1.233, 1.288, 1.333, 1.245, 1.375, 1.34]
    assert table.get_column("step_time_s").to_list() == [
        0.03146,
        0.03163,
        0.03215,
        0.03157,
        0.0317,
        0.03147,
    ]
    assert table.get_column("lr").to_list() == [3e-05] * 6
    long = run.metrics.filter(run.metrics["name"].cast(str) == "val_loss")
    assert long.get_column("value").to_list() == [4.106] * 6
    consumed = run.metrics.filter(run.metrics["name"].cast(str) == "consumed_samples")
    assert consumed.get_column("value").to_list() == [121.0, 122.0, 123.0, 124.0, 125.0, 126.0]


def test_nemo1_lightning_bars_and_hydra_config() -> None:
    doc = summary(NEMO1, "--gpu", "h100-sxm")
    # the last frame of each step: global_step 996..1004 (`global_step=1e+3` past 999: by the
    # bar's count 1001..1005), numbered from 1
    assert doc["iterations"] == {
        "logged": 9,
        "first": 997,
        "last": 1005,
        "segments": 1,
        "covered": 9,
    }
    # "`Trainer.fit` stopped: `max_steps=1005` reached." (Lightning's fit loop)
    assert doc["outcome"]["status"] == "completed"
    assert doc["outcome"]["train_iters"] == 1005
    assert doc["step_time_s"]["min"] == 2.59
    assert doc["step_time_s"]["max"] == 2.62
    run = doc["run"]
    assert run["framework"] == "nemo1"
    assert run["num_gpus"] == 16  # trainer.devices 8 x trainer.num_nodes 2
    assert run["dtype"] == "bf16"  # trainer.precision: bf16
    assert run["global_batch_size"] == 256
    assert run["seq_length"] == 2048  # model.encoder_seq_length
    assert run["recompute"] == "selective"  # activations_checkpoint_granularity
    assert run["parallelism"] == {
        "tensor": 2,
        "pipeline": 1,
        "data": 8,
        "context": None,
        "expert": None,
    }
    model = run["model"]
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (24, 2048, 5440)
    assert model["num_attention_heads"] == 16
    assert model["padded_vocab_size"] == 50432  # "Padded vocab_size: 50432, original ..."
    assert model["swiglu"] is True  # activation: fast-swiglu
    # the formula by hand: B*s*[6l(h(q+2k)+qh) + 6lqs + 6l*3*h*f + 6hV], MHA (k = q = h)
    b, s, lay, h, f, v = 256, 2048, 24, 2048, 5440, 50432
    hand = b * s * (6 * lay * (h * 3 * h + h * h) + 6 * lay * h * s + 18 * lay * h * f + 6 * h * v)
    assert doc["flops"]["per_iteration"] == hand
    pace = doc["step_time_s"]["median"]
    assert doc["flops"]["tflops_per_gpu"] == pytest.approx(hand / pace / 16 / 1e12)


def test_bridge_log_reads_iteration_lines_and_the_task_configuration() -> None:
    # verdimrc/playground-nemo-2.0-gh:05-byoc-te-mb/with-ngc-pytorch-25.06-cleanup.md@6129a1a
    doc = summary(BRIDGE, "--gpu", "h100-sxm")
    assert doc["sources"] == [
        {"path": str(BRIDGE), "format": "nemo", "records": 1, "unit": "line", "tags": {}}
    ]
    assert doc["iterations"] == {"logged": 1, "first": 10, "last": 10, "segments": 1, "covered": 10}
    assert doc["step_time_s"]["median"] == 4.6478  # elapsed time per iteration (ms): 4647.8
    run = doc["run"]
    assert run["framework"] == "megatron-bridge"
    assert run["num_gpus"] == 8  # "[Gloo] Rank 0 is connected to 7 peer ranks"
    assert run["dtype"] == "bf16"  # mixed_precision.bf16: true
    assert run["global_batch_size"] == 512  # train.global_batch_size
    assert run["seq_length"] == 1024  # dataset.sequence_length (model.seq_length is 131072)
    model = run["model"]
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (16, 2048, 8192)
    assert (model["num_attention_heads"], model["num_query_groups"]) == (32, 8)
    assert model["padded_vocab_size"] == 128256  # should_pad_vocab: false
    assert model["swiglu"] is True  # gated_linear_unit: true
    # "Step Time : 4.65s GPU utilization: 59892.5TFLOP/s/GPU": Bridge's own figure
    assert doc["reported"]["tflops_per_gpu"] == 59892.5
    b, s, lay, h, q, k, f, v = 512, 1024, 16, 2048, 2048, 512, 8192, 128256
    hand = b * s * (6 * lay * (h * (q + 2 * k) + q * h) + 6 * lay * q * s)
    hand += b * s * (18 * lay * h * f + 6 * h * v)
    assert doc["flops"]["per_iteration"] == hand
    assert any("dataset's 1024" in w and "model's 131072" in w for w in doc["warnings"])


def test_bridge_log_was_the_megatron_parsers_before() -> None:
    """Both read the iteration lines; only the NeMo parser reads Bridge's config dump, so it
    claims the file above the Megatron parser."""
    registry = load_registry()
    found = scores(registry, BRIDGE)
    assert found["megatron"] == 0.95
    assert found["nemo"] > found["megatron"]
    assert choose(registry, BRIDGE) == "nemo"


@pytest.mark.parametrize("path", [BIONEMO, PERF, NEMO1], ids=lambda p: p.name)
def test_nemo_logs_are_not_claimed_by_megatron(path: Path) -> None:
    assert choose(load_registry(), path) == "nemo"


@pytest.mark.parametrize(
    "path", sorted(p for p in NEMO.iterdir() if p.is_file()), ids=lambda p: p.name
)
def test_summary_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", str(path.relative_to(ROOT)), "--gpu", "h100-sxm"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert_golden(f"nemo/{path.name}.json", result.stdout)
    run = load_run([str(path.relative_to(ROOT))], load_registry()).run
    assert_golden(f"nemo/{path.name}.table.csv", run.table.write_csv())


def test_nemo1_bar_without_step_timing_glued_to_a_watchdog() -> None:
    # pytorch/pytorch issue 118369 (fixtures/endings): a real NeMo 1 bar, `global_step=3.2e+4`,
    # no `train_step_timing in s`, an NCCL watchdog glued after the frame
    path = FIXTURES / "endings" / "nccl_timeout" / "pytorch_118369_bar_glued_watchdog_hours.log"
    doc = summary(path)
    assert doc["sources"][0]["format"] == "nemo"
    assert doc["iterations"]["last"] == 32040  # the bar's count: global_step is inexact
    assert doc["step_time_s"]["median"] is None
    assert any("train_step_timing" in w for w in doc["warnings"])
    outcome = doc["outcome"]
    assert (outcome["status"], outcome["reason"], outcome["last_iteration"]) == (
        "crashed",
        "nccl_timeout",
        32040,
    )
    # the watchdog glued after the bar on line 1 is the first failure, not line 2's
    assert outcome["collective"]["seq"] == 96120


def test_a_nemo1_run_that_died_before_its_first_step(tmp_path: Path) -> None:
    """The config dump and a traceback, no bar: the config is read, no records, the crash."""
    head = NEMO1.read_text(encoding="utf-8").splitlines()[:150]
    crash = [
        "0: Traceback (most recent call last):",
        '0:   File "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py",'
        " line 40, in main",
        "0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    path = tmp_path / "died.log"
    path.write_text("\n".join([*head, *crash]) + "\n", encoding="utf-8")
    assert choose(load_registry(), path) == "nemo"
    doc = summary(path)
    assert doc["iterations"]["logged"] == 0
    assert doc["run"]["num_gpus"] == 16
    assert doc["run"]["model"]["num_layers"] == 24
    assert doc["outcome"]["status"] == "crashed"
    assert doc["outcome"]["exception"] == "OutOfMemoryError"


def test_no_other_frameworks_fixture_is_claimed_by_nemo() -> None:
    """Detection claims what the parser reads: NeMo's lines, bars and dumps, nothing of
    Megatron-LM's, DeepSpeed's or the HF Trainer's own logs."""
    registry = load_registry()
    for family in ("megatron", "megatron_deepspeed", "deepspeed", "hf_trainer", "corpus"):
        for path in sorted((FIXTURES / family).rglob("*")):
            if path.is_file():
                assert scores(registry, path)["nemo"] == 0.0, path


def test_a_megatron_log_with_a_nemo_logger_line_stays_megatrons(tmp_path: Path) -> None:
    """Megatron-LM's iteration lines under NeMo's logger prefix (NeMo 1 runs megatron-core):
    the NeMo parser reads none of them, so it claims the file below the Megatron parser."""
    megatron = (FIXTURES / "megatron" / "core_v0_6_mixtral_throughput.txt").read_text()
    path = tmp_path / "mixed.log"
    path.write_text(
        "[NeMo W 2024-04-06 02:50:00 nemo_logging:349] a warning\n" + megatron, encoding="utf-8"
    )
    found = scores(load_registry(), path)
    assert found["nemo"] < found["megatron"]
    assert choose(load_registry(), path) == "megatron"
