"""Verdicts, checked against numbers worked out by hand (each worded as the document says it:
`render.verdict_wording`)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from loganalyzer.analysis import analyse
from loganalyzer.analysis.verdicts import (
    MfuInputs,
    hardware_family,
    judge,
    reference_runs,
)
from loganalyzer.model import empty_metrics
from loganalyzer.render.verdict_wording import Verdict, worded
from tests.analysis_factories import make_metrics, make_table, synthetic_run

NO_METRICS = empty_metrics()
NO_MFU = MfuInputs(None, None, None, None, None, None)


def mfu_inputs(
    mfu: float, key: str = "h100-sxm", dtype: str = "bf16", params: float | None = 7e9
) -> MfuInputs:
    return MfuInputs(mfu, key, dtype, params, 8, None)


def verdicts_for(mfu: MfuInputs, table: pl.DataFrame | None = None) -> list[Verdict]:
    table = make_table([1.0] * 50) if table is None else table
    return [worded(v) for v in judge(analyse(table, NO_METRICS), table, mfu)]


def codes(verdicts: list[Verdict]) -> list[str]:
    return [v.code for v in verdicts]


def test_reference_runs_are_bundled_with_their_sources() -> None:
    runs = reference_runs()
    assert len(runs) == 16  # the Megatron-Turing row gives TFLOPS only
    assert all(run.source for run in runs)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("h100-sxm", "h100"),
        ("H100-80GB", "h100"),
        ("H100 (500W cap)", "h100"),
        ("a100-sxm4-80gb", "a100"),
        ("TPU v4", "tpuv4"),
        ("tpu-v4", "tpuv4"),
        ("mi300x", "mi300x"),
        ("Ampere", None),
    ],
)
def test_hardware_family(name: str, family: str | None) -> None:
    assert hardware_family(name) == family


def test_mfu_below_similar_sized_published_runs() -> None:
    # 7B on H100 bf16: MPT-7B (0.464) and torchtitan Llama 3.1 8B (0.39) are within 5x in size.
    (verdict,) = verdicts_for(mfu_inputs(0.30))
    assert verdict == Verdict(
        "warning",
        "MFU_BELOW_REFERENCE",
        "MFU 30.0 % is below what published runs of bf16 on H100 of similar size reached "
        "39.0 % to 46.4 % (MPT-7B llm-foundry 46.4 % on 8 devices, mosaicml/llm-foundry "
        "scripts/train/benchmarking/README.md; torchtitan Llama 3.1 8B 39.0 % on 8 devices, "
        "pytorch/torchtitan docs/performance.md)",
    )


def test_mfu_below_half_the_band_is_critical() -> None:
    (verdict,) = verdicts_for(mfu_inputs(0.19))  # 0.19 < 0.5 * 0.39
    assert (verdict.severity, verdict.code) == ("critical", "MFU_BELOW_REFERENCE")


@pytest.mark.parametrize(
    ("mfu", "code"), [(0.42, "MFU_WITHIN_REFERENCE"), (0.50, "MFU_ABOVE_REFERENCE")]
)
def test_mfu_within_or_above_the_band_is_info(mfu: float, code: str) -> None:
    (verdict,) = verdicts_for(mfu_inputs(mfu))
    assert (verdict.severity, verdict.code) == ("info", code)


def test_without_size_all_runs_on_the_hardware_form_the_band() -> None:
    # H100 bf16 runs range from torchtitan 405B (0.29) to MPT-7B (0.464).
    (verdict,) = verdicts_for(mfu_inputs(0.30, params=None))
    assert verdict.code == "MFU_WITHIN_REFERENCE"
    assert "runs of bf16 on H100 reached 29.0 % to 46.4 %" in verdict.message


def test_fp16_compares_with_mixed_precision_runs() -> None:
    # A100 16-bit runs within 5x of 70B: GPT-NeoX 20B (fp16, 0.375), MPT-70B (bf16, 0.533),
    # BLOOM 176B (bf16, 0.48), OPT 175B (fp16, 0.47).
    (verdict,) = verdicts_for(mfu_inputs(0.30, key="a100-sxm4-80gb", dtype="fp16", params=70e9))
    assert verdict.code == "MFU_BELOW_REFERENCE"
    assert "runs of fp16 on A100 of similar size reached 37.5 % to 53.3 %" in verdict.message


def test_no_reference_for_the_hardware() -> None:
    (verdict,) = verdicts_for(mfu_inputs(0.30, key="mi300x"))
    assert verdict == Verdict(
        "info",
        "MFU_NO_REFERENCE",
        "no published run of bf16 on MI300X to compare MFU 30.0 % against",
    )


def test_implausibly_high_mfu_on_a_gpu_but_not_on_a_tpu() -> None:
    verdicts = verdicts_for(mfu_inputs(0.80))
    assert codes(verdicts) == ["MFU_IMPLAUSIBLY_HIGH", "MFU_ABOVE_REFERENCE"]
    assert verdicts[0].severity == "critical"
    assert "MFU 80.0 % is above 75.0 %" in verdicts[0].message
    assert "MFU_IMPLAUSIBLY_HIGH" not in codes(verdicts_for(mfu_inputs(0.80, key="tpu-v4")))


@pytest.mark.parametrize(
    ("ratio", "expected", "flagged"),
    [(1.33, None, True), (1.05, None, False), (1.33, 1.33, False), (0.80, 1.0, True)],
)
def test_reported_tflops_mismatch_beyond_the_explained_ratio(
    ratio: float, expected: float | None, flagged: bool
) -> None:
    inputs = MfuInputs(None, None, None, None, None, ratio, expected)
    verdicts = verdicts_for(inputs)
    assert codes(verdicts) == (["REPORTED_TFLOPS_MISMATCH"] if flagged else [])
    if ratio == 1.33 and flagged:
        assert verdicts[0].message.startswith(
            "recomputed TFLOPS are 1.33× the framework's own figure where the formula "
            "differences explain 1.00×: +33.0 % unexplained (tolerance 10.0 %)"
        )


def test_loss_spike_and_skipped_iterations_at_a_slow_step() -> None:
    steps = [1.0] * 100
    loss = [2.0] * 100
    skipped = [0] * 100
    steps[40], loss[40] = 3.0, 2.6  # slow step with a loss spike
    loss[70] = 3.0  # loss spike at a normal step: not reported
    steps[80], skipped[80] = 2.0, 3  # slow step with skipped iterations
    table = make_table(steps, loss=loss, skipped=skipped)
    verdicts = verdicts_for(NO_MFU, table)
    by_code = {v.code: v for v in verdicts}
    assert by_code["LOSS_SPIKE_AT_SLOW_STEP"].message.startswith(
        "1 slow step coincides with a loss spike: iteration 41 (loss 2.6 against a local "
        "median of 2, step 3.00× the baseline)"
    )
    assert by_code["NAN_OR_SKIPPED_AT_SLOW_STEP"].message == (
        "1 slow step skipped iterations or hit NaNs: "
        "iteration 81 (3 skipped, 0 NaN, step 2.00× the baseline)"
    )


def test_slow_step_verdicts_carry_their_numbers() -> None:
    steps = [1.0] * 1000
    steps[500] = 4.0  # 3 s lost
    for k in range(99, 1000, 100):
        steps[k] = 2.0  # every 100 iterations: 10 x 1 s lost
    for k in range(720, 770):
        steps[k] = 2.0  # sustained 2x for 50 iterations: 50 s lost
    # logged: 1000 + 3 + 10 + 50 = 1063 s
    verdicts = verdicts_for(NO_MFU, make_table(steps))
    by_code = {v.code: v for v in verdicts}
    assert by_code["SLOW_STEPS"] == Verdict(
        "info",
        "SLOW_STEPS",
        "1 isolated slow record above the baseline cost 3 s (0.3 % of the logged "
        "17.7 min); the worst, iteration 501, took 4 s against 1 s (4.00×): 3 s lost; nothing "
        "in the logs says why",
        3.0,
    )
    assert by_code["PERIODIC_SLOW_STEPS"].message == (
        "10 slow steps recur every 100 iterations (iterations 100–1000, median 2.00× the "
        "baseline), typically checkpoint saves or evaluation; they cost 10 s (0.9 % of the "
        "logged 17.7 min)"
    )
    assert by_code["SUSTAINED_SLOWDOWN"].message == (
        "iterations 721–770 ran at 2 s per iteration, 2.00× the pace of 1 s, for 50 "
        "iterations: 50 s lost (4.7 % of the logged 17.7 min)"
    )


def test_step_time_drift() -> None:
    steps = [1.0 + 0.3 * k / 999 for k in range(1000)]
    (verdict,) = verdicts_for(NO_MFU, make_table(steps))
    assert verdict.code == "STEP_TIME_DRIFT"
    assert verdict.message == (
        "the steady step time rose 26.6 %, from a median of 1.015 s over iterations 1–100 to "
        "1.285 s over iterations 901–1000 (first and last tenth of 1000 steady records)"
    )


def test_restart_and_stall_verdicts() -> None:
    run = synthetic_run(1000, noise=0.0, restart=(700, 50, 600.0), stalls={300: 120.0})
    verdicts = verdicts_for(NO_MFU, run.table)
    # the restart cost more than a quarter of the logged time: critical; the stall nothing
    # explains, 120 s of 1,170 s, a warning
    assert verdicts == [
        Verdict(
            "critical",
            "RESTARTS_LOST_TIME",
            "1 restart cost 10.8 min: 10.0 min of gaps (known for 1 of 1) and 50 redone "
            "iterations (50 s at the steady pace of 1 s)",
            650.0,
        ),
        Verdict(
            "warning",
            "STALLS",
            "1 stall inside a run segment added 2.0 min that the step times do not show and "
            "nothing in the logs explains; the longest, 2.0 min, came between iterations 300 "
            "and 301",
            120.0,
        ),
    ]


def test_straggler_rank_and_severity_order() -> None:
    rows = [
        (10, "timer/backward-compute", 300.0 if rank == 3 else 200.0, rank) for rank in range(4)
    ]
    table = make_table([1.0] * 50)
    analysis = analyse(table, make_metrics(rows))
    verdicts = [worded(v) for v in judge(analysis, table, mfu_inputs(0.80))]
    assert codes(verdicts) == ["MFU_IMPLAUSIBLY_HIGH", "STRAGGLER_RANK", "MFU_ABOVE_REFERENCE"]
    assert verdicts[1].message == (
        "timer/backward-compute: rank 3 takes 300 ms, 1.50× the median rank's 200 ms over 4 ranks"
    )


def test_clean_run_without_mfu_has_no_verdict() -> None:
    assert verdicts_for(NO_MFU, synthetic_run(2000).table) == []


def test_below_references_of_a_very_different_size_is_only_information() -> None:
    """A 30M-parameter model under published 7B+ runs: worth knowing, not a warning."""
    (verdict,) = verdicts_for(mfu_inputs(0.02, params=3e7))
    assert (verdict.severity, verdict.code) == ("info", "MFU_BELOW_REFERENCE")
    assert "bf16 on H100 (none within 10× of this model's size)" in verdict.message
    (sized,) = verdicts_for(mfu_inputs(0.02, params=7e9))
    assert sized.severity == "critical"


def test_a_shortfall_within_the_tolerance_is_information() -> None:
    # 7B on H100 bf16: the similar-sized band starts at 39.0 % (torchtitan Llama 3.1 8B)
    (near,) = verdicts_for(mfu_inputs(0.36))
    assert (near.severity, near.code) == ("info", "MFU_BELOW_REFERENCE")
    (far,) = verdicts_for(mfu_inputs(0.34))
    assert (far.severity, far.code) == ("warning", "MFU_BELOW_REFERENCE")


def test_an_fp8_run_compares_against_the_bf16_peak_where_only_bf16_was_published() -> None:
    inputs = dataclasses.replace(mfu_inputs(0.20, dtype="fp8"), mfu_vs_bf16=0.40)
    (verdict,) = verdicts_for(inputs)
    assert verdict.code == "MFU_WITHIN_REFERENCE"
    assert verdict.message.startswith(
        "MFU against the bf16 peak 40.0 % is within what published runs of bf16 on H100"
    )
