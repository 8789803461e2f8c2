"""The Trainer's log entries (one `Trainer.log` call each: a training log, an evaluation, the
final metrics), as a long frame, and what the per-iteration table takes from them.

Both readers produce the same long frame, (entry, step, line, key, value): the output_dir's
`log_history` carries each entry's `step`; stdout's dicts do not, and the stdout reader
numbers them first.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.model import conform_metrics, conform_table

ENTRY_SCHEMA = {
    "entry": pl.Int64,
    "step": pl.Int64,
    "line": pl.Int64,
    "key": pl.String,
    "value": pl.Float64,
}

# Entry keys that have a column of the per-iteration table.
COLUMNS = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "lr"}

# Step-time sources, best first. Event-file wall times (an output_dir's runs/) come first
# once they are read; then the cumulative `train_runtime` that transformers >= 4.57 logs with
# every entry; then tqdm's elapsed time; else the run's average.
STEP_TIME_SOURCES = {
    "train_runtime": "the cumulative train_runtime of each logged entry",
    "train_runtime_printed": (
        "the cumulative train_runtime of each logged entry as printed (transformers 5 rounds"
        " it to 4 significant digits)"
    ),
    "tqdm": (
        "the progress bar at each logged step: its own rate where its elapsed clock (whole"
        " seconds) agrees with it, else the elapsed time (1 s resolution)"
    ),
    "average": (
        "the run's average (train_runtime / steps) on every record: MFU holds overall, but"
        " slow steps and stalls cannot be seen"
    ),
}


def train_entries(long: pl.DataFrame) -> pl.DataFrame:
    """One row per training log entry (those with a `loss`), keys as columns, by step."""
    losses = long.filter(pl.col("key") == "loss")["entry"]
    entries = long.filter(pl.col("entry").is_in(losses.implode()))
    if entries.height == 0:
        return pl.DataFrame(schema={"entry": pl.Int64, "step": pl.Int64, "line": pl.Int64})
    wide = entries.pivot(
        on="key", index=["entry", "step", "line"], values="value", aggregate_function="first"
    )
    return wide.sort("entry")


def iteration_table(wide: pl.DataFrame, step_times: pl.Series | None, source: str) -> pl.DataFrame:
    """The per-iteration table: a step that does not increase starts a segment (a resume);
    a record covers the steps since the one before it."""
    if wide.height == 0:
        return conform_table(pl.DataFrame())
    frame = wide.select(
        "line",
        iteration="step",
        **{column: key for key, column in COLUMNS.items() if key in wide.columns},
    )
    if step_times is not None:
        frame = frame.with_columns(step_time_s=step_times)
    new_segment = pl.col("iteration") <= pl.col("iteration").shift(1)
    frame = frame.with_columns(segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32))
    # A gap wider than the logging interval means entries are missing (a cut file), not
    # a longer average: a record covers at most the usual interval.
    gap = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = gap.drop_nulls().mode().min().over("segment")
    first = pl.min_horizontal(typical, pl.col("iteration"))
    covered = pl.coalesce(pl.min_horizontal(gap, typical), first, pl.lit(1))
    return conform_table(
        frame.with_columns(
            interval=covered.clip(lower_bound=1).cast(pl.Int64),
            source=pl.lit(source),
        )
    )


def step_times(
    wide: pl.DataFrame, runtime: float | None, steps: int | None, printed: bool = False
) -> tuple[pl.Series | None, str | None]:
    """Seconds per step of each training entry, and which source gave them (a key of
    STEP_TIME_SOURCES): the cumulative runtime the entries carry, else the run's average."""
    if "train_runtime" in wide.columns and wide["train_runtime"].null_count() == 0:
        # train_runtime restarts with each launch: differences within a segment, and the
        # first record of a segment covers the usual logging interval (or its step).
        segment = (pl.col("step") <= pl.col("step").shift(1)).fill_null(False).cum_sum()
        gap = (pl.col("step") - pl.col("step").shift(1)).over(segment)
        elapsed = (pl.col("train_runtime") - pl.col("train_runtime").shift(1)).over(segment)
        first = pl.min_horizontal(gap.drop_nulls().mode().min(), pl.col("step"))
        times = wide.select(
            pl.when(gap > 0)
            .then(elapsed / gap)
            .otherwise(pl.col("train_runtime") / first)
            .alias("step_time_s")
        ).to_series()
        return times, "train_runtime_printed" if printed else "train_runtime"
    if runtime and steps:
        return pl.Series("step_time_s", [runtime / steps] * wide.height), "average"
    return None, None


def other_metrics(long: pl.DataFrame, train: pl.DataFrame, source: str) -> pl.DataFrame:
    """Every entry value without a column, to the long table as `hf/<key>` at the entry's
    step; an evaluation's `eval_*` values as `validation/eval_*`, the name every parser gives
    an evaluation (the analysis takes them as evidence of one at that step)."""
    kept = long.filter(
        ~pl.col("key").is_in(list(COLUMNS)) | ~pl.col("entry").is_in(train["entry"].implode())
    )
    evaluation = pl.col("key").str.starts_with("eval_")
    prefix = pl.when(evaluation).then(pl.lit("validation/")).otherwise(pl.lit("hf/"))
    return conform_metrics(
        kept.select(
            iteration="step",
            name=(prefix + pl.col("key")).cast(pl.Categorical),
            value="value",
            source=pl.lit(source).cast(pl.Categorical),
            rank=pl.lit(None, dtype=pl.Int32),
            line="line",
        )
    )


def save_events(saves: pl.DataFrame, source: str | None = None) -> pl.DataFrame:
    """Checkpoint saves (`step`, `line`, `source`: a checkpoint-N folder, or the stdout line
    that says it saved one) as the long table's `event/checkpoint_save` rows, the name every
    parser gives a save."""
    where = pl.lit(source) if source is not None else pl.col("source")
    return conform_metrics(
        saves.select(
            iteration=pl.col("step").cast(pl.Int64),
            name=pl.lit("event/checkpoint_save").cast(pl.Categorical),
            value=pl.lit(1.0),
            source=where.cast(pl.Categorical),
            rank=pl.lit(None, dtype=pl.Int32),
            line=pl.col("line").cast(pl.Int64),
        )
    )
