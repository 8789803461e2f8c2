"""Facts recovered when a log's arguments lack them: sequence length from consumed tokens and
samples, and MFU from the framework's printed TFLOPS when the model shape is unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.flops.fallbacks import seq_length_from_consumed
from tests.analysis_factories import make_metrics
from tests.conftest import FIXTURES


def test_seq_length_from_consumed_tokens_between_two_records() -> None:
    metrics = make_metrics(
        [
            (199, "consumed samples", 152832.0, None),
            (199, "consumed tokens", 625999872.0, None),
            (200, "consumed samples", 153600.0, None),
            (200, "consumed tokens", 629145600.0, None),
        ]
    )
    assert seq_length_from_consumed(metrics) == (
        4096,
        "derived: consumed tokens / consumed samples over iterations 199-200",
    )


def test_no_seq_length_where_tokens_per_sample_is_not_whole() -> None:
    metrics = make_metrics([(5, "consumed samples", 3.0, None), (5, "consumed tokens", 10.0, None)])
    assert seq_length_from_consumed(metrics) is None
    assert seq_length_from_consumed(make_metrics([(5, "consumed samples", 3.0, None)])) is None


def test_summary_takes_the_seq_length_from_consumed_tokens() -> None:
    """alcf_tgs.txt states no --seq-length: 629145600 - 625999872 tokens over 768 samples."""
    result = CliRunner().invoke(
        main, ["summary", "-q", "--json", str(FIXTURES / "megatron_deepspeed/alcf_tgs.txt")]
    )
    doc = json.loads(result.stdout)
    assert doc["run"]["seq_length"] == 4096
    assert doc["run"]["provenance"]["seq_length"].startswith("derived: consumed tokens")


def test_mfu_from_printed_tflops_when_the_shape_is_unknown() -> None:
    """bloom_176b_chronicles.txt prints `TFLOPs` but no arguments: its median 147.4 over the
    A100's 312 bf16 peak, labelled as the framework's figure."""
    path = Path(FIXTURES / "megatron_deepspeed/bloom_176b_chronicles.txt")
    args = ["summary", "-q", "--json", str(path), "--gpu", "a100-sxm4-80gb", "--dtype", "bf16"]
    doc = json.loads(CliRunner().invoke(main, args).stdout)
    assert doc["flops"]["mfu"] is None
    waterfall = doc["waterfall"]
    assert waterfall["achieved"] == pytest.approx(doc["reported"]["tflops_per_gpu"] / 312)
    assert "printed TFLOPS/GPU" in waterfall["achieved_label"]
