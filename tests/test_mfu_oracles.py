"""`loganalyzer mfu`, end to end, against every row of the spec's FLOPs oracle table."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import FIXTURES

ROWS = list(csv.DictReader((FIXTURES / "spec" / "flops-oracles.csv").read_text().splitlines()))
# oracle column -> (mfu options, the JSON field that holds it)
COLUMNS = {
    "megatron_flops_per_iter": (["--formula", "megatron"], "per_iteration"),
    "megatron_hfu_full_recompute": (["--recompute", "full"], "hardware_per_iteration"),
    "megatron_hfu_selective_recompute": (["--recompute", "selective"], "hardware_per_iteration"),
    "palm_flops": (["--formula", "palm"], "per_iteration"),
    "sixN_flops": (["--formula", "6n"], "per_iteration"),
    "megatron_paper_72_flops": (["--formula", "megatron-paper"], "per_iteration"),
}


def _shape_flags(row: dict[str, str]) -> list[str]:
    flags = [
        *("--num-layers", row["num_layers"], "--hidden-size", row["hidden_size"]),
        *("--num-attention-heads", row["num_attention_heads"]),
        *("--num-query-groups", row["num_query_groups"], "--kv-channels", row["kv_channels"]),
        *("--ffn-hidden-size", row["ffn_hidden_size"], "--seq-length", row["seq_length"]),
        *("--padded-vocab-size", row["padded_vocab_size"]),
        *("--global-batch-size", row["global_batch_size"]),
        "--swiglu" if row["swiglu"] == "1" else "--no-swiglu",
    ]
    if int(row["num_experts"]):
        flags += ["--num-experts", row["num_experts"], "--moe-router-topk", row["moe_router_topk"]]
    return flags


@pytest.mark.parametrize("column", list(COLUMNS))
@pytest.mark.parametrize("row", ROWS, ids=[r["config"] for r in ROWS])
def test_mfu_command_matches_the_oracle(row: dict[str, str], column: str) -> None:
    options, field = COLUMNS[column]
    result = CliRunner().invoke(main, ["mfu", "--json", *_shape_flags(row), *options])
    assert result.exit_code == 0, result.output
    flops = json.loads(result.stdout)["flops"][field]
    assert flops == pytest.approx(float(row[column]), rel=1e-4)  # the spec's 0.01 %
