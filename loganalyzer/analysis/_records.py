"""The working view of the per-iteration table that every analysis step shares.

Only records with a positive, finite step time carry timing, so only they are analysed (a
log can print `nan` or `inf` where a timer broke). `first` is the
first iteration a record covers.

Segments are numbered in log order (each restart and each file starts the next one), so the
`segment` column is normally sorted. `by_segment` is then the key flagged sorted: polars
partitions by it by slicing instead of hashing, several times cheaper for a window over a
million records. It is the key for sums too: a hashed group's sum is cut between polars'
threads, so its last digits would change with the machine's cores; a slice's are the same
on any machine (though not a whole column's: the column is summed pairwise).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def timed_records(
    table: pl.DataFrame,
    columns: Sequence[str] = (),
    *,
    positions: bool = False,
    resolution: pl.Expr | None = None,
) -> pl.DataFrame:
    """The table's timed records, in log order, with the columns the analysis reads, or only
    `columns` of them: a filter copies every column it is given (about 44 bytes a record for
    all six). With `positions`, `row` too: each record's row in `table`, to take other
    columns of the same records later by position rather than by a join on their keys.

    With `resolution` (each record's clock resolution, `clocks.resolution_of`), that column
    too, and a step time of zero read from a coarse clock is a reading (less than one tick
    over the interval), not a broken timer: its interval counts toward the pace. The column
    takes 8 bytes a record, and only where some source's clock is coarse."""
    wanted = {*columns, "step"}
    chosen = [c for c in _TIMED_COLUMNS if not columns or c.meta.output_name() in wanted]
    extra = ["row"] if positions else []
    if positions:
        chosen.append(pl.int_range(pl.len(), dtype=pl.get_index_type()).alias("row"))
    keep = _TIMED
    if resolution is not None:
        chosen.append(resolution)
        extra.append(resolution.meta.output_name())
        keep = _TIMED | ((pl.col("step") == 0) & (pl.col(extra[-1]) > 0))
    timed = table.select(chosen).filter(keep)
    return timed.select(*columns, *extra) if columns else timed


_INTERVAL = pl.col("interval").fill_null(1)
_TIMED_COLUMNS = (
    pl.col("segment").fill_null(0),
    pl.col("iteration"),
    _INTERVAL.alias("interval"),
    (pl.col("iteration") - _INTERVAL + 1).alias("first"),
    pl.col("step_time_s").alias("step"),
    pl.col("timestamp"),
)
_TIMED = pl.col("step").is_finite() & (pl.col("step") > 0)


def first_iteration() -> pl.Expr:
    """`first` of timed records (their interval filled), computed where it is read: held as
    a column beside the others, it would take 8 bytes a record at the analysis's peak."""
    return (pl.col("iteration") - pl.col("interval") + 1).alias("first")


def by_segment(frame: pl.DataFrame) -> pl.Expr:
    """The key to partition `frame` by segment: flagged sorted when it is (checked, not
    assumed; the check is one pass over a small integer column)."""
    segment = pl.col("segment")
    return segment.set_sorted() if frame["segment"].is_sorted() else segment


def contiguous(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every column in one piece, one column at a time, so that each column's
    old pieces are freed as it is copied (a copy of the whole would hold both): the windows
    and group-bys of the analysis would each copy a column of many pieces for themselves, and
    a float total's last digits depend on how its column is cut. A column already in one
    piece is left as it is: a literal (the interval) stays one value."""
    for name, pieces in zip(frame.columns, frame.n_chunks("all"), strict=True):
        if pieces > 1:
            frame = frame.with_columns(frame.get_column(name).rechunk())
    return frame


def rejoined(warm: pl.DataFrame, rest: pl.DataFrame) -> pl.DataFrame:
    """The timed records again from their warm-up records and the rest, both in log order
    (by `row`): one after the other when every warm-up record comes first (one segment, or
    warm-up in the first segment only), else merged by row."""
    if warm.is_empty():
        return rest
    if rest.is_empty() or warm.select(pl.col("row").max()).item() < rest.item(0, "row"):
        return pl.concat([warm, rest])
    return warm.merge_sorted(rest, key="row")
