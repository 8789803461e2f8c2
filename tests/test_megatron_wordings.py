"""Megatron start-up lines in every wording they were printed in: the world-size line of
each version of `arguments.py`, Megatron-DeepSpeed's expert-parallel argument, the GPU
nvidia-smi names in a job's log, options echoed under their shell array's name, and a paste
re-wrapped at a fixed width."""

from __future__ import annotations

from pathlib import Path

import pytest

from loganalyzer.load import load_runs
from loganalyzer.registry import load_registry
from tests.test_megatron_launches import iteration_line
from tests.test_megatron_stated import RECORDS, run_of, summary
from tests.test_megatron_stated import stated as stated_by


def stated(path: Path) -> dict[str, tuple[object, int | None]]:
    return stated_by(run_of(path))


# (line, world, tensor, pipeline, data, context): each wording of the print in `validate_args`.
WORLD_LINES = [
    # NVIDIA/Megatron-LM arguments.py of 2019: 'using world size: {} and model-parallel size: {} '
    ("using world size: 16 and model-parallel size: 8 ", 16, 8, None, None, None),
    # NVIDIA/Megatron-LM megatron/arguments.py 2020-2023 (real: bigscience-workshop/bigscience
    # experiments, fixtures/corpus/megatron/bigscience_2021_gpt2_n4_tp4_pp4_cancelled.log:1)
    (
        "using world size: 16, data-parallel-size: 1, tensor-model-parallel size: 4,"
        " pipeline-model-parallel size: 4 ",
        16,
        4,
        4,
        1,
        None,
    ),
    # microsoft/Megatron-DeepSpeed megatron/arguments.py, with its sequence-parallel size
    # (real: stark-sim/megatron-deepspeed-lock-clock:.context/dual32_run_v2.log@f3bf150e
    # line 1380, behind pdsh's label)
    (
        "localhost: using world size: 32, data-parallel-size: 8, sequence-parallel size: 1,"
        " tensor-model-parallel size: 4, pipeline-model-parallel size: 1 ",
        32,
        4,
        1,
        8,
        None,
    ),
    # Megatron-LM 2023-2024 with context parallelism, a comma missing before the tensor size
    # (real: modelscope/ms-swift:tests/custom/test_megatron.py@40e97b88 line 70)
    (
        "using world size: 2, data-parallel size: 2, context-parallel size: 1"
        " tensor-model-parallel size: 1, pipeline-model-parallel size: 1",
        2,
        1,
        1,
        2,
        1,
    ),
    # Megatron-LM late 2024 with the encoder's sizes (real: SeunghyunSEO/Megatron-LM:
    # moe_exp/README.md@026f2da9, fixtures/corpus/megatron/core_2024_moe64_top1_ep4_echoed_args)
    (
        "using world size: 8, data-parallel size: 8, context-parallel size: 1,"
        " tensor-model-parallel size: 1, encoder-tensor-model-parallel size: 0,"
        " pipeline-model-parallel size: 1, encoder-pipeline-model-parallel size: 0",
        8,
        1,
        1,
        8,
        1,
    ),
    # The hierarchical sizes printed with no comma after them ('hierarchical context-parallel
    # sizes: {}' 'tensor-model-parallel size: {}, ' 'encoder-tensor-model-parallel size: {}, ')
    (
        "using world size: 64, data-parallel size: 2, context-parallel size: 4,"
        " hierarchical context-parallel sizes: [2, 2]tensor-model-parallel size: 8,"
        " encoder-tensor-model-parallel size: 2, pipeline-model-parallel size: 1,"
        " encoder-pipeline-model-parallel size: 1",
        64,
        8,
        1,
        2,
        4,
    ),
    # NVIDIA/Megatron-LM:megatron/training/arguments.py@000c4ac24f61159c138b0975def722c65245983c
    (
        "using world size: 16, data-parallel size: 1, context-parallel size: 2,"
        " hierarchical context-parallel sizes: None, tensor-model-parallel size: 4,"
        " pipeline-model-parallel size: 2",
        16,
        4,
        2,
        1,
        2,
    ),
]


@pytest.mark.parametrize(("line", "world", "tensor", "pipeline", "data", "context"), WORLD_LINES)
def test_every_wording_of_the_world_size_line(
    tmp_path: Path,
    line: str,
    world: int,
    tensor: int,
    pipeline: int | None,
    data: int | None,
    context: int | None,
) -> None:
    """Each size by its own name, wherever it stands: `model-parallel` inside
    `tensor-model-parallel`, `tensor-model-parallel` inside `encoder-tensor-model-parallel`
    and the `context-parallel sizes` list are not the sizes they end with."""
    path = tmp_path / "world.log"
    path.write_text("\n".join([line, *RECORDS]) + "\n")
    facts = stated(path)
    assert facts["world_size"] == (world, 1)
    assert facts["tensor_model_parallel_size"] == (tensor, 1)
    assert facts.get("pipeline_model_parallel_size", (None, 1)) == (pipeline, 1)
    assert facts.get("data_parallel_size", (None, 1)) == (data, 1)
    assert facts.get("context_parallel_size", (None, 1)) == (context, 1)
    parallelism = summary(path)["run"]["parallelism"]
    assert (parallelism["tensor"], parallelism["pipeline"]) == (tensor, pipeline)


def test_megatron_deepspeed_expert_parallel_size(tmp_path: Path) -> None:
    """microsoft/Megatron-DeepSpeed's `--moe-expert-parallel-size` (megatron/arguments.py),
    dumped as in HaibaraAiChan/megatron-deepspeed-moe-bak:log/gpt-0.125B-gpus-4-MoE-64.log
    @038db0dc: `  moe_expert_parallel_size ........................ 4`."""
    path = tmp_path / "ep.log"
    lines = [
        "------------------------ arguments ------------------------",
        "  moe_expert_parallel_size ........................ 4",
        "  num_experts ..................................... [64]",
        "-------------------- end of arguments ---------------------",
        *RECORDS,
    ]
    path.write_text("\n".join(lines) + "\n")
    assert stated(path)["expert_model_parallel_size"] == (4, 2)
    assert summary(path)["run"]["parallelism"]["expert"] == 4


# SeunghyunSEO/Megatron-LM:moe_exp/README.md@026f2da93c96d0489d627aa26ebc2013de8ad580 (an
# nvidia-smi table pasted below the run); nvidia-smi -L's form as the driver prints it.
NVIDIA_SMI = [
    "+-----------------------------------------+----------------------+----------------------+",
    "|   5  NVIDIA A100-SXM4-80GB          On  | 00000000:CA:00.0 Off |                  Off |",
    "| N/A   54C    P0             201W / 400W |  45634MiB / 81920MiB |     97%      Default |",
]


@pytest.mark.parametrize(
    ("lines", "gpu"),
    [
        (NVIDIA_SMI, "a100-sxm4-80gb"),
        (
            ["|   0  Tesla V100-SXM2...  On   | 00000000:06:00.0 Off |                    0 |"],
            "v100-sxm2",
        ),
        (
            ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f2e0a4c-0000-0000-0000-000000000000)"],
            "h100-sxm",
        ),
    ],
)
def test_the_gpu_nvidia_smi_names(tmp_path: Path, lines: list[str], gpu: str) -> None:
    path = tmp_path / "smi.log"
    path.write_text("\n".join([*RECORDS, *lines]) + "\n")
    facts = stated(path)
    assert facts["gpu_name"][1] == 4 + (len(lines) > 1)
    found = summary(path)["run"]["gpu"]
    assert (found["key"], found["source"]) == (gpu, "log")


def test_options_echoed_under_their_arrays_name(tmp_path: Path) -> None:
    """SeunghyunSEO/Megatron-LM:moe_exp/README.md@026f2da9 lines 609-627 (cut): the script
    echoes each array; torchrun's options are not the script's, and an option cut by the
    terminal's wrap (`--ffn-hidden-siz` / `e 1792`) states nothing."""
    path = tmp_path / "echoed.log"
    lines = [
        "DISTRIBUTED_ARGS: --nproc_per_node 8 --nnodes 1 --node_rank 0 --master_addr localhost",
        "",
        "MODEL_ARGS: --disable-bias-linear --seq-length 2048 --num-layers 24 --hidden-size 512"
        " --num-attention-heads 4 --group-query-attention --num-query-groups 1 --ffn-hidden-siz",
        "e 1792 --swiglu --normalization RMSNorm",
        "",
        "MODEL_PARALLEL_ARGS: --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1"
        " --expert-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer",
        *RECORDS,
    ]
    path.write_text("\n".join(lines) + "\n")
    facts = stated(path)
    assert facts["seq_length"] == (2048, 3)
    assert facts["hidden_size"] == (512, 3)
    assert facts["num_query_groups"] == (1, 3)
    assert facts["swiglu"] == (True, 4)
    assert facts["expert_model_parallel_size"] == (4, 6)
    assert "ffn_hidden_size" not in facts and "nproc_per_node" not in facts
    assert "nnodes" not in facts


def test_a_paste_wrapped_between_a_key_and_its_value(tmp_path: Path) -> None:
    """bigscience-workshop/bigscience:experiments/gpt2-16gb-nodes.md@9e64edec lines 903-909,
    re-wrapped at ~100 columns: the iteration line keeps its loss scale (fp16's dynamic scale)
    and `Effective Tera Flops per GPU:` its figure on the next line."""
    path = tmp_path / "wrapped.log"
    lines = [
        "iteration 20/ 1000 | elapsed time per iteration (ms): 28716.0 | learning rate: 1.500E-04"
        " | lm loss:",
        "2.324108E+01 | loss scale: 1024.0 | number of skipped iterations: 0 | number of nan"
        " iterations: 0 |",
        "time (ms) | forward: 5495.35 | backward: 22976.72 | backward-backward: 22976.69 |",
        "backward-allreduce: 0.00 | optimizer: 243.03 | batch generator: 1.00 Effective Tera"
        " Flops per GPU:",
        "0.21 and total parameters 29.998 B",
    ]
    path.write_text("\n".join(lines) + "\n")
    (loaded,) = load_runs([str(path)], load_registry())
    table = loaded.run.table
    assert table.select("iteration", "loss_scale", "reported_tflops_per_gpu").rows() == [
        (20, 1024.0, 0.21)
    ]
    doc = summary(path)
    assert (doc["run"]["dtype"], doc["run"]["dtype_assumed"]) == ("fp16", False)


def test_a_label_under_a_heading_is_no_wrapped_value(tmp_path: Path) -> None:
    """srun --label prints `0: (min, max) time across ranks (ms):` and, on the next line,
    `0:     forward-backward ...: (5905.00, 5955.00)` (Megatron-LM's timers block): the
    label's digit is no value of the heading's, and each timer stays a line of its own."""
    path = tmp_path / "labelled.log"
    lines = []
    for k in (10, 20, 30):
        lines += [
            "0: " + iteration_line(k, 1000, 6000.0, None),
            "0: (min, max) time across ranks (ms):",
            f"0:     {'forward-backward ':.<48}: (5905.00, 5955.00)",
            f"0:     {'optimizer ':.<48}: (40.00, 45.00)",
        ]
    path.write_text("\n".join(lines) + "\n")
    phases = {p["name"] for p in summary(path)["health"]["phases"]}
    assert {"forward-backward", "optimizer"} <= phases
