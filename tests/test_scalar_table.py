"""The per-iteration and metrics tables built from a long table of scalars in batches (as the
TensorBoard reader does, chunk by chunk, most batches reduced with numpy) are the ones built
from the whole long table at once by polars' group-bys."""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.parsers import scalar_table
from loganalyzer.parsers.scalar_table import (
    NeedsSampleBatch,
    TableBuilder,
    Tables,
    Unknown,
    build_tables,
    sample_batch,
    sample_steps,
)

# mapped names (two of them to one column), unmapped ones, an axis copy, DeepSpeed's monitor
NAMES = (
    "lm loss",
    "learning-rate",
    "iteration-time",
    "train/loss",
    "eval/accuracy",
    "lm loss vs samples",
    "Train/Samples/train_loss",
    "Train/Samples/elapsed_time_ms_forward",
    "Train/Samples/elapsed_time_ms_backward",
    "Train/Samples/elapsed_time_ms_step",
)

events = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.sampled_from([-3, 0, 1, 1, 1, 1, 2, 5]),  # step advance; below 1 a restart or repeat
        st.integers(min_value=0, max_value=64).map(lambda half: half / 2),  # sums stay exact
        st.booleans(),  # the wall time is logged
    ),
    min_size=1,
    max_size=120,
)


def _long(rows: list[tuple[str, int, float, bool]], samples: bool) -> pl.DataFrame:
    """A long table in record order; each name's iteration moves by its own advances, and
    names logged against samples (when `samples`) log 64 samples per iteration."""
    iterations: dict[str, int] = {}
    columns: dict[str, list[object]] = {n: [] for n in ("name", "step", "wall_time", "value")}
    for record, (name, advance, value, timed) in enumerate(rows):
        if not samples:
            name = name.removeprefix("Train/Samples/")
        iterations[name] = max(0, iterations.get(name, 0) + advance)
        columns["name"].append(name)
        columns["step"].append(iterations[name] * (64 if name.startswith("Train/") else 1))
        columns["wall_time"].append(1_795_000_000.0 + record if timed else None)
        columns["value"].append(value)
    return pl.DataFrame(columns).with_columns(
        pl.col("name").cast(pl.Categorical), record=pl.int_range(pl.len(), dtype=pl.Int64)
    )


def _assert_same(one: Tables, other: Tables) -> None:
    assert one.table.equals(other.table)
    assert one.metrics.equals(other.metrics)
    assert one.warnings == other.warnings
    assert (one.framework, one.step_time_source) == (other.framework, other.step_time_source)


@settings(max_examples=150, deadline=None)
@given(rows=events, cuts=st.lists(st.integers(min_value=0), max_size=8), samples=st.booleans())
def test_tables_built_in_batches_are_the_whole_tables(
    rows: list[tuple[str, int, float, bool]], cuts: list[int], samples: bool
) -> None:
    long = _long(rows, samples)
    with pytest.MonkeyPatch.context() as patch:  # every batch grouped by polars: the reference
        patch.setattr(scalar_table, "_in_order", lambda *_: None)
        whole = build_tables(long, "run")
    builder = TableBuilder("run", sample_batch(sample_steps(long)))
    bounds = sorted({0, long.height, *(cut % (long.height + 1) for cut in cuts)})
    for start, end in itertools.pairwise(bounds):
        builder.add(long.slice(start, end - start))
    _assert_same(builder.finish(), whole)


def test_a_builder_without_the_sample_batch_asks_for_it() -> None:
    long = _long([("Train/Samples/train_loss", 1, 1.0, True)], samples=True)
    with pytest.raises(NeedsSampleBatch):
        TableBuilder("run", Unknown.BATCH).add(long)


@pytest.mark.parametrize("size", [1, 2, 5, 64])
def test_iterations_split_between_batches_or_missing_a_column(size: int) -> None:
    """Loss at every step, the learning rate at every other, in batches of `size` rows: an
    iteration cut by a batch's edge is merged; one that never logged a column keeps a null.
    Reduced with numpy (every name's step moves forward), checked against polars."""
    rows = [(name, step) for step in range(1, 61) for name in ("lm loss", "learning-rate")]
    rows = [(name, step) for name, step in rows if name == "lm loss" or step % 2 == 0]
    long = pl.DataFrame(
        {
            "name": [name for name, _ in rows],
            "step": [step for _, step in rows],
            "wall_time": [1_795_000_000.0 + index for index in range(len(rows))],
            "value": [step / 4 for _, step in rows],
        }
    ).with_columns(pl.col("name").cast(pl.Categorical), record=pl.int_range(pl.len()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scalar_table, "_in_order", lambda *_: None)
        whole = build_tables(long, "run")
    fast = []
    builder = TableBuilder("run", None)
    with pytest.MonkeyPatch.context() as patch:
        in_order = scalar_table._in_order
        patch.setattr(scalar_table, "_in_order", lambda *a: fast.append(in_order(*a)) or fast[-1])
        for start in range(0, long.height, size):
            builder.add(long.slice(start, size))
    batched = builder.finish()
    _assert_same(batched, whole)
    assert all(frame is not None for frame in fast)
    assert batched.table["lr"].null_count() == 30
