"""Values a framework prints where it has none: placeholders, not measurements.

Megatron-DeepSpeed under DeepSpeed's engine prints `loss scale: -1.0` and `grad norm: 0.000`
on every iteration line: the engine owns the scale and the clipping, and Megatron's own
fields are left at their defaults (the shared `logs/FORMATS.md` §2a, on
microsoft/Megatron-DeepSpeed `megatron/training.py`: "Under DeepSpeed pipeline engine
`grad norm: 0.000` and `loss scale: -1.0`/absent can appear (engine owns them)"; the
BigScience 3D ds-on log prints them on all its lines). Drawn or analysed,
they become a loss scale of -1 and a gradient that never moved. The rules are the values'
own, whatever the framework: a loss scale is positive, and grad norms that are all exactly
zero were not computed. Such values are removed from the run's table (null: unknown) and a
warning says what was left out and why.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.model import Run


def without_placeholders(run: Run) -> Run:
    """`run` with its placeholder loss scales and grad norms null, each kind named once in
    its warnings (how many records, which value)."""
    table = run.table
    scales, zero_norms, norms = table.select(
        (pl.col("loss_scale") <= 0).sum().alias("scales"),
        (pl.col("grad_norm") == 0).sum().alias("zero_norms"),
        pl.col("grad_norm").count().alias("norms"),
    ).row(0)
    changes = []
    if scales:
        shown = table.select(pl.col("loss_scale").filter(pl.col("loss_scale") <= 0).unique())
        values = ", ".join(f"{v:g}" for v in sorted(shown.to_series().to_list()))
        changes.append(
            pl.when(pl.col("loss_scale") > 0).then(pl.col("loss_scale")).alias("loss_scale")
        )
        run.warnings.append(
            f"loss scale {values} on {scales} records is a placeholder (a loss scale is "
            "positive: the engine, not this log, keeps it): left out of the charts and the "
            "analyses"
        )
    if norms and zero_norms == norms:
        changes.append(pl.lit(None, dtype=pl.Float64).alias("grad_norm"))
        run.warnings.append(
            f"grad norm 0 on all {norms} records is a placeholder (not computed where it "
            "was printed): left out of the charts and the analyses"
        )
    if changes:
        run.table = table.with_columns(changes)
    return run
