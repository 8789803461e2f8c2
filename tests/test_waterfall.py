"""The MFU waterfall on inputs whose truth is known, and the verdicts that name a lever."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import analyse
from loganalyzer.analysis.causes import attribute
from loganalyzer.analysis.events import Interval, Schedule
from loganalyzer.analysis.goodput import budget
from loganalyzer.analysis.levers import LeverFacts, lever_verdicts
from loganalyzer.flops.waterfall import Inputs, build
from loganalyzer.model import empty_metrics
from loganalyzer.render.wording import lever_message
from tests.analysis_factories import cumulative_timestamps, make_table


def _timers(rows: dict[str, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "phase": list(rows),
            "median_ms": list(rows.values()),
            "share": [v / 1000 for v in rows.values()],
        }
    )


def test_bubble_with_interleaving_then_communication_beyond_it() -> None:
    """p=8, m=4, v=2: bubble 7/15 of the step; waits of 60 % leave 60 % - 46.7 % exposed."""
    inputs = Inputs(
        mfu=0.12,
        hfu=0.16,
        mfu_overall=0.11,
        mfu_source="recomputed",
        pipeline=8,
        virtual_stages=2,
        micro_batches=4,
        step_ms=1000.0,
        goodput_mfu=0.1,
        timers=_timers({"forward-recv": 400.0, "embedding-grads-all-reduce": 200.0}),
    )
    waterfall = build(inputs)
    names = [s.name for s in waterfall.steps]
    assert names[:3] == ["pipeline bubble", "exposed communication", "recomputation"]
    bubble, comm = waterfall.steps[0], waterfall.steps[1]
    assert bubble.inputs["bubble_share"] == pytest.approx(7 / 15)
    assert comm.inputs["c"] == pytest.approx(0.6 - 7 / 15)
    assert comm.value_after == pytest.approx(1 - 0.6)
    assert waterfall.steps[-1].value_after == waterfall.achieved == 0.1


@settings(max_examples=50, deadline=None)
@given(
    mfu=st.floats(0.01, 0.8),
    hfu_extra=st.floats(1.0, 1.4),
    overall=st.floats(0.5, 1.0),
    goodput=st.floats(0.3, 1.0),
    pipeline=st.integers(1, 16),
    micro=st.integers(1, 64),
    waits=st.floats(0.0, 0.5),
)
def test_steps_multiply_exactly_to_the_achieved_mfu(
    mfu: float,
    hfu_extra: float,
    overall: float,
    goodput: float,
    pipeline: int,
    micro: int,
    waits: float,
) -> None:
    inputs = Inputs(
        mfu=mfu,
        hfu=mfu * hfu_extra,
        mfu_overall=mfu * overall,
        mfu_source="recomputed",
        pipeline=pipeline,
        virtual_stages=None,
        micro_batches=micro,
        step_ms=1000.0,
        goodput_mfu=mfu * overall * goodput,
        timers=_timers({"backward-send": waits * 1000}),
    )
    waterfall = build(inputs)
    assert waterfall.steps[0].value_before == 1.0
    assert waterfall.achieved == inputs.goodput_mfu
    assert waterfall.steps[-1].value_after == waterfall.achieved
    product = math.prod(step.factor for step in waterfall.steps)
    assert product == pytest.approx(waterfall.achieved, rel=1e-9)


def test_no_waterfall_without_a_steady_mfu() -> None:
    inputs = Inputs(None, None, None, "", None, None, None, None, None)
    waterfall = build(inputs)
    assert (waterfall.steps, waterfall.achieved) == ((), None)


def test_checkpoint_verdict_names_the_interval_the_count_and_the_lever() -> None:
    """The Primus case: 21 s stalls after iterations 500, 1000 and 1500, `save_interval 500`."""
    steps = [1.0] * 1600
    stamps = cumulative_timestamps(steps, 1, {499: 21.0, 999: 21.0, 1499: 21.0})
    table = make_table(steps, timestamps=stamps)
    schedule = Schedule(save=Interval(500, "save_interval 500 (primus.log:12)"))
    metrics = empty_metrics()
    analysis = analyse(table, metrics, configured_periods=schedule.periods())
    causes = attribute(analysis, table, schedule)
    goodput = budget(analysis, causes, table)
    waterfall = build(Inputs(None, None, None, "", None, None, None, None, None))
    # the flag is named only where the run's printed arguments list it (Megatron-LM's
    # `async_save`), else the lever is said generally
    printed = LeverFacts(arguments={"async_save": False})
    (verdict,) = lever_verdicts(causes, goodput, waterfall, schedule, printed)
    assert verdict.code == "CHECKPOINT_SAVE_COST"
    assert lever_message(verdict) == (
        "checkpoint saves every 500 iterations cost 3.8 % of the run (3 saves attributed, "
        "21 s each at the median, 63 s in all); asynchronous saving (`--async-save`) would "
        "hide most of it"
    )
    (verdict,) = lever_verdicts(causes, goodput, waterfall, schedule)
    assert lever_message(verdict).endswith("; asynchronous saving would hide most of it")


def test_levers_name_only_the_flags_the_run_has_and_the_values_it_can_change() -> None:
    """Megatron-LM core prints `overlap_grad_reduce`, `overlap_param_gather` and
    `overlap_p2p_comm` in its arguments dump (fixtures/corpus/megatron/
    core_2024_swift_qwen2_0_5b_dp2.log:209-211); a 2021 dump lists none of them. With DP=1
    there is no data-parallel reduction to overlap; with a micro-batch of 1, no smaller one."""
    inputs = Inputs(
        mfu=0.12,
        hfu=0.16,
        mfu_overall=0.11,
        mfu_source="recomputed",
        pipeline=8,
        virtual_stages=1,
        micro_batches=4,
        step_ms=1000.0,
        goodput_mfu=0.1,
        timers=_timers({"forward-recv": 700.0, "embedding-grads-all-reduce": 200.0}),
    )
    table = make_table([1.0] * 100)
    analysis = analyse(table, empty_metrics())
    causes = attribute(analysis, table, Schedule())
    goodput = budget(analysis, causes, table)

    def said(facts: LeverFacts) -> dict[str, str]:
        verdicts = lever_verdicts(causes, goodput, build(inputs), Schedule(), facts)
        return {v.code: lever_message(v) for v in verdicts}

    core = {"overlap_grad_reduce": False, "overlap_param_gather": False, "overlap_p2p_comm": False}
    found = said(LeverFacts(core | {"micro_batch_size": 2}, 2, 4, 8))
    assert (
        "overlapping the data-parallel reductions (`--overlap-grad-reduce` and "
        "`--overlap-param-gather`) and the pipeline sends (`--overlap-p2p-communication`) "
        "with compute"
    ) in found["EXPOSED_COMMUNICATION"]
    assert "a smaller micro-batch (`--micro-batch-size`)" in found["PIPELINE_BUBBLE"]
    found = said(LeverFacts({"micro_batch_size": 1}, 1, 1, 8))
    assert "overlapping the pipeline sends with compute" in found["EXPOSED_COMMUNICATION"]
    assert "--overlap" not in found["EXPOSED_COMMUNICATION"]
    assert "smaller micro-batch" not in found["PIPELINE_BUBBLE"]
    # a flag already set is not advised again
    found = said(LeverFacts(core | {"overlap_p2p_comm": True}, 2, 4, 8))
    assert "the pipeline sends with compute" in found["EXPOSED_COMMUNICATION"]
