"""Timer phases: the iterations found in more than one slice of the long table."""

from __future__ import annotations

from collections import Counter

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from loganalyzer.analysis.phases import in_several

SLICES = st.lists(st.sets(st.integers(min_value=-5, max_value=40)), max_size=6)


@given(SLICES)
def test_in_several_is_every_value_found_in_two_slices_or_more(slices: list[set[int]]) -> None:
    counts = Counter(value for values in slices for value in values)
    distinct = [
        pl.Series("iteration", sorted(values, reverse=True), dtype=pl.Int64) for values in slices
    ]
    found = in_several(distinct) if distinct else pl.Series("iteration", [], dtype=pl.Int64)
    assert found.to_list() == sorted(value for value, count in counts.items() if count >= 2)
    assert found.name == "iteration"
