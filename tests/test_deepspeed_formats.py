"""DeepSpeed facts beyond the step records: the dynamic loss scale, the GPU count, the
precision flags of the printed config JSON and the pipeline engine's batch size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loganalyzer.load import load_run
from loganalyzer.model import Run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES


def _run(path: Path) -> Run:
    return load_run([str(path)], load_registry()).run


def test_the_loss_scale_is_the_last_one_printed(tmp_path: Path) -> None:
    """fixtures/deepspeed/overflow_fp16.log (real): ten overflows halve the scale from
    4294967296 to 4194304 before step 10, seven more to 32768 before step 20."""
    run = _run(FIXTURES / "deepspeed" / "overflow_fp16.log")
    table = run.table
    assert table["iteration"].to_list() == [10, 20, 30, 40]
    assert table["loss_scale"].to_list() == [4194304.0, 32768.0, 32768.0, 32768.0]
    # the ten skips before step 10 are the first record's: the run starts there from step 0
    assert table["skipped_iterations"].to_list() == [10, 7, 0, 0]
    # no batch size anywhere: the step times come from the step lines' timestamps
    assert table["step_time_s"].to_list()[1:] == pytest.approx([0.0741, 0.0924, 0.0925])


def _step_lines(steps: tuple[int, ...], skipped: tuple[int, ...]) -> str:
    """`[Rank 0] step={}, skipped={}, lr={}, mom={}` (runtime/engine.py _report_progress)."""
    return "".join(
        f"[2023-08-02 00:41:{n:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s},"
        f" skipped={k}, lr=[0.0001], mom=[(0.9, 0.999)]\n"
        for n, (s, k) in enumerate(zip(steps, skipped, strict=True))
    )


@pytest.mark.parametrize(
    ("steps", "skipped", "per_record"),
    [
        ((10, 20, 30), (3, 5, 5), [3, 2, 0]),  # from step 0: the first record's 3 are its own
        ((1010, 1020, 1030), (12, 14, 14), [0, 2, 0]),  # mid-run: 12 counted before the log
    ],
)
def test_a_launchs_first_record_counts_its_skips_only_from_step_0(
    tmp_path: Path, steps: tuple[int, ...], skipped: tuple[int, ...], per_record: list[int]
) -> None:
    path = tmp_path / "train.log"
    path.write_text(_step_lines(steps, skipped))
    assert _run(path).table["skipped_iterations"].to_list() == per_record


def test_a_log_before_its_first_overflow_has_the_scale_that_overflow_started_from(
    tmp_path: Path,
) -> None:
    """An fp16 optimizer's own lines (deepspeed/runtime/fp16/fused_optimizer.py:
    `Reducing dynamic loss scale from {prev_scale} to {cur_scale}`), as quoted in
    a published log: `Reducing dynamic loss scale from 4096.0 to 2048.0`."""
    text = (
        "[2025-07-29 08:48:06,775] [INFO] [logging.py:96:log_dist] [Rank 0] step=1000,"
        " skipped=5, lr=[0.001], mom=[[0.8, 0.999]]\n"
        "[2025-07-29 08:48:30,100] [INFO] [fused_optimizer.py:345:_update_scale] Reducing"
        " dynamic loss scale from 4096.0 to 2048.0\n"
        "[2025-07-29 08:49:06,775] [INFO] [logging.py:96:log_dist] [Rank 0] step=2000,"
        " skipped=6, lr=[0.001], mom=[[0.8, 0.999]]\n"
    )
    path = tmp_path / "train.log"
    path.write_text(text)
    assert _run(path).table["loss_scale"].to_list() == [4096.0, 2048.0]


def _printout(values: dict[str, object], extra: str = "") -> str:
    stamp = "[2023-09-04 03:51:58,416] [INFO] [config.py:967:print]"
    lines = [
        "[2023-09-04 03:51:58,415] [INFO] [config.py:963:print] DeepSpeedEngine configuration:"
    ]
    lines += [f"{stamp}   {k} {'.' * (29 - len(k))} {v}" for k, v in values.items()]
    return "\n".join(lines) + "\n" + extra


STEPS = "".join(
    f"[2023-09-04 03:52:{s:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s},"
    f" skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]\n"
    f"[2023-09-04 03:52:{s:02d},001] [INFO] [timer.py:260:stop] epoch=0/micro_step={s}/"
    f"global_step={s}, RunningAvgSamplesPerSec=32.0, CurrSamplesPerSec=32.0,"
    " MemAllocated=1.0GB, MaxMemAllocated=2.0GB\n"
    for s in (10, 20)
)


def test_the_printouts_world_size_is_the_gpu_count_without_model_parallelism(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train.log"
    path.write_text(_printout({"train_batch_size": 64, "world_size": 8}, STEPS))
    run = _run(path)
    assert run.config["num_gpus"].value == 8
    assert run.config["num_gpus"].provenance.line == 3
    assert any("world_size, which is the data-parallel size" in w for w in run.warnings)


def test_the_groups_summary_gives_the_gpu_count(tmp_path: Path) -> None:
    """DeepSpeed >= 0.17's `distributed groups summary` (engine.py, rank 0)."""
    summary = (
        "[2025-11-22 00:19:02,195] [INFO] [engine.py:2192:_configure_distributed_model]"
        " ********** distributed groups summary **********\n"
        "\t self.dp_world_size=4\n\t self.mp_world_size=2\n\t self.seq_dp_world_size=4\n"
        "\t self.sequence_parallel_size=1\n***********************************************\n"
    )
    path = tmp_path / "train.log"
    path.write_text(summary + _printout({"train_batch_size": 64, "world_size": 4}, STEPS))
    run = _run(path)
    assert run.config["num_gpus"].value == 8
    assert not any("data-parallel size" in w for w in run.warnings)


def test_a_pipelined_runs_gpu_count_is_not_its_data_parallel_size(tmp_path: Path) -> None:
    """The pipeline engine's stages are not in the printout's world_size (data-parallel)."""
    pipeline = "steps: 10 loss: 10.1234 iter time (s): 2.000 samples/sec: 32.000\n"
    path = tmp_path / "train.log"
    path.write_text(_printout({"train_batch_size": 64, "world_size": 8}, STEPS + pipeline))
    run = _run(path)
    assert run.config["data_parallel_size"].value == 8
    assert "num_gpus" not in run.config


@pytest.mark.parametrize(
    ("section", "dtype"),
    [
        ('    "fp16": {\n        "enabled": true, \n        "loss_scale": 0\n    }, \n', "fp16"),
        ('    "bf16":{\n        "enabled":true\n    },\n', "bf16"),
        ('    "fp16": {"enabled": false}, \n', "fp32"),
    ],
)
def test_the_printed_config_json_gives_the_precision(
    tmp_path: Path, section: str, dtype: str
) -> None:
    """`json = {` as DeepSpeedConfig._do_print writes it (json.dumps, sort_keys, indent 4;
    bigscience's 2021 HF+DeepSpeed logs show `"fp16": {` / `"enabled": true, `)."""
    text = (
        "[2021-05-25 06:54:51,424] [INFO] [config.py:754:print]   json = {\n"
        + section
        + '    "train_batch_size": 64\n}\n'
        + STEPS
    )
    path = tmp_path / "train.log"
    path.write_text(text)
    run = _run(path)
    assert run.config["dtype"].value == dtype
    assert run.config["dtype"].provenance.line == 2


def test_the_pipeline_engines_lines_give_its_batch_size(tmp_path: Path) -> None:
    """runtime/pipe/engine.py: `steps: {} loss: {:0.4f} iter time (s): {:0.3f} samples/sec:
    {:0.3f}` with samples/sec = train_batch_size / iter time."""
    text = "".join(
        f"steps: {s} loss: 10.1234 iter time (s): 2.000 samples/sec: 256.000\n"
        for s in (10, 20, 30)
    )
    path = tmp_path / "train.log"
    path.write_text(text)
    run = _run(path)
    assert run.config["global_batch_size"].value == 512
    assert run.table["step_time_s"].to_list() == [2.0, 2.0, 2.0]
    assert any("train batch size 512 from the pipeline engine" in w for w in run.warnings)
    (tmp_path / "ds_config.json").write_text(json.dumps({"train_batch_size": 500}))
    assert _run(path).config["global_batch_size"].value == 500


def test_the_printed_config_json_behind_a_pdsh_label(tmp_path: Path) -> None:
    text = (
        "[2021-05-25 06:54:51,424] [INFO] [config.py:754:print]   json = {\n"
        '    "fp16": {\n        "enabled": true, \n    }, \n'
        '    "train_batch_size": 64\n}\n' + STEPS
    )
    path = tmp_path / "train.log"
    path.write_text("".join(f"worker-0: {line}\n" for line in text.splitlines()))
    assert _run(path).config["dtype"].value == "fp16"
