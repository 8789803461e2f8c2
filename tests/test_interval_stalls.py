"""Records that average `interval` iterations: a stall inside one is found and costed whole.

One iteration that stalls for S seconds inside a record of k iterations raises the record's
average by S/k only; the time lost must still come out as S (within the run's noise), and
the entry must say which iterations the record covers.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import analyse
from loganalyzer.load import Loaded
from loganalyzer.model import Run, empty_metrics
from loganalyzer.render.text import render_summary
from loganalyzer.summary import build_summary
from tests.analysis_factories import make_table

RECORDS = 60
NOISE = 0.003  # relative, uniform, per record


@settings(max_examples=40, deadline=None)
@given(
    interval=st.sampled_from([1, 10, 100]),
    pace=st.floats(min_value=0.5, max_value=30.0),
    stall_in_steps=st.floats(min_value=5.0, max_value=80.0),
    where=st.integers(min_value=15, max_value=RECORDS - 15),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_a_stall_inside_a_record_is_lost_time_of_its_full_length(
    interval: int, pace: float, stall_in_steps: float, where: int, seed: int
) -> None:
    noise = random.Random(seed)
    stall = stall_in_steps * pace
    steps = [pace * (1 + noise.uniform(-NOISE, NOISE)) for _ in range(RECORDS)]
    steps[where] += stall / interval
    analysis = analyse(make_table(steps, interval=interval), empty_metrics(), warmup=0)

    (found,) = analysis.slow.steps
    assert found.iteration == (where + 1) * interval
    assert (found.first_iteration, found.last_iteration) == (where * interval + 1, found.iteration)
    assert found.interval == interval
    assert found.kind == ("spike" if interval == 1 else "stall")
    # the baseline is a median of records within ±NOISE of the pace: the error on the time
    # lost is at most that noise over the iterations the record covers, on both sides
    assert found.lost_s == pytest.approx(stall, abs=2 * NOISE * pace * interval + 1e-9)
    assert analysis.time.slow_steps_s == pytest.approx(found.lost_s)


def test_a_stall_and_a_slowdown_read_as_ranges_of_real_records() -> None:
    """Logged every 10 iterations: a 15-minute stall inside one record, and 22 records at
    30 s per iteration; in the text and the JSON alike."""
    noise = random.Random(1)
    steps = [18.15 * (1 + noise.uniform(-0.01, 0.01)) for _ in range(400)]
    steps[278] = 107.9
    steps[240:262] = [30.0] * 22
    run = Run("megatron-lm", {}, make_table(steps, interval=10), empty_metrics())
    doc = build_summary(Loaded(run), {"shape": {}, "run": {}})
    stall, sustained = doc["slow_steps"]
    assert (stall["kind"], stall["first_iteration"], stall["last_iteration"]) == (
        "stall",
        2781,
        2790,
    )
    assert stall["interval"] == 10
    assert stall["lost_s"] == pytest.approx((107.9 - stall["baseline_s"]) * 10)
    assert (sustained["kind"], sustained["first_record"], sustained["last_record"]) == (
        "sustained",
        2410,
        2620,
    )
    assert sustained["iteration"] == 2410  # a record that exists
    text = render_summary(doc)
    assert "    iterations 2781–2790 averaged 107.9 s, 5.95× the baseline of 18.13 s: " in text
    assert "15.0 min lost (stall)" in text
    assert "    iterations 2401–2620 (22 records, 2410 to 2620) ran at 30 s per iteration" in text
