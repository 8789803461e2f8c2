"""The config NeMo prints, named as the FLOPs formula names it: each mapping on the key as
NeMo 1's hydra config and Megatron-Bridge's ConfigContainer spell it."""

from __future__ import annotations

import polars as pl
import pytest

from loganalyzer.parsers.nemo.config import dump_config, startup_rows


def config_of(values: dict[str, str]) -> dict[str, object]:
    config, _ = dump_config({k: (v, n) for n, (k, v) in enumerate(values.items())}, "log")
    return {key: found.value for key, found in config.items()}


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("bf16", "bf16"),
        ("bf16-mixed", "bf16"),
        ("16", "fp16"),
        ("16-mixed", "fp16"),
        ("32", "fp32"),
    ],
)
def test_lightning_precision(precision: str, dtype: str) -> None:
    assert config_of({"trainer.precision": precision})["dtype"] == dtype


def test_bridge_fp8_outranks_bf16() -> None:
    found = config_of({"mixed_precision.bf16": "true", "mixed_precision.fp8": "hybrid"})
    assert found["dtype"] == "fp8"
    assert config_of({"mixed_precision.bf16": "true", "mixed_precision.fp8": "null"})["dtype"] == (
        "bf16"
    )


def test_moe_and_gqa_fields() -> None:
    found = config_of(
        {
            "model.num_moe_experts": "64",
            "model.moe_router_topk": "6",
            "model.moe_ffn_hidden_size": "1408",
            "model.num_query_groups": "8",
        }
    )
    assert (found["num_experts"], found["moe_router_topk"], found["moe_ffn_hidden_size"]) == (
        64,
        6,
        1408,
    )
    # Megatron reads num_query_groups only with group_query_attention set
    assert found["num_query_groups"] == 8
    assert found["group_query_attention"] is True
    assert "group_query_attention" not in config_of({"model.num_query_groups": "null"})


def test_gpus_from_devices_and_nodes_only_when_whole_numbers() -> None:
    assert config_of({"trainer.devices": "8", "trainer.num_nodes": "4"})["num_gpus"] == 32
    assert "num_gpus" not in config_of({"trainer.devices": "-1", "trainer.num_nodes": "4"})


def test_an_interpolation_stands_for_the_value_it_names() -> None:
    found = config_of({"model.global_batch_size": "${model.gbs}", "model.gbs": "1024"})
    assert found["global_batch_size"] == 1024


def test_bridge_step_time_lines_of_both_wordings() -> None:
    # FORMATS reference: `Step Time : 9.09s GPU utilization: 663.5MODEL_TFLOP/s/GPU`; the
    # Bridge 0.2 log in fixtures/nemo: `Step Time : 4.65s GPU utilization: 59892.5TFLOP/s/GPU`
    frame = pl.DataFrame(
        {
            "line": [1, 2],
            "text": [
                "Step Time : 9.09s GPU utilization: 663.5MODEL_TFLOP/s/GPU",
                "[rank0]:Step Time : 4.65s GPU utilization: 59892.5TFLOP/s/GPU",
            ],
        }
    )
    rows = startup_rows(frame).filter(pl.col("key") == "bridge_tflops_per_gpu")
    assert rows.get_column("value").to_list() == ["663.5", "59892.5"]
