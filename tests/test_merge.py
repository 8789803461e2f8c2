"""Copies of a record that several files carry are kept once, the first in log order: found
in groups (by a hash of the iteration) when the records are many, as found all at once."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from loganalyzer.merge import IDENTITY_BYTES, RECORD_IDENTITY, first_copies, merged_table
from loganalyzer.model import compact_table, conform_table
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


def _file_table(path: str | None, rows: list[tuple[int, int, float]]) -> pl.DataFrame:
    """A file's table as a parser hands it over: compacted, its path one value."""
    frame = pl.DataFrame(
        {
            "iteration": [i for i, _, _ in rows],
            "segment": [s for _, s, _ in rows],
            "loss": [loss for _, _, loss in rows],
            "step_time_s": [1.0] * len(rows),
            "interval": [1] * len(rows),
            "line": list(range(1, len(rows) + 1)),
        },
        schema_overrides={"segment": pl.Int32, "loss": pl.Float64, "iteration": pl.Int64},
    )
    return compact_table(conform_table(frame.with_columns(source=pl.lit(path, pl.String))))


def _merged_all_at_once(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """What `merged_table` gives, as the plain concatenation gives it."""
    offsets = [0]
    for table in tables:
        offsets.append(offsets[-1] + int(table.get_column("segment").max() or 0) + 1)  # type: ignore[arg-type]
    merged = pl.concat(
        t.with_columns(_seg=pl.col("segment") + o)
        for t, o in zip(tables, offsets[:-1], strict=True)
    )
    return (
        merged.filter(pl.struct(RECORD_IDENTITY).is_first_distinct())
        .with_columns(segment=pl.col("_seg").rank("dense").cast(pl.Int32) - 1)
        .drop("_seg")
    )


FILE_ROWS = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 2), st.sampled_from([2.0, 2.5])), max_size=12
).map(sorted)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a.log", "b.log", None]), FILE_ROWS), min_size=2, max_size=5
    )
)
def test_merged_as_concatenated(
    files: list[tuple[str | None, list[tuple[int, int, float]]]],
) -> None:
    """Paths carried by position, literals left as they are, the filter skipped when no
    record is a copy: the same table as concatenating everything, copies, empty files,
    files without a path and a table of several files included."""
    tables = [_file_table(path, rows) for path, rows in files]
    if len(tables) > 2:  # a table whose records came from two files
        tables[0] = pl.concat([tables[0], _file_table("c.log", [(9, 0, 2.0)])])
    assert_frame_equal(merged_table(tables), _merged_all_at_once(tables))
