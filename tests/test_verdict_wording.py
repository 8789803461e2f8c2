"""The verdict messages `render.verdict_wording` writes from `analysis.verdicts`' facts: a case
per verdict code, built from the facts `judge` found on a run, and the message exactly as the
summary printed it for that run (a shared log, a fixture, or a synthetic run as
tests/test_analysis_verdicts.py builds them)."""

from __future__ import annotations

import pytest

from loganalyzer.analysis.causes import (
    Cause,
    FlaggedIterations,
    IntervalMultiple,
    NothingFound,
)
from loganalyzer.analysis.restarts import Stall
from loganalyzer.analysis.slow_steps import Periodic, SlowKind, SlowStep, Sustained
from loganalyzer.analysis.steady import Drift
from loganalyzer.analysis.stragglers import RankSpread, RankValue
from loganalyzer.analysis.verdicts import (
    AgainstReference,
    Finding,
    ImplausibleMfu,
    LossSpikeAt,
    MfuUnknown,
    NoReference,
    PeriodicSlowSteps,
    ReferenceBand,
    ReferenceRun,
    RestartsLost,
    SkippedAt,
    SlowAtLossSpikes,
    SlowAtSkipped,
    SlowRecords,
    SustainedSlowdown,
    TflopsMismatch,
    UnexplainedStalls,
)
from loganalyzer.render.verdict_wording import (
    Verdict,
    evidence_text,
    finding_message,
    reference_scope,
    worded,
)

# Every code `judge` gives: part of the JSON contract.
CODES = {
    "MFU_IMPLAUSIBLY_HIGH",
    "MFU_NO_REFERENCE",
    "MFU_ABOVE_REFERENCE",
    "MFU_WITHIN_REFERENCE",
    "MFU_BELOW_REFERENCE",
    "MFU_UNKNOWN",
    "REPORTED_TFLOPS_MISMATCH",
    "SLOW_STEPS",
    "PERIODIC_SLOW_STEPS",
    "SUSTAINED_SLOWDOWN",
    "LOSS_SPIKE_AT_SLOW_STEP",
    "NAN_OR_SKIPPED_AT_SLOW_STEP",
    "STEP_TIME_DRIFT",
    "RESTARTS_LOST_TIME",
    "STALLS",
    "STRAGGLER_RANK",
}

LLM_FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"
TORCHTITAN = "pytorch/torchtitan docs/performance.md"
MPT_7B = ReferenceRun("MPT-7B llm-foundry", 7, "H100-80GB", 8, "bf16", 0.464, LLM_FOUNDRY)
LLAMA_405B = ReferenceRun(
    "Llama 3 405B (8K seq)",
    405,
    "H100-80GB",
    8192,
    "bf16",
    0.43,
    "Llama 3 paper (Dubey et al. 2024)",
)
MPT_70B = ReferenceRun("MPT-70B llm-foundry", 70, "H100-80GB", 64, "bf16", 0.426, LLM_FOUNDRY)
TITAN_8B = ReferenceRun(
    "torchtitan Llama 3.1 8B", 8, "H100 (500W cap)", 8, "bf16", 0.39, TORCHTITAN
)
TITAN_405B = ReferenceRun("torchtitan Llama 3.1 405B", 405, "H100", 128, "bf16", 0.29, TORCHTITAN)
GPT3_PALM = ReferenceRun(
    "GPT-3 (recomputed by PaLM)", 175, "V100", None, "fp16", 0.213, "PaLM paper Table 3"
)
H100_7B = ReferenceBand("h100", "bf16", True, 0.39, 0.464, (MPT_7B, TITAN_8B), False)
# no H100 bf16 run within 10x of a tiny model's size: all of them, three named
H100_UNLIKE = ReferenceBand(
    "h100", "bf16", False, 0.29, 0.464, (MPT_7B, LLAMA_405B, MPT_70B, TITAN_405B), True
)
LOW_CONFIDENCE = "the steady step time, TFLOPS and MFU rest on {} records (fewer than 10)"
UNKNOWN_CAUSE = Cause("unknown", NothingFound("records"))


def slow_step(
    first: int, last: int, step_s: float, baseline_s: float, lost_s: float, kind: SlowKind
) -> SlowStep:
    """A slow record of iterations `first`..`last`, `step_s` against `baseline_s`."""
    ratio = step_s / baseline_s
    interval = last - first + 1
    return SlowStep(
        last, first, last, 0, interval, step_s, baseline_s, ratio, lost_s, kind, None, None, None
    )


CASES = [
    # a synthetic run at MFU 0.80 on H100 (test_implausibly_high_mfu_on_a_gpu_but_not_on_a_tpu)
    (
        Finding("critical", "MFU_IMPLAUSIBLY_HIGH", ImplausibleMfu(0.8)),
        "MFU 80.0 % is above 75.0 %, which no published GPU training run reaches: check the "
        "GPU count, the dtype's peak and the FLOP formula's inputs",
    ),
    # fixtures/maxtext/tpu_v6e_absl_jax091_2026.log
    (
        Finding("info", "MFU_NO_REFERENCE", NoReference(0.26959163413342974, "bf16", "tpuv6e")),
        "no published run of bf16 on TPUV6E to compare MFU 27.0 % against",
    ),
    # shared logs bigscience/gpt2-meg/meg_gpt2_perf_n16-1999618.out: 3 steady records
    (
        Finding(
            "info",
            "MFU_ABOVE_REFERENCE",
            AgainstReference(
                0.33319125805088545,
                ReferenceBand("v100", "fp16", True, 0.213, 0.213, (GPT3_PALM,), False),
                against_bf16=False,
            ),
            low_confidence=LOW_CONFIDENCE.format(3),
        ),
        "MFU 33.3 % is above what published runs of fp16 on V100 of similar size reached "
        "21.3 % (GPT-3 (recomputed by PaLM) 21.3 %, PaLM paper Table 3) (low confidence: the "
        "steady step time, TFLOPS and MFU rest on 3 records (fewer than 10))",
    ),
    # a synthetic 7B run at MFU 0.42 on H100 bf16
    (
        Finding("info", "MFU_WITHIN_REFERENCE", AgainstReference(0.42, H100_7B, False)),
        "MFU 42.0 % is within what published runs of bf16 on H100 of similar size reached "
        "39.0 % to 46.4 % (MPT-7B llm-foundry 46.4 % on 8 devices, mosaicml/llm-foundry "
        "scripts/train/benchmarking/README.md; torchtitan Llama 3.1 8B 39.0 % on 8 devices, "
        "pytorch/torchtitan docs/performance.md)",
    ),
    # the same at FP8, 0.40 against the bf16 peak
    (
        Finding("info", "MFU_WITHIN_REFERENCE", AgainstReference(0.4, H100_7B, True)),
        "MFU against the bf16 peak 40.0 % is within what published runs of bf16 on H100 of "
        "similar size reached 39.0 % to 46.4 % (MPT-7B llm-foundry 46.4 % on 8 devices, "
        "mosaicml/llm-foundry scripts/train/benchmarking/README.md; torchtitan Llama 3.1 8B "
        "39.0 % on 8 devices, pytorch/torchtitan docs/performance.md)",
    ),
    # fixtures/megatron/quirks/restart_in_file.log --gpu h100-sxm (its golden)
    (
        Finding(
            "info",
            "MFU_BELOW_REFERENCE",
            AgainstReference(9.376637576615915e-05, H100_UNLIKE, False),
        ),
        "MFU 0.0 % is below what published runs of bf16 on H100 (none within 10× of this "
        "model's size) reached 29.0 % to 46.4 % (MPT-7B llm-foundry 46.4 % on 8 devices, "
        "mosaicml/llm-foundry scripts/train/benchmarking/README.md; Llama 3 405B (8K seq) "
        "43.0 % on 8192 devices, Llama 3 paper (Dubey et al. 2024); MPT-70B llm-foundry "
        "42.6 % on 64 devices, mosaicml/llm-foundry scripts/train/benchmarking/README.md)",
    ),
    # shared logs bigscience/gpt2-hf-ds/hf_ds_gpt2_perf_n16_bs4-mbs8.out
    (
        Finding(
            "info",
            "MFU_UNKNOWN",
            MfuUnknown(
                (
                    ("global_batch_size", "--global-batch-size"),
                    ("num_layers", "--model"),
                    ("hidden_size", "--model"),
                    ("num_attention_heads", "--model"),
                    ("seq_length", "--model"),
                    ("vocab_size", "--model"),
                    ("gpu", "--gpu"),
                    ("num_gpus", "--num-gpus"),
                )
            ),
        ),
        "MFU unknown: the run does not give its global batch size, layer count, hidden size, "
        "attention heads, sequence length, vocabulary size, GPU type, GPU count; pass "
        "--global-batch-size, --model, --gpu and --num-gpus",
    ),
    # fixtures/hf_trainer/lora/trainer_state.json: 8 steady records
    (
        Finding(
            "info",
            "REPORTED_TFLOPS_MISMATCH",
            TflopsMismatch(1.117117117117117, 1.7033248081841432, -0.34415496577658744),
            low_confidence=LOW_CONFIDENCE.format(8),
        ),
        "recomputed TFLOPS are 1.12× the framework's own figure where the formula differences "
        "explain 1.70×: -34.4 % unexplained (tolerance 10.0 %); check the GPU count, the model "
        "shape and the batch size (low confidence: the steady step time, TFLOPS and MFU rest "
        "on 8 records (fewer than 10))",
    ),
    # a synthetic run whose recomputed TFLOPS are 1.33x the reported
    (
        Finding("warning", "REPORTED_TFLOPS_MISMATCH", TflopsMismatch(1.33, 1.0, 0.33)),
        "recomputed TFLOPS are 1.33× the framework's own figure where the formula differences "
        "explain 1.00×: +33.0 % unexplained (tolerance 10.0 %); check the GPU count, the model "
        "shape and the batch size",
    ),
    # shared logs excerpts/deepspeed_2.txt
    (
        Finding(
            "warning",
            "SLOW_STEPS",
            SlowRecords(
                1,
                1.932,
                25.899,
                slow_step(136008, 136008, 5.335, 3.403, 1.932, "spike"),
                UNKNOWN_CAUSE,
            ),
            1.932,
        ),
        "1 isolated slow record above the baseline cost 2 s (7.5 % of the logged 26 s); the "
        "worst, iteration 136008, took 5.335 s against 3.403 s (1.57×): 2 s lost; nothing in "
        "the logs says why",
    ),
    # shared logs excerpts/hf_trainer_4.txt: a record of 5 iterations, one of which stalled
    (
        Finding(
            "warning",
            "SLOW_STEPS",
            SlowRecords(
                1,
                5.0946,
                35.7744,
                slow_step(16, 20, 1.19964, 0.18072, 5.0946, "stall"),
                UNKNOWN_CAUSE,
            ),
            5.0946,
        ),
        "1 isolated slow record above the baseline cost 5 s (14.2 % of the logged 36 s); the "
        "worst, iterations 16–20, averaged 1.2 s against 0.1807 s (6.64×): 5 s lost, most "
        "likely one iteration that stalled for 5 s rather than 5 slow ones; nothing in the "
        "logs says why",
    ),
    # a synthetic run with an fp16 overflow (2 skipped iterations) at its worst slow step
    (
        Finding(
            "info",
            "SLOW_STEPS",
            SlowRecords(
                2,
                6.0,
                206.0,
                slow_step(78, 78, 5.0, 1.0, 4.0, "spike"),
                Cause("overflow", FlaggedIterations("skipped", 2, 78, 78)),
            ),
            6.0,
        ),
        "2 isolated slow records above the baseline cost 6 s (2.9 % of the logged 3.4 min); "
        "the worst, iteration 78, took 5 s against 1 s (5.00×): 4 s lost, overflow: 2 skipped "
        "iterations (fp16 overflow) logged in iteration 78",
    ),
    # shared logs excerpts/hf_trainer_7.txt: one of the two is an evaluation
    (
        Finding(
            "warning",
            "PERIODIC_SLOW_STEPS",
            PeriodicSlowSteps(
                Periodic(20, 2, 20, 25, 6.356961044710067, 9.6811), None, 1, 5.0946, 35.7744
            ),
            5.0946,
        ),
        "2 slow steps recur every 20 iterations (iterations 20–25, median 6.36× the baseline), "
        "typically checkpoint saves or evaluation; 1 of them is a save or an evaluation, said "
        "in its own verdict; the rest cost 5 s (14.2 % of the logged 36 s)",
    ),
    # saves every 50 iterations that the configuration names, two of them their own verdict's
    (
        Finding(
            "info",
            "PERIODIC_SLOW_STEPS",
            PeriodicSlowSteps(
                Periodic(50, 6, 50, 300, 3.0, 12.0),
                Cause(
                    "checkpoint_save",
                    IntervalMultiple("checkpoint_save", 50, "save_interval 50 (train.log:7)"),
                    "interval",
                    (),
                    50,
                ),
                2,
                8.0,
                2000.0,
            ),
            8.0,
        ),
        "6 slow steps recur every 50 iterations (iterations 50–300, median 3.00× the "
        "baseline), checkpoint saves (first: iteration 50 is a multiple of save_interval 50 "
        "(train.log:7)); 2 of them are saves or evaluations, said in its own verdict; the rest "
        "cost 8 s (0.4 % of the logged 33.3 min)",
    ),
    # test_slow_step_verdicts_carry_their_numbers's run: 2x for iterations 721-770
    (
        Finding(
            "warning",
            "SUSTAINED_SLOWDOWN",
            SustainedSlowdown(
                Sustained(0, 721, 770, 721, 770, 1, 50, 50, 2.0, 1.0, 2.0, 50.0), 1060.0
            ),
            50.0,
        ),
        "iterations 721–770 ran at 2 s per iteration, 2.00× the pace of 1 s, for 50 "
        "iterations: 50 s lost (4.7 % of the logged 17.7 min)",
    ),
    # records of 10 iterations each
    (
        Finding(
            "warning",
            "SUSTAINED_SLOWDOWN",
            SustainedSlowdown(
                Sustained(0, 401, 600, 410, 600, 10, 20, 200, 1.5, 1.0, 1.5, 100.0), 2000.0
            ),
            100.0,
        ),
        "iterations 401–600 (20 records, 410 to 600) ran at 1.5 s per iteration, 1.50× the "
        "pace of 1 s, for 200 iterations: 100 s lost (5.0 % of the logged 33.3 min)",
    ),
    # a synthetic run with four loss spikes at slow steps: three named
    (
        Finding(
            "warning",
            "LOSS_SPIKE_AT_SLOW_STEP",
            SlowAtLossSpikes(
                4,
                (
                    LossSpikeAt(21, 2.9, 2.0, 2.5),
                    LossSpikeAt(31, 3.1, 2.0, 2.4),
                    LossSpikeAt(41, 2.6, 2.0, 3.0),
                ),
            ),
        ),
        "4 slow steps coincide with a loss spike: iteration 21 (loss 2.9 against a local "
        "median of 2, step 2.50× the baseline), iteration 31 (loss 3.1 against a local median "
        "of 2, step 2.40× the baseline), iteration 41 (loss 2.6 against a local median of 2, "
        "step 3.00× the baseline); a data or numerics problem can slow a step (recovery, "
        "re-tries) as well as the loss",
    ),
    # test_loss_spike_and_skipped_iterations_at_a_slow_step's run: one
    (
        Finding(
            "warning",
            "LOSS_SPIKE_AT_SLOW_STEP",
            SlowAtLossSpikes(1, (LossSpikeAt(41, 2.6, 2.0, 3.0),)),
        ),
        "1 slow step coincides with a loss spike: iteration 41 (loss 2.6 against a local "
        "median of 2, step 3.00× the baseline); a data or numerics problem can slow a step "
        "(recovery, re-tries) as well as the loss",
    ),
    (
        Finding(
            "warning",
            "NAN_OR_SKIPPED_AT_SLOW_STEP",
            SlowAtSkipped(
                4, (SkippedAt(11, 2, 0, 2.1), SkippedAt(61, 1, 0, 2.2), SkippedAt(81, 3, 0, 2.0))
            ),
        ),
        "4 slow steps skipped iterations or hit NaNs: iteration 11 (2 skipped, 0 NaN, step "
        "2.10× the baseline), iteration 61 (1 skipped, 0 NaN, step 2.20× the baseline), "
        "iteration 81 (3 skipped, 0 NaN, step 2.00× the baseline)",
    ),
    # fixtures/maxtext/gpu_llama2_7b_jax0425_2024.log
    (
        Finding(
            "warning",
            "STEP_TIME_DRIFT",
            Drift(26, 3.319, (2, 3), 4.3614999999999995, (28, 29), 0.31410063272069877, "median"),
        ),
        "the steady step time rose 31.4 %, from a median of 3.319 s over iterations 2–3 to "
        "4.361 s over iterations 28–29 (first and last tenth of 26 steady records)",
    ),
    # fixtures/bad/iteration_backwards.log
    (
        Finding(
            "critical",
            "RESTARTS_LOST_TIME",
            RestartsLost(1, 68.516, 3.828, 1, 40, 64.688, 1.6172),
            68.516,
        ),
        "1 restart cost 69 s: 4 s of gaps (known for 1 of 1) and 40 redone iterations (65 s "
        "at the steady pace of 1.617 s)",
    ),
    # fixtures/corpus/megatron_deepspeed/bigscience_tr11_176b_reshaping_relaunches.log
    (
        Finding(
            "critical",
            "RESTARTS_LOST_TIME",
            RestartsLost(6, 2701.66, 0.0, 0, 13, 2701.66, 207.82),
            2701.66,
        ),
        "6 restarts cost 45.0 min: gaps unknown (no timestamps) and 13 redone iterations "
        "(45.0 min at the steady pace of 207.8 s)",
    ),
    # fixtures/corpus/deepspeed/y2020_deepspeedlight_cifar_pdsh.log
    (
        Finding(
            "critical",
            "STALLS",
            UnexplainedStalls(
                1, 0, 2411.009816646576, Stall(0, 150, 24550, 2411.009816646576, 75.99)
            ),
            2411.009816646576,
        ),
        "1 stall inside a run segment added 40.2 min that the step times do not show and "
        "nothing in the logs explains; the longest, 40.2 min, came between iterations 150 and "
        "24550",
    ),
    # three stalls, one a save explains
    (
        Finding(
            "warning",
            "STALLS",
            UnexplainedStalls(2, 1, 135.0, Stall(0, 500, 501, 90.0, 1.0)),
            135.0,
        ),
        "2 stalls inside a run segment (1 more explained by their causes) added 2.2 min that "
        "the step times do not show and nothing in the logs explains; the longest, 90 s, came "
        "between iterations 500 and 501",
    ),
    # test_straggler_rank_and_severity_order's run
    (
        Finding(
            "warning",
            "STRAGGLER_RANK",
            RankSpread(
                "timer/backward-compute",
                4,
                200.0,
                300.0,
                1.5,
                (RankValue(3, 300.0), RankValue(0, 200.0), RankValue(1, 200.0)),
            ),
        ),
        "timer/backward-compute: rank 3 takes 300 ms, 1.50× the median rank's 200 ms over 4 ranks",
    ),
]


@pytest.mark.parametrize(
    ("finding", "message"),
    [pytest.param(f, m, id=f"{f.code}-{i}") for i, (f, m) in enumerate(CASES)],
)
def test_each_verdict_reads_as_the_summary_printed_it(finding: Finding, message: str) -> None:
    assert finding_message(finding) == message
    assert worded(finding) == Verdict(finding.severity, finding.code, message, finding.lost_s)


def test_every_verdict_code_has_a_case() -> None:
    assert {finding.code for finding, _ in CASES} == CODES


@pytest.mark.parametrize(
    ("band", "scope"),
    [
        (H100_7B, "bf16 on H100 of similar size"),
        (H100_UNLIKE, "bf16 on H100 (none within 10× of this model's size)"),
        (
            ReferenceBand("h100", "bf16", False, 0.29, 0.464, (MPT_7B, TITAN_405B), False),
            "bf16 on H100",
        ),
    ],
)
def test_the_reference_scope_names_the_runs_the_band_spans(band: ReferenceBand, scope: str) -> None:
    assert reference_scope(band) == scope


def test_a_cause_s_evidence_is_quoted_as_the_causes_give_it() -> None:
    cause = Cause("overflow", FlaggedIterations("skipped", 2, 78, 78))
    assert evidence_text(cause) == "2 skipped iterations (fp16 overflow) logged in iteration 78"
