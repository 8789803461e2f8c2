"""Facts a Megatron log states outside a whole `arguments` dump: argument lines without the
dump's header and footer, a dump cut before its footer, and a launch command echoed into the
log; each with the line it was read from, the precision among them.

Argument lines follow megatron/arguments.py `_print_args`: `'  {} {} {}'.format(arg, dots,
value)` between `'------------------------ arguments ------------------------'` and
`'-------------------- end of arguments ---------------------'`; iteration lines
megatron/training.py `training_log` (`' iteration {:8d}/{:8d} |'` ...), as in
tests/test_megatron_launches.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_runs
from loganalyzer.model import Run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES
from tests.test_megatron_launches import iteration_line

RECORDS = [iteration_line(k, 1000, 1200.0, None) for k in (100, 200, 300)]


def summary(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def run_of(path: Path) -> Run:
    (loaded,) = load_runs([str(path)], load_registry())
    return loaded.run


def stated(run: Run) -> dict[str, tuple[object, int | None]]:
    return {key: (value.value, value.provenance.line) for key, value in run.config.items()}


def test_argument_lines_pasted_without_the_dump_header() -> None:
    """NVIDIA/Megatron-LM#756 pasted part of its dump, header and footer cut (the fixture's
    lines 4-...): the run's EP, shape and batch are the log's, with their lines."""
    path = FIXTURES / "megatron" / "core_v0_6_mixtral_throughput.txt"
    facts = stated(run_of(path))
    assert facts["expert_model_parallel_size"] == (8, 4)
    assert facts["ffn_hidden_size"] == (14336, 5)
    assert facts["global_batch_size"] == (128, 16)
    assert facts["hidden_size"] == (4096, 21)
    assert facts["fp16"] == (False, 7)
    assert summary(path)["run"]["parallelism"]["expert"] == 8


def test_deepspeed_op_report_and_timer_blocks_are_no_arguments(tmp_path: Path) -> None:
    """ds_report's `    cpu_adam ............... [NO] ....... [OKAY]` (four spaces, dots in
    its value) and a timer block's `    forward-compute ......: (1.0, 2.0)` state nothing."""
    path = tmp_path / "log.txt"
    path.write_text(
        "\n".join(
            [
                "    cpu_adam ............... [NO] ....... [OKAY]",
                "  num_layers ...................................... 24",
                *RECORDS[:1],
                "    forward-compute ................................: (1011.12, 1012.40)",
                *RECORDS[1:],
            ]
        )
        + "\n"
    )
    facts = stated(run_of(path))
    assert facts["num_layers"] == (24, 2)
    assert "cpu_adam" not in facts and "forward" not in " ".join(facts)


def test_a_dump_cut_before_its_footer_leaves_the_iteration_lines_read(tmp_path: Path) -> None:
    path = tmp_path / "cut.log"
    lines = [
        "------------------------ arguments ------------------------",
        "  fp16 ............................................ True",
        "  num_layers ...................................... 24",
        *RECORDS,
    ]
    path.write_text("\n".join(lines) + "\n")
    run = run_of(path)
    assert run.table["iteration"].to_list() == [100, 200, 300]
    assert stated(run)["dtype"] == ("fp16", 2)


TORCHRUN = (
    "+ torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 24 --hidden-size 2048"
    " --num-attention-heads 16 --seq-length 2048 --tensor-model-parallel-size 2"
    " --micro-batch-size 4 --global-batch-size 64 --bf16 --train-iters 1000 --data-path $DATA"
    " --num-experts 8 --moe-router-topk 1"
)
CONTINUED = [
    "torchrun --nproc_per_node 8 \\",
    "    pretrain_gpt.py \\",
    "    --num-layers 24 \\",
    "    --hidden-size 2048 \\",
    "    --num-attention-heads 16 \\",
    "    --seq-length 2048 \\",
    "    --fp16 \\",
    "    --tensor-model-parallel-size ${TP} \\",
    "    --lr 1.5e-4 2>&1 | tee log.txt",
]


def test_an_echoed_launch_command_states_the_config(tmp_path: Path) -> None:
    path = tmp_path / "one_line.log"
    path.write_text("\n".join([TORCHRUN, *RECORDS]) + "\n")
    facts = stated(run_of(path))
    for key, value in [
        ("num_layers", 24),
        ("hidden_size", 2048),
        ("seq_length", 2048),
        ("tensor_model_parallel_size", 2),
        ("dtype", "bf16"),
        ("num_experts", 8),
        ("moe_router_topk", 1),
        ("train_iters", 1000),
    ]:
        assert facts[key] == (value, 1)
    # the launcher's options are not the script's; a shell variable states nothing
    assert "nproc_per_node" not in facts and "data_path" not in facts
    doc = summary(path)
    assert doc["run"]["model"]["moe_router_topk"] == 1
    assert doc["run"]["dtype"] == "bf16"


def test_a_command_read_as_the_shell_reads_it(tmp_path: Path) -> None:
    """Quotes go as the shell takes them away, and an option given twice takes its last
    value, as argparse does (the shell's and argparse's own rules, not a log's wording)."""
    command = (
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers \"24\" --hidden-size '1024'"
        ' --seq-length="1024" --num-attention-heads 16 --seq-length 2048 --bf16'
    )
    path = tmp_path / "quoted.log"
    path.write_text("\n".join([command, *RECORDS]) + "\n")
    facts = stated(run_of(path))
    assert facts["num_layers"] == (24, 1)
    assert facts["hidden_size"] == (1024, 1)
    assert facts["seq_length"] == (2048, 1)


def test_a_command_continued_over_lines(tmp_path: Path) -> None:
    path = tmp_path / "continued.log"
    path.write_text("\n".join([*CONTINUED, *RECORDS]) + "\n")
    facts = stated(run_of(path))
    assert facts["num_layers"] == (24, 3)
    assert facts["seq_length"] == (2048, 6)
    assert facts["dtype"] == ("fp16", 7)
    assert facts["lr"] == (1.5e-4, 9)  # the pipe after it ends the command
    assert "tensor_model_parallel_size" not in facts and "nproc_per_node" not in facts


def test_a_dump_outranks_the_command_before_it(tmp_path: Path) -> None:
    """The arguments printed are those the script used (defaults and corrections applied)."""
    path = tmp_path / "both.log"
    dump = [
        "------------------------ arguments ------------------------",
        "  num_layers ...................................... 12",
        "-------------------- end of arguments ---------------------",
    ]
    path.write_text("\n".join(["python pretrain_gpt.py --num-layers 24", *dump, *RECORDS]) + "\n")
    assert stated(run_of(path))["num_layers"] == (12, 3)


def test_a_command_wrapped_at_the_terminal_width(shared_logs: Path) -> None:
    """argonne-lcf/Megatron-DeepSpeed's notes paste a `deepspeed ... pretrain_gpt_alcf.py`
    command wrapped at a fixed width, cutting options in two (`--save-interval 20` / `0`,
    `--global-bat` / `ch-size 96`): the options whole on their line are read, the cut ones
    are not."""
    path = shared_logs / "excerpts" / "megatron_deepspeed_4.txt"
    facts = stated(run_of(path))
    for key, value, line in [
        ("num_layers", 32, 39),
        ("hidden_size", 4096, 39),
        ("seq_length", 4096, 39),
        ("num_attention_heads", 32, 39),
        ("ffn_hidden_size", 11008, 42),
        ("micro_batch_size", 4, 40),
        ("dtype", "bf16", 35),
        ("swiglu", True, 43),
        ("recompute", "full", 44),
    ]:
        assert facts[key] == (value, line)
    for cut in ("save_interval", "global_bat", "data_cache_path", "no_query_", "zero_stage"):
        assert cut not in facts
    assert "deepspeed_config" in facts  # `--deepspeed_config=...` on the last line, whole


@pytest.mark.parametrize(
    ("lines", "dtype", "line"),
    [
        (["  fp16 ............................................ True"], "fp16", 1),
        (["  bf16 ............................................ True"], "bf16", 1),
        (["  params_dtype .................................... torch.float16"], "fp16", 1),
        (["python pretrain_gpt.py --num-layers 2 --fp16"], "fp16", 1),
        (["python pretrain_gpt.py \\", "  --bf16 \\", "  --num-layers 2"], "bf16", 2),
    ],
)
def test_precision_is_stated_by_every_form(
    tmp_path: Path, lines: list[str], dtype: str, line: int
) -> None:
    path = tmp_path / "precision.log"
    path.write_text("\n".join([*lines, *RECORDS]) + "\n")
    assert stated(run_of(path))["dtype"] == (dtype, line)
    doc = summary(path)
    assert doc["run"]["dtype"] == dtype and doc["run"]["dtype_assumed"] is False


def _deepspeed_moe_dump(experts: str) -> list[str]:
    """A Megatron-DeepSpeed dump's MoE arguments (microsoft/Megatron-DeepSpeed
    megatron/arguments.py: `--num-experts` nargs='+' default [1], `--topk` default 1,
    `--expert-interval` default 2)."""
    values = {
        "expert_interval": 2,
        "fp16": True,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_experts": experts,
        "num_layers": 24,
        "seq_length": 2048,
        "topk": 1,
    }
    return [
        "------------------------ arguments ------------------------",
        *(f"  {key} {'.' * (48 - len(key))} {value}" for key, value in values.items()),
        "-------------------- end of arguments ---------------------",
    ]


def test_megatron_deepspeed_experts(tmp_path: Path) -> None:
    """`num_experts [128]` with `topk 1`: 128 experts, top-1, in every second layer (those
    whose number is a multiple of `expert_interval`); `[1]` is the dense model."""
    path = tmp_path / "moe.log"
    path.write_text("\n".join([*_deepspeed_moe_dump("[128]"), *RECORDS]) + "\n")
    facts = stated(run_of(path))
    assert facts["num_experts"] == (128, 6)
    assert facts["moe_router_topk"] == (1, 9)
    assert facts["moe_layer_freq"] == (str([0, 1] * 12), 2)
    model = summary(path)["run"]["model"]
    assert (model["num_experts"], model["moe_router_topk"]) == (128, 1)
    dense = tmp_path / "dense.log"
    dense.write_text("\n".join([*_deepspeed_moe_dump("[1]"), *RECORDS]) + "\n")
    model = summary(dense)["run"]["model"]
    assert (model["num_experts"], model["moe_router_topk"]) == (None, None)
    assert model["params"] == model["active_params"]


def test_a_dense_model_routes_to_no_expert(tmp_path: Path) -> None:
    """Megatron-core prints `moe_router_topk ... 2` and `num_experts ... None` for a dense
    model: the summary's model has no top-k."""
    path = tmp_path / "dense.log"
    lines = [
        "------------------------ arguments ------------------------",
        "  moe_router_topk ................................. 2",
        "  num_experts ..................................... None",
        "  num_layers ...................................... 2",
        "-------------------- end of arguments ---------------------",
        *RECORDS,
    ]
    path.write_text("\n".join(lines) + "\n")
    assert summary(path)["run"]["model"]["moe_router_topk"] is None


def test_effective_tera_flops_below_each_iteration_line(shared_logs: Path) -> None:
    """bigscience's Megatron-DeepSpeed ZeRO benchmark (2021) prints `Effective Tera Flops per
    GPU: 41.31 and total parameters 52.005 B` after the timers below each iteration line
    (`flops_calculator`, megatron/utils.py): the TFLOPS per GPU the run reported."""
    path = shared_logs / "bigscience/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out"
    table = run_of(path).table
    assert table.select("iteration", "reported_tflops_per_gpu").rows() == [
        (1, 41.31),
        (2, 39.66),
        (3, 39.74),
        (4, 40.01),
    ]
    assert summary(path)["reported"]["tflops_per_gpu"] == 39.875


def test_effective_tera_flops_is_not_a_timer(tmp_path: Path) -> None:
    """The line goes to its record, not to the long table; a record without one keeps none,
    and a value an iteration line prints itself (`TFLOPs: v |`) is not replaced."""
    path = tmp_path / "effective.log"
    lines = [
        RECORDS[0],
        "time (ms) | forward: 5495.35 | backward: 22976.72 | optimizer: 243.03",
        "Effective Tera Flops per GPU: 0.21 and total parameters 29.998 B",
        RECORDS[1],
        RECORDS[2].replace(" lm loss:", " TFLOPs: 12.50 | lm loss:"),
        "Effective Tera Flops per GPU: 9.99 and total parameters 29.998 B",
    ]
    path.write_text("\n".join(lines) + "\n")
    run = run_of(path)
    assert run.table["reported_tflops_per_gpu"].to_list() == [0.21, None, 12.5]
    assert isinstance(run.metrics, pl.DataFrame)
    assert not run.metrics.filter(pl.col("name").cast(pl.String).str.contains("flops")).height
