"""Slow steps on synthetic runs whose truth is known: spikes, periodic stalls, slowdowns."""

from __future__ import annotations

import random
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import Analysis, analyse
from loganalyzer.analysis.baseline import WINDOW, centred_median
from loganalyzer.analysis.phases import phase_growth
from loganalyzer.model import empty_metrics
from tests.analysis_factories import (
    make_metrics,
    make_table,
    synthetic_run,
    timer_metrics,
    timers_of,
)

NO_METRICS = empty_metrics()


def kinds(table: pl.DataFrame, **options: Any) -> tuple[Analysis, set[tuple[int, str]]]:
    result = analyse(table, NO_METRICS, **options)
    return result, {(s.iteration, s.kind) for s in result.slow.steps}


@pytest.mark.parametrize("seed", range(5))
def test_clean_run_with_three_percent_noise_has_no_slow_step(seed: int) -> None:
    result, found = kinds(synthetic_run(3000, seed=seed, noise=0.03).table)
    assert found == set()
    assert result.slow.sustained == ()
    assert result.slow.periodic == ()
    assert result.slow.lost_s == 0


def test_isolated_spikes_are_found_with_ratio_baseline_and_lost_time() -> None:
    run = synthetic_run(2000, noise=0.02, spikes=[300, 1100, 1700], spike_factor=3.0)
    result, found = kinds(run.table)
    assert found == {(301, "spike"), (1101, "spike"), (1701, "spike")}
    for step in result.slow.steps:
        assert step.baseline_s == pytest.approx(1.0, rel=0.03)
        assert step.ratio == pytest.approx(3.0, rel=0.07)
        assert step.lost_s == pytest.approx(step.step_time_s - step.baseline_s)
    assert result.slow.lost_s == pytest.approx(sum(s.lost_s for s in result.slow.steps))


def test_spike_lost_time_counts_every_iteration_of_its_interval() -> None:
    steps = [2.0] * 40
    steps[20] = 5.0
    result = analyse(make_table(steps, interval=100), NO_METRICS)
    (step,) = result.slow.steps
    assert (step.iteration, step.interval, step.ratio) == (2100, 100, 2.5)
    assert step.lost_s == pytest.approx((5.0 - 2.0) * 100)


def test_checkpoint_stall_every_250_iterations_is_periodic() -> None:
    run = synthetic_run(3000, period=250, spikes=[777])
    result, found = kinds(run.table)
    assert found == {(i, "periodic") for i in run.periodic} | {(778, "spike")}
    (pattern,) = result.slow.periodic
    assert pattern.period_iterations == 250
    assert pattern.occurrences == len(run.periodic) == 12
    assert (pattern.first_iteration, pattern.last_iteration) == (250, 3000)
    assert pattern.median_ratio == pytest.approx(2.5, rel=0.07)


def test_period_is_a_multiple_of_the_log_interval() -> None:
    # Megatron-style: one record per 100 iterations, a save every 1000.
    run = synthetic_run(400, interval=100, period=1000, noise=0.01)
    result, found = kinds(run.table)
    assert found == {(i, "periodic") for i in run.periodic}
    assert [p.period_iterations for p in result.slow.periodic] == [1000]


def test_two_periods_are_both_named() -> None:
    rng = random.Random(3)
    steps = [1 + rng.uniform(-0.03, 0.03) for _ in range(4000)]
    for k in range(4000):
        iteration = k + 1
        if iteration % 500 == 0:
            steps[k] *= 4.0
        elif iteration % 170 == 0:
            steps[k] *= 2.0
    result = analyse(make_table(steps), NO_METRICS)
    assert [p.period_iterations for p in result.slow.periodic] == [170, 500]
    assert all(s.kind == "periodic" for s in result.slow.steps)


def test_sustained_slowdown_is_one_event_and_does_not_hide_spikes() -> None:
    run = synthetic_run(2000, sustained=(800, 1000, 2.0), spikes=[900, 1005, 1500])
    result, found = kinds(run.table)
    (event,) = result.slow.sustained
    assert (event.start_iteration, event.end_iteration) == (801, 1000)
    assert (event.records, event.iterations) == (200, 200)
    assert event.factor == pytest.approx(2.0, rel=0.03)
    assert event.baseline_s == pytest.approx(1.0, rel=0.01)
    assert event.lost_s == pytest.approx(200 * 1.0, rel=0.05)
    # The spike inside the slowdown is measured against the shifted level, the one right
    # after it against the normal pace.
    assert found == {(901, "spike"), (1006, "spike"), (1501, "spike")}
    inside = next(s for s in result.slow.steps if s.iteration == 901)
    after = next(s for s in result.slow.steps if s.iteration == 1006)
    assert inside.baseline_s == pytest.approx(2.0, rel=0.04)
    assert after.baseline_s == pytest.approx(1.0, rel=0.04)
    # The slowdown is kept out of the steady pace.
    assert result.step_time_s.median == pytest.approx(1.0, rel=0.01)


def test_short_burst_is_spikes_not_a_sustained_event() -> None:
    run = synthetic_run(1000, sustained=(500, 505, 2.0))
    result, found = kinds(run.table)
    assert result.slow.sustained == ()
    assert found == {(i, "spike") for i in range(501, 506)}


def test_noise_floor_raises_the_threshold_for_a_very_noisy_run() -> None:
    rng = random.Random(1)
    steps = [rng.lognormvariate(0, 0.35) for _ in range(3000)]
    result = analyse(make_table(steps), NO_METRICS)
    assert result.slow.threshold > 1.5
    over_factor = sum(1 for s in steps if s > 1.5)
    assert len(result.slow.steps) < over_factor / 10


def test_phase_that_grew_most_is_named() -> None:
    steps = [1.0] * 200
    steps[120] = 2.0
    iterations = list(range(1, 201))
    forward = [300.0] * 200
    backward = [600.0] * 200
    backward[120] = 1550.0
    forward[120] = 350.0
    enclosing = [f + b for f, b in zip(forward, backward, strict=True)]
    metrics = timer_metrics(
        iterations,
        {"forward-compute": forward, "backward-compute": backward, "forward-backward": enclosing},
    )
    (step,) = analyse(make_table(steps), metrics).slow.steps
    # forward-backward encloses the compute timers: it is the phase, the child that grew its detail
    assert (step.iteration, step.phase, step.phase_delta_ms) == (121, "forward-backward", 1000.0)
    detail = phase_growth(metrics, pl.Series([121]), timers_of(metrics)).row(0, named=True)
    assert (detail["phase_detail"], detail["detail_delta_ms"]) == ("backward-compute", 950.0)


def test_phase_uses_max_across_ranks_form() -> None:
    steps = [1.0] * 100
    steps[50] = 3.0
    iterations = list(range(1, 101))
    optimizer_max = [100.0] * 100
    optimizer_max[50] = 1900.0
    metrics = timer_metrics(iterations, {"optimizer": optimizer_max}, suffix="/max")
    minimum = timer_metrics(iterations, {"optimizer": [5000.0] * 100}, suffix="/min")
    (step,) = analyse(make_table(steps), pl.concat([metrics, minimum])).slow.steps
    assert (step.phase, step.phase_delta_ms) == ("optimizer", 1800.0)


def test_without_timers_phase_is_null() -> None:
    steps = [1.0] * 100
    steps[50] = 3.0
    metrics = make_metrics([(51, "lm loss validation", 2.0, None)])
    (step,) = analyse(make_table(steps), metrics).slow.steps
    assert (step.phase, step.phase_delta_ms) == (None, None)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(300, 3000),
    noise=st.floats(0.0, 0.03),
    seed=st.integers(0, 10_000),
    factor=st.floats(1.8, 6.0),
    positions=st.lists(st.floats(0.02, 0.98), min_size=1, max_size=3),
)
def test_property_injected_spikes_are_exactly_the_slow_steps(
    n: int, noise: float, seed: int, factor: float, positions: list[float]
) -> None:
    spikes = sorted({int(p * n) for p in positions})
    run = synthetic_run(n, seed=seed, noise=noise, spikes=spikes, spike_factor=factor)
    _, found = kinds(run.table)
    assert found == {(i, "spike") for i in run.spikes}


@settings(max_examples=20, deadline=None)
@given(
    interval=st.sampled_from([1, 10, 50]),
    multiple=st.integers(4, 30),
    occurrences=st.integers(5, 15),
    seed=st.integers(0, 10_000),
    noise=st.floats(0.0, 0.03),
)
def test_property_periodic_stalls_are_found_with_their_period(
    interval: int, multiple: int, occurrences: int, seed: int, noise: float
) -> None:
    period = interval * multiple
    n = multiple * occurrences + 3
    run = synthetic_run(n, seed=seed, noise=noise, interval=interval, period=period)
    result, found = kinds(run.table)
    assert found == {(i, "periodic") for i in run.periodic}
    assert [p.period_iterations for p in result.slow.periodic] == [period]


@settings(max_examples=20, deadline=None)
@given(
    start=st.floats(0.05, 0.6),
    length=st.integers(12, 300),
    factor=st.floats(1.7, 3.0),
    seed=st.integers(0, 10_000),
)
def test_property_sustained_slowdown_is_one_event_with_exact_bounds(
    start: float, length: int, factor: float, seed: int
) -> None:
    n = 1500
    first = int(start * n)
    run = synthetic_run(n, seed=seed, sustained=(first, first + length, factor))
    result, found = kinds(run.table)
    assert [(e.start_iteration, e.end_iteration) for e in result.slow.sustained] == [run.sustained]
    assert result.slow.sustained[0].factor == pytest.approx(factor, rel=0.04)
    assert found == set()


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
    interleaved=st.booleans(),
)
def test_property_centred_median_matches_polars_center(
    lengths: list[int], seed: int, interleaved: bool
) -> None:
    """The same numbers as polars' `center=True` per segment, at every distance from a
    segment's ends, for segments in log order (the one-pass path) and interleaved ones."""
    rng = random.Random(seed)
    segments = [s for s, n in enumerate(lengths) for _ in range(n)]
    if interleaved:
        rng.shuffle(segments)
    frame = pl.DataFrame(
        {"segment": segments, "step": [round(rng.random(), 1) for _ in segments]},
        schema={"segment": pl.Int32, "step": pl.Float64},
    )
    ours = centred_median(frame, "step")
    theirs = frame.select(
        pl.col("step").rolling_median(WINDOW, min_samples=1, center=True).over("segment")
    )["step"]
    assert ours.to_list() == theirs.to_list()
