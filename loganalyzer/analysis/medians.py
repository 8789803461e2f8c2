"""Exact medians per group of a long table without holding its values: a few passes that
count values per bucket of each group's range, narrowing it to the value sought.

polars' group-by median gathers every value of every group at once and holds several times
that while it sorts (1.5 GB for 22 M values, measured); the per-rank spread of a log that
prints 32 ranks' memory lines is a median over tens of millions of values. Here a pass holds
at most `BUCKETS` counts per order statistic sought, and the result is the one polars'
`median` gives, bit for bit: the two middle values, interpolated as polars does.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from loganalyzer.model import Metrics
from loganalyzer.spill import collect

# Buckets each remaining range is cut into per pass: a range of floats narrows 1,024-fold.
BUCKETS = 1024
# An order statistic with at most this many candidate values left is read from them.
FEW = 4096
# Passes before the candidates are read whatever their number (values spread over hundreds
# of orders of magnitude); ordinary data needs one to three.
MAX_PASSES = 8


def grouped_median(frame: Metrics, keys: Sequence[str], value: str = "value") -> pl.DataFrame:
    """Per group of `keys`, the median of `value` (nulls left out; null for a group without
    values), as `frame.group_by(keys).agg(pl.col(value).median())` gives it, in no order."""
    keys = list(keys)
    v = pl.col(value)
    stats = collect(
        frame.lazy()
        .group_by(keys)
        .agg(n=v.count(), lo=v.min(), hi=v.max(), odd=(v.is_nan() | v.is_infinite()).any())
    )
    plain = stats.filter(~pl.col("odd") & (pl.col("n") > 0))
    # groups with nan or infinite values (polars sorts nan last) or none: left to polars (a
    # pass over the rows, made only when there are such groups)
    rest = (
        collect(
            frame.lazy()
            .join(plain.lazy().select(keys), on=keys, how="anti", nulls_equal=True)
            .group_by(keys)
            .agg(v.median())
        )
        if plain.height < stats.height
        else None
    )
    targets = plain.join(pl.DataFrame({"t": [0, 1]}), how="cross").select(
        *keys,
        "t",
        "lo",
        "hi",
        r=pl.when(pl.col("t") == 0).then((pl.col("n") - 1) // 2).otherwise(pl.col("n") // 2),
        left="n",
    )
    found = _order_statistics(frame, keys, value, targets)
    lower = found.filter(pl.col("t") == 0).select(*keys, lower=value)
    upper = found.filter(pl.col("t") == 1).select(*keys, upper=value)
    medians = lower.join(upper, on=keys, nulls_equal=True).select(
        *keys, (pl.col("lower") + (pl.col("upper") - pl.col("lower")) * 0.5).alias(value)
    )
    if rest is None:
        return medians
    return pl.concat([medians, rest.select(*keys, value)], how="vertical_relaxed")


def _order_statistics(
    frame: Metrics, keys: list[str], value: str, targets: pl.DataFrame
) -> pl.DataFrame:
    """For each target (`keys`, `t`): the `r`-th smallest (from 0) of its group's values
    within [`lo`, `hi`], of which there are `left`. Columns: `keys`, `t`, `value`."""
    found = [pl.DataFrame(schema={**targets.select(*keys, "t").schema, value: pl.Float64})]
    for passes in range(MAX_PASSES + 1):
        settled = pl.col("lo") == pl.col("hi")
        found.append(targets.filter(settled).select(*keys, "t", pl.col("lo").alias(value)))
        targets = targets.filter(~settled)
        direct = (pl.col("left") <= FEW) | pl.lit(passes == MAX_PASSES)
        if not (chosen := targets.filter(direct)).is_empty():
            found.append(_read(frame, keys, value, chosen))
        targets = targets.filter(~direct)
        if targets.is_empty():
            break
        targets = _narrow(frame, keys, value, targets)
    return pl.concat(found, how="vertical_relaxed")


def _narrow(frame: Metrics, keys: list[str], value: str, targets: pl.DataFrame) -> pl.DataFrame:
    """One pass: each target's range cut into `BUCKETS`, narrowed to the bucket holding its
    value (bucket numbers grow with the value, so the bucket's own minimum and maximum
    bound it and no value of another bucket lies between them)."""
    v, lo, hi = pl.col(value), pl.col("lo"), pl.col("hi")
    # halves: the range of two finite doubles can overflow, their halves' cannot (but the
    # halves of a range of a few subnormal numbers can round to one value)
    half = hi / 2 - lo / 2
    share = pl.when(half > 0).then((v / 2 - lo / 2) / half).otherwise((v - lo) / (hi - lo))
    bucket = (share * BUCKETS).floor().clip(0, BUCKETS - 1).cast(pl.Int32)
    counted = collect(
        frame.lazy()
        .join(targets.lazy().select(*keys, "t", "lo", "hi"), on=keys, nulls_equal=True)
        .filter(v.is_between(lo, hi))
        .group_by(*keys, "t", bucket.alias("b"))
        .agg(c=pl.len(), bmin=v.min(), bmax=v.max())
    )
    before = pl.col("c").cum_sum().over([*keys, "t"]) - pl.col("c")
    return (
        counted.sort("b")
        .with_columns(before=before)
        .join(targets.select(*keys, "t", "r"), on=[*keys, "t"], nulls_equal=True)
        .filter((pl.col("before") <= pl.col("r")) & (pl.col("r") < pl.col("before") + pl.col("c")))
        .select(*keys, "t", lo="bmin", hi="bmax", r=pl.col("r") - pl.col("before"), left="c")
    )


def _read(frame: Metrics, keys: list[str], value: str, targets: pl.DataFrame) -> pl.DataFrame:
    """The targets' values read from their candidates, which are few."""
    v = pl.col(value)
    rows = collect(
        frame.lazy()
        .join(targets.lazy().select(*keys, "t", "lo", "hi", "r"), on=keys, nulls_equal=True)
        .filter(v.is_between(pl.col("lo"), pl.col("hi")))
        .select(*keys, "t", "r", value)
    )
    return (
        rows.group_by([*keys, "t"]).agg(v.sort().get(pl.col("r").first())).select(*keys, "t", value)
    )
