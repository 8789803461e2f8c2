"""The step of each dict the Trainer printed on stdout: the dicts carry none themselves.

Sources, in the order they are trusted (a counter is a fact; a count of dicts is not):

1. the training progress bar printed just before the dict: the Trainer moves the bar to the
   global step (`ProgressCallback.on_step_end`) before it logs (`_maybe_log_save_evaluate`),
   so `  3%|▎  | 6/200 [00:05<02:51, 1.13it/s]{'loss': ...}` is step 6;
2. the dict's own `step` (or `global_step`) key, where a callback prints one;
3. its `epoch` times the optimizer steps per epoch, from the `***** Running training *****`
   block (`Num examples`, the per-device batch, `Gradient Accumulation steps`, the total
   batch), when the printed epoch's rounding leaves exactly one whole step;
4. the last resort: the k-th training log is step k·L, the logging interval L being the one
   the number of logs and the total steps fix. A log with lines cut out defeats it, so the
   run says it was assumed.

A counter whose steps do not increase from one training log to the next within a launch (the
bar printed to stderr, buffered apart from the dicts on stdout) is not used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

# a callback's own step; ms-swift's `done/total` counter (read as its count by stdout._value)
STEP_KEYS = ("step", "global_step", "global_step/max_steps")
HOW = {
    "bar": "the progress bar printed before each",
    "step": "their own step key",
    "epoch": "their epoch times the steps per epoch of the training block",
}


@dataclass(frozen=True)
class Numbered:
    """The long entry frame (entry, step, line, key, value), notes for Run.warnings, and
    whether the steps are the run's (False: numbered 1, 2, 3, ...)."""

    long: pl.DataFrame
    notes: list[str]
    numbered: bool


def numbered_entries(
    found: dict[str, pl.DataFrame],
    total_steps: int | None,
    steps_per_epoch: float | None = None,
) -> Numbered:
    """Every dict entry of `stdout.scan`'s frames with its step (see the module docstring).
    Evaluation entries take the step of the training log before them, the final metrics the
    total steps. Copies printed by several ranks are kept once."""
    order = pl.col("line") * 10_000 + pl.col("piece")
    dicts = found["dicts"].with_columns(order=order)
    entries = dicts.group_by("order", maintain_order=True).agg(
        pl.col("key"), pl.col("value"), pl.col("line").first()
    )
    launches = (
        found["starts"]
        .select(order=order)
        .sort("order")
        .with_row_index("launch", offset=1)
        .with_columns(pl.col("launch").cast(pl.Int64))
    )
    offsets = (
        found["resumes"]
        .select(order=order, step="step")
        .sort("order")
        .join_asof(launches, on="order", strategy="backward")
        .select(pl.col("launch").fill_null(0), resumed_from="step")
        .unique("launch", keep="first")
    )
    entries = entries.sort("order").join_asof(launches, on="order", strategy="backward")
    entries = entries.with_columns(pl.col("launch").fill_null(0)).join(
        offsets, on="launch", how="left", maintain_order="left"
    )
    entries = entries.with_columns(pl.col("resumed_from").fill_null(0))
    # A copy: the same keys and values as an entry before it in the same launch.
    entries = entries.filter(pl.struct("launch", "key", "value").is_first_distinct())
    is_train = pl.col("key").list.contains("loss")
    entries = entries.with_columns(
        is_train=is_train, k=is_train.cast(pl.Int64).cum_sum().over("launch")
    )
    entries = entries.join(_own_keys(dicts), on="order", how="left", maintain_order="left")
    entries = _with_bar_steps(entries, found["bars"], launches, total_steps)
    counters = {
        "bar": pl.col("bar_n") if "bar_n" in entries.columns else None,
        "step": pl.col("own_step"),
        "epoch": _epoch_steps(steps_per_epoch),
    }
    notes: list[str] = []
    train_step, how = None, None
    for name, counter in counters.items():
        if counter is None:
            continue
        steps = entries.select(counter.alias("s"), "is_train", "launch")
        if _increasing(steps):
            train_step, how = counter, name
            break
        if name == "bar" and steps.filter("is_train")["s"].null_count() == 0:
            notes.append(
                "the progress bar printed before stdout's logged dicts does not advance from"
                " one to the next (stdout and stderr buffered apart): its counter is not used"
                " to number them"
            )
    interval = None
    if train_step is None:
        train = entries.filter("is_train")
        if train.height:
            last = train.filter(pl.col("launch") == train["launch"].max())
            interval = _logging_interval(last.height, total_steps, int(last["resumed_from"][0]))
        if train.height and interval is None:
            notes.append(
                "stdout's logged dicts carry no step number and the total steps do not fix the"
                " logging interval: records are numbered 1, 2, 3, ... (the output_dir's"
                " trainer_state.json has the steps)"
            )
        elif train.height:
            notes.append(
                f"assumption: stdout's logged dicts carry no step (no progress bar before them,"
                f" no step or epoch key that places them): the k-th training log of a launch is"
                f" taken as step k x {interval}, the one logging interval that {last.height}"
                f" logs in {total_steps} steps fit; lines cut out of the log would shift them"
            )
        size = interval or 1
        # without the interval the records are only numbered, a resume's offset means nothing
        offset = pl.col("resumed_from") // size if interval else pl.lit(0)
        train_step = (offset + pl.col("k")) * size
    final = pl.col("key").list.contains("train_runtime") & ~pl.col("is_train")
    # evaluations (and a launch's entries before its first training log) take the step of
    # the training log before them
    logged = (
        pl.when("is_train")
        .then(train_step)
        .forward_fill()
        .over("launch")
        .fill_null(pl.col("resumed_from"))
    )
    total = pl.lit(total_steps, dtype=pl.Int64)
    entries = entries.with_columns(
        step=pl.when(final & total.is_not_null()).then(total).otherwise(logged).cast(pl.Int64),
        entry=pl.int_range(pl.len(), dtype=pl.Int64),
    )
    if how is not None and how != "bar":
        notes.append(f"stdout's logged dicts are placed at their steps by {HOW[how]}")
    long = entries.explode(["key", "value"]).select("entry", "step", "line", "key", "value")
    return Numbered(long, notes, how is not None or interval is not None)


def _own_keys(dicts: pl.DataFrame) -> pl.DataFrame:
    """Per dict (`order`), its own step key and its epoch, where it has them."""
    step = (
        dicts.filter(pl.col("key").is_in(STEP_KEYS))
        .group_by("order")
        .agg(own_step=pl.col("value").first())
    )
    epoch = (
        dicts.filter(pl.col("key") == "epoch").group_by("order").agg(epoch=pl.col("value").first())
    )
    return step.join(epoch, on="order", how="full", coalesce=True).with_columns(
        pl.col("own_step").round(0).cast(pl.Int64)
    )


def _with_bar_steps(
    entries: pl.DataFrame, bars: pl.DataFrame, launches: pl.DataFrame, total_steps: int | None
) -> pl.DataFrame:
    """`entries` with `bar_n`, the training bar's counter when each was written (no column
    when no training bar was printed).

    The Trainer moves the bar to step N, then logs; tqdm draws an update at most every 0.1 s
    and redraws the bar after a written line. So the counter printed last before a dict is N
    or, when the update to N was not drawn, lower; the one printed first after it is N or,
    stdout and stderr reaching the file in another order, higher. Where the two differ for
    some dicts, the largest interval L with a multiple in each [before, after] (the logging
    interval) places them at that multiple; else the counter printed before is taken.
    """
    main = training_bars(bars, total_steps)
    if main.height == 0:
        return entries
    main = (
        main.select(order=pl.col("line") * 10_000 + pl.col("piece"), n="n")
        .sort("order")
        .join_asof(launches.rename({"launch": "bar_launch"}), on="order", strategy="backward")
        .with_columns(pl.col("bar_launch").fill_null(0), bar=pl.col("order"))
    )
    joined = entries.join_asof(
        main.rename({"n": "before", "bar_launch": "before_launch", "bar": "before_bar"}),
        on="order",
        strategy="backward",
    ).join_asof(
        main.rename({"n": "after", "bar_launch": "after_launch", "bar": "after_bar"}),
        on="order",
        strategy="forward",
    )
    # the bar printed first after a dict is its redraw only if it is not the one printed
    # last before the next training dict (a log of the screen's last state keeps no redraws)
    next_before = pl.when("is_train").then("before_bar").shift(-1).backward_fill()
    redraw = pl.col("after_bar") != next_before.fill_null(-1)
    before = pl.when(pl.col("before_launch") == pl.col("launch")).then("before")
    after = pl.when((pl.col("after_launch") == pl.col("launch")) & redraw).then("after")
    joined = joined.with_columns(low=pl.coalesce(before, after)).with_columns(
        high=pl.max_horizontal(pl.coalesce(after, before), "low")
    )
    low, high = joined["low"], joined["high"]
    train = joined.select(pl.col("is_train") & pl.col("low").is_not_null())["is_train"]
    size = _interval_between(low.filter(train), high.filter(train))
    placed = (
        ((pl.col("low") + size - 1) // size * size).clip(upper_bound=pl.col("high"))
        if size > 1
        else pl.col("low")
    )
    return joined.with_columns(bar_n=placed).drop(
        "before", "after", "before_launch", "after_launch", "before_bar", "after_bar", "low", "high"
    )


def _interval_between(low: pl.Series, high: pl.Series) -> int:
    """The largest L > 1 with a multiple in every [low, high]; 1 when the counters agree
    everywhere or no such L exists. A first-step log (`logging_first_step`, step 1) is left
    out of the fit; one log alone fixes no interval.

    Two logs of one launch are at least L steps apart, so L is at most the smallest rise from
    one log's `low` to the next one's `high`: the search starts there (not at the counter,
    which can be in the billions), and tests candidates a block at a time.
    """
    if not (low != high).any():
        return 1
    kept = high > 1
    low, high = low.filter(kept).cast(pl.Int64), high.filter(kept).cast(pl.Int64)
    if low.len() < 2:
        # one log: any L up to its `high` has a multiple there, the fit says nothing
        return 1
    rises = high.slice(1) - low.slice(0, low.len() - 1)
    rises = rises.filter(rises > 0)  # a resumed launch starts lower; a repeated log adds nothing
    largest = int(min(high.min(), rises.min()) if rises.len() else high.min())  # type: ignore[arg-type]
    # the tightest counters first: they rule out most candidates
    tight = (high - low).arg_sort()
    bounds = list(zip(low.gather(tight).to_list(), high.gather(tight).to_list(), strict=True))
    for top in range(largest, 1, -_CANDIDATE_BLOCK)[:_MAX_BLOCKS]:
        sizes = pl.int_range(max(top - _CANDIDATE_BLOCK, 1) + 1, top + 1, eager=True).reverse()
        for lo, hi in bounds:
            sizes = sizes.filter(hi // sizes * sizes >= lo)
            if sizes.len() <= _FEW:
                break
        # the few left, largest first, each against every log at once
        for size in sizes.to_list():
            if (high // size * size >= low).all():
                return int(size)
    # counters that agree on no interval over millions of candidates: each log is placed at
    # the counter printed before it
    return 1


_CANDIDATE_BLOCK = 1 << 16
_MAX_BLOCKS = 64
_FEW = 16


def training_bars(bars: pl.DataFrame, total_steps: int | None) -> pl.DataFrame:
    """The training bar's updates: those over the run's total steps, else over the largest
    total printed (an evaluation bar counts batches of the evaluation set)."""
    if bars.height == 0:
        return bars
    total = total_steps if total_steps else bars["total"].max()
    return bars.filter((pl.col("total") == total) & (pl.col("n") > 0))


def _epoch_steps(steps_per_epoch: float | None) -> pl.Expr | None:
    """The one whole step within the printed epoch's rounding (`round(epoch, 2)` by
    transformers 4's ProgressCallback, `.4g` by 5's), times the steps per epoch."""
    if not steps_per_epoch:
        return None
    epoch = pl.col("epoch")
    # half a unit of the last decimal printed: at least two decimals (`1.0` is 1.00 rounded),
    # more where the value has them (transformers 5's `.4g`, PrinterCallback's full float)
    half_unit = pl.lit(0.5e-7)
    for decimals in range(6, 1, -1):
        exact = (epoch - epoch.round(decimals)).abs() < 1e-9
        half_unit = pl.when(exact).then(0.5 * 10.0**-decimals).otherwise(half_unit)
    low = ((epoch - half_unit) * steps_per_epoch).ceil()
    high = ((epoch + half_unit) * steps_per_epoch).floor()
    return pl.when(low == high).then(low).cast(pl.Int64)


def _increasing(steps: pl.DataFrame) -> bool:
    """Every training entry has a step, and within a launch each is above the one before."""
    train = steps.filter("is_train")
    if train.height == 0 or train["s"].null_count():
        return False
    rises = train.select((pl.col("s").diff().over("launch").fill_null(1) > 0).all()).item()
    return bool(rises) and bool(train["s"].min() > 0)  # type: ignore[operator]


def _logging_interval(logs: int, total_steps: int | None, resumed_from: int = 0) -> int | None:
    """The L with floor(total / L) - floor(resumed_from / L) == logs, when exactly one whole
    number fits (for a resumed launch, preferring one that divides the checkpoint's step)."""
    if not total_steps or logs <= 0 or resumed_from >= total_steps:
        return None
    if resumed_from == 0:
        smallest, largest = total_steps // (logs + 1) + 1, total_steps // logs
        return largest if smallest == largest else None
    fits: list[tuple[int, int]] = []  # ranges [first, last] of L that fit
    dividing: list[int] = []  # the fits that divide the checkpoint's step
    # an L up to (total - resumed) / (logs + 1) has more multiples than logs
    steps = total_steps - resumed_from
    for first, last, count, below in _quotient_blocks(
        total_steps, resumed_from, max(1, steps // (logs + 1)), steps // logs + 1
    ):
        if count != logs:
            continue
        fits.append((first, last))
        # within a block resumed_from // L is constant (`below`): one L at most divides it
        if below and resumed_from % below == 0 and first <= resumed_from // below <= last:
            dividing.append(resumed_from // below)
    if sum(last - first + 1 for first, last in fits) == 1:
        return fits[0][0]
    # checkpoints are saved every save_steps, in practice a multiple of the interval
    return dividing[0] if len(dividing) == 1 else None


def _quotient_blocks(
    total: int, resumed: int, first: int, last: int
) -> Iterator[tuple[int, int, int, int]]:
    """The ranges [a, b] of L in [first, last] over which total // L and resumed // L are both
    constant, with total // L - resumed // L and resumed // L: at most 2·(√total + √resumed)
    ranges, where testing each L would take a step per L (billions for a long run)."""
    size = first
    while size <= last:
        above, below = total // size, resumed // size
        end = min(
            last,
            total // above if above else last,
            resumed // below if below else last,
        )
        yield size, end, above - below, below
        size = end + 1
