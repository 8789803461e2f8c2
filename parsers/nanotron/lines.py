"""The nanotron lines worth reading, found in one chunk of a log at a time (polars, no row
loops); `parser` ties them together.

The iteration line (nanotron/trainer.py, quoted in the project's FORMATS reference):
``iteration: {step} / {total} | consumed_tokens: ... | elapsed_time_per_iteration_ms: ... |
tokens_per_sec: ... | tokens_per_sec_per_gpu: ... | global_batch_size: ... | lm_loss: ... |
lr: ... | model_tflops_per_gpu: ... | hardware_tflops_per_gpu: ... | grad_norm: ...`` (memory
and disk fields early on and at checkpoints), every value in nanotron's `human_format`:
3 significant digits with a K/M/G/T suffix (`1.02K`, `11.5K` ms), `{:.3g}` below 1. The
logger prints ``MM/DD/YYYY HH:MM:SS [LEVEL|DP=0|PP=0|TP=0[|host]]: `` before each line,
also before each line of the config it prints (`pformat(Config(...))`).
"""

from __future__ import annotations

import polars as pl

from loganalyzer.textlog import clean, launcher_rank, strip_launcher, to_number

# Literal markers of the lines read; every other line is skipped unparsed.
CANDIDATES = ("iteration: ", "=", ": ")

# The logger's prefix: its time and the process's ranks. Until 2025 `%m/%d/%Y %H:%M:%S
# [INFO|DP=0|PP=0|TP=0|host]: `; since, `%m/%d %H:%M:%S [INFO|DP=1|TP=0]: ` (no year; only
# the ranks of dimensions above 1) in ANSI dim italics.
LOGGER = r"^(\d\d/\d\d(?:/\d{4})? \d\d:\d\d:\d\d) \[[A-Z]+(?:\|[^\]]*)?\]: ?"
# A `%m/%d/%Y` date, rewritten in ISO order for the timestamp reader; one without its year
# gives no timestamp.
US_DATE = r"^(\d\d)/(\d\d)/(\d{4})"
ITERATION = r"^iteration: (\d+) / (\d+) \| (.*)$"

# The iteration line's fields that are the table's columns, and their scale to its units
# (`time_per_iteration_ms` since March 2025, when `global_batch_size` became the batch in
# tokens: see `BATCH_IN_TOKENS`).
TABLE_FIELDS = {
    "elapsed_time_per_iteration_ms": ("step_time_s", 1e-3),
    "time_per_iteration_ms": ("step_time_s", 1e-3),
    "lm_loss": ("loss", 1.0),
    "lr": ("lr", 1.0),
    "grad_norm": ("grad_norm", 1.0),
    "global_batch_size": ("global_batch_size", 1.0),
    "tokens_per_sec": ("tokens_per_s", 1.0),
    "model_tflops_per_gpu": ("reported_tflops_per_gpu", 1.0),
}

# The wording whose `global_batch_size` counts tokens (nanotron 2025-03 on).
BATCH_IN_TOKENS = "time_per_iteration_ms"
# A figure as human_format prints it (`eta: 1 day, 2:03:04` is no figure).
FIGURE = r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[KMGTPE]?\s*$|^\s*[-+]?(?:nan|inf)\s*$"

# Config fields read, from the printed `Config(...)` (`key=value,`) or a YAML dump
# (`key: value`): nanotron's names.
CONFIG_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "is_llama_config",
    "hidden_act",
    "sequence_length",
    "micro_batch_size",
    "batch_accumulation_per_replica",
    "train_steps",
    "dtype",
    "make_vocab_size_divisible_by",
    "recompute_layer",
    "expert_parallel_size",
    "context_parallel_size",
    "moe_num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "num_experts",
)
CONFIG_LINE = r"^\s*(?:\w+=\w+\()*(" + "|".join(CONFIG_KEYS) + r")\s*[:=]\s*([^,()\s#]+)"
# The parallelism degrees: `parallelism=ParallelismArgs(dp=2,`, `pp=1,` / YAML `  dp: 2`.
DEGREE_LINE = r"^\s*(?:parallelism=ParallelismArgs\()?(dp|pp|tp)\s*[:=]\s*(\d+)\s*,?\s*$"
# `[Start training] datetime: ... | mbs: 2 | grad_accum: 1 | global_batch_size: 2 |
# sequence_length: 256 | train_steps: 15 | ...`; since 2025 the line after a `Start training`
# separator: `mbs: 2 | grad_accum: 1 | cp: 1 | sequence_length: ... | global_batch_size: ...`.
START = r"^(?:\[Start training\] (.*)|(mbs: \d+ \| grad_accum: \d+ \|.*))$"


def candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's lines that may matter, launcher label, colours and the logger's prefix
    removed, with the logger's time (text) where the line has one."""
    text = pl.col("text")
    lines = (
        frame.filter(text.str.contains_any(list(CANDIDATES)))
        .with_columns(launcher_rank(text))
        .with_columns(clean(strip_launcher(text)).alias("text"))
    )
    found = pl.col("text").str.extract(LOGGER)
    stamp = pl.when(found.str.contains(US_DATE)).then(found.str.replace(US_DATE, "$3-$1-$2"))
    return lines.with_columns(stamp=stamp, text=pl.col("text").str.replace(LOGGER, ""))


def iteration_fields(lines: pl.DataFrame) -> pl.DataFrame:
    """One row per field of each iteration line: line, rank, stamp, iteration, total, name,
    value (a number, its suffix applied)."""
    found = lines.filter(pl.col("text").str.starts_with("iteration: ")).with_columns(
        m=pl.col("text").str.extract_groups(ITERATION)
    )
    found = found.filter(pl.col("m").struct.field("1").is_not_null())
    fields = (
        found.select(
            "line",
            "rank",
            "stamp",
            iteration=pl.col("m").struct.field("1").cast(pl.Int64, strict=False),
            total=pl.col("m").struct.field("2").cast(pl.Int64, strict=False),
            field=pl.col("m").struct.field("3").str.split(" | "),
        )
        .explode("field")
        .with_columns(pair=pl.col("field").str.splitn(": ", 2))
    )
    printed = pl.col("pair").struct.field("field_1").fill_null("")
    return fields.select(
        "line",
        "rank",
        "stamp",
        "iteration",
        "total",
        name=pl.col("pair").struct.field("field_0").str.strip_chars(),
        value=pl.when(printed.str.contains(FIGURE)).then(to_number(printed)),
    ).filter(pl.col("iteration").is_not_null())


# The trainer's save line (trainer.py: `Saving checkpoint at {checkpoint_path}`, a WARNING).
CHECKPOINT_SAVE = "Saving checkpoint at "


def save_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines (line, rank) that say a checkpoint is being saved."""
    return lines.filter(pl.col("text").str.starts_with(CHECKPOINT_SAVE)).select("line", "rank")


def config_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Rows (line, key, value) of the config the chunk prints: Config(...) fields, a YAML
    dump's, the parallelism degrees, and the `[Start training]` line's fields."""
    text = pl.col("text")
    parts: list[pl.DataFrame] = []
    for pattern in (CONFIG_LINE, DEGREE_LINE):
        found = lines.select("line", m=text.str.extract_groups(pattern)).filter(
            pl.col("m").struct.field("1").is_not_null()
        )
        parts.append(
            found.select(
                "line",
                key=pl.col("m").struct.field("1"),
                value=pl.col("m").struct.field("2").str.strip_chars("'\""),
            )
        )
    start = (
        lines.select(
            "line", fields=pl.coalesce(text.str.extract(START, 1), text.str.extract(START, 2))
        )
        .filter(pl.col("fields").is_not_null())
        .select("line", pair=pl.col("fields").str.split(" | "))
        .explode("pair")
        .select("line", pair=pl.col("pair").str.splitn(": ", 2))
        .select(
            "line",
            key=pl.lit("start.") + pl.col("pair").struct.field("field_0").str.strip_chars(),
            value=pl.col("pair").struct.field("field_1").str.strip_chars(),
        )
        .filter(pl.col("value").is_not_null())
    )
    parts.append(start)
    return pl.concat(parts)
