"""Training incidents: loss spikes, divergence, grad-norm spikes, NaN/Inf values and loss-scale
collapse (`loganalyzer.analysis.incidents`), in the summary JSON and in every output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loss_curves import Spike, logged_table, loss_per_iteration

from loganalyzer.analysis.incidents import Incident, find_incidents
from loganalyzer.cli import main
from loganalyzer.model import conform_table

FIXTURES = Path(__file__).parent.parent / "fixtures"
CORPUS = FIXTURES / "corpus" / "megatron_deepspeed"
# The clean runs the no-false-spike property is checked on: a meaningful number by default,
# the 1,000 with LOGANALYZER_CLEAN_RUNS=1000 (about 20 s).
CLEAN_RUNS = int(os.environ.get("LOGANALYZER_CLEAN_RUNS", "100"))
# The runs with injected spikes, likewise (LOGANALYZER_SPIKED_RUNS=1000: about a minute).
SPIKED_RUNS = int(os.environ.get("LOGANALYZER_SPIKED_RUNS", "40"))


def _summary(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _kinds(found: tuple[Incident, ...] | list[dict[str, Any]]) -> list[str]:
    return [i.kind if isinstance(i, Incident) else i["kind"] for i in found]


@st.composite
def spiked_runs(draw: st.DrawFn) -> tuple[pl.DataFrame, list[Spike], int]:
    """A run logged every `interval` iterations with spikes of 1.5-5x over its trend that
    recover within 5-200 iterations, at least 400 records apart, and noise up to 3 %."""
    interval = draw(st.sampled_from([1, 2, 5, 10]))
    records = draw(st.integers(1200, 3000))
    iterations = records * interval
    spikes, at = [], draw(st.integers(20, 400)) * interval + draw(st.integers(0, interval - 1))
    while True:
        recovery = draw(st.integers(5, 200))
        if at + 2 * interval + recovery + 50 * interval >= iterations:
            break
        size = draw(st.floats(1.5, 5.0))
        shape = draw(st.sampled_from(["linear", "exponential"]))
        # held over one whole log interval, wherever in a record it starts
        spikes.append(Spike(at + 1, size, recovery, shape, hold=2 * interval - 1))
        at += 2 * interval + recovery + draw(st.integers(400, 800)) * interval
    noise = draw(st.floats(0.0, 0.03))
    seed = draw(st.integers(0, 2**31))
    losses = loss_per_iteration(iterations, noise, tuple(spikes), seed)
    return logged_table(losses, interval), spikes, interval


@settings(max_examples=SPIKED_RUNS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spiked_runs())
def test_every_injected_spike_is_found_once_within_one_log_interval(
    run: tuple[pl.DataFrame, list[Spike], int],
) -> None:
    table, spikes, interval = run
    found = [i for i in find_incidents(table) if i.metric == "loss"]
    assert _kinds(found) == ["loss_spike"] * len(spikes)
    for incident, spike in zip(found, spikes, strict=True):
        assert abs(incident.first_iteration - spike.start) < interval
        assert incident.peak is not None and incident.baseline is not None
        assert incident.ratio is not None and incident.ratio > 1.3
        assert incident.recovery_iterations is not None
        assert incident.recovery_iterations <= spike.hold + spike.recovery + interval


@settings(max_examples=CLEAN_RUNS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    interval=st.sampled_from([1, 2, 5, 10]),
    records=st.integers(30, 3000),
    noise=st.floats(0.0, 0.03),
    drop=st.floats(0.0, 0.6),
    seed=st.integers(0, 2**31),
)
def test_a_clean_run_has_no_incident(
    interval: int, records: int, noise: float, drop: float, seed: int
) -> None:
    losses = loss_per_iteration(records * interval, noise, (), seed, drop)
    assert find_incidents(logged_table(losses, interval)) == ()


def test_a_loss_that_rises_and_stays_up_is_one_divergence() -> None:
    losses = loss_per_iteration(4000, 0.02, (), 7)
    losses[3000:] *= np.linspace(1.0, 3.0, 1000)
    found = find_incidents(logged_table(losses, 1))
    assert _kinds(found) == ["divergence"]
    (divergence,) = found
    assert 3000 < divergence.first_iteration < 3300
    assert divergence.last_iteration == 4000
    assert divergence.recovery_iterations is None


def test_a_spike_still_high_at_the_end_of_its_segment_is_a_divergence() -> None:
    losses = loss_per_iteration(2000, 0.01, (), 3)
    losses[1990:] *= 4.0
    (divergence,) = find_incidents(logged_table(losses, 1))
    assert (divergence.kind, divergence.first_iteration) == ("divergence", 1991)


def test_gradient_norm_spikes_need_three_times_their_baseline() -> None:
    rng = np.random.default_rng(5)
    norms = 1.0 + 0.05 * rng.standard_normal(600)
    norms[200] *= 2.5  # an ordinary swing
    norms[400] *= 40.0
    table = conform_table(
        pl.DataFrame(
            {
                "iteration": np.arange(1, 601),
                "grad_norm": norms,
                "segment": np.zeros(600, dtype=np.int32),
                "line": np.arange(1, 601),
                "source": ["train.log"] * 600,
            }
        )
    )
    (spike,) = find_incidents(table)
    assert (spike.kind, spike.first_iteration, spike.evidence.line) == ("grad_norm_spike", 401, 401)


def _megatron_lines(rows: list[tuple[int, float | None, float, int]]) -> str:
    """Iteration lines as Megatron-LM v2.5 prints them (megatron/training.py:548-578, quoted
    in the shared logs/FORMATS.md): the loss only when it is above 0, `{:.6E}`; loss scale
    `{:.1f}`; skipped and NaN counts `{:3d}`. Each row: (iteration, loss, scale, skipped)."""
    lines = []
    for iteration, loss, scale, skipped in rows:
        text = f" iteration {iteration:8d}/{100000:8d} |"
        text += f" consumed samples: {iteration * 512:12d} |"
        text += f" elapsed time per iteration (ms): {1500.0:.1f} |"
        text += f" learning rate: {1.5e-4:.3E} |"
        text += f" global batch size: {512:5d} |"
        if loss is not None and loss > 0.0:
            text += f" lm loss: {loss:.6E} |"
        text += f" loss scale: {scale:.1f} |"
        text += f" number of skipped iterations: {skipped:3d} |"
        text += f" number of nan iterations: {0:3d} |"
        lines.append(text)
    return "\n".join(lines) + "\n"


def test_an_fp16_loss_scale_halved_to_its_floor_is_a_collapse(tmp_path: Path) -> None:
    # the scaler's calibration at the start (every iteration skipped) is no incident; the
    # scale then holds at 2^16 and later halves, iteration after iteration, down to 1.0
    rows: list[tuple[int, float | None, float, int]] = [
        (i, None, 2.0 ** (32 - i), 1) for i in range(1, 17)
    ]
    rows += [(i, 3.0 - i / 1000, 65536.0, 0) for i in range(17, 200)]
    rows += [(200 + k, None, 2.0 ** (15 - k), 1) for k in range(16)]
    log = tmp_path / "fp16.log"
    log.write_text(_megatron_lines(rows))
    document = _summary(str(log))
    (collapse,) = document["incidents"]
    assert collapse["kind"] == "loss_scale_collapse"
    assert (collapse["first_iteration"], collapse["last_iteration"]) == (200, 215)
    assert (collapse["peak"], collapse["baseline"], collapse["iterations"]) == (1.0, 65536.0, 16)
    assert collapse["evidence"]["line"] == 200
    codes = {v["code"]: v["severity"] for v in document["verdicts"]}
    assert codes["LOSS_SCALE_COLLAPSE"] == "critical"  # the run ended there


def test_a_bf16_scale_of_one_and_the_pipeline_engines_minus_one_are_no_collapse(
    tmp_path: Path,
) -> None:
    # bf16 runs print `loss scale: 1.0` throughout; under DeepSpeed's pipeline engine
    # Megatron-DeepSpeed prints -1.0 (the engine owns the scale): neither is a scale that fell
    rows = [(i, 3.0 - i / 1000, 1.0, 0) for i in range(1, 100)]
    rows += [(i, 3.0 - i / 1000, -1.0, 0) for i in range(100, 200)]
    log = tmp_path / "bf16.log"
    log.write_text(_megatron_lines(rows))
    assert _summary(str(log))["incidents"] == []


def test_a_nan_loss_that_megatron_left_out_of_its_line_is_a_nan_incident() -> None:
    # epfLLM/Megatron-LLM issue 33 (Falcon-40B, bf16): NaN losses from iteration 3385, which
    # Megatron leaves out of the line (`if avg > 0.0`), while both counters stay at 0
    document = _summary(str(FIXTURES / "incidents" / "megatron_llm_nan_loss_dropped.log"))
    (nan,) = document["incidents"]
    assert (nan["kind"], nan["metric"]) == ("nan", "loss not printed")
    assert (nan["first_iteration"], nan["last_iteration"], nan["evidence"]["line"]) == (
        3385,
        3385,
        3,
    )
    (verdict,) = [v for v in document["verdicts"] if v["code"] == "NAN_VALUES"]
    assert verdict["severity"] == "critical"  # the log's last record
    assert "iteration 3385" in verdict["message"]


def test_a_missing_loss_is_a_nan_only_from_sources_that_leave_one_out() -> None:
    # TensorBoard and W&B keep a NaN as a NaN: a row without a loss there is another tag's
    table = conform_table(
        pl.DataFrame(
            {
                "iteration": [1, 2, 3],
                "loss": [2.0, None, 2.0],
                "loss_scale": [1.0, 1.0, 1.0],
                "segment": [0, 0, 0],
                "source": ["events.out.tfevents"] * 3,
            },
            schema_overrides={"segment": pl.Int32},
        )
    )
    assert find_incidents(table) == ()
    (nan,) = find_incidents(table, ["events.out.tfevents"])
    assert (nan.kind, nan.metric, nan.first_iteration) == ("nan", "loss not printed", 2)


def test_a_printed_nan_grad_norm_is_a_nan_incident_over_its_iterations() -> None:
    # bigscience-workshop/Megatron-DeepSpeed issue 396: `grad norm: nan` on every line,
    # `number of nan iterations:   0`; no line has a loss, so none is missing from one
    log = CORPUS / "bsmds_2023_issue396_no_lm_loss_grad_nan.log"
    (nan,) = _summary(str(log))["incidents"]
    assert (nan["kind"], nan["metric"], nan["records"]) == ("nan", "grad_norm", 3)
    assert (nan["first_iteration"], nan["last_iteration"]) == (5426, 5428)


def test_a_loss_spike_of_a_13b_fp16_run_not_back_by_the_end_of_the_paste() -> None:
    # bigscience tr1-13B chronicles: lm loss 2.77 at iteration 29040, 7.34 at 29050, 8.72 at
    # 29060, still 6.85 at 29090 where the paste ends: it has not come back in the log
    document = _summary(str(CORPUS / "bigscience_tr1_13b_loss_spike_fp16.log"))
    (rise,) = document["incidents"]
    assert (rise["kind"], rise["first_iteration"], rise["last_iteration"]) == (
        "divergence",
        29041,
        29090,
    )
    assert (rise["peak_iteration"], rise["peak"]) == (29060, 8.715872)
    assert rise["baseline"] == pytest.approx(2.77, abs=0.01)
    codes = {v["code"]: v["severity"] for v in document["verdicts"]}
    assert codes["LOSS_DIVERGENCE"] == "critical"


def test_a_104b_divergence_ending_in_a_loss_megatron_left_out() -> None:
    # bigscience tr8-104B chronicles: the loss jumps from 3.3 to 7.3 at iteration 8741, is
    # still 7.0 at 9026, and iteration 9027 prints no lm loss with both counters at 0
    document = _summary(str(CORPUS / "bigscience_tr8_104b_rampup_divergence.log"))
    found = [(i["kind"], i["first_iteration"], i["last_iteration"]) for i in document["incidents"]]
    assert found == [("divergence", 8741, 9026), ("nan", 9027, 9027)]
    assert document["incidents"][1]["metric"] == "loss not printed"


def test_hf_trainers_nan_grad_norm_in_its_logged_dicts() -> None:
    # AnswerDotAI/ModernBERT issue 233: `{'loss': 0.2051, 'grad_norm': nan, ...}` on stdout
    document = _summary(str(FIXTURES / "incidents" / "hf_grad_norm_nan.txt"))
    assert [(i["kind"], i["metric"], i["records"]) for i in document["incidents"]] == [
        ("nan", "grad_norm", 3)
    ]


def test_hf_trainer_5s_nan_printed_as_a_string(tmp_path: Path) -> None:
    # transformers 5.x ProgressCallback.on_log prints each float as f"{v:.4g}" in quotes
    # (trainer_callback.py:673-690, shared logs/FORMATS.md): a NaN loss is 'nan'
    lines = [
        f"{{'loss': '{2.5 - step / 1000:.4g}', 'grad_norm': '{1.2:.4g}', "
        f"'learning_rate': '{4.253e-05:.4g}', 'epoch': '{step / 100:.4g}'}}"
        for step in range(1, 40)
    ]
    lines += [
        f"{{'loss': 'nan', 'grad_norm': 'nan', 'learning_rate': '4.253e-08', 'epoch': '{e}'}}"
        for e in ("0.4", "0.41")
    ]
    log = tmp_path / "hf5.log"
    log.write_text("\n".join(lines) + "\n")
    (nan,) = _summary(str(log))["incidents"]
    assert (nan["kind"], nan["metric"], nan["first_iteration"], nan["records"]) == (
        "nan",
        "loss, grad_norm",
        40,
        2,
    )
    assert nan["evidence"]["line"] == 40


def test_hf_trainer_keeps_deepspeeds_skipped_steps_and_loss_scale() -> None:
    # ymcui/Chinese-LLaMA-Alpaca issue 534: DeepSpeed's OVERFLOW lines glued after the tqdm
    # bars of steps 378 and 379 come before the dict logged at step 380; 380-382 after it
    from loganalyzer.parsers.hf_trainer.parser import HfTrainerParser

    run = HfTrainerParser().parse(FIXTURES / "incidents" / "hf_deepspeed_overflow_skips.log")
    assert run.table.select("iteration", "loss_scale", "skipped_iterations").rows() == [
        (380, 16.0, 2)
    ]


def test_an_hf_deepspeed_loss_scale_halved_to_one_is_a_collapse(tmp_path: Path) -> None:
    # DeepSpeed's loss_scaler.py (update_scale) logs `[deepspeed] OVERFLOW! Rank 0 Skipping
    # step. Attempted loss scale: {prev_scale}, reducing to {cur_scale}` for each overflow;
    # the Trainer prints its training block (trainer.py's `***** Running training *****`),
    # then a dict every 10 steps (logging_steps)
    lines = [
        "***** Running training *****",
        "  Num examples = 1,200",
        "  Num Epochs = 1",
        "  Instantaneous batch size per device = 10",
        "  Total train batch size (w. parallel, distributed & accumulation) = 10",
        "  Gradient Accumulation steps = 1",
        "  Total optimization steps = 120",
    ]
    scale = 65536
    for step in range(1, 121):
        if step > 80 and scale > 1:
            lines.append(
                "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] "
                f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to "
                f"{max(scale // 2, 1)}"
            )
            scale = max(scale // 2, 1)
        elif step > 80:
            lines.append(
                "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] "
                "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1"
            )
        if step % 10 == 0:
            lines.append(
                f"{{'loss': {2.5 - step / 1000:.4f}, 'learning_rate': 0.0002, "
                f"'epoch': {step / 120:.2f}}}"
            )
    log = tmp_path / "hf_ds.log"
    log.write_text("\n".join(lines) + "\n")
    document = _summary(str(log))
    (collapse,) = [i for i in document["incidents"] if i["kind"] == "loss_scale_collapse"]
    assert (collapse["first_iteration"], collapse["last_iteration"]) == (81, 120)
    assert (collapse["peak"], collapse["iterations"]) == (1.0, 40)


def test_infinite_values_are_their_own_kind() -> None:
    table = conform_table(
        pl.DataFrame(
            {
                "iteration": [1, 2, 3, 4],
                "loss": [2.0, float("inf"), float("nan"), 2.0],
                "segment": [0, 0, 0, 0],
                "line": [1, 2, 3, 4],
            },
            schema_overrides={"segment": pl.Int32},
        )
    )
    assert [(i.kind, i.first_iteration) for i in find_incidents(table)] == [
        ("nan", 3),
        ("inf", 2),
    ]


def test_blooms_loss_spike_in_its_chronicles() -> None:
    # bigscience-workshop/bigscience train/tr11-176B-ml/chronicles.md: BLOOM-176B's loss
    # jumped from 2.2 to 5.1 at iteration 31219 (grad norm 960) and was back by 31222
    document = _summary(str(FIXTURES / "megatron_deepspeed" / "bloom_176b_chronicles.txt"))
    spikes = {i["kind"]: i for i in document["incidents"]}
    loss = spikes["loss_spike"]
    assert (loss["first_iteration"], loss["peak_iteration"], loss["peak"]) == (
        31219,
        31219,
        5.098124,
    )
    assert loss["recovery_iterations"] == 3
    assert loss["evidence"]["line"] == 9
    assert spikes["grad_norm_spike"]["peak"] == 960.351
    assert "divergence" not in spikes


def test_an_early_loss_spike_of_a_real_gpt2_run() -> None:
    # bigscience-workshop/bigscience experiments/gpt2-meg (May 2021): lm loss 12.1 at
    # iteration 20, 26.5 at 30, 13.8 at 40, while the fp16 scaler calibrated (skipped
    # iterations at the start: no collapse)
    document = _summary(str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"))
    (spike,) = document["incidents"]
    assert (spike["kind"], spike["first_iteration"], spike["peak_iteration"]) == (
        "loss_spike",
        21,
        30,
    )
    assert spike["peak"] == pytest.approx(26.48119)


def test_the_text_markdown_and_html_outputs_list_incidents(tmp_path: Path) -> None:
    bloom = str(FIXTURES / "megatron_deepspeed" / "bloom_176b_chronicles.txt")
    text = CliRunner().invoke(main, ["summary", "-q", bloom])
    assert text.exit_code == 0, text.output
    assert "Incidents\n  loss_spike: iterations 31219–31221, loss 5.098 against" in text.stdout
    markdown = CliRunner().invoke(main, ["summary", "-q", "--markdown", bloom])
    assert markdown.exit_code == 0, markdown.output
    assert "**Incidents**" in markdown.stdout
    assert "| loss_spike | 31219–31221 |" in markdown.stdout
    out = tmp_path / "report.html"
    report = CliRunner().invoke(main, ["report", "-q", bloom, "-o", str(out)])
    assert report.exit_code == 0, report.output
    html = out.read_text()
    section = html[html.index('<section id="incidents">') :]
    section = section[: section.index("</section>")]
    assert "lm loss: 5.098124E+00" in section  # the log line, quoted
    assert "rgba(217,45,32,0.18)" in html  # the training curves shade it


def test_a_clean_real_log_has_no_incident() -> None:
    document = _summary(str(FIXTURES / "megatron" / "core_v0_6_mixtral_throughput.txt"))
    assert document["incidents"] == []
    assert not [v for v in document["verdicts"] if v["code"].startswith(("LOSS_", "NAN_"))]
