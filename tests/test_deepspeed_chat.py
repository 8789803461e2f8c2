"""DeepSpeed-Chat's own statements in a DeepSpeed log: its scripts' arguments on an echoed
launch command, and the throughput line of steps 1 and 2 (its sequence length and per-GPU
batch read; its TFLOPs figure, which is not per GPU, left out and said so)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from loganalyzer.load import load_run
from loganalyzer.model import Run
from loganalyzer.parsers.deepspeed import parser as ds_parser
from loganalyzer.registry import load_registry


def _run(path: Path) -> Run:
    return load_run([str(path)], load_registry()).run


# deepspeedai/DeepSpeedExamples:applications/DeepSpeed-Chat/training/step1_supervised_finetuning/
# training_log_output/opt-1.3b-globalBatchSize128.log@3a77097a7b6ce67b78ea7c05129b90915cfebbb0
# lines 1, 12, 13 (fixtures/corpus/deepspeed_chat/step1_opt13b_zero2_2023.log)
STEP1 = (
    "cmd = deepspeed main.py --data_path Dahoas/rm-static Dahoas/full-hh-rlhf"
    " Dahoas/synthetic-instruct-gptj-pairwise yitingxie/rlhf-reward-datasets --data_split 2,4,4"
    " --model_name_or_path facebook/opt-1.3b --per_device_train_batch_size 8"
    " --per_device_eval_batch_size 8 --max_seq_len 512 --learning_rate 9.65e-6 --weight_decay"
    " 0. --num_train_epochs 16 --gradient_accumulation_steps 1 --lr_scheduler_type cosine"
    " --num_warmup_steps 0 --seed 1234 --zero_stage 2 --deepspeed --output_dir"
    " ./output_fourDatasets_reproduce_withDropout\n"
    "[2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=6,"
    " lr=[9.649992967150629e-06, 9.649992967150629e-06], mom=[(0.9, 0.95), (0.9, 0.95)]\n"
    "[2023-04-18 01:46:59,171] [INFO] [timer.py:199:stop] epoch=0/micro_step=10/global_step=10,"
    " RunningAvgSamplesPerSec=173.4455644119137, CurrSamplesPerSec=171.97903593624417,"
    " MemAllocated=3.96GB, MaxMemAllocated=22.95GB\n"
)
# DeepSpeed's runner (launcher/runner.py: `logger.info(f"cmd = {' '.join(cmd)}")`), the user
# script and its arguments after the launch module's own.
RUNNER = (
    "[2023-04-18 01:40:02,001] [INFO] [runner.py:541:main] cmd = /usr/bin/python -u -m"
    " deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1"
    " --master_port=29500 --enable_each_rank_log=None main.py --model_name_or_path"
    " facebook/opt-350m --per_device_train_batch_size=4 --max_seq_len=256\n"
)


@pytest.mark.parametrize(
    ("command", "seq", "micro"),
    [(STEP1.split("\n")[0] + "\n", 512, 8), (RUNNER, 256, 4)],
)
def test_the_echoed_launch_commands_arguments_give_seq_length_and_micro_batch(
    tmp_path: Path, command: str, seq: int, micro: int
) -> None:
    path = tmp_path / "train.log"
    path.write_text(command + "\n".join(STEP1.split("\n")[1:]))
    run = _run(path)
    assert run.config["seq_length"].value == seq
    assert run.config["seq_length"].provenance.line == 1
    assert run.config["micro_batch_size"].value == micro


def test_arguments_not_on_a_launch_command_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("see --max_seq_len 1024 in the README\n" + "\n".join(STEP1.split("\n")[1:]))
    assert "seq_length" not in _run(path).config


# deepspeedai/DeepSpeedExamples:applications/DeepSpeed-Chat/training/step2_dpo_finetuning/
# training_log_output/opt-350M_globalBatchSize-32.log@1842b4fddfcfaedffbb697f53ffe3a57aea718c4
# lines 617-619 (fixtures/corpus/deepspeed_chat/step2_dpo_opt350m_2025.log lines 18-20):
# 8 GPUs, so its TFLOPs (0.57) is one GPU's figure / 8.
DPO = (
    "[2025-01-02 15:47:38,841] [INFO] [logging.py:128:log_dist] [Rank 0] step=10, skipped=4,"
    " lr=[4.999919851200522e-05, 4.999919851200522e-05], mom=[(0.9, 0.95), (0.9, 0.95)]\n"
    "[2025-01-02 15:47:38,842] [INFO] [timer.py:264:stop] epoch=0/micro_step=20/global_step=10,"
    " RunningAvgSamplesPerSec=46.98077573584925, CurrSamplesPerSec=50.86885115471782,"
    " MemAllocated=5.53GB, MaxMemAllocated=8.61GB\n"
    "Model Parameters: 0.331 B, Latency: 0.49s, TFLOPs: 0.57, Samples/sec: 4.09, Time/seq"
    " 0.24s, Batch Size: 2, Sequence Length: 512\n"
)


def test_the_throughput_line_gives_seq_length_not_tflops_per_gpu(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(DPO)
    run = _run(path)
    assert run.config["seq_length"].value == 512
    assert run.config["seq_length"].provenance.line == 3
    assert run.config["micro_batch_size"].value == 2
    assert run.table["reported_tflops_per_gpu"].is_null().all()
    assert any("DeepSpeed-Chat's `TFLOPs:`" in w and "world size" in w for w in run.warnings)


def test_rows_held_for_the_config_do_not_grow_with_the_throughput_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The throughput line is printed every micro-step: the rows kept for the config are the
    distinct statements, as many for 2,000 steps as for 2, and the first one still gives the
    line."""
    held: list[int] = []
    real = ds_parser.engine_config

    def counting(rows: pl.DataFrame, source: str) -> dict[str, object]:
        held.append(rows.height)
        return real(rows, source)  # type: ignore[return-value]

    monkeypatch.setattr(ds_parser, "engine_config", counting)
    for steps in (2, 2_000):
        path = tmp_path / f"train{steps}.log"
        path.write_text(DPO * steps)
        run = _run(path)
        assert run.config["seq_length"].value == 512
        assert run.config["seq_length"].provenance.line == 3
    assert held[0] == held[1] <= 3
