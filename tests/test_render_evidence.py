"""Each kind of cause evidence, worded as the document says it: the analysis returns facts
(`analysis.causes`), `render.evidence` writes the one sentence for each.

The expected sentences are the outputs' own: the golden documents named beside a case, else
the causes of the synthetic runs in tests/test_analysis_causes.py and tests/test_cause_evidence.py
as the summary words them.
"""

from __future__ import annotations

import pytest

from loganalyzer.analysis.causes import (
    CauseEvidence,
    EventAftermath,
    EventSeen,
    FlaggedIterations,
    IntervalMultiple,
    NothingFound,
    PhaseGrowth,
    RankSpread,
    RestartGap,
    SaveAndEvaluation,
)
from loganalyzer.render.evidence import aftermath_evidence, cause_evidence

SAVE_LINE = EventSeen("checkpoint_save", 500, "line", 1)
EVALUATION_LINE = EventSeen("evaluation", 500, "line", 2)
BOTH = "a checkpoint save ('saving checkpoint' at iteration 500 (line 1)) and an evaluation "
BOTH += "('validation' at iteration 500 (line 2)) after the same iteration: "
NO_TIMERS = (
    "(start-up, queueing and checkpoint load: the log prints no start-up timers to split it)"
)

CASES: dict[str, tuple[CauseEvidence, str]] = {
    # tests/golden/nanotron/nanotron_2024_08_tiny_llama.log.json
    "save line": (
        EventSeen("checkpoint_save", 10, "line", 83),
        "'saving checkpoint' at iteration 10 (line 83)",
    ),
    # tests/golden/megatron/megatron__bigscience_gpt2_tp4_pp8.out.json
    "validation line": (
        EventSeen("evaluation", 100, "line", 202),
        "'validation' at iteration 100 (line 202)",
    ),
    "line with no number": (
        EventSeen("checkpoint_save", 10, "line"),
        "'saving checkpoint' at iteration 10",
    ),
    "checkpoint folder": (
        EventSeen("checkpoint_save", 100, "folder"),
        "a checkpoint folder of iteration 100",
    ),
    "save metric": (EventSeen("checkpoint_save", 300, "metric"), "a save recorded at step 300"),
    "validation metric": (
        EventSeen("evaluation", 200, "metric"),
        "a validation metric recorded at step 200",
    ),
    # `loganalyzer summary fixtures/corpus/megatron/core_2024_swift_qwen2_0_5b_dp2.log --json`
    "interval": (
        IntervalMultiple(
            "checkpoint_save",
            100,
            "save_interval 100 (fixtures/corpus/megatron/core_2024_swift_qwen2_0_5b_dp2.log:252)",
        ),
        "iteration 100 is a multiple of save_interval 100 "
        "(fixtures/corpus/megatron/core_2024_swift_qwen2_0_5b_dp2.log:252)",
    ),
    "save and evaluation, save timer": (
        SaveAndEvaluation(SAVE_LINE, EVALUATION_LINE, "save-checkpoint", 12.0, 18.0),
        BOTH + "the save-checkpoint timer gives the save 12 s, the evaluation the other 18 s",
    ),
    "save and evaluation, eval_runtime": (
        SaveAndEvaluation(SAVE_LINE, EVALUATION_LINE, "eval_runtime", 23.0, 7.0),
        BOTH + "eval_runtime gives the evaluation 7 s, the save the other 23 s",
    ),
    "save and evaluation, untimed": (
        SaveAndEvaluation(SAVE_LINE, EVALUATION_LINE, None, None, None),
        BOTH + "the log does not time them apart",
    ),
    "rank spread": (
        RankSpread("timer/forward-backward", 155, 2, 3.4899, 1.0012, "median rank"),
        "timer/forward-backward at iteration 155: rank 2 at 3.49× the median rank, against "
        "1.00× typically",
    ),
    # the `against` of `analysis.spreads` for a timer's /max and /min across ranks
    "max over min": (
        RankSpread(
            "timer/forward-backward",
            155,
            None,
            2.5,
            1.1,
            "fastest rank (max over min across ranks)",
        ),
        "timer/forward-backward at iteration 155: the slowest rank at 2.50× the fastest rank "
        "(max over min across ranks), against 1.10× typically",
    ),
    "phase": (
        PhaseGrowth("forward-backward", 55, 2000.4, None, None),
        "forward-backward grew by 2,000 ms at iteration 55, against its run median",
    ),
    "phase and child": (
        PhaseGrowth("forward-backward", 130, 2000.0, "batch-generator", 1999.6),
        "forward-backward grew by 2,000 ms (batch-generator +2,000 ms) at iteration 130, "
        "against its run median",
    ),
    "NaN": (FlaggedIterations("nan", 2, 151, 151), "2 NaN iterations logged in iteration 151"),
    "skipped": (
        FlaggedIterations("skipped", 1, 171, 180),
        "1 skipped iteration (fp16 overflow) logged in iterations 171–180",
    ),
    "nothing in a gap": (NothingFound("gap"), "no save, evaluation or timer explains the gap"),
    # tests/golden/megatron/megatron__core_0_12_llama3_8b_throughput.log.json
    "nothing in the records": (
        NothingFound("records"),
        "no save, evaluation, rank spread, NaN or timer growth logged there",
    ),
    # tests/golden/megatron/megatron__quirks__restart_in_file.log.json
    "restart from a save": (
        RestartGap(1, 60, 40, True, 25, 900.0, None, None, None, 20, 10.0),
        "the attempt before segment 1 stopped after iteration 60; resumed from the checkpoint "
        f"saved at iteration 40 (line 25): a gap of 15.0 min {NO_TIMERS}, and 20 iterations "
        "redone (10 s)",
    ),
    "restart, gap split": (
        RestartGap(1, 120, 100, False, None, 300.0, 60.0, 20.0, 240.0, 20, 20.0),
        "the attempt before segment 1 stopped after iteration 120; resumed at iteration 101: a "
        "gap of 5.0 min: start-up 60 s (its setup timers, checkpoint load 20 s of it) and "
        "4.0 min before it (launch, queueing), and 20 iterations redone (20 s)",
    ),
    "restart, no timestamps": (
        RestartGap(1, 20, 0, False, None, None, None, None, None, 20, 10.0),
        "the attempt before segment 1 stopped after iteration 20; resumed at iteration 1: a "
        "gap of unknown length (no timestamps either side), and 20 iterations redone (10 s)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_kind_of_evidence_is_worded_as_the_document_says_it(case: str) -> None:
    evidence, expected = CASES[case]
    assert cause_evidence(evidence) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # tests/golden/hf_trainer/lora__train.log.json
        (
            30,
            "after the checkpoint save at iteration 20 (line 30), iterations 21-25 ran at "
            "4.51 s per step against the pace of 1.956 s: 13 s more",
        ),
        (
            None,
            "after the checkpoint save at iteration 20, iterations 21-25 ran at 4.51 s per step "
            "against the pace of 1.956 s: 13 s more",
        ),
    ],
)
def test_what_an_event_cost_the_record_after_it(line: int | None, expected: str) -> None:
    cost = EventAftermath("checkpoint_save", 20, line, 21, 25, 4.51, 1.956, 12.77)
    assert aftermath_evidence(cost) == expected
