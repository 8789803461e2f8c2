"""grouped_median gives polars' own group-by median, bit for bit, without holding the values."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import medians
from loganalyzer.analysis.medians import grouped_median

VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e3, max_value=1e3),
    st.sampled_from([0.0, 1.5, 17694.36, 20045.0126953125]),
    st.none(),
)


def _reference(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.group_by("name", "rank").agg(pl.col("value").median()).sort("name", "rank")


def _frame(rows: list[tuple[str, int | None, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"name": pl.Categorical, "rank": pl.Int32, "value": pl.Float64},
        orient="row",
    )


GROUP = st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(0, 3)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(GROUP, VALUES), max_size=120), st.sampled_from([1, 2, 4096]))
def test_the_median_of_every_group_is_polars_own(
    drawn: list[tuple[tuple[str, int | None], float | None]], few: int
) -> None:
    frame = _frame([(name, rank, value) for (name, rank), value in drawn])
    with pytest.MonkeyPatch.context() as patch:  # a few candidates: ranges are narrowed
        patch.setattr(medians, "FEW", few)
        patch.setattr(medians, "BUCKETS", 3)
        found = grouped_median(frame.lazy(), ["name", "rank"]).sort("name", "rank")
    assert found.equals(_reference(frame))


@pytest.mark.parametrize("few", [1, 3])
def test_ranges_narrowed_pass_by_pass_give_the_same_medians(
    few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few candidates read directly only after narrowing, over values from 1e-300 to 1e300."""
    monkeypatch.setattr(medians, "FEW", few)
    monkeypatch.setattr(medians, "BUCKETS", 4)
    monkeypatch.setattr(medians, "MAX_PASSES", 6)
    rows: list[tuple[str, int | None, float | None]] = [
        (name, rank, (-1) ** k * (k % 97) * 10.0 ** ((k * 37) % 601 - 300))
        for k in range(3000)
        for name, rank in [(("a", "b")[k % 2], k % 5)]
    ]
    rows += [("c", 1, 17694.36)] * 50 + [("c", 2, float(k % 7)) for k in range(1001)]
    rows += [("c", 3, value) for value in (0.0, 5e-324, 5e-324, 1e-323, 0.0)]  # subnormal
    frame = _frame(rows)
    found = grouped_median(frame.lazy(), ["name", "rank"]).sort("name", "rank")
    assert found.equals(_reference(frame))


def test_groups_polars_must_take_cost_a_pass_only_when_there_are_some(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each pass reads the whole long table (from disk, when it was spilled): the pass for
    groups with nan or infinite values is made only where there are such groups."""
    passes: list[int] = []
    counting = medians.collect

    def counted(frame: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
        passes[-1] += 1
        return counting(frame)

    monkeypatch.setattr(medians, "collect", counted)
    finite = [("a", 0, float(k)) for k in range(50)]
    for rows in (finite, [*finite, ("b", 0, float("nan"))]):
        passes.append(0)
        grouped_median(_frame(rows).lazy(), ["name", "rank"])
    assert passes[1] == passes[0] + 1
