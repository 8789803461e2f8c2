"""Where the time went: the split of logged time and the one-sentence summary."""

from __future__ import annotations

import pytest

from loganalyzer.analysis import analyse
from loganalyzer.model import empty_metrics
from loganalyzer.render.numbers import duration
from loganalyzer.render.wording import time_summary
from tests.analysis_factories import cumulative_timestamps, make_table

NO_METRICS = empty_metrics()


def hand_checked_run() -> list[float]:
    """100 records at 1 s: a 4 s warm-up record, one 3 s spike at record 50."""
    steps = [1.0] * 100
    steps[0] = 4.0
    steps[50] = 3.0
    return steps


def test_logged_time_splits_into_productive_warmup_and_slow_steps() -> None:
    time = analyse(make_table(hand_checked_run()), NO_METRICS).time
    assert time.logged_s == pytest.approx(105.0)
    assert time.warmup_s == pytest.approx(3.0)
    assert time.slow_steps_s == pytest.approx(2.0)
    assert time.productive_s == pytest.approx(100.0)
    assert (time.redone_s, time.restart_gaps_s, time.stalls_s, time.restarts_s) == (0, 0, 0, 0)
    assert time_summary(time) == (
        "Of 105 s logged, 100 s (95.2 %) ran at the steady pace; 2 s went to slow steps, "
        "3 s to warm-up and 0 s to redone work."
    )


def test_restart_gaps_and_stalls_add_wall_clock_time_outside_the_logged_time() -> None:
    steps = [1.0] * 200
    segment = [0] * 100 + [1] * 100
    iterations = list(range(1, 101)) + list(range(91, 191))  # 10 iterations redone
    stamps = cumulative_timestamps(steps, 1, {100: 300.0, 150: 60.0})
    result = analyse(
        make_table(steps, iterations=iterations, segment=segment, timestamps=stamps), NO_METRICS
    )
    time = result.time
    assert time.logged_s == pytest.approx(200.0)
    assert time.redone_s == pytest.approx(10.0)
    assert time.restart_gaps_s == pytest.approx(300.0)
    assert time.stalls_s == pytest.approx(60.0)
    assert time.restarts_s == pytest.approx(310.0)
    assert time.productive_s == pytest.approx(190.0)
    assert time_summary(time).endswith("and restarts and stalls added 6.0 min of wall-clock time.")


def test_empty_table_has_nothing_to_account() -> None:
    result = analyse(make_table([]), NO_METRICS)
    assert result.time.logged_s == 0
    assert time_summary(result.time) == "No timed records were logged."
    assert result.step_time_s.median is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (0.004, "< 0.01 s"),
        (0.0822, "0.08 s"),
        (0.5, "0.50 s"),
        (0.999, "1 s"),
        (1.4, "1 s"),
        (45.2, "45 s"),
        (600, "10.0 min"),
        (7200, "2.0 h"),
        (36000, "10.0 h"),
    ],
)
def test_duration_picks_a_readable_unit(seconds: float, text: str) -> None:
    assert duration(seconds) == text
