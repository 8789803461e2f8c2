"""Several formats of one run read as one: an HF output_dir's trainer_state.json beside the
Trainer's stdout, later its event files. Each is a view of the same iterations; they are
combined record by record, not laid end to end as restarts are (`merge.py`).

Two Runs are views of one run when one's logged iterations are all among the other's (at
least two in common), their losses agree at every common iteration (to 0.1 %: stdout rounds
them) or, without losses in common, their timestamps do (to a second: DeepSpeed's stdout
beside its monitor's event files), and they are of different kinds (another format, or their
step times from another source): two logs of one kind are copies (kept once by `merge.py`),
a restart that redid iterations, or two benchmarks of one model from one seed, which print
the same losses. A resume logs new iterations past the old ones, so it never passes. A
progress bar's records (no losses) are a view of the same framework's logged run when they
end no later than it does.

Precedence, per record: the view whose step times come from the better source wins
(STEP_TIME_PRECEDENCE, best first); the others fill the columns it lacks and add the
iterations no record of it covers. Config values: the winner's, the others filling gaps.
Long-table rows that several views carry (same iteration and name) are kept once, the
winner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import polars as pl

from loganalyzer.model import ConfigValue, Endings, Run
from loganalyzer.spill import concat

# Where a view's step times came from (its `step_time_source` config value), best first:
# event-file wall times, the Trainer's cumulative runtime (as saved, then as printed: stdout
# rounds it), tqdm's elapsed time, a run-level average; a view that does not say comes last.
STEP_TIME_PRECEDENCE = (
    "event_files",
    "train_runtime",
    "train_runtime_printed",
    "tqdm",
    "average",
)

LOSS_TOLERANCE = 1e-3
# Views without losses in common (DeepSpeed's stdout prints none, its monitor's event files
# do) are one run when they logged the same iterations at the same moments: two runs, or a
# run and its restart, never log an iteration within a second of each other's.
CLOCK_TOLERANCE = timedelta(seconds=1)


def combine_views(runs: Sequence[Run]) -> list[Run]:
    """The runs with every group of views of one run combined into one Run (order kept)."""
    remaining = list(runs)
    result: list[Run] = []
    while remaining:
        first = remaining.pop(0)
        views = [first]
        for other in list(remaining):
            if any(_same_run(view, other) for view in views):
                views.append(other)
                remaining.remove(other)
        result.append(first if len(views) == 1 else _combined(views))
    return result


def _same_run(a: Run, b: Run) -> bool:
    if _bars_within(a, b) or _bars_within(b, a):
        return True
    if _formats(a) == _formats(b) and a.get("step_time_source") == b.get("step_time_source"):
        return False  # two logs of one kind: copies, restarts or other runs (merge, identity)
    relative = (pl.col("loss") - pl.col("loss_other")).abs() / pl.col("loss_other").abs().clip(
        lower_bound=1e-12
    )
    if _agree_where_common(a, b, "loss", relative <= LOSS_TOLERANCE):
        return True
    apart = (pl.col("timestamp") - pl.col("timestamp_other")).abs()
    return _agree_where_common(a, b, "timestamp", apart <= CLOCK_TOLERANCE)


def _agree_where_common(a: Run, b: Run, column: str, agree: pl.Expr) -> bool:
    """Every iteration of the view with fewer values of `column` is one the other logged too
    (at least two), and `agree` holds at each of them."""
    left = a.table.select("iteration", column).drop_nulls().unique("iteration")
    right = b.table.select("iteration", column).drop_nulls().unique("iteration")
    if left.height == 0 or right.height == 0:
        return False
    small, large = (left, right) if left.height <= right.height else (right, left)
    common = small.join(large, on="iteration", suffix="_other")
    if common.height < 2 or common.height != small.height:
        return False
    return bool(common.select(agree.all()).item())


def _formats(run: Run) -> frozenset[str]:
    return frozenset(source.format for source in run.sources)


def _bars_within(bars: Run, other: Run) -> bool:
    """A progress bar's records (the Trainer's stderr: no losses, tqdm step times) are a
    view of the same framework's run whose logged steps reach at least as far."""
    if bars.get("step_time_source") != "tqdm" or bars.table["loss"].drop_nulls().len():
        return False
    if bars.framework != other.framework or other.table["loss"].drop_nulls().len() < 2:
        return False
    last, reach = bars.table["iteration"].max(), other.table["iteration"].max()
    return isinstance(last, int) and isinstance(reach, int) and last <= reach


def _rank(run: Run) -> int:
    used = run.get("step_time_source")
    if used in STEP_TIME_PRECEDENCE:
        return STEP_TIME_PRECEDENCE.index(str(used))
    return len(STEP_TIME_PRECEDENCE)


def _uncovered(extra: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """The records of `extra` whose iteration no record of `table` covers (a record covers
    the `interval` iterations up to its own): filling gaps never counts a step twice."""
    if extra.height == 0 or table.height == 0:
        return extra
    spans = table.select("iteration", first=pl.col("iteration") - pl.col("interval") + 1).sort(
        "iteration"
    )
    found = extra.sort("iteration").join_asof(
        spans.rename({"iteration": "covering"}),
        left_on="iteration",
        right_on="covering",
        strategy="forward",
    )
    keep = pl.col("first").is_null() | (pl.col("iteration") < pl.col("first"))
    return found.filter(keep).drop("covering", "first").select(extra.columns)


def _combined(views: list[Run]) -> Run:
    ordered = sorted(views, key=_rank)
    best = ordered[0]
    table = best.table
    columns = table.columns
    for other in ordered[1:]:
        filled = table.join(
            other.table.unique("iteration", keep="first"),
            on="iteration",
            how="left",
            suffix="_other",
            maintain_order="left",
        )
        table = filled.select(
            "iteration",
            *[
                pl.coalesce(name, f"{name}_other").alias(name)
                for name in columns
                if name != "iteration"
            ],
        ).select(columns)
        extra = _uncovered(other.table.join(table, on="iteration", how="anti"), table)
        if extra.height:
            table = pl.concat([table, extra]).sort("segment", "iteration", maintain_order=True)
    config: dict[str, ConfigValue] = {}
    for view in ordered:
        for key, value in view.config.items():
            config.setdefault(key, value)
    metrics = concat([view.metrics for view in ordered])
    metrics = metrics.filter(pl.struct("iteration", "name").is_first_distinct())
    names = ", ".join(view.sources[0].path for view in ordered if view.sources)
    warnings = [w for view in ordered for w in view.warnings]
    warnings.append(
        f"{names}: views of one run (the same iterations and losses), combined record by record;"
        f" step times from {best.sources[0].path if best.sources else 'the first'}"
    )
    return Run(
        framework=best.framework,
        config=config,
        table=table,
        metrics=metrics,
        sources=[source for view in ordered for source in view.sources],
        warnings=warnings,
        endings=sum((view.endings for view in ordered), Endings()),
    )
