"""Restarts between segments and stalls inside them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import analyse, restarts, timed_records
from loganalyzer.model import empty_metrics
from tests.analysis_factories import cumulative_timestamps, make_table, synthetic_run

NO_METRICS = empty_metrics()


def test_restart_gap_redone_iterations_and_lost_time() -> None:
    run = synthetic_run(1000, noise=0.0, restart=(700, 50, 600.0))
    result = analyse(run.table, NO_METRICS)
    (restart,) = result.restarts
    assert (restart.segment, restart.after_iteration) == (1, 700)
    assert (restart.resumed_at, restart.first_iteration) == (650, 651)
    assert restart.gap_s == pytest.approx(600.0)
    assert restart.gap_note is None
    assert restart.lost_iterations == 50
    assert restart.redone_s == pytest.approx(50.0)
    assert restart.lost_s == pytest.approx(650.0)


def test_restart_without_timestamps_has_no_gap_and_says_why() -> None:
    run = synthetic_run(1000, noise=0.0, restart=(700, 50, 600.0), timestamps=False)
    (restart,) = analyse(run.table, NO_METRICS).restarts
    assert restart.gap_s is None
    assert restart.gap_note == "no timestamp on the records either side of the restart"
    assert restart.lost_s == pytest.approx(50.0)


def test_megatron_restart_redoes_work_since_the_checkpoint() -> None:
    # logged up to 5000, resumed from the checkpoint at 4000 (first record 4100)
    iterations = [100 * (k + 1) for k in range(50)] + [4000 + 100 * (k + 1) for k in range(30)]
    table = make_table([2.0] * 80, iterations=iterations, interval=100, segment=[0] * 50 + [1] * 30)
    (restart,) = analyse(table, NO_METRICS).restarts
    assert (restart.after_iteration, restart.resumed_at, restart.lost_iterations) == (
        5000,
        4000,
        1000,
    )
    assert restart.lost_s == pytest.approx(1000 * 2.0)


def test_resume_right_after_the_last_logged_iteration_redoes_nothing() -> None:
    table = make_table([1.0] * 40, iterations=list(range(1, 41)), segment=[0] * 20 + [1] * 20)
    (restart,) = analyse(table, NO_METRICS).restarts
    assert restart.lost_iterations == 0


def test_stall_inside_a_segment_is_found_and_jitter_is_not() -> None:
    steps = [1.0] * 300
    stamps = cumulative_timestamps(steps, 1, {100: 95.0, 200: 3.0})
    result = analyse(make_table(steps, timestamps=stamps), NO_METRICS)
    (stall,) = result.stalls
    assert (stall.segment, stall.after_iteration, stall.iteration) == (0, 100, 101)
    assert stall.gap_s == pytest.approx(95.0)
    assert stall.expected_s == 1.0
    assert result.time.stalls_s == pytest.approx(95.0)


def test_record_covering_its_interval_is_not_a_stall() -> None:
    steps = [30.0] * 50  # records every 100 iterations of 30 s each: 3000 s apart
    stamps = cumulative_timestamps(steps, 100)
    assert analyse(make_table(steps, interval=100, timestamps=stamps), NO_METRICS).stalls == ()


def test_records_missing_from_a_cut_log_are_not_a_stall() -> None:
    """Iterations 4..70 absent (an excerpt): the time between the records is their work."""
    steps = [5.5] * 6
    iterations = [2, 3, 71, 72, 73, 74]
    stamps = cumulative_timestamps([5.5, 5.5, 5.5 * 68, 5.5, 5.5, 5.5], 1)
    table = make_table(steps, iterations=iterations, timestamps=stamps)
    assert analyse(table, NO_METRICS).stalls == ()


@settings(max_examples=25, deadline=None)
@given(
    at=st.integers(100, 900),
    redo=st.integers(0, 99),
    gap=st.floats(0.0, 5000.0),
    seed=st.integers(0, 10_000),
)
def test_property_restart_is_recovered(at: int, redo: int, gap: float, seed: int) -> None:
    run = synthetic_run(1000, seed=seed, noise=0.03, restart=(at, redo, gap))
    result = analyse(run.table, NO_METRICS)
    (restart,) = result.restarts
    assert restart.lost_iterations == redo
    assert restart.first_iteration == run.restart_iteration
    assert restart.gap_s == pytest.approx(gap, abs=1e-3)
    assert result.stalls == ()
    assert result.slow.steps == ()


@settings(max_examples=20, deadline=None)
@given(
    stalls=st.dictionaries(st.integers(1, 299), st.floats(20.0, 500.0), max_size=12),
    restart=st.integers(1, 299),
    size=st.integers(1, 40),
)
def test_stalls_judged_in_slices_are_those_of_the_whole_table(
    stalls: dict[int, float], restart: int, size: int
) -> None:
    """Slices of any size, stalls on their first and last records and a restart anywhere:
    the slice before a record carries the gap into it."""
    run = synthetic_run(300, noise=0.0, restart=(restart, 0, 900.0), stalls=stalls)
    recs = timed_records(run.table)
    whole = restarts.find_stalls(recs)
    assert len(whole) == len(stalls.keys() - {0, restart})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(restarts, "STALL_SLICE", size)
        assert restarts.find_stalls(recs) == whole
