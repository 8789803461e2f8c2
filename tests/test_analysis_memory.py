"""The analysis holds its per-record columns once: in one piece each, a literal left as one
value, and the records split around the slow-step pass and taken back in log order."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis._records import contiguous, rejoined


def _records(warm: list[bool]) -> pl.DataFrame:
    n = len(warm)
    return pl.DataFrame(
        {
            "row": pl.Series(range(n), dtype=pl.UInt32),
            "step": [float(i) for i in range(n)],
            "warmup": pl.Series(warm, dtype=pl.Boolean),
        }
    ).with_columns(interval=pl.lit(1, dtype=pl.Int64))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), max_size=60))
def test_records_split_around_the_slow_steps_come_back_in_log_order(warm: list[bool]) -> None:
    """Warm-up records first (one segment) or between the others (several): the same
    records in the same order."""
    records = _records(warm)
    found = rejoined(records.filter("warmup"), records.filter(~pl.col("warmup")))
    assert found.equals(records)


def test_contiguous_puts_columns_in_one_piece_and_leaves_a_literal_one_value() -> None:
    pieces = pl.concat([_records([False] * 100_000)] * 3, rechunk=False)
    assert pieces.n_chunks("all")[0] == 3
    size = pieces.estimated_size()
    joined = contiguous(pieces)
    assert joined.n_chunks("all") == [1] * len(joined.columns)
    assert joined.estimated_size() == size  # `interval` not written out: 8 bytes a record
    assert joined.equals(pieces)
