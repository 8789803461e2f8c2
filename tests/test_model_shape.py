"""Model shapes: presets, Hugging Face configs, Megatron arguments, padding, MoE patterns."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from loganalyzer.flops.shape import (
    ModelShape,
    count_parameters,
    merge_shape,
    padded_vocab,
    parse_moe_layer_freq,
    preset_names,
    shape_from_hf_config,
    shape_from_megatron_args,
    shape_from_preset,
)

# Published parameter counts of the released checkpoints.
PUBLISHED_TOTALS = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
}


@pytest.mark.parametrize(("name", "total"), PUBLISHED_TOTALS.items())
def test_preset_parameter_counts(name: str, total: int) -> None:
    counts = count_parameters(shape_from_preset(name))
    assert counts is not None and counts.total == total


def test_every_preset_counts() -> None:
    required = {"gpt2", "gpt2-xl", "gpt3-125m", "gpt3-175b", "llama3.1-70b", "mixtral-8x22b"}
    assert required <= set(preset_names())
    for name in preset_names():
        assert count_parameters(shape_from_preset(name)) is not None, name


def test_preset_aliases_and_unknown() -> None:
    assert shape_from_preset("GPT2-1.5B") == shape_from_preset("gpt2-xl")
    with pytest.raises(ValueError, match="unknown model preset 'llama9'"):
        shape_from_preset("llama9")


def test_gpt2_preset_pads_vocab_like_megatron() -> None:
    shape = shape_from_preset("gpt2-medium")
    assert shape.vocab == 50304
    counts = count_parameters(shape)
    assert counts is not None and counts.total == 354_871_296


def test_mixtral_active_parameters() -> None:
    counts = count_parameters(shape_from_preset("mixtral-8x7b"))
    assert counts is not None and counts.active == 12_879_925_248


def test_hf_gpt2_config(tmp_path: Path) -> None:
    config = {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "vocab_size": 50257,
        "n_inner": None,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    shape = shape_from_hf_config(path)
    assert (shape.num_layers, shape.hidden_size, shape.ffn_size, shape.vocab) == (
        12,
        768,
        3072,
        50257,
    )
    counts = count_parameters(shape)
    assert counts is not None and counts.total == 124_439_808


def test_hf_llama3_config() -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    }
    shape = shape_from_hf_config(config)
    assert shape.swiglu and shape.num_query_groups == 8 and shape.head_dim == 128
    assert shape.untie_embeddings_and_output_weights is True


def test_hf_mixtral_config() -> None:
    config = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
    }
    shape = shape_from_hf_config(config)
    assert (shape.num_experts, shape.moe_router_topk, shape.moe_ffn_hidden_size) == (8, 2, 14336)
    assert shape.moe_layers() == 32


def test_hf_qwen2_tied_with_qkv_bias() -> None:
    config = {
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_attention_heads": 14,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    }
    counts = count_parameters(shape_from_hf_config(config))
    assert counts is not None and counts.total == 494_032_768


def test_hf_gpt_neox_config() -> None:
    config = {
        "model_type": "gpt_neox",
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_attention_heads": 8,
        "num_hidden_layers": 6,
        "vocab_size": 50304,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    }
    shape = shape_from_hf_config(config)
    assert shape.position_embedding_type == "rope" and shape.add_bias_linear is True
    assert not shape.swiglu and shape.untie_embeddings_and_output_weights is True


def test_hf_unsupported_model_type() -> None:
    with pytest.raises(ValueError, match="unsupported model_type 'bert'"):
        shape_from_hf_config({"model_type": "bert"})


@pytest.mark.parametrize(
    ("vocab", "divisible", "tp", "expected"),
    [
        (50257, 128, 1, 50304),
        (50257, 128, 8, 51200),
        (32000, 128, 1, 32000),
        (32000, 128, 8, 32768),
        (128256, 128, 2, 128256),
        (1, 1, 1, 1),
    ],
)
def test_padding_rule(vocab: int, divisible: int, tp: int, expected: int) -> None:
    assert padded_vocab(vocab, divisible, tp) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("2", 2),
        (4, 4),
        ("[0,1,1,1]", (0, 1, 1, 1)),
        ("[0, 1]", (0, 1)),
        ("([0]*1+[1]*3)", (0, 1, 1, 1)),
        ("([1]*2+[0]*1)*2", (1, 1, 0, 1, 1, 0)),
    ],
)
def test_moe_layer_freq_forms(text: str | int, expected: int | tuple[int, ...]) -> None:
    assert parse_moe_layer_freq(text) == expected


@pytest.mark.parametrize(
    "text", ["__import__('os')", "[0,2]", "0", "[1]*10**9", "abc", "[0]+1", "(("]
)
def test_moe_layer_freq_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_moe_layer_freq(text)


def test_moe_layer_freq_int_counts_from_layer_zero() -> None:
    shape = ModelShape(num_layers=5, num_experts=4, moe_layer_freq=2)
    assert shape.moe_layers() == 3


def test_megatron_core_args() -> None:
    args = {
        "num_layers": "32",
        "hidden_size": "4096",
        "num_attention_heads": "32",
        "group_query_attention": "True",
        "num_query_groups": "8",
        "kv_channels": "None",
        "ffn_hidden_size": "14336",
        "seq_length": "8192",
        "swiglu": "True",
        "padded_vocab_size": "None",
        "vocab_size": "128256",
        "tensor_model_parallel_size": "4",
        "make_vocab_size_divisible_by": "128",
        "num_experts": "None",
        "moe_layer_freq": "1",
        "untie_embeddings_and_output_weights": "True",
    }
    shape = shape_from_megatron_args(args)
    assert shape.num_query_groups == 8 and shape.swiglu and shape.seq_length == 8192
    assert shape.vocab == 128512  # 128256 rounded up to a multiple of 128 x 4
    assert shape.num_experts is None and shape.head_dim == 128


def test_megatron_ignores_query_groups_without_gqa_flag() -> None:
    args = {
        "num_layers": "2",
        "hidden_size": "64",
        "num_attention_heads": "4",
        "group_query_attention": "False",
        "num_query_groups": "1",
    }
    assert shape_from_megatron_args(args).query_groups == 4


def test_old_megatron_deepspeed_args() -> None:
    args = {
        "num_layers": "24",
        "hidden_size": "2048",
        "num_attention_heads": "16",
        "glu_activation": "swiglu",
        "checkpoint_activations": "True",
        "seq_length": "2048",
        "moe_layer_freq": "([0]*1+[1]*23)",
        "num_experts": "8",
    }
    shape = shape_from_megatron_args(args)
    assert shape.swiglu and shape.moe_router_topk == 2
    assert shape.moe_layer_freq == (0,) + (1,) * 23 and shape.moe_layers() == 23


def test_merge_repads_vocab_on_new_tp() -> None:
    shape = merge_shape(shape_from_preset("llama2-7b"), {"tensor_model_parallel_size": 8})
    assert shape.vocab == 32768
    assert merge_shape(shape, {"num_layers": None}) == shape


def test_router_topk_is_a_moe_fact() -> None:
    """A dense model routes to no expert, whatever its arguments print (Megatron-core dumps
    `moe_router_topk 2` for every model); a MoE one that states none routes to Megatron's
    default 2; one that states 1 routes to 1."""
    dense = shape_from_megatron_args({"num_layers": "2", "moe_router_topk": "2"})
    assert dense.moe_router_topk is None
    assert ModelShape(num_experts=8).moe_router_topk == 2
    assert shape_from_megatron_args({"num_experts": "8", "moe_router_topk": "1"}).router_topk == 1
    # merging experts into a dense shape gives it the default, and taking them away drops it
    assert merge_shape(dense, {"num_experts": 4}).moe_router_topk == 2
    assert dataclasses.replace(ModelShape(num_experts=8), num_experts=None).moe_router_topk is None
    # one expert is the dense MLP (Megatron-DeepSpeed's default `--num-experts 1`)
    assert shape_from_megatron_args({"num_experts": "1"}).num_experts is None
