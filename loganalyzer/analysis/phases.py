"""Which per-phase timer grew the most at a slow step, with the timers' hierarchy respected.

Timers come from the long metrics table as `timer/<phase>` (one value, ms) or
`timer/<phase>/max` and `timer/<phase>/min` (across ranks). The max across ranks bounds the
step, so a phase's value at an iteration is the largest of what was logged for it (`/min`
ignored). Its growth is its value minus its median over the run.

Timers nest, and which ones a log holds depends on the framework and the timer level:
Megatron-LM at its default level 1 prints `forward-backward` beside `optimizer` and the
`optimizer-*` steps, at level 2 also the compute, send/receive and batch timers that
`forward-backward` encloses. Growth is therefore compared among siblings only: the top-level
timers (those whose parent was not logged) compete, and the winner's growth is then followed
down to the child that grew the most (`phase_detail`), when one explains at least
`CHILD_SHARE` of it. `ROOTS` enclose the whole step and are named only when nothing else was
logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import polars as pl

from loganalyzer.analysis.medians import grouped_median
from loganalyzer.model import Metrics
from loganalyzer.spill import collect, metric_names, slices

ROOTS = frozenset({"interval-time", "iteration-time", "train-step"})
# Parent of each enclosed timer, by name, for Megatron-LM (2021 to core 0.x), Megatron-DeepSpeed
# and DeepSpeed's engine timers (`_` and `-` spellings are both matched).
PARENT = {
    **dict.fromkeys(
        (
            "forward-compute",
            "backward-compute",
            "batch-generator",
            "forward-recv",
            "forward-send",
            "backward-recv",
            "backward-send",
            "forward-send-forward-recv",
            "forward-send-backward-recv",
            "backward-send-forward-recv",
            "backward-send-backward-recv",
            "forward-backward-send-forward-backward-recv",
            "all-grads-sync",
            "layernorm-grads-all-reduce",
            "embedding-grads-all-reduce",
            "conditional-embedding-all-reduce",
        ),
        "forward-backward",
    ),
    **dict.fromkeys(
        (
            "optimizer-copy-to-main-grad",
            "optimizer-unscale-and-check-inf",
            "optimizer-clip-main-grad",
            "optimizer-count-zeros",
            "optimizer-inner-step",
            "optimizer-copy-main-to-model-params",
        ),
        "optimizer",
    ),
    **dict.fromkeys(
        ("backward-inner", "backward-allreduce", "backward-reduce-scatter"), "backward"
    ),
}
# Timers Megatron-LM runs outside an iteration, printed at the iteration after which they ran
# (a save, an evaluation) or once per launch (its start-up): they take no share of a step.
OUTSIDE_STEP = frozenset(
    {
        "evaluate",
        "save-checkpoint",
        "save-checkpoint-non-persistent",
        "load-checkpoint",
        "model-and-optimizer-setup",
        "train/valid/test-data-iterators-setup",
    }
)
# A child must explain this share of its parent's growth to be named as the detail.
CHILD_SHARE = 0.5

SCHEMA = {
    "iteration": pl.Int64,
    "phase": pl.String,
    "phase_delta_ms": pl.Float64,
    "phase_detail": pl.String,
    "detail_delta_ms": pl.Float64,
}


def timer_phase(name: str) -> str | None:
    """`timer/<phase>` or `timer/<phase>/max` → `<phase>`; None for other metrics and `/min`."""
    if not name.startswith("timer/") or name.endswith("/min"):
        return None
    return name.removeprefix("timer/").removesuffix("/max")


def timer_phases(names: Iterable[str]) -> dict[str, str]:
    """The phase of each timer name among `names` (a table's metric names; `/min` names left
    out)."""
    return {name: phase for name in names if (phase := timer_phase(name)) is not None}


@dataclass(frozen=True)
class Timers:
    """A run's timers as slow steps, causes and the waterfall all read them: the phase of
    each timer name, and each phase's median over the run (`timer_medians`). Read once per
    run (`read_timers`): the medians take several passes over the long table."""

    phase_of: dict[str, str]
    medians: pl.DataFrame


def read_timers(metrics: Metrics, names: Iterable[str]) -> Timers:
    """The timers of `metrics`, whose metric names are `names`."""
    phase_of = timer_phases(names)
    return Timers(phase_of, timer_medians(metrics, phase_of))


def _timer_rows(frame: pl.LazyFrame, phase_of: Mapping[str, str]) -> pl.LazyFrame:
    """The timer rows of `frame` with an iteration, in no set order: `iteration`, `phase` (an
    Enum of the phases, in name order: one byte a row, not the text), `value`.

    The phase is found by a join with the (name, phase) pairs, which polars' streaming engine
    runs a batch at a time as it does the string operations that give it, in half their
    time (0.18 against 0.36 s for each pass over the 10 M timer rows of the 1 GB 2021-format
    bench log); `replace_strict` would make it read the whole table into memory."""
    pairs = pl.LazyFrame(
        {"name": list(phase_of), "phase": list(phase_of.values())},
        schema={"name": pl.Categorical, "phase": pl.Enum(sorted(set(phase_of.values())))},
    )
    return (
        frame.filter(pl.col("iteration").is_not_null())
        .join(pairs, on="name", how="inner")
        .select("iteration", "phase", "value")
    )


Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def _per_iteration(rows: Frame) -> Frame:
    """A phase's value at an iteration: the largest logged there (ranks' copies, a restart)."""
    return rows.group_by("iteration", "phase").agg(pl.col("value").max())


def timer_values(metrics: Metrics, phase_of: Mapping[str, str] | None = None) -> pl.DataFrame:
    """Per iteration and phase, the largest logged value (ms): columns `iteration`, `phase`
    (an Enum of the phases read, in name order), `value`. Start-up timers (no iteration)
    are left out. `phase_of` (`timer_phases` of the names read) reads only some timers; by
    default, every one.

    This table is as long as the per-iteration table times the phases: it is aggregated a
    slice of the long table at a time (a group-by over the whole holds several times its
    result while it runs); iterations whose timers fall in two slices (or were logged again
    after a restart) are aggregated once more. A run of many iterations is better read as
    `timer_means`."""
    if phase_of is None:
        phase_of = timer_phases(metric_names(metrics))
    parts = [collect(_per_iteration(_timer_rows(part, phase_of))) for part in slices(metrics)]
    if not parts:
        return collect(_timer_rows(metrics.lazy(), phase_of))
    values = pl.concat(parts, rechunk=False)
    split = in_several([part.get_column("iteration").unique() for part in parts])
    if split.is_empty():
        return values
    again = pl.col("iteration").is_in(split.implode())
    merged = _per_iteration(values.filter(again))
    return pl.concat([values.filter(~again), merged], rechunk=False)


def logged_phases(metrics: Metrics, phase_of: Mapping[str, str]) -> set[str]:
    """The phases logged at some iteration (start-up timers have none); `phase_of` is
    `timer_phases` of the table's metric names."""
    rows = _timer_rows(metrics.lazy(), phase_of)
    found = collect(rows.select(pl.col("phase").unique()))["phase"]
    return set(found.cast(pl.String).to_list())


def timer_means(metrics: Metrics, phase_of: Mapping[str, str], buckets: int) -> pl.DataFrame:
    """`timer_values` of the timers of `phase_of` (`timer_phases` of the names read),
    averaged over `buckets` runs of as many consecutive iterations (by rank) when more
    iterations than that have them: columns `iteration` (a bucket's first with the phase),
    `phase` (text), `value` (the mean of the bucket's per-iteration values).

    The per-iteration values are never all held (a report's chart of a 1 GB 2021-format
    log's 12 M took 1.8 GB): the long table is read a slice at a time, once for the
    iterations with timers and once for the buckets' sums; an iteration whose timers fall in
    two slices (or were logged again after a restart) is read on its own."""
    parts = slices(metrics)
    distinct = [
        # shrunk, as they are held through every slice (see `_repeated`)
        collect(_timer_rows(part, phase_of).select(pl.col("iteration").unique()))
        .get_column("iteration")
        .shrink_to_fit()
        for part in parts
    ]
    ordered = pl.concat(distinct).sort() if distinct else pl.Series("iteration", [], pl.Int64)
    del distinct
    iterations = ordered.filter((ordered != ordered.shift(1)).fill_null(True))
    if iterations.len() <= buckets:
        values = timer_values(metrics, phase_of)
        return values.with_columns(pl.col("phase").cast(pl.String))
    split = _repeats(ordered)
    del ordered

    def sums(values: pl.DataFrame) -> pl.DataFrame:
        """Per bucket and phase, the first iteration, the sum of the values and their count."""
        rank = iterations.search_sorted(values["iteration"], side="left").cast(pl.Int64)
        return (
            values.with_columns(bucket=rank * buckets // iterations.len())
            .group_by("bucket", "phase")
            .agg(pl.col("iteration").min(), pl.col("value").sort().sum(), count=pl.len())
        )

    again = pl.col("iteration").is_in(split.implode())
    unsplit = [_timer_rows(part, phase_of).filter(~again) for part in parts]
    split_rows = _timer_rows(metrics.lazy(), phase_of).filter(again)
    partial = [sums(collect(_per_iteration(rows))) for rows in [*unsplit, split_rows]]
    return (
        pl.concat(partial)
        .group_by("bucket", "phase")
        .agg(
            pl.col("iteration").min(),
            (pl.col("value").sort().sum() / pl.col("count").sum()).alias("value"),
        )
        .sort("bucket", "phase")
        .select("iteration", pl.col("phase").cast(pl.String), "value")
    )


def timer_medians(metrics: Metrics, phase_of: Mapping[str, str]) -> pl.DataFrame:
    """Each phase's median over the run of its per-iteration value (`timer_values`):
    columns `phase` (text, in name order) and `median`; no rows when no timers were logged.
    `phase_of` is `timer_phases` of the table's metric names.

    Taken without holding the per-iteration values: an iteration logs each phase once,
    except where ranks' copies or a restart logged it again (found a slice at a time); only
    those iterations are aggregated in memory, and the medians are counted in passes over
    the rows (`grouped_median`)."""
    rows = _timer_rows(metrics.lazy(), phase_of)
    repeated = _repeated(metrics, phase_of)
    if not repeated.is_empty():
        again = pl.col("iteration").is_in(repeated.implode())
        merged = collect(_per_iteration(rows.filter(again)))
        rows = pl.concat([rows.filter(~again), merged.lazy()])
    medians = grouped_median(rows.select("phase", "value"), ["phase"])
    return medians.sort("phase").select(pl.col("phase").cast(pl.String), median="value")


# Bytes a timer row's key takes while `_repeated` sorts a slice (the key, its sorted copy and
# the iterations taken back from it), against `spill.GROUP_BYTES` a row of a group-by: its
# slices are about five times longer, and so five times fewer.
KEY_ROW_BYTES = 24


def _repeated(metrics: Metrics, phase_of: Mapping[str, str]) -> pl.Series:
    """Iterations with a phase logged more than once: twice within a slice, or in two slices
    (which may have it once each: those are aggregated again for nothing, harmlessly).

    Each slice's keys are sorted and compared with their neighbours, not grouped: a group-by
    holds about 100 bytes a key, so its slices would be five times smaller and their queries
    five times as many (on the 1 GB 2021-format log, 177 queries in 1.6 s against 0.8 s).
    A key is one integer, iteration * phases + the phase's number: sorted as one column, not
    as two (1.10 against 0.69 s on that log)."""
    phases = len(set(phase_of.values()))
    within: list[pl.Series] = []
    seen: list[pl.Series] = []
    for part in slices(metrics, row_bytes=KEY_ROW_BYTES) if phases else ():
        keys = _sorted_keys(_timer_rows(part, phase_of), phases)
        iteration = (keys // phases).cast(pl.Int64).alias("iteration")
        same_iteration = iteration == iteration.shift(1)
        # shrunk, as they are held through every slice: unshrunk, these small filter results
        # kept about ten times their size resident (the 4 GB 2021-format bench log: +374 MiB
        # in this loop, +64 MiB shrunk)
        within.append(iteration.filter(keys == keys.shift(1)).shrink_to_fit())
        seen.append(iteration.filter(~same_iteration.fill_null(False)).shrink_to_fit())
    if not seen:
        return pl.Series("iteration", [], dtype=pl.Int64)
    repeated: pl.Series = pl.concat([*within, in_several(seen)])
    return repeated.unique()


def _sorted_keys(rows: pl.LazyFrame, phases: int) -> pl.Series:
    """The timer rows' keys, iteration * phases + the phase's number, sorted: 64-bit, unless an
    iteration is so large (numbers of up to 18 digits are read) that its key would wrap
    around, then 128-bit (slower to compute and sort)."""
    iteration, phase = pl.col("iteration"), pl.col("phase").to_physical()
    fits = iteration.abs() <= (2**63 - 1) // phases - phases
    key = pl.when(fits).then(iteration * phases + phase.cast(pl.Int64))
    keys: pl.Series = collect(rows.select(key.alias("key")))["key"]
    if keys.null_count():
        wide = iteration.cast(pl.Int128) * phases + phase.cast(pl.Int128)
        keys = collect(rows.select(wide.alias("key")))["key"]
    ordered: pl.Series = keys.sort()
    return ordered


def in_several(distinct: list[pl.Series]) -> pl.Series:
    """The values found in more than one of `distinct`, series whose values are each distinct
    (an iteration per slice of the long table), in order.

    Found by sorting, as values equal to the one before: `is_duplicated` over them all
    groups every value, and held about 80 MB for a million iterations while it ran."""
    return _repeats(pl.concat(distinct).sort())


def _repeats(ordered: pl.Series) -> pl.Series:
    """The values of sorted `ordered` found more than once, each once, in order."""
    found: pl.Series = ordered.filter(ordered == ordered.shift(1)).unique(maintain_order=True)
    return found


def timer_values_at(
    metrics: Metrics, iterations: pl.Series, phase_of: Mapping[str, str]
) -> pl.DataFrame:
    """`timer_values` at `iterations` only (few: the slow ones), with `phase` as text;
    `phase_of` is `timer_phases` of the table's metric names."""
    rows = _timer_rows(metrics.lazy(), phase_of).filter(
        pl.col("iteration").is_in(iterations.unique().implode())
    )
    return collect(_per_iteration(rows)).with_columns(pl.col("phase").cast(pl.String))


def parent_of(phase: str, logged: set[str]) -> str | None:
    """The logged timer that encloses `phase`, if any."""
    parent = PARENT.get(phase.replace("_", "-"))
    if parent is not None:
        for spelling in (parent, parent.replace("-", "_")):
            if spelling in logged:
                return spelling
    if phase not in ROOTS:
        return next((root for root in sorted(ROOTS) if root in logged), None)
    return None


def phase_growth(metrics: Metrics, iterations: pl.Series, timers: Timers) -> pl.DataFrame:
    """For each of `iterations` with timers: the top-level `phase` that grew the most, its
    growth `phase_delta_ms`, and the child it is attributed to (`phase_detail`,
    `detail_delta_ms`) where its children were logged. `timers` are the run's (`read_timers`)."""
    medians = timers.medians
    if medians.is_empty() or iterations.is_empty():  # no pass over the long table for none
        return pl.DataFrame(schema=SCHEMA)
    logged = set(medians["phase"].to_list())
    parents = {phase: parent_of(phase, logged) for phase in logged}
    if logged - ROOTS:
        parents.update({root: "" for root in ROOTS & logged})  # roots never compete
    growth = (
        timer_values_at(metrics, iterations, timers.phase_of)
        .join(medians, on="phase", how="left", maintain_order="left")
        .select(
            "iteration",
            "phase",
            "value",
            (pl.col("value") - pl.col("median")).alias("delta"),
        )
        .with_columns(
            pl.col("phase")
            .replace_strict(parents, default=None, return_dtype=pl.String)
            .alias("parent")
        )
    )
    top = _largest(growth.filter(pl.col("parent").is_null()), "iteration")
    children = _largest(growth.filter(pl.col("parent").is_not_null()), "iteration", "parent")
    detail = children.filter(pl.col("delta") > 0).select(
        "iteration",
        pl.col("parent").alias("phase"),
        pl.col("phase").alias("phase_detail"),
        pl.col("delta").alias("detail_delta_ms"),
    )
    explained = pl.col("detail_delta_ms") >= CHILD_SHARE * pl.col("phase_delta_ms")
    return (
        top.select("iteration", "phase", pl.col("delta").alias("phase_delta_ms"))
        .join(detail, on=["iteration", "phase"], how="left")
        .with_columns(
            pl.when(explained).then("phase_detail").alias("phase_detail"),
            pl.when(explained).then("detail_delta_ms").alias("detail_delta_ms"),
        )
        .sort("iteration")
        .select(list(SCHEMA))
    )


def _largest(frame: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """Per group of `keys`, the row with the largest `delta` (ties: the first name)."""
    return (
        frame.sort([*keys, "delta", "phase"], descending=[False] * len(keys) + [True, False])
        .group_by(*keys, maintain_order=True)
        .first()
    )
