"""DeepSpeed's 2020 forms (the `DeepSpeedLight configuration:` printout without the logger's
prefix, the `[INFO date time]` logger of whole seconds) and the pipeline engine's GPU count
from its layout lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from loganalyzer.load import load_run
from loganalyzer.model import Run
from loganalyzer.registry import load_registry


def _run(path: Path) -> Run:
    return load_run([str(path)], load_registry()).run


# deepspeedai/DeepSpeed:docs/_tutorials/cifar-10.md@fd405169232dd83bdc7883df1c7d707d482e1be6
# (the tutorial's output of Feb 2020, DeepSpeedLight on one GPU through pdsh), cut.
CIFAR_2020 = """\
worker-0: [INFO 2020-02-06 19:53:56] rank:0 step=0, skipped=0, lr=[0.001], mom=[[0.8, 0.999]]
worker-0: DeepSpeedLight configuration:
worker-0:   allgather_size ............... 500000000
worker-0:   fp16_enabled ................. False
worker-0:   gradient_accumulation_steps .. 1
worker-0:   tensorboard_output_path ......
worker-0:   train_batch_size ............. 4
worker-0:   train_micro_batch_size_per_gpu  4
worker-0:   world_size ................... 1
worker-0:   zero_enabled ................. False
worker-0:   json = {
worker-0:     "train_batch_size":4,
worker-0:     "wall_clock_breakdown":false
worker-0: }
worker-0: [INFO 2020-02-06 19:53:56] 0/50, SamplesPerSec=1292.6411179579866
worker-0: [INFO 2020-02-06 19:53:56] 0/100, SamplesPerSec=1303.6726433398537
worker-0: [INFO 2020-02-06 19:53:56] 0/150, SamplesPerSec=1304.4251022567403
"""


def test_the_2020_printout_without_the_logger_gives_batch_precision_and_gpus(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train.log"
    path.write_text(CIFAR_2020)
    run = _run(path)
    assert run.config["global_batch_size"].value == 4
    assert run.config["global_batch_size"].provenance.line == 7
    assert run.config["dtype"].value == "fp32"
    assert run.config["num_gpus"].value == 1
    assert run.table["iteration"].to_list() == [50, 100, 150]
    # the running average: 4 samples a step at ~1300 samples/s
    assert run.table["step_time_s"].to_list()[-1] == pytest.approx(4 / 1305.9, rel=0.01)


def test_rows_like_a_printouts_elsewhere_are_not_read(tmp_path: Path) -> None:
    """Megatron's `arguments:` dump prints rows of the same form (`print('  {} {} {}'`,
    dots to column 29): its world_size is every GPU, not DeepSpeed's data-parallel size."""
    megatron = (
        "arguments:\n  world_size ...................... 64\n"
        "  train_batch_size ................ 512\n"
    )
    path = tmp_path / "train.log"
    path.write_text(megatron + CIFAR_2020.replace("world_size ...................", "x ."))
    run = _run(path)
    assert "data_parallel_size" not in run.config
    assert run.config["global_batch_size"].value == 4


def test_whole_second_logger_stamps_time_steps_to_their_resolution(tmp_path: Path) -> None:
    """https://github.com/deepspeedai/DeepSpeed/issues/255 (2020-06-08): no batch size, so
    the step times come from the stamps, 50 steps in 15 s, a clock of whole seconds."""
    path = tmp_path / "train.log"
    path.write_text(
        ">[INFO 2020-06-08 05:26:19] 0/2650, SamplesPerSec=13.19749106827976\n"
        "[INFO 2020-06-08 05:26:34] 0/2700, SamplesPerSec=13.198177991591365\n"
    )
    run = _run(path)
    assert run.table["step_time_s"].to_list() == [None, pytest.approx(0.3)]
    assert run.sources[0].clock_resolution_s == 1.0
    assert any("logger timestamps" in w and "whole seconds" in w for w in run.warnings)


def test_millisecond_logger_stamps_state_no_resolution(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "".join(
            f"[2023-09-04 03:52:{s:02d},{s:03d}] [INFO] [logging.py:96:log_dist] [Rank 0]"
            f" step={s}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]\n"
            for s in (10, 20, 30)
        )
    )
    run = _run(path)
    assert run.sources[0].clock_resolution_s is None
    assert any("1 ms resolution" in w for w in run.warnings)


# SeekPoint/DeepSpeedExamples, branch yknote-training-pipeline_paralle,
# @63ea1e40f614585edf973f6bfaf7e3ad4d70fd0a (fixtures/corpus/deepspeed/v0_9_5_pipeline_cifar;
# DeepSpeed 0.9.5, one GPU): the layout line of the one rank of its model-parallel group.
ONE_STAGE = (
    "[2023-07-24 13:14:27,661] [INFO] [engine.py:138:__init__] RANK=0 STAGE=0 LAYERS=22"
    " [0, 22) STAGE_PARAMS=57044810 (57.045M) TOTAL_PARAMS=57044810 (57.045M)"
    " UNIQUE_PARAMS=57044810 (57.045M)\n"
)
PRINTOUT = (
    "[2023-07-24 13:14:27,588] [INFO] [config.py:960:print] DeepSpeedEngine configuration:\n"
    "[2023-07-24 13:14:27,590] [INFO] [config.py:964:print]   train_batch_size ............."
    " 256\n"
    "[2023-07-24 13:14:27,590] [INFO] [config.py:964:print]   world_size ..................."
    " {dp}\n"
)
STEPS = "".join(
    f"[2023-07-24 13:14:{s:02d},000] [INFO] [engine.py:1:_aggregate_total_loss] steps: {s}"
    f" loss: 2.3 iter time (s): 0.320 samples/sec: 800.000\n"
    for s in (10, 20)
)


def _stage(rank: int, params: int, total: int) -> str:
    """runtime/pipe/engine.py's f-string: `RANK={} STAGE={} LAYERS={} [{}, {})
    STAGE_PARAMS={} ({:0.3f}M) TOTAL_PARAMS={} ({:0.3f}M) UNIQUE_PARAMS={} ({:0.3f}M)`."""
    return (
        f"[2023-07-24 13:14:27,661] [INFO] [engine.py:138:__init__] RANK={rank} STAGE={rank}"
        f" LAYERS=11 [0, 11) STAGE_PARAMS={params} ({params / 1e6:0.3f}M)"
        f" TOTAL_PARAMS={total} ({total / 1e6:0.3f}M) UNIQUE_PARAMS={params}"
        f" ({params / 1e6:0.3f}M)\n"
    )


@pytest.mark.parametrize(
    ("dp", "stages", "gpus"),
    [
        (1, ONE_STAGE, 1),
        (4, _stage(0, 100, 250) + _stage(1, 150, 250), 8),
        (4, _stage(1, 150, 250) + _stage(1, 150, 250) + _stage(0, 100, 250), 8),
        (4, _stage(0, 100, 250), None),  # a rank of the group not in the log
    ],
)
def test_a_pipelined_runs_gpus_are_its_data_parallel_size_times_its_stage_ranks(
    tmp_path: Path, dp: int, stages: str, gpus: int | None
) -> None:
    """The printout's world_size is the data-parallel size (the pipeline engine passes its
    grid as mpu); TOTAL_PARAMS sums the model-parallel group, so the ranks whose
    STAGE_PARAMS add up to it are that whole group."""
    path = tmp_path / "train.log"
    path.write_text(PRINTOUT.format(dp=dp) + stages + STEPS)
    run = _run(path)
    found = run.config.get("num_gpus")
    assert (found.value if found else None) == gpus
    assert run.config["data_parallel_size"].value == dp
