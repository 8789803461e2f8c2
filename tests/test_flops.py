"""FLOPs formulas against the spec's oracle table (fixtures/spec/flops-oracles.csv)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from loganalyzer.flops.formulas import (
    EXPLAINED,
    ShapeError,
    compute_flops,
    hf_trainer_flops,
    megatron_core_v011_flops,
    megatron_deepspeed_reported_flops,
    read_reported_ratio,
    tflops_per_gpu,
    utilisation,
)
from loganalyzer.flops.shape import ModelShape, count_parameters
from loganalyzer.render.wording import COUNTS, reported_ratio

ORACLES = Path(__file__).parent.parent / "fixtures" / "spec" / "flops-oracles.csv"
ROWS = list(csv.DictReader(ORACLES.read_text(encoding="utf-8").splitlines()))
REL = 1e-4


def _shape(row: dict[str, str]) -> tuple[ModelShape, int]:
    def i(key: str) -> int:
        return int(row[key])

    shape = ModelShape(
        num_layers=i("num_layers"),
        hidden_size=i("hidden_size"),
        num_attention_heads=i("num_attention_heads"),
        num_query_groups=i("num_query_groups"),
        kv_channels=i("kv_channels"),
        ffn_hidden_size=i("ffn_hidden_size"),
        swiglu=bool(i("swiglu")),
        num_experts=i("num_experts") or None,
        moe_router_topk=i("moe_router_topk") or 2,
        seq_length=i("seq_length"),
        padded_vocab_size=i("padded_vocab_size"),
    )
    return shape, i("global_batch_size")


def _value(shape: ModelShape, batch: int, column: str) -> float:
    model = {"megatron_flops_per_iter": "megatron", "palm_flops": "palm", "sixN_flops": "6n"}
    if column in model:
        return compute_flops(shape, batch, model[column]).per_iteration
    if column == "megatron_paper_72_flops":
        return compute_flops(shape, batch, "megatron-paper").per_iteration
    if column == "megatron_paper_96_flops":
        return compute_flops(shape, batch, "megatron-paper", "full").hardware_per_iteration
    if column == "megatron_hfu_full_recompute":
        return compute_flops(shape, batch, recompute="full").hardware_per_iteration
    if column == "megatron_hfu_selective_recompute":
        return compute_flops(shape, batch, recompute="selective").hardware_per_iteration
    if column == "megatron_core_v0_11_pre_causal":
        return megatron_core_v011_flops(shape, batch)
    if column == "hf_trainer_flops":
        return hf_trainer_flops(shape, batch)
    raise AssertionError(column)


COLUMNS = [
    "megatron_flops_per_iter",
    "megatron_hfu_full_recompute",
    "megatron_hfu_selective_recompute",
    "palm_flops",
    "sixN_flops",
    "megatron_paper_72_flops",
    "megatron_paper_96_flops",
    "megatron_core_v0_11_pre_causal",
    "hf_trainer_flops",
]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("row", ROWS, ids=[r["config"] for r in ROWS])
def test_oracle_flops(row: dict[str, str], column: str) -> None:
    shape, batch = _shape(row)
    assert _value(shape, batch, column) == pytest.approx(float(row[column]), rel=REL)


@pytest.mark.parametrize("row", ROWS, ids=[r["config"] for r in ROWS])
def test_oracle_parameter_counts(row: dict[str, str]) -> None:
    shape, _ = _shape(row)
    counts = count_parameters(shape)
    assert counts is not None
    assert counts.total == int(row["n_params_total"])
    assert counts.nonembedding == int(row["n_params_nonembedding"])
    assert counts.active == int(row["n_params_active"])


@pytest.mark.parametrize("row", ROWS, ids=[r["config"] for r in ROWS])
def test_model_flops_ignore_recompute(row: dict[str, str]) -> None:
    shape, batch = _shape(row)
    plain = compute_flops(shape, batch)
    full = compute_flops(shape, batch, recompute="full")
    assert full.per_iteration == plain.per_iteration
    assert plain.hardware_per_iteration == plain.per_iteration
    assert full.hardware_per_iteration > plain.per_iteration


def test_worked_example_7b_h100() -> None:
    result = compute_flops(ModelShape(seq_length=4096, params=7_000_000_000), 8, "6n")
    mfu = utilisation(tflops_per_gpu(result.per_iteration, 1.2, 8), 989)
    assert round(100 * mfu, 1) == 14.5


def test_worked_example_405b_lora_mi300x() -> None:
    shape = ModelShape(seq_length=64, params=405_000_000_000)
    full = compute_flops(shape, 16, "6n")
    lora = compute_flops(shape, 16, "6n", lora=True)
    assert round(100 * utilisation(tflops_per_gpu(full.per_iteration, 30, 8), 1300), 2) == 0.80
    assert round(100 * utilisation(tflops_per_gpu(lora.per_iteration, 30, 8), 1300), 2) == 0.53
    assert lora.per_iteration == pytest.approx(full.per_iteration * 4 / 6)


def test_worked_example_624_tflop() -> None:
    tflops = tflops_per_gpu(624e12, 4, 1)
    assert tflops == pytest.approx(156)
    assert utilisation(tflops, 312) == pytest.approx(0.5)


def test_trainable_params_counted_at_six() -> None:
    shape = ModelShape(seq_length=10, params=1000, trainable_params=100)
    result = compute_flops(shape, 1, "6n")
    assert result.per_iteration == 10 * (4 * 1000 + 2 * 100)


def test_lora_adapters_are_extra_weights_at_six() -> None:
    shape = ModelShape(seq_length=10, params=1000, trainable_params=100)
    result = compute_flops(shape, 1, "6n", lora=True)
    assert result.per_iteration == 10 * (4 * 1000 + 6 * 100)


def test_lora_keeps_attention_at_full_cost() -> None:
    shape, batch = _shape(ROWS[0])
    plain, lora = compute_flops(shape, batch), compute_flops(shape, batch, lora=True)
    attention = 6 * 96 * 96 * 128 * 2048 * batch * 2048
    assert lora.per_iteration == pytest.approx(
        (plain.per_iteration - attention) * 2 / 3 + attention
    )


def test_fallback_to_6n_when_only_params_known() -> None:
    result = compute_flops(ModelShape(seq_length=2048, params=10**9), 4)
    assert result.formula == "6n"
    assert result.per_iteration == 6 * 10**9 * 4 * 2048
    assert any("fell back to 6n" in a for a in result.assumptions)


def test_shape_error_names_missing_fields() -> None:
    with pytest.raises(ShapeError, match=r"^need num_layers, hidden_size to compute megatron"):
        compute_flops(ModelShape(num_attention_heads=8, seq_length=128, vocab_size=1000), 1)
    with pytest.raises(ShapeError, match="--seq-length"):
        compute_flops(ModelShape(params=10), 1, "6n")


def test_moe_layer_pattern_must_match_layers() -> None:
    shape = ModelShape(
        num_layers=4,
        hidden_size=64,
        num_attention_heads=4,
        seq_length=16,
        vocab_size=128,
        num_experts=4,
        moe_layer_freq=(0, 1),
    )
    with pytest.raises(ShapeError, match="lists 2 layers"):
        compute_flops(shape, 1)


def test_moe_terms_use_expert_size_freq_and_shared_expert() -> None:
    base = dict(
        num_layers=4, hidden_size=64, num_attention_heads=4, seq_length=16, padded_vocab_size=128
    )
    dense = ModelShape(**base, ffn_hidden_size=256, swiglu=True)
    moe = ModelShape(
        **base,
        ffn_hidden_size=256,
        swiglu=True,
        num_experts=8,
        moe_router_topk=2,
        moe_ffn_hidden_size=32,
        moe_shared_expert_intermediate_size=48,
        moe_layer_freq=2,
    )
    # layers 0 and 2 are MoE: their MLP is 6·m·h·(f_e·t + f_sh) instead of 6·m·h·f
    delta = 2 * 6 * 3 * 64 * ((32 * 2 + 48) - 256) * 16
    assert compute_flops(moe, 1).per_iteration - compute_flops(dense, 1).per_iteration == delta


def test_derivation_plugs_in_numbers() -> None:
    shape, batch = _shape(ROWS[1])
    text = compute_flops(shape, batch, recompute="full").derivation
    lines = text.splitlines()
    assert lines[0].startswith("formula:  F = B·s·[6·l·(h·(q+2k)")
    assert lines[1].startswith("numbers:  F = 8·1024·[6·24·(1024·(1024+2·1024)")
    assert "1.861224e+13" in text
    assert "F_hw = 2.397236e+13" in text


def test_megatron_deepspeed_formula() -> None:
    shape, batch = _shape(ROWS[0])
    layers, h, s, v = 96, 12288, 2048, 51200
    expected = 24 * 4 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    assert megatron_deepspeed_reported_flops(shape, batch, True) == pytest.approx(expected)
    assert megatron_deepspeed_reported_flops(shape, batch, False) == pytest.approx(expected * 3 / 4)


def explain_reported_ratio(*args: Any) -> str | None:
    """The document's `reported.explanation`: the reading of the ratio, worded."""
    return reported_ratio(read_reported_ratio(*args))


def test_every_count_read_is_worded() -> None:
    assert set(COUNTS) == EXPLAINED


def test_explain_megatron_deepspeed_ratio() -> None:
    shape, batch = _shape(ROWS[0])
    expected = compute_flops(shape, batch).per_iteration / megatron_deepspeed_reported_flops(
        shape, batch, True
    )
    text = explain_reported_ratio("megatron-deepspeed", expected, "full", shape, batch)
    assert text is not None
    assert f"expected ratio {expected:.3f}×, observed {expected:.3f}×" in text
    assert "factor 4" in text


def test_explain_old_megatron_causal_halving() -> None:
    shape, batch = _shape(ROWS[3])
    ratio = compute_flops(shape, batch).per_iteration / megatron_core_v011_flops(shape, batch)
    text = explain_reported_ratio("megatron-lm", ratio, "none", shape, batch)
    assert text is not None and "core 0.11" in text


def test_explain_nothing_when_ratio_is_one() -> None:
    assert explain_reported_ratio("megatron-lm", 1.004, "none") is None
    assert explain_reported_ratio("unknown-framework", 0.5, "none") is None


def test_unknown_formula_rejected() -> None:
    shape, batch = _shape(ROWS[0])
    with pytest.raises(ValueError, match="unknown formula"):
        compute_flops(shape, batch, "chinchilla")
