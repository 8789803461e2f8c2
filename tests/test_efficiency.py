"""TFLOPS and MFU of real and written logs, checked against what the frameworks printed and
against the spec's formula applied by hand to the numbers in each log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.flops.efficiency import resolve_facts
from loganalyzer.flops.formulas import compute_flops
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES

NO_OPTIONS: dict[str, dict[str, object]] = {"shape": {}, "run": {}}


def summary(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    assert result.exit_code == 0, result.output
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_recomputed_tflops_match_what_megatron_printed_within_its_rounding() -> None:
    """Megatron-LM >= core 0.12 prints `throughput per GPU` with the default formula."""
    path = FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log"
    run = load_run([str(path)], load_registry()).run
    facts = resolve_facts(run, NO_OPTIONS)
    flops = compute_flops(facts.shape, facts.global_batch_size or 0).per_iteration
    assert facts.num_gpus == 64
    recomputed = flops / (run.table["step_time_s"] * 64 * 1e12)
    printed = run.table["reported_tflops_per_gpu"]
    assert (recomputed - printed).abs().max() <= 0.05 + 1e-9  # printed with {:.1f}
    doc = summary(str(path), "--gpu", "h100-sxm")
    assert doc["reported"]["recomputed_over_reported"] == pytest.approx(1.0, abs=0.05 / 136)  # type: ignore[index]


def test_megatron_deepspeed_tflops_ratio_is_explained() -> None:
    """BLOOM-176B's printed TFLOPs count activation recomputation (factor 4/3) and a
    V/(16lh) logit term: the expected ratio is computed and matches the observed one."""
    doc = summary(
        str(FIXTURES / "megatron_deepspeed" / "bloom_176b_chronicles.txt"),
        *("--num-layers", "70", "--hidden-size", "14336", "--num-attention-heads", "112"),
        *("--seq-length", "2048", "--padded-vocab-size", "250880", "--num-gpus", "384"),
        *("--gpu", "a100-sxm4-80gb", "--dtype", "bf16", "--recompute", "full"),
    )
    reported = doc["reported"]
    assert isinstance(reported, dict)
    match = re.search(r"expected ratio (\d\.\d+)×, observed (\d\.\d+)×", reported["explanation"])
    assert match, reported["explanation"]
    expected, observed = float(match[1]), float(match[2])
    assert observed == pytest.approx(reported["recomputed_over_reported"], abs=5e-4)
    assert observed == pytest.approx(expected, rel=0.01)
    assert not [v for v in doc["verdicts"] if v["code"] == "REPORTED_TFLOPS_MISMATCH"]  # type: ignore[union-attr]


def _argument(text: str, name: str) -> int | None:
    found = re.search(rf"^  {name} \.+ (\d+)\s*$", text, re.M)
    return int(found[1]) if found else None


BIGSCIENCE = [
    "gpt2-meg-ds-3d-old/meg_ds_3d_gpt2_perf_n16.out",
    "gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-off.out",
    "gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-on.out",
    "gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out",
    "gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16_nbs48_ms48.out",
    "gpt2-meg/meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out",
    "gpt2-meg/meg_gpt2_perf_n16-1999618.out",
    "gpt2-meg/meg_gpt2_perf_n16.out",
]


@pytest.mark.parametrize("name", BIGSCIENCE)
def test_bigscience_megatron_logs_give_flops_from_their_own_arguments(
    shared_logs: Path, name: str
) -> None:
    """V100, fp16, activation checkpointing: FLOPs from each log's arguments dump (the
    formula applied here by hand to the numbers grep finds), MFU/HFU against the fp16 peak."""
    path = shared_logs / "bigscience" / name
    text = path.read_text(errors="replace")
    layers, h, s = (_argument(text, k) for k in ("num_layers", "hidden_size", "seq_length"))
    ffn = _argument(text, "ffn_hidden_size") or 4 * (h or 0)
    vocab = int(re.search(r"new size: (\d+)\)", text)[1])  # type: ignore[index]
    batch = _argument(text, "global_batch_size") or int(
        re.search(r"train_batch_size \.+ (\d+)", text)[1]  # type: ignore[index]
    )
    assert layers and h and s
    per_token = (
        6 * layers * (h * 3 * h + h * h)  # QKV and output projections, no GQA
        + 6 * layers * h * s  # causal core attention
        + 6 * layers * 2 * h * ffn  # plain (non-gated) MLP
        + 6 * h * vocab  # logit layer
    )
    doc = summary(str(path), "--gpu", "v100-sxm2")
    run, flops, peak = doc["run"], doc["flops"], doc["peak"]
    assert isinstance(run, dict) and isinstance(flops, dict) and isinstance(peak, dict)
    assert run["dtype"] == "fp16"
    assert run["recompute"] == "full"
    assert flops["per_iteration"] == pytest.approx(batch * s * per_token, rel=1e-12)
    assert peak == {"tflops_per_gpu": 125.0, "dtype": "fp16", "source": peak["source"]}
    assert flops["hfu"] > flops["mfu"] > 0


def test_unknown_gpu_flag_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        main,
        ["summary", str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"), "--gpu", "H9000"],
    )
    assert result.exit_code == 2
    assert "Invalid value for '--gpu': unknown hardware 'H9000'; did you mean" in result.stderr
    assert "reading" not in result.stderr  # refused before any input is read


def test_unknown_gpu_in_a_log_is_null_and_a_warning() -> None:
    from loganalyzer.model import ConfigValue, Provenance

    run = load_run(
        [str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")], load_registry()
    ).run
    run.config["gpu_name"] = ConfigValue("Mystery Accelerator 9000", Provenance("log", "x.log", 3))
    facts = resolve_facts(run, NO_OPTIONS)
    assert facts.gpu is None
    assert any(
        "'Mystery Accelerator 9000' from the log is not in the peak table" in w
        for w in facts.warnings
    )


def test_fail_under_mfu_gate_exits_4() -> None:
    path = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")
    low = CliRunner().invoke(
        main, ["summary", "-q", path, "--gpu", "v100-sxm2", "--fail-under-mfu", "0.5"]
    )
    assert low.exit_code == 4
    assert "steady-state MFU 11.5 % is below 50.0 %" in low.stderr
    ok = CliRunner().invoke(
        main, ["summary", "-q", path, "--gpu", "v100-sxm2", "--fail-under-mfu", "0.1"]
    )
    assert ok.exit_code == 0
    unknown = CliRunner().invoke(main, ["summary", "-q", path, "--fail-under-mfu", "0.1"])
    assert unknown.exit_code == 4


def test_malformed_argument_is_a_warning_naming_its_line(tmp_path: Path) -> None:
    text = (FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out").read_text()
    broken = tmp_path / "run.log"
    broken.write_text(
        text.replace(
            "  num_layers ...................................... 48",
            "  num_layers ...................................... abc",
        )
    )
    result = CliRunner().invoke(
        main, ["summary", "--json", "-q", str(broken), "--gpu", "v100-sxm2"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any(
        w.startswith(f"{broken}:") and "argument num_layers = 'abc' is not a number" in w
        for w in doc["warnings"]
    )
    assert doc["flops"]["per_iteration"] is None
    with_flag = summary(str(broken), "--gpu", "v100-sxm2", "--num-layers", "48")
    assert with_flag["flops"]["per_iteration"] == pytest.approx(7.449148e14, rel=1e-6)  # type: ignore[index]


def test_a_shape_megatron_would_refuse_gives_no_flops_and_says_why() -> None:
    doc = summary(
        str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"),
        *("--gpu", "v100-sxm2", "--num-query-groups", "5"),
    )
    assert doc["flops"]["per_iteration"] is None  # type: ignore[index]
    expected = "FLOPs unknown: num_attention_heads 32 is not a multiple of num_query_groups 5"
    assert expected in doc["warnings"]  # type: ignore[operator]


def test_warmup_past_the_end_leaves_steady_figures_null_with_a_warning() -> None:
    doc = summary(
        str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"),
        *("--gpu", "v100-sxm2", "--warmup", "100000"),
    )
    flops = doc["flops"]
    assert isinstance(flops, dict)
    assert flops["mfu"] is None and flops["tflops_per_gpu"] is None
    assert flops["mfu_overall"] == pytest.approx(0.109, abs=0.001)  # all logged time still counts
    assert any(w.startswith("no steady-state record") for w in doc["warnings"])  # type: ignore[union-attr]


def test_throughput_printed_by_megatron_core_up_to_0_11_is_explained(tmp_path: Path) -> None:
    """Core 0.5-0.11 printed `throughput per GPU` without halving causal attention: the
    llama3_8b oracle's pre-causal count, printed as those versions did, is no mismatch."""
    old_flops = 6.072603e16  # flops-oracles.csv, llama3_8b, megatron_core_v0_11_pre_causal
    source = (FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log").read_text()

    printed = r"\(ms\): ([\d.]+) \| throughput per GPU \(TFLOP/s/GPU\): [\d.]+"

    def reprint(match: re.Match[str]) -> str:
        tflops = old_flops / (float(match[1]) / 1000 * 64 * 1e12)
        return f"(ms): {match[1]} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f}"

    log = tmp_path / "core_0_8.log"
    log.write_text(re.sub(printed, reprint, source))
    doc = summary(str(log), "--gpu", "h100-sxm")
    reported = doc["reported"]
    assert isinstance(reported, dict)
    assert reported["recomputed_over_reported"] == pytest.approx(5.397063 / 6.072603, rel=1e-3)
    assert "expected ratio 0.889" in reported["explanation"]
    assert "REPORTED_TFLOPS_MISMATCH" not in [v["code"] for v in doc["verdicts"]]  # type: ignore[union-attr]


def test_total_flos_ratio_needs_no_gpu_count(shared_logs: Path) -> None:
    """HF Trainer's total_flos (24,599,592,960 over 40 steps) against the recomputed FLOPs per
    step (1.0475e9): 1.703x, with or without --num-gpus (before: only with it)."""
    out = str(shared_logs / "generated/hf_run/out")
    ratios = []
    for extra in ([], ["--num-gpus", "1"]):
        result = CliRunner().invoke(main, ["summary", "-q", "--json", out, *extra])
        assert result.exit_code == 0, result.output
        ratios.append(json.loads(result.stdout)["reported"]["recomputed_over_reported"])
    assert ratios[0] == pytest.approx(1.0475e9 / (24599592960.0 / 40), rel=1e-3)
    assert ratios[0] == pytest.approx(ratios[1])


@pytest.mark.parametrize("value", ["1e400", "-1e400", "inf", "nan"])
def test_an_argument_that_is_no_size_is_a_warning(tmp_path: Path, value: str) -> None:
    """A value no model size can be (infinite, not a number) is left out as a malformed one
    is, never a traceback (a size of 0 is fixtures/bad/zero_hidden_size.log's case)."""
    text = (FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out").read_text()
    broken = tmp_path / "run.log"
    broken.write_text(
        text.replace(
            "  num_layers ...................................... 48",
            f"  num_layers ...................................... {value}",
        )
    )
    result = CliRunner().invoke(
        main, ["summary", "--json", "-q", str(broken), "--gpu", "v100-sxm2"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any(
        w.startswith(f"{broken}:") and "argument num_layers = " in w and "is not a number" in w
        for w in doc["warnings"]
    )
    assert doc["flops"]["per_iteration"] is None


def test_an_echoed_command_with_an_infinite_size_is_a_warning(tmp_path: Path) -> None:
    # the iteration line as Megatron-LM's training_log prints it (the shared logs/FORMATS.md)
    iteration = (
        " [2024-10-24 21:02:{s:02d}] iteration {n:8d}/   40000 | consumed samples: {c:12d} |"
        " elapsed time per iteration (ms): 826.6 | learning rate: 1.200000E-05 |"
        " global batch size:    64 | lm loss: 1.145711E+01 | loss scale: 1.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    lines = ["pretrain_gpt.py --num-layers 1e400 --hidden-size 1024 --seq-length 2048"]
    lines += [iteration.format(s=n, n=n, c=64 * n) for n in range(1, 6)]
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["summary", "--json", "-q", str(path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any("argument num_layers = " in w and "is not a number" in w for w in doc["warnings"])
