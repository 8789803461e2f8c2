"""The `mfu` and `hardware` commands through click's runner: JSON fields and exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from loganalyzer.commands.hardware import hardware_command
from loganalyzer.commands.mfu import mfu
from loganalyzer.commands.options import overrides_from_options

SEVEN_B = ["--params", "7e9", "--formula", "6n", "--seq-length", "4096"]
SEVEN_B += ["--global-batch-size", "8", "--step-time", "1.2", "--num-gpus", "8"]


def _run(command: object, args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(command, args)  # type: ignore[arg-type]
    return result.exit_code, result.output


def test_mfu_json_worked_example() -> None:
    code, out = _run(mfu, [*SEVEN_B, "--peak-tflops", "989", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "loganalyzer.mfu/1" and doc["formula"] == "6n"
    flops = doc["flops"]
    assert set(flops) == {
        "formula",
        "per_iteration",
        "hardware_per_iteration",
        "tflops_per_gpu",
        "mfu",
        "hfu",
        "mfu_overall",
    }
    assert flops["per_iteration"] == 6 * 7e9 * 8 * 4096
    assert round(100 * flops["mfu"], 1) == 14.5
    assert flops["mfu_overall"] is None
    assert doc["peak"] == {"tflops_per_gpu": 989.0, "dtype": "bf16", "source": "--peak-tflops"}
    assert doc["inputs"]["tokens_per_iteration"] == 32768
    assert doc["derivation"].startswith("formula:  F = B·s·6·N")


def test_mfu_gpu_device_name_and_fp8() -> None:
    args = [*SEVEN_B, "--gpu", "NVIDIA H100 80GB HBM3", "--dtype", "fp8", "--json"]
    code, out = _run(mfu, args)
    doc = json.loads(out)
    assert code == 0
    assert doc["peak"]["tflops_per_gpu"] == 1979 and doc["inputs"]["gpu"]["key"] == "h100-sxm"
    assert doc["flops"]["mfu_vs_bf16"] == pytest.approx(doc["flops"]["tflops_per_gpu"] / 989.5)


def test_mfu_without_step_time_has_null_rates() -> None:
    code, out = _run(
        mfu,
        ["--model", "llama3-8b", "--seq-length", "8192", "--global-batch-size", "128", "--json"],
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["flops"]["per_iteration"] == pytest.approx(5.397063e16, rel=1e-6)
    assert doc["flops"]["tflops_per_gpu"] is None and doc["flops"]["mfu"] is None
    assert doc["peak"] is None
    assert "GPU type unknown: pass --gpu or --peak-tflops" in doc["warnings"]


def test_mfu_tokens_per_second_and_recompute() -> None:
    args = [
        "--model",
        "llama3-8b",
        "--seq-length",
        "8192",
        "--global-batch-size",
        "128",
        "--tokens-per-second",
        "1048576",
        "--num-gpus",
        "64",
        "--gpu",
        "h100-sxm",
        "--recompute",
        "full",
        "--json",
    ]
    doc = json.loads(_run(mfu, args)[1])
    assert doc["inputs"]["step_time_s"] == 1.0
    assert doc["flops"]["hfu"] > doc["flops"]["mfu"]


def test_mfu_flops_per_iteration_text() -> None:
    code, out = _run(
        mfu,
        [
            "--flops-per-iteration",
            "6.24e14",
            "--step-time",
            "4",
            "--num-gpus",
            "1",
            "--gpu",
            "a100-sxm4-80gb",
        ],
    )
    assert code == 0
    assert "TFLOPS/GPU           156.0" in out
    assert "MFU                  50.0 %" in out


def test_mfu_without_the_gpu_count_is_a_usage_error() -> None:
    code, out = _run(mfu, ["--flops-per-iteration", "6.24e14", "--step-time", "6.1"])
    assert code == 2
    assert "--num-gpus is required" in out


@pytest.mark.parametrize(
    "args",
    [
        ["--global-batch-size", "8"],
        ["--flops-per-iteration", "1", "--gpu", "no-such-gpu"],
        ["--moe-layer-freq", "[0,2]"],
        ["--model", "llama9"],
        ["--params", "seven"],
        [*SEVEN_B, "--tokens-per-second", "5"],
    ],
)
def test_mfu_usage_errors_exit_2(args: list[str]) -> None:
    assert _run(mfu, args)[0] == 2


def test_hardware_name_json() -> None:
    code, out = _run(hardware_command, ["NVIDIA H100 80GB HBM3", "--json"])
    doc = json.loads(out)
    assert code == 0
    assert doc["schema"] == "loganalyzer.hardware/1" and doc["key"] == "h100-sxm"
    assert doc["matched"] == "H100 80GB HBM3"
    assert doc["peak_tflops"]["bf16"] == 989.5 and doc["peak_tflops"]["fp4"] is None


def test_hardware_table_json_lists_every_row() -> None:
    code, out = _run(hardware_command, ["--json"])
    rows = json.loads(out)
    assert code == 0 and len(rows) >= 50
    assert {r["key"] for r in rows} >= {"h100-sxm", "mi300x", "tpu-v5e"}


def test_hardware_unknown_exits_2_with_suggestion() -> None:
    """As an unknown --gpu does: a usage error."""
    code, out = _run(hardware_command, ["h100-sxmm"])
    assert code == 2
    assert "did you mean h100-sxm" in out


def test_help_has_examples() -> None:
    for command in (mfu, hardware_command):
        assert "Examples:" in _run(command, ["--help"])[1]


def test_overrides_split_shape_and_run() -> None:
    facts = overrides_from_options(num_layers=4, swiglu=False, gpu="h100-sxm", seq_length=None)
    assert facts == {"shape": {"num_layers": 4, "swiglu": False}, "run": {"gpu": "h100-sxm"}}
