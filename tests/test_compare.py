"""`compare`: the bigscience 3D runs with and without DeepSpeed, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.analysis.comparison import zero_stage
from loganalyzer.cli import main
from loganalyzer.model import ConfigValue, Provenance
from tests.report_helpers import summary_json

PAIR = "bigscience/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-{}.out"


@pytest.fixture
def pair(shared_logs: Path) -> list[str]:
    return [str(shared_logs / PAIR.format("on")), str(shared_logs / PAIR.format("off"))]


def test_names_the_faster_run_and_by_how_much(pair: list[str]) -> None:
    args = ["compare", "-q", *pair, "--label", "ds-on", "--label", "ds-off", "--gpu", "v100-sxm2"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    compared = json.loads(result.stdout)
    on, off = (summary_json([p], ["--gpu", "v100-sxm2"]) for p in pair)
    ratio = off["throughput"]["tokens_per_s"] / on["throughput"]["tokens_per_s"]
    assert ratio > 1  # ds-off trained faster in these logs
    assert compared["faster"].startswith("ds-off is the fastest")
    assert f"{ratio:.3f}×" in compared["faster"]
    tokens = compared["figures"]["tokens_per_s"]
    assert [t["value"] for t in tokens] == [
        on["throughput"]["tokens_per_s"],
        off["throughput"]["tokens_per_s"],
    ]
    assert tokens[0]["change"] is None
    assert f"({ratio:.3f}×)" in tokens[1]["change"]
    assert compared["config_differences"]["deepspeed"] == ["True", "False"]
    assert "num_layers" not in compared["config_differences"]

    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0
    assert "ds-off is the fastest" in text.stdout


def test_html_overlays_both_runs(pair: list[str], tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(
        main, ["compare", "-q", *pair, "--gpu", "v100-sxm2", "--x", "tokens", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="chart-compare-step-time"' in page
    assert 'id="chart-compare-rate"' in page
    assert "Config differences" in page


def test_one_run_or_mismatched_labels_is_a_usage_error(pair: list[str]) -> None:
    one = CliRunner().invoke(main, ["compare", "-q", pair[0]])
    assert one.exit_code == 2
    labels = CliRunner().invoke(main, ["compare", "-q", *pair, "--label", "a"])
    assert labels.exit_code == 2
    assert "one per run" in labels.stderr


def test_without_tokens_the_faster_run_is_judged_per_step() -> None:
    from loganalyzer.render.compare import faster_sentence
    from loganalyzer.render.viewmodel import Figure

    def headline(step: float) -> tuple[Figure, ...]:
        return (
            Figure("tokens_per_s", "tokens/s", "unknown", None),
            Figure("step_time", "median step time", f"{step} s", step),
        )

    text = faster_sentence(["a", "b"], [headline(2.0), headline(1.6)])
    assert text.startswith("b is the fastest per iteration: median step time 1.6 s against 2 s")
    assert "1.250×" in text


def test_time_axis_falls_back_to_logged_time_without_timestamps(pair: list[str]) -> None:
    from loganalyzer.render.compare import RunInput, build_compare
    from tests.report_helpers import loaded_run

    runs = [RunInput(p, summary_json([p], ["--gpu", "v100-sxm2"]), loaded_run([p])) for p in pair]
    view = build_compare(runs, x_axis="time")
    step = next(c for c in view.charts if c.id == "chart-compare-step-time")
    xs = step.figure["data"][0]["x"]
    assert xs == sorted(xs) and xs[-1] > 1  # hours, increasing


# The shared BigScience logs of issue 30: ds-3d on and off (49 and 62 iterations logged), and
# Megatron-LM TP4-PP16 at batch 1024 against Megatron-DeepSpeed ZeRO-3 TP4-DP16 at batch 768
# (3 and 4 records).
MEGATRON = "bigscience/gpt2-meg/meg_gpt2_perf_n16.out"
ZERO = "bigscience/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out"


def _compare(*args: str) -> str:
    result = CliRunner().invoke(main, ["compare", "-q", *args, "--gpu", "v100-sxm2"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_logs_of_different_lengths_are_compared_per_iteration(pair: list[str]) -> None:
    compared = json.loads(_compare(*pair, "--label", "ds-on", "--label", "ds-off", "--json"))
    on, off = (summary_json([p], ["--gpu", "v100-sxm2"]) for p in pair)
    assert [d["iterations"]["covered"] for d in (on, off)] == [49, 62]
    figures = compared["figures"]
    assert [c["value"] for c in figures["iterations"]] == [49, 62]
    assert [c["text"] for c in figures["iterations"]] == ["49 (1–49)", "62 (1–62)"]
    per = [d["goodput"]["wall_s"] / d["iterations"]["covered"] for d in (on, off)]
    assert [c["value"] for c in figures["time_per_iteration"]] == per
    assert [c["value"] for c in figures["time_per_1k_iterations"]] == [p * 1000 for p in per]
    assert [c["text"] for c in figures["time_per_iteration"]] == ["137.0 s", "126.9 s"]
    # the raw totals are kept for scripts but marked: 62 and 49 iterations do not compare
    assert [c["comparable"] for c in figures["wall_clock"]] == [True, False]
    assert [c["comparable"] for c in figures["lost"]] == [True, False]
    assert [c["comparable"] for c in figures["tokens_per_s"]] == [True, True]
    # one unit in a row: "1.9 h" and "2.2 h", not "111.9 min" and "2.2 h"
    assert [c["text"] for c in figures["wall_clock"]] == ["1.9 h", "2.2 h"]
    assert compared["identity_differences"] == {"deepspeed": ["on", "off"]}
    assert [i["iterations"]["covered"] for i in compared["identities"]] == [49, 62]
    assert compared["largest_difference"]["figure"] == "tokens_per_s"
    assert compared["largest_difference"]["run"] == "ds-off"
    assert compared["largest_difference"]["reasons"] == ["deepspeed"]
    assert compared["headline"].startswith(
        "ds-off trains 8.3 % more tokens per second than ds-on (8,280 against 7,648). "
        "The runs differ in DeepSpeed engine (off against on)."
    )

    text = _compare(*pair, "--label", "ds-on", "--label", "ds-off")
    assert text.startswith(compared["headline"] + "\n")
    rows = {line.split("  ")[0]: line for line in text.splitlines()}
    assert "49 (1–49)" in rows["iterations logged"] and "62 (1–62)" in rows["iterations logged"]
    assert "137.0 s" in rows["time per iteration"] and "126.9 s" in rows["time per iteration"]
    assert "38.1 h" in rows["per 1,000 iterations"]
    assert "other iterations logged" in rows["wall clock"] and "min" not in rows["wall clock"]
    assert "differs: DeepSpeed engine on | off" in text


def test_identity_lines_show_parallelism_and_batch_that_differ(shared_logs: Path) -> None:
    runs = [str(shared_logs / MEGATRON), str(shared_logs / ZERO)]
    compared = json.loads(_compare(*runs, "--label", "megatron", "--label", "zero3", "--json"))
    megatron, zero = compared["identities"]
    assert megatron["text"] != zero["text"]
    assert "TP4-PP16 · batch 1,024 (micro 4)" in megatron["text"]
    assert "ZeRO-3 TP4-DP16 · batch 768 (micro 48)" in zero["text"]
    assert megatron["parallelism"]["zero_stage"] is None
    assert (zero["parallelism"]["zero_stage"], zero["parallelism"]["data"]) == (3, 16)
    differences = compared["identity_differences"]
    assert differences["parallelism"] == ["TP4-PP16", "ZeRO-3 TP4-DP16"]
    assert differences["global_batch_size"] == ["1,024", "768"]
    assert "model" not in differences  # same shape; one log states 4h, the other assumes it
    # both rest on fewer than 10 steady records: the summary's own confidence, marked
    assert [i["confidence"] for i in compared["identities"]] == ["low", "low"]
    assert "Low confidence: megatron and zero3 rest on" in compared["headline"]
    assert compared["headline"].startswith("zero3 trains 24.6 % fewer tokens per second")
    assert "parallelism (ZeRO-3 TP4-DP16 against TP4-PP16)" in compared["headline"]

    # 104 differences: those that change FLOPs or parallelism first, the rest folded
    ranked = compared["config_ranked"]
    assert len(ranked) == len(compared["config_differences"]) > 80
    assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert [r["name"] for r in ranked[:2]] == ["global_batch_size", "micro_batch_size"]
    folded = [r["folded"] for r in ranked]
    assert folded == sorted(folded) and 0 < folded.count(False) < 30
    assert {r["kind"] for r in ranked if r["folded"]} == {"other"}
    assert next(r for r in ranked if r["name"] == "zero_stage")["kind"] == "parallelism"
    assert next(r for r in ranked if r["name"] == "data_path")["folded"]

    text = _compare(*runs)
    assert f"and {folded.count(True)} other differences" in text
    assert "data_path" not in text
    assert "  low confidence: the steady step time, TFLOPS and MFU rest on 2 records" in text
    assert "data_path" in _compare(*runs, "--all")


def test_config_kinds_rank_flops_and_parallelism_first() -> None:
    from loganalyzer.analysis.comparison import config_kind, config_order

    names = ["data_path", "tensor_model_parallel_size", "num_layers", "bf16", "seq_length"]
    assert sorted(names, key=config_order) == [
        "num_layers",
        "seq_length",
        "tensor_model_parallel_size",
        "bf16",
        "data_path",
    ]
    assert [config_kind(n) for n in ("recompute_granularity", "zero_stage", "lr")] == [
        "recompute",
        "parallelism",
        "other",
    ]
    # a value every run states ranks before one only some state, within the ranked ones
    assert config_order("micro_batch_size") < config_order("num_layers", stated_by_all=False)
    assert config_order("num_layers", stated_by_all=False) < config_order("lr")


def _document(tokens: float, batch: int | None, tensor: int | None = 2) -> dict[str, object]:
    """The parts of a summary document a comparison's identity and rates read."""
    return {
        "run": {
            "framework": "megatron-lm",
            "global_batch_size": batch,
            "parallelism": {"tensor": tensor, "pipeline": None, "data": 4},
            "dtype": "bf16",
        },
        "iterations": {"logged": 10, "covered": 100, "first": 10, "last": 100},
        "goodput": {"wall_s": 500.0},
        "throughput": {"tokens_per_s": tokens},
        "confidence": "normal",
    }


@pytest.mark.parametrize(
    ("tokens", "batch", "expected"),
    [
        (
            1005.0,
            8,
            "b and a run alike: the largest difference, in tokens per second, is 0.5 %. Their "
            "model, batch, parallelism, precision, recomputation, hardware and framework are "
            "the same as far as the logs say.",
        ),
        (
            3000.0,
            16,
            "b's tokens per second is 3× a's (3,000 against 1,000). The runs differ in global "
            "batch (16 against 8).",
        ),
        (
            800.0,
            None,  # a batch only one log states is no difference
            "b trains 20.0 % fewer tokens per second than a (800 against 1,000). Their model, "
            "batch, parallelism, precision, recomputation, hardware and framework are the same "
            "as far as the logs say.",
        ),
    ],
)
def test_headline_names_the_largest_difference_and_what_differs(
    tokens: float, batch: int | None, expected: str
) -> None:
    from loganalyzer.analysis.comparison import identity_of, largest_difference
    from loganalyzer.render.compare import headline_sentence

    documents = [_document(1000.0, 8), _document(tokens, batch)]
    facts = [identity_of(d, {}) for d in documents]
    rates = [{"tokens_per_s": 1000.0}, {"tokens_per_s": tokens}]
    found = largest_difference(facts, rates)
    assert found is not None and found.figure == "tokens_per_s" and found.run == 1
    assert headline_sentence(["a", "b"], facts, found) == expected


@pytest.mark.parametrize(
    ("stated", "stage"),
    [
        ({"zero_stage": 0, "deepspeed": True}, None),  # stage 0 is no ZeRO
        ({"zero_stage": 3, "deepspeed": True}, 3),
        ({"zero_stage": 1.0}, 1),  # Megatron-DeepSpeed 2022 prints `zero_stage ... 1.0`
        ({"zero_stage": 2, "deepspeed": False}, None),  # no engine: --zero-stage goes unused
        ({"deepspeed": True}, None),
    ],
)
def test_zero_stage_is_1_to_3_where_the_engine_runs_zero(
    stated: dict[str, object], stage: int | None
) -> None:
    config = {
        key: ConfigValue(value, Provenance("log", "x.log", 1)) for key, value in stated.items()
    }
    assert zero_stage(config) == stage
