"""Copies of a record that several files carry are kept once, the first in log order: found
in groups (by a hash of the iteration) when the records are many, as found all at once."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.merge import IDENTITY_BYTES, RECORD_IDENTITY, first_copies
from loganalyzer.spill import BUDGET_ENV


def _records(iterations: list[int], losses: list[float]) -> pl.DataFrame:
    n = len(iterations)
    return pl.DataFrame(
        {
            "iteration": iterations,
            "step_time_s": [1.0] * n,
            "loss": losses,
            "lr": [1e-4] * n,
            "timestamp": pl.Series([None] * n, dtype=pl.Datetime("us", "UTC")),
            "reported_tflops_per_gpu": [None] * n,
        },
        schema_overrides={"reported_tflops_per_gpu": pl.Float64},
    )


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from([2.0, 2.5, float("nan")])),
        min_size=1,
        max_size=200,
    )
)
def test_found_in_groups_as_found_at_once(records: list[tuple[int, float]]) -> None:
    table = _records([i for i, _ in records], [loss for _, loss in records])
    at_once = table.select(pl.struct(RECORD_IDENTITY).is_first_distinct()).to_series()
    with pytest.MonkeyPatch.context() as patched:
        # a budget of about ten records: many groups
        patched.setenv(BUDGET_ENV, str(10 * IDENTITY_BYTES))
        assert first_copies(table).to_list() == at_once.to_list()


def test_the_first_copy_in_log_order_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUDGET_ENV, str(IDENTITY_BYTES))  # one record a group's worth
    table = _records([1, 2, 1, 3, 2, 1], [2.0, 2.0, 2.0, 2.0, 2.5, 2.0])
    assert first_copies(table).to_list() == [True, True, False, True, True, False]


@pytest.mark.parametrize("budget", ["0", "1"])
def test_a_budget_of_nothing_still_finds_them(budget: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most `MAX_GROUPS` groups, and no division by a budget of zero."""
    monkeypatch.setenv(BUDGET_ENV, budget)
    table = _records(list(range(300)) * 2, [2.0] * 600)
    assert first_copies(table).to_list() == [True] * 300 + [False] * 300
