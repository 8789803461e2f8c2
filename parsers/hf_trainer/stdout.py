"""The Trainer's console output: the logged dicts, the `***** Running training *****` block,
tqdm bars (glued with `\\r`), PEFT's `trainable params` line, whatever the launcher prefix."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.textlog import clean, line_frames, split_glued, strip_launcher

CANDIDATES = (
    "{'",
    "it/s]",
    "s/it]",
    "Running training",
    " = ",
    "trainable params",
    "TrainOutput",
    "Continuing training from global step",
)
RESUME = r"Continuing training from global step (\d+)"

# Where a record starts inside a glued line: a launcher label, a dict, a tqdm bar.
RECORD_START = r"\[default\d+\]:|\[rank\d+\]:|\{'|\s*\d{1,3}%\|"

DICT = r"^(?:[\w.-]+: )?\{'([\w/().%-]+)': "  # pdsh prefixes a node's lines with `host: `
PAIR = r"'([^']+)': '?([-+\w.]+)'?"
BAR = r"(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<"
BLOCK = {
    "Num examples": "num_train_samples",
    "Num Epochs": "num_train_epochs",
    "Instantaneous batch size per device": "micro_batch_size",
    "Total train batch size (w. parallel, distributed & accumulation)": "global_batch_size",
    "Gradient Accumulation steps": "gradient_accumulation_steps",
    "Total optimization steps": "train_iters",
    "Number of trainable parameters": "trainable_params",
}
# The block's lines, after whatever logger prefix (`[INFO|trainer.py:2405] ... >> `,
# transformers 5's `[transformers] `).
BLOCK_LINE = r"(?:^|\s)(" + "|".join(re.escape(k) for k in BLOCK) + r") = ([\d,]+)\s*$"
PEFT = r"trainable params: ([\d,]+) \|\| all params: ([\d,]+)"
TRAIN_OUTPUT = r"^TrainOutput\(global_step=(\d+)"


def scan(path: Path) -> dict[str, pl.DataFrame]:
    """The file's dict entries (long: entry order, launch, key, value), tqdm bars, facts."""
    found: dict[str, list[pl.DataFrame]] = {
        "dicts": [],
        "bars": [],
        "facts": [],
        "starts": [],
        "resumes": [],
    }
    for frame in line_frames(path):
        lines = frame.filter(pl.col("text").str.contains_any(list(CANDIDATES)))
        pieces = split_glued(lines, RECORD_START).with_columns(
            clean(strip_launcher(pl.col("text"))).str.strip_chars_end().alias("text")
        )
        text = pl.col("text")
        found["starts"].append(
            pieces.filter(text.str.contains("***** Running training *****", literal=True)).select(
                "line", "piece"
            )
        )
        found["resumes"].append(
            pieces.select("line", "piece", step=text.str.extract(RESUME).cast(pl.Int64)).drop_nulls(
                "step"
            )
        )
        found["dicts"].append(_dicts(pieces))
        found["bars"].append(_bars(pieces))
        found["facts"].append(_facts(pieces))
    return {key: pl.concat(frames) for key, frames in found.items()}


def _dicts(pieces: pl.DataFrame) -> pl.DataFrame:
    dicts = pieces.filter(pl.col("text").str.contains(DICT))
    return (
        dicts.select("line", "piece", pair=pl.col("text").str.extract_all(PAIR))
        .explode("pair")
        .with_columns(kv=pl.col("pair").str.extract_groups(PAIR))
        .select(
            "line",
            "piece",
            key=pl.col("kv").struct.field("1"),
            value=pl.col("kv").struct.field("2").cast(pl.Float64, strict=False),
        )
        .drop_nulls(["key", "value"])
    )


def _bars(pieces: pl.DataFrame) -> pl.DataFrame:
    m = pl.col("m").struct
    return (
        pieces.with_columns(m=pl.col("text").str.extract_groups(BAR))
        .filter(m.field("1").is_not_null())
        .select(
            "line",
            "piece",
            n=m.field("1").cast(pl.Int64),
            total=m.field("2").cast(pl.Int64),
            elapsed_s=(
                m.field("3").cast(pl.Int64).fill_null(0) * 3600
                + m.field("4").cast(pl.Int64) * 60
                + m.field("5").cast(pl.Int64)
            ).cast(pl.Float64),
        )
    )


def _facts(pieces: pl.DataFrame) -> pl.DataFrame:
    block = pieces.with_columns(m=pl.col("text").str.extract_groups(BLOCK_LINE)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    peft = pieces.with_columns(m=pl.col("text").str.extract_groups(PEFT)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    number = pl.col("value").str.replace_all(",", "").cast(pl.Int64, strict=False)
    return (
        pl.concat(
            [
                block.select(
                    "line",
                    key=pl.col("m").struct.field("1").replace_strict(BLOCK, return_dtype=pl.String),
                    value=pl.col("m").struct.field("2"),
                ),
                peft.select(
                    "line", key=pl.lit("peft_trainable_params"), value=pl.col("m").struct.field("1")
                ),
                peft.select(
                    "line", key=pl.lit("peft_all_params"), value=pl.col("m").struct.field("2")
                ),
            ]
        )
        .select("line", "key", value=number)
        .drop_nulls("value")
    )


def numbered_entries(
    dicts: pl.DataFrame, starts: pl.DataFrame, resumes: pl.DataFrame, total_steps: int | None
) -> tuple[pl.DataFrame, list[str], bool]:
    """The dict entries with their step. stdout dicts carry none: the k-th training log of a
    launch is step k·L, L the logging interval, which the number of training logs and the
    total steps fix (logs at L, 2L, ... up to the total). A launch resumed from a checkpoint
    (`Continuing training from global step N`) logs from the first multiple of L after N.
    Evaluation and final entries take the step of the training log before them. Copies
    printed by several ranks are kept once. The flag says whether the steps are the run's
    (False: numbered 1, 2, 3, ...)."""
    notes: list[str] = []
    order = pl.col("line") * 10_000 + pl.col("piece")
    entries = (
        dicts.with_columns(order=order)
        .group_by("order", maintain_order=True)
        .agg(pl.col("key"), pl.col("value"), pl.col("line").first())
    )
    launches = (
        starts.select(order=order)
        .sort("order")
        .with_row_index("launch", offset=1)
        .with_columns(pl.col("launch").cast(pl.Int64))
    )
    offsets = (
        resumes.select(order=order, step="step")
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
    entries = entries.with_columns(k=is_train.cast(pl.Int64).cum_sum().over("launch"))
    train = entries.filter(is_train)
    interval = None
    if train.height:
        last = train.filter(pl.col("launch") == train["launch"].max())
        interval = _logging_interval(last.height, total_steps, int(last["resumed_from"][0]))
    if train.height and interval is None:
        notes.append(
            "stdout's logged dicts carry no step number and the total steps do not fix the"
            " logging interval: records are numbered 1, 2, 3, ... (the output_dir's"
            " trainer_state.json has the steps)"
        )
    size = interval or 1
    final = pl.col("key").list.contains("train_runtime") & ~is_train
    step = pl.when(final & (pl.lit(total_steps).is_not_null())).then(pl.lit(total_steps))
    # without the interval the records are only numbered, a resume's offset means nothing
    offset = pl.col("resumed_from") // size if interval else pl.lit(0)
    logged = (offset + pl.col("k")) * size
    entries = entries.with_columns(
        step=step.otherwise(logged).cast(pl.Int64),
        entry=pl.int_range(pl.len(), dtype=pl.Int64),
    )
    long = entries.explode(["key", "value"]).select("entry", "step", "line", "key", "value")
    return long, notes, interval is not None


def _logging_interval(logs: int, total_steps: int | None, resumed_from: int = 0) -> int | None:
    """The L with floor(total / L) - floor(resumed_from / L) == logs, when exactly one whole
    number fits (for a resumed launch, preferring one that divides the checkpoint's step)."""
    if not total_steps or logs <= 0 or resumed_from >= total_steps:
        return None
    if resumed_from == 0:
        smallest, largest = total_steps // (logs + 1) + 1, total_steps // logs
        return largest if smallest == largest else None
    fits = [
        size
        for size in range(1, (total_steps - resumed_from) // logs + 2)
        if total_steps // size - resumed_from // size == logs
    ]
    if len(fits) > 1:
        # checkpoints are saved every save_steps, in practice a multiple of the interval
        fits = [size for size in fits if resumed_from % size == 0]
    return fits[0] if len(fits) == 1 else None
