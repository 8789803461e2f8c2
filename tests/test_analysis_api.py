"""The `analyse` entry point on a run with every kind of event at once."""

from __future__ import annotations

import polars as pl
import pytest

from loganalyzer.analysis import analyse
from loganalyzer.model import empty_metrics
from tests.analysis_factories import SyntheticRun, synthetic_run

NO_METRICS = empty_metrics()


def full_run() -> SyntheticRun:
    return synthetic_run(
        4000,
        seed=7,
        warmup=(5.0, 1.5),
        spikes=[333, 1444, 3555],
        period=500,
        sustained=(2010, 2300, 2.0),
        restart=(3000, 80, 900.0),
        stalls={1200: 300.0},
    )


def test_every_injected_event_is_found_with_its_kind() -> None:
    run = full_run()
    result = analyse(run.table, NO_METRICS)
    found = {(s.iteration, s.kind) for s in result.slow.steps}
    assert found == {(i, "spike") for i in run.spikes} | {(i, "periodic") for i in run.periodic}
    assert [(e.start_iteration, e.end_iteration) for e in result.slow.sustained] == [run.sustained]
    assert [p.period_iterations for p in result.slow.periodic] == [500]
    assert [(r.after_iteration, r.lost_iterations) for r in result.restarts] == [(3000, 80)]
    assert result.restarts[0].gap_s == pytest.approx(900.0, abs=1e-3)
    assert [(s.after_iteration, round(s.gap_s)) for s in result.stalls] == [(1200, 300)]
    assert [w.records for w in result.warmup] == [2, 2]
    assert (result.records, result.timed_records, result.segments) == (4000, 4000, 2)
    assert (result.first_iteration, result.last_iteration) == (1, 3920)
    assert result.step_time_s.median == pytest.approx(1.0, rel=0.01)


def test_analysis_is_deterministic() -> None:
    run = full_run()
    assert analyse(run.table, NO_METRICS) == analyse(run.table, NO_METRICS)


def test_records_without_step_time_are_left_out() -> None:
    run = synthetic_run(500)
    table = run.table.with_columns(step_time_s=pl.lit(None, pl.Float64))
    result = analyse(table, NO_METRICS)
    assert (result.records, result.timed_records) == (500, 0)
    assert result.slow.steps == () and result.restarts == () and result.warmup == ()


def test_steady_rows_are_the_table_rows_of_the_steady_records() -> None:
    """By position in the table as given, untimed rows included: the framework's own
    figures are taken at these rows beside the steady pace."""
    run = full_run()
    untimed = pl.int_range(pl.len()) % 7 == 3
    table = run.table.with_columns(
        step_time_s=pl.when(untimed).then(None).otherwise(pl.col("step_time_s"))
    )
    result = analyse(table, NO_METRICS)
    steady = table[result.steady_rows]
    assert steady.height == result.step_time_s.steady_records
    assert steady["step_time_s"].null_count() == 0
    assert steady["step_time_s"].median() == result.step_time_s.median
    slow = {s.iteration for s in result.slow.steps}
    assert slow and not slow & set(steady["iteration"])
