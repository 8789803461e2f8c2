"""Chart downsampling keeps the shape and everything a reader must see."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.render.downsample import keep_shape


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3000),
    flagged=st.sets(st.integers(0, 2999), max_size=30),
    max_points=st.integers(4, 400),
)
def test_keeps_flagged_first_last_and_every_bucket_extreme(
    values: list[float], flagged: set[int], max_points: int
) -> None:
    frame = pl.DataFrame({"i": range(len(values)), "v": values})
    kept = keep_shape(frame, "v", pl.col("i").is_in(sorted(flagged)), max_points)
    rows = kept["i"].to_list()
    assert rows == sorted(set(rows))  # in order, no duplicates
    assert rows[0] == 0 and rows[-1] == len(values) - 1
    assert {f for f in flagged if f < len(values)} <= set(rows)
    if len(values) <= max_points:
        assert kept.equals(frame)
        return
    assert len(rows) <= max_points + len(flagged) + 2
    assert kept["v"].max() == frame["v"].max()
    assert kept["v"].min() == frame["v"].min()


def test_a_million_records_become_a_few_thousand_points() -> None:
    n = 1_000_000
    frame = pl.DataFrame({"i": range(n)}).with_columns(
        v=pl.when(pl.col("i") == 654_321).then(500.0).otherwise((pl.col("i") % 97).cast(float))
    )
    kept = keep_shape(frame, "v", pl.col("i") == 123_456)
    assert kept.height <= 2000 + 3
    assert 654_321 in kept["i"].to_list()  # the spike survives as its bucket's max
    assert 123_456 in kept["i"].to_list()
