"""Warm-up detection, the --warmup override, steady-state statistics and drift."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import analyse
from loganalyzer.analysis.steady import _window_flags, warmup_flags
from loganalyzer.model import empty_metrics
from loganalyzer.render.wording import warmup_reason
from tests.analysis_factories import make_table, synthetic_run

NO_METRICS = empty_metrics()


def test_leading_slow_records_of_each_segment_are_warmup() -> None:
    run = synthetic_run(1000, warmup=(6.0, 1.6), restart=(600, 0, 60.0))
    result = analyse(run.table, NO_METRICS)
    assert [(w.segment, w.records, w.iterations, w.last_iteration) for w in result.warmup] == [
        (0, 2, 2, 2),
        (1, 2, 2, 602),
    ]
    assert "compilation and start-up" in warmup_reason(result.warmup[0])
    assert result.slow.steps == ()


def test_megatron_first_interval_is_warmup_of_one_record() -> None:
    steps = [3.0] + [1.0] * 49
    result = analyse(make_table(steps, interval=100), NO_METRICS)
    (warm,) = result.warmup
    assert (warm.records, warm.iterations, warm.last_iteration) == (1, 100, 100)
    assert warm.time_s == pytest.approx(300.0)
    assert warm.lost_s == pytest.approx(200.0)
    assert result.step_time_s.median == 1.0
    assert result.step_time_s.steady_records == 49


def test_clean_run_has_no_warmup() -> None:
    result = analyse(synthetic_run(500).table, NO_METRICS)
    assert [w.records for w in result.warmup] == [0]
    assert warmup_reason(result.warmup[0]).startswith("no leading record")


def test_warmup_is_capped_so_a_slow_start_is_left_to_slow_steps() -> None:
    run = synthetic_run(1000, sustained=(0, 300, 2.0))
    result = analyse(run.table, NO_METRICS)
    assert result.warmup[0].records == 50  # 5 % of the segment
    (event,) = result.slow.sustained
    assert (event.start_iteration, event.end_iteration) == (51, 300)


@pytest.mark.parametrize(("warmup", "records"), [(0, 0), (100, 1), (150, 2), (1000, 10)])
def test_warmup_override_counts_iterations_from_each_segment_start(
    warmup: int, records: int
) -> None:
    # two segments of 20 records of 100 iterations; the second resumes from iteration 1500
    iterations = [100 * (k + 1) for k in range(20)] + [1500 + 100 * (k + 1) for k in range(20)]
    table = make_table([1.0] * 40, iterations=iterations, interval=100, segment=[0] * 20 + [1] * 20)
    result = analyse(table, NO_METRICS, warmup=warmup)
    assert [w.records for w in result.warmup] == [records, records]
    assert [w.iterations for w in result.warmup] == [100 * records, 100 * records]
    assert warmup_reason(result.warmup[0]).startswith(f"--warmup {warmup}:")


def test_step_time_stats_over_all_and_steady_records() -> None:
    steps = [5.0] + [1.0, 1.2] * 10 + [4.0] + [1.0, 1.2] * 10
    result = analyse(make_table(steps), NO_METRICS)
    stats = result.step_time_s
    assert stats.median == 1.1  # warm-up (5.0) and the spike (4.0) left out
    assert stats.steady_records == 40
    assert stats.mean == pytest.approx((5.0 + 4.0 + 20 * 2.2) / 42)
    assert (stats.min, stats.max) == (1.0, 5.0)
    assert stats.p90 == pytest.approx(1.2)


def test_drift_compares_first_and_last_tenth_of_steady_records() -> None:
    steps = [1.0 + 0.3 * k / 999 for k in range(1000)]
    drift = analyse(make_table(steps), NO_METRICS).drift
    assert drift is not None
    assert drift.records == 1000
    assert drift.first_iterations == (1, 100) and drift.last_iterations == (901, 1000)
    assert drift.first_median_s == pytest.approx(1.0 + 0.3 * 49.5 / 999)
    assert drift.last_median_s == pytest.approx(1.0 + 0.3 * 949.5 / 999)
    assert drift.relative_change == pytest.approx(drift.last_median_s / drift.first_median_s - 1)


def test_drift_spans_start_at_the_first_iteration_a_record_covers() -> None:
    """Records of 10 iterations each: the first tenth covers iterations 1 to 1,000."""
    drift = analyse(make_table([1.0] * 1000, interval=10), NO_METRICS).drift
    assert drift is not None
    assert drift.first_iterations == (1, 1000) and drift.last_iterations == (9001, 10000)


def test_too_few_records_for_drift() -> None:
    assert analyse(make_table([1.0] * 19), NO_METRICS).drift is None


# Step times around a pace of 1 s, a few far above it, so that warm-ups of every length occur.
STEPS = st.sampled_from([0.9, 1.0, 1.05, 1.2, 2.0, 5.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(STEPS, min_size=1, max_size=70), min_size=1, max_size=6))
def test_warmup_judged_on_segment_heads_is_that_of_the_window_expressions(
    segments: list[list[float]],
) -> None:
    """Segments in log order are judged on their first records only, with the flags the
    window expressions over every record give (short segments, caps, slow segments)."""
    recs = pl.DataFrame(
        {
            "segment": [number for number, steps in enumerate(segments) for _ in steps],
            "step": [step for steps in segments for step in steps],
        },
        schema={"segment": pl.Int32, "step": pl.Float64},
    )
    assert warmup_flags(recs, None).equals(_window_flags(recs, None))
