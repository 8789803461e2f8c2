"""MaxText stdout through the CLI: real logs of four releases (fixtures/maxtext, provenance in
fixtures/README.md), their records, step times, config, reported TFLOP/s/device, the FLOPs
recomputed from the dump, the TPU each names; and the step line's parser on every wording.

The truth below was read by hand from each excerpt (its lines are quoted in the comments).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.cli import main
from loganalyzer.errors import NothingReadError
from loganalyzer.parsers.maxtext import MaxTextParser
from loganalyzer.parsers.maxtext.lines import candidates, step_fields
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, assert_golden

HERE = FIXTURES / "maxtext"
GPU_2024 = HERE / "gpu_llama2_7b_jax0425_2024.log"
TPU_V6E = HERE / "tpu_v6e_absl_jax091_2026.log"
DOCS_V5P = HERE / "docs_v5p_deepseek2_2025.log"
XPK_2023 = HERE / "xpk_v5e_2023_tflops.log"


def _summary(path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path), *extra])
    assert result.exit_code == 0, result.output
    doc: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return doc


# file, records, first, last, step 0's seconds (or the first record's), last seconds, loss at
# the last record, reported median, devices, accelerator key
CASES = [
    # `# completed step: 1, seconds: 8.693, TFLOP/s: 1.731, loss: 9.206` ... step 99
    (XPK_2023, 10, 1, 99, 8.693, 0.281, 6.880, 53.562, None, None),
    # `# completed step: 0, seconds: 36.350, TFLOP/s/device: 28.423, loss: 1.966` ... 29
    (GPU_2024, 30, 0, 29, 36.350, 4.301, 1.857, None, 8, None),
    # `completed step: 0, seconds: 44.923, TFLOP/s/device: 17.022, ...` ... step 9
    (DOCS_V5P, 10, 0, 9, 44.923, 5.667, 10.374, 134.914, 4, "tpu-v5p"),
    # `I0317 10:00:13.224641 ... completed step: 0, seconds: 31.731, ...` ... step 12
    (TPU_V6E, 13, 0, 12, 31.731, 0.427, math.nan, None, 8, "tpu-v6e"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0].name for c in CASES])
def test_real_logs_give_their_records_step_times_and_devices(case: tuple) -> None:  # type: ignore[type-arg]
    path, records, first, last, first_s, last_s, last_loss, reported, devices, accel = case
    doc = _summary(path)
    assert doc["sources"][0]["format"] == "maxtext"
    assert doc["run"]["framework"] == "maxtext"
    assert doc["iterations"] == {
        "logged": records,
        "first": first,
        "last": last,
        "segments": 1,
        "covered": records,
    }
    table = _table(path)
    assert table["step_time_s"][0] == first_s
    assert table["step_time_s"][-1] == last_s
    loss = table["loss"][-1]
    assert math.isnan(loss) if math.isnan(last_loss) else loss == last_loss
    if reported is not None:
        assert doc["reported"]["tflops_per_gpu"] == pytest.approx(reported)
    assert doc["run"]["num_gpus"] == devices
    assert (doc["run"]["gpu"] or {}).get("key") == accel


def _table(path: Path) -> pl.DataFrame:
    return MaxTextParser().parse(path).table


def test_the_dump_gives_the_model_batch_precision_and_parallelism() -> None:
    # `# Config param num_decoder_layers: 32`, `emb_dim: 4096`, `mlp_dim: 11008`,
    # `num_query_heads: 32`, `num_kv_heads: 32`, `head_dim: 128`, `max_target_length: 2048`,
    # `vocab_size: 32000`, `mlp_activations: ['silu', 'linear']`, `dtype: bfloat16`,
    # `remat_policy: full`, `global_batch_size_to_train_on: 96`,
    # `Num_devices: 8, shape (1, 8, 1, 1, 1, 1)` over mesh_axes ['data', 'fsdp', ...]
    run = _summary(GPU_2024)["run"]
    model = run["model"]
    assert (model["num_layers"], model["hidden_size"], model["ffn_hidden_size"]) == (
        32,
        4096,
        11008,
    )
    assert (model["num_attention_heads"], model["num_query_groups"], model["kv_channels"]) == (
        32,
        32,
        128,
    )
    assert (model["padded_vocab_size"], model["swiglu"]) == (32000, True)
    assert model["params"] == 6738415616  # the log prints `number parameters: 6.738 billion`
    assert (run["seq_length"], run["global_batch_size"], run["dtype"]) == (2048, 96, "bf16")
    assert run["recompute"] == "full"
    assert MaxTextParser().parse(GPU_2024).get("micro_batch_size") == 12  # per device
    assert run["parallelism"]["data"] == 8 and run["parallelism"]["tensor"] == 1
    assert run["provenance"]["global_batch_size"].endswith("gpu_llama2_7b_jax0425_2024.log:43")


def test_maxtexts_own_micro_batch_size_is_not_megatrons(tmp_path: Path) -> None:
    # a line of the same 2026 dump (cut from the fixture): pipeline microbatching unset
    line = (
        "I0317 09:59:16.241605 125344476638336 pyconfig.py:413] Config param micro_batch_size: -1\n"
    )
    log = tmp_path / "maxtext.log"
    log.write_text(line + TPU_V6E.read_text())
    run = MaxTextParser().parse(log)
    assert run.get("micro_batch_size") == 1  # `per_device_batch_size: 1`
    assert run.get("micro_batch_size") == run.get_int("per_device_batch_size")


def test_a_derived_global_batch_is_stated_as_an_assumption() -> None:
    # the docs' log prints `per_device_batch_size: 24.0` and `Num_devices: 4`, no global batch
    result = CliRunner().invoke(main, ["summary", "--json", str(DOCS_V5P)])
    doc = json.loads(result.stdout)
    assert doc["run"]["global_batch_size"] == 96
    assert doc["run"]["provenance"]["global_batch_size"].startswith(
        "derived per_device_batch_size 24.0"
    )
    assert any("global batch size 96 assumed" in w for w in doc["warnings"])
    # the batch read so agrees with the tokens MaxText counted: 4 x `Tokens/s/device: 8671.946`
    # at the steady 5.668 s a step
    assert doc["throughput"]["tokens_per_s"] == pytest.approx(4 * 8671.946, rel=1e-3)


def test_the_step_lines_other_fields_go_to_the_long_table() -> None:
    # `completed step: 12, ..., Tokens/s/device: 9603.144, total_weights: 28410, loss: nan`
    metrics = MaxTextParser().parse(TPU_V6E).metrics
    assert isinstance(metrics, pl.DataFrame)
    step = metrics.filter(pl.col("iteration") == 12).sort("name")
    assert step.select(pl.col("name").cast(pl.String), "value").rows() == [
        ("Tokens/s/device", 9603.144),
        ("total_weights", 28410.0),
    ]


def test_recomputed_flops_and_mfu_on_a_tpu_v6e() -> None:
    doc = _summary(TPU_V6E)
    b, s, layers, h, f, v = 8, 4096, 36, 2560, 10240, 262144
    q, k = 8 * 256, 4 * 256  # query and key/value widths: heads x head_dim
    by_hand = (
        b * s * (6 * layers * (h * (q + 2 * k) + q * h) + 6 * layers * q * s + 18 * layers * h * f)
        + b * s * 6 * h * v
    )
    flops = doc["flops"]
    assert flops["per_iteration"] == by_hand
    steady = doc["step_time_s"]["median"]  # 0.434
    assert flops["tflops_per_gpu"] == pytest.approx(by_hand / (steady * 8) / 1e12, rel=1e-3)
    assert doc["peak"]["tflops_per_gpu"] == 918.0  # TPU v6e bf16
    assert flops["mfu"] == pytest.approx(flops["tflops_per_gpu"] / 918.0)
    # MaxText since 2025-07 counts this formula (sliding-window layers over their window)
    assert doc["reported"]["explanation"].startswith("MaxText (since July 2025)")


def test_a_gpu_named_by_the_user_gives_the_mfu() -> None:
    # the log's backend is `cuda 12030`: no GPU model is printed
    plain = CliRunner().invoke(main, ["summary", "--json", str(GPU_2024)])
    assert "names no accelerator model (JAX backend 'cuda 12030'" in plain.output
    doc = _summary(GPU_2024, "--gpu", "h100-sxm")
    assert doc["peak"]["tflops_per_gpu"] == 989.5
    assert doc["flops"]["mfu"] == pytest.approx(doc["flops"]["tflops_per_gpu"] / 989.5)
    # recomputed 8.1107e15 FLOPs a step over reported 1033.20 TFLOPs a device: 0.981
    assert doc["reported"]["recomputed_over_reported"] == pytest.approx(0.981, abs=0.001)


def test_the_gpu_xla_names_is_the_accelerator(tmp_path: Path) -> None:
    # XLA's own line as a JAX program on a GPU logs it (xla/service/service.cc's
    # "  StreamExecutor device (%d): %s, %s" with absl's prefix), before MaxText's output
    log = tmp_path / "maxtext.log"
    xla = (
        "I0306 06:26:45.561012 135530450430272 service.cc:153]   StreamExecutor device (0):"
        " NVIDIA H100 80GB HBM3, Compute Capability 9.0\n"
    )
    log.write_text(xla + GPU_2024.read_text())
    result = CliRunner().invoke(main, ["summary", "--json", str(log)])
    doc = json.loads(result.stdout)
    assert doc["run"]["gpu"]["key"] == "h100-sxm"
    assert doc["flops"]["mfu"] == pytest.approx(doc["flops"]["tflops_per_gpu"] / 989.5)
    assert "names no accelerator model" not in result.output


@pytest.mark.parametrize(
    ("kind", "key"),
    [
        ("TPU v4", "tpu-v4"),
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5", "tpu-v5p"),
        ("TPU7x", "tpu-v7-core"),
    ],
)
def test_the_tpu_kind_the_runtime_prints_picks_the_peak(
    tmp_path: Path, kind: str, key: str
) -> None:
    log = tmp_path / "maxtext.log"
    log.write_text(DOCS_V5P.read_text().replace("TFRT TPU v5\n", f"TFRT {kind}\n"))
    assert _summary(log)["run"]["gpu"]["key"] == key


def test_a_tpu_without_a_peak_is_named_not_guessed(tmp_path: Path) -> None:
    log = tmp_path / "maxtext.log"
    log.write_text(DOCS_V5P.read_text().replace("TFRT TPU v5\n", "TFRT TPU v2\n"))
    result = CliRunner().invoke(main, ["summary", "--json", str(log)])
    doc = json.loads(result.stdout)
    assert doc["run"]["gpu"] is None and doc["peak"] is None
    assert doc["flops"]["mfu"] is None
    assert "'TPU v2' from the log is not in the peak table" in result.output


def test_a_crash_after_the_steps_is_the_ending(tmp_path: Path) -> None:
    log = tmp_path / "maxtext.log"
    log.write_text(
        DOCS_V5P.read_text()
        + "Traceback (most recent call last):\n"
        + '  File "/app/MaxText/train.py", line 500, in <module>\n'
        + "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device"
        + " buffer\n"
    )
    outcome = _summary(log)["outcome"]
    assert (outcome["status"], outcome["exception"]) == ("crashed", "XlaRuntimeError")
    assert outcome["last_iteration"] == 9


def test_steps_reached_is_a_completed_run() -> None:
    # `Config param steps: 10`; steps are numbered from 0, the last printed is 9
    outcome = _summary(DOCS_V5P)["outcome"]
    assert (outcome["status"], outcome["train_iters"]) == ("completed", 9)


def test_a_restart_starts_a_segment_and_a_copy_does_not(tmp_path: Path) -> None:
    text = DOCS_V5P.read_text()
    steps = text.split("Per train step:")[1]
    log = tmp_path / "maxtext.log"
    # the same steps printed again with other figures: a relaunch from step 0
    log.write_text(text + steps.replace("seconds: 5.66", "seconds: 6.66"))
    table = MaxTextParser().parse(log).table
    assert table.height == 20 and table["segment"].to_list() == [0] * 10 + [1] * 10
    assert _summary(log)["iterations"]["segments"] == 2
    # every step line printed twice in a row (two hosts' copies): nothing new
    doubled = [line for line in text.splitlines() for _ in range(1 + ("completed" in line))]
    log.write_text("\n".join(doubled))
    assert _summary(log)["iterations"] == {
        "logged": 10,
        "first": 0,
        "last": 9,
        "segments": 1,
        "covered": 10,
    }


def test_detection_claims_maxtext_and_nothing_else() -> None:
    parser = MaxTextParser()
    for path in (XPK_2023, GPU_2024, DOCS_V5P, TPU_V6E):
        assert parser.detect(path) == 0.9
    others = [
        p
        for folder in (
            *("megatron", "megatron_deepspeed", "deepspeed", "hf_trainer", "launcher"),
            *("corpus", "endings", "incidents", "bad"),
        )
        for p in (FIXTURES / folder).glob("**/*")
        if p.is_file()
    ]
    assert others
    assert [p for p in others if parser.detect(p) > 0] == []
    assert "maxtext" in load_registry().parsers


def test_a_dump_without_steps_is_read_and_said(tmp_path: Path) -> None:
    log = tmp_path / "maxtext.log"
    log.write_text(DOCS_V5P.read_text().split("completed step:")[0])
    assert MaxTextParser().detect(log) == 0.5
    run = MaxTextParser().parse(log)
    assert run.table.height == 0 and run.get("num_gpus") == 4
    assert any("no training steps logged" in w for w in run.warnings)


def test_latent_attention_is_said_to_be_approximate(tmp_path: Path) -> None:
    # deepseek2-16b.yml sets `attention_type: "mla"`; pyconfig prints it with the dump
    log = tmp_path / "maxtext.log"
    log.write_text("Config param attention_type: mla\n" + DOCS_V5P.read_text())
    warnings = MaxTextParser().parse(log).warnings
    assert any("attention_type mla" in w and "approximate" in w for w in warnings)
    assert not any("attention_type" in w for w in MaxTextParser().parse(TPU_V6E).warnings)


def test_text_without_maxtext_lines_is_nothing_read(tmp_path: Path) -> None:
    log = tmp_path / "other.log"
    log.write_text("the run completed step: twelve\n")
    assert MaxTextParser().detect(log) == 0.0
    with pytest.raises(NothingReadError):
        MaxTextParser().parse(log)


@pytest.mark.parametrize("path", [GPU_2024, TPU_V6E], ids=lambda p: p.name)
def test_summary_matches_golden(path: Path) -> None:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert_golden(f"maxtext/{path.stem}.json", result.stdout)


# ------------------------------------------------------------ the step line, any wording

# Prefixes a MaxText line is printed behind: none, absl's, a comment, launchers'.
PREFIXES = st.sampled_from(
    [
        "",
        "I0317 10:00:13.224641 125344476638336 metric_logger.py:181] ",
        "# ",
        "[rank0]: ",
        "3: ",
        "2026-03-17T10:00:13.224641Z ",
    ]
)
VALUES = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    prefix=PREFIXES,
    step=st.integers(min_value=0, max_value=10**9),
    seconds=VALUES,
    tflops=VALUES,
    loss=st.one_of(VALUES, st.just(math.nan)),
    wording=st.sampled_from(["TFLOP/s", "TFLOP/s/device"]),
    tokens=st.one_of(st.none(), VALUES),
    weights=st.one_of(st.none(), st.integers(min_value=0, max_value=10**9)),
    extra=st.lists(st.sampled_from(["lm_loss", "perplexity", "moe_lb_loss"]), unique=True),
)
def test_step_lines_of_every_wording_read_back(
    prefix: str,
    step: int,
    seconds: float,
    tflops: float,
    loss: float,
    wording: str,
    tokens: float | None,
    weights: int | None,
    extra: list[str],
) -> None:
    # metric_logger.py: f"completed step: {step}, seconds: {...:.3f}, TFLOP/s/device:
    # {...:.3f}, Tokens/s/device: {...:.3f}, total_weights: {...}, loss: {loss:.3f}", then
    # further `, name: value` fields in newer releases; 2023's train.py printed `TFLOP/s:`
    line = f"{prefix}completed step: {step}, seconds: {seconds:.3f}, {wording}: {tflops:.3f}, "
    if tokens is not None:
        line += f"Tokens/s/device: {tokens:.3f}, "
    if weights is not None:
        line += f"total_weights: {weights}, "
    line += f"loss: {loss:.3f}" + "".join(f", {name}: {loss:.3f}" for name in extra)
    frame = pl.DataFrame({"line": [7], "text": [line]})
    steps, pairs = step_fields(candidates(frame))
    assert steps["iteration"].to_list() == [step]
    fields = dict(zip(pairs["name"], pairs["value"], strict=True))
    assert fields["seconds"] == float(f"{seconds:.3f}")
    assert fields[wording] == float(f"{tflops:.3f}")
    printed = float(f"{loss:.3f}")
    assert math.isnan(fields["loss"]) if math.isnan(loss) else fields["loss"] == printed
    if tokens is not None:
        assert fields["Tokens/s/device"] == float(f"{tokens:.3f}")
    if weights is not None:
        assert fields["total_weights"] == weights
    assert set(fields) == {
        "seconds",
        wording,
        "loss",
        *extra,
        *(["Tokens/s/device"] if tokens is not None else []),
        *(["total_weights"] if weights is not None else []),
    }
