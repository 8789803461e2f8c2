"""The torchtitan lines worth reading, found in one chunk of a log at a time (polars, no row
loops). Each function takes the chunk's candidate lines (line, rank, text, stamp) and returns
one row per line (or fact) it recognises; `parser` ties them together.

The step line (torchtitan/components/metrics.py; the project's FORMATS reference quotes it):
``step: {step:2}  loss: {loss:8.5f}  grad_norm: {grad_norm:7.4f}  memory: {gib:5.2f}GiB({pct:.2f}%)
tps: {round(tps):,}  tflops: {tflops:,.2f}  mfu: {mfu}``, each field in an ANSI colour unless
colour printing is off; `grad_norm` since June 2025, `tflops` since February 2025, `tps` was
`wps` until November 2024, `mfu` is `N/A` with float8/MX quantisation. The logger prints
``[titan] %(asctime)s - root - INFO - `` (no ``[titan]`` before 2025) and torchrun's
``--role rank --tee 3`` adds ``[rankN]:``.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.textlog import clean, launcher_rank, strip_launcher

# Literal markers of the lines read; every other line is skipped unparsed.
CANDIDATES = (
    "step:",
    "Building ",
    "Training starts at step",
    "Trainer is initialized with",
    "CUDA capacity:",
    "Peak FLOPS used for computing MFU",
    "#words",
    "total parameters",
    "activation checkpointing",
    "torchtitan version",
    "Starting job",
    " = ",
    "[",
)

# The logger's time, `2025-06-16 22:30:50,322` (a `[YYYY-mm-dd HH:MM:SS,ffffff]` wrapper too).
STAMP = r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?)"

# The step line; `validate step:` (the validator's line) is not a training step.
STEP = r"(?:^|\s-\s|\]\s?)step:\s*(\d+)\s+loss:\s*([-+\w.]+)"
FIELDS = {
    "grad_norm": r"\bgrad_norm:\s*([-+\w.]+)",
    "memory_gib": r"memory:\s*([\d.]+)GiB",
    "memory_pct": r"memory:\s*[\d.]+GiB\(([\d.]+)%\)",
    "tps": r"\b[tw]ps:\s*([\d,]+)",
    "tflops": r"\btflops:\s*([\d,.]+)",
    "mfu_pct": r"\bmfu:\s*([\d.]+)%",
    "lr": r"\blr:\s*([-+\w.]+)",
}

# The long table's names for what a step line prints beside the table's columns.
LONG_NAMES = {
    "tps": "tokens_per_s_per_device",
    "mfu_pct": "reported_mfu_pct",
    "memory_gib": "max_reserved_gib",
    "memory_pct": "max_reserved_pct",
}


def candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's lines that may matter, launcher prefix and colours removed, with the
    logger's timestamp (text) where the line has one."""
    text = pl.col("text")
    return (
        frame.filter(text.str.contains_any(list(CANDIDATES)))
        .with_columns(launcher_rank(text))
        .with_columns(clean(strip_launcher(text)).alias("text"))
        .with_columns(stamp=pl.col("text").str.extract(STAMP))
    )


def step_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """One row per step line: line, rank, stamp, iteration, loss and each field as text."""
    found = lines.filter(pl.col("text").str.contains("loss:", literal=True)).with_columns(
        m=pl.col("text").str.extract_groups(STEP)
    )
    found = found.filter(pl.col("m").struct.field("1").is_not_null())
    return found.select(
        "line",
        "rank",
        "stamp",
        iteration=pl.col("m").struct.field("1").cast(pl.Int64, strict=False),
        loss=pl.col("m").struct.field("2"),
        **{name: pl.col("text").str.extract(pattern) for name, pattern in FIELDS.items()},
    ).filter(pl.col("iteration").is_not_null())


def as_number(text: pl.Expr) -> pl.Expr:
    """A printed figure as Float64 (thousands separators dropped; `N/A` is null)."""
    return text.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)


# Facts, as (pattern, key per group): each match gives one (line, key, value) row per group.
FACT_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"Building (\w[\w./-]*) ([\w.]+) with \w*Args\(", ("model_name", "flavor")),
    (r"Building (\w[\w./-]*) ([\w.]+)\s*$", ("model_name", "flavor")),
    (r"\blocal batch size (\d+)", ("local_batch_size",)),
    (r"\bglobal batch size (\d+)", ("global_batch_size",)),
    (r"\bgradient accumulation steps (\d+)", ("gradient_accumulation_steps",)),
    (r"\bsequence length (\d+)", ("seq_length",)),
    (r"\btotal steps (\d+)", ("train_iters",)),
    (r"CUDA capacity: (.+?) with [\d.]+GiB memory", ("gpu_name",)),
    (r"Peak FLOPS used for computing MFU: ([\d.eE+-]+)", ("reported_peak_flops",)),
    (r"TikTokenizer built: #words (\d+)", ("tokenizer_words",)),
    (r"size: ([\d,]+) total parameters", ("params",)),
    (r"torchtitan version: ([\w.+-]+)", ("framework_version",)),
    (r"Applied (full|selective|Full|Selective)\s?AC\b", ("activation_checkpoint",)),
    (r"Applied (full|selective) activation checkpointing", ("activation_checkpoint",)),
    (r"Building \d-D device mesh with \[([^\]]*)\], \[([\d, ]*)\]", ("mesh_names", "mesh_sizes")),
    (r"Building device mesh with parallelism: (.*)$", ("mesh",)),
)
# The model's printed arguments: `Building llama3 8B with ModelArgs(dim=4096, n_layers=32, ...)`.
MODEL_ARGS = r"Building \w[\w./-]* [\w.]+ with \w*Args\((.*)\)\s*$"
ARGUMENT = r"(\w+)=([^,()]+)"

# The job config as a TOML file echoed into the log (`cat train.toml`): a section header, or a
# `key = value` line of one of the sections read.
TOML_SECTION = r"^\s*\[([a-z_][\w.]*)\]\s*(?:#.*)?$"
TOML_KEY = r"^\s*([a-z_]\w*)\s*=\s*(\"[^\"]*\"|'[^']*'|[-\w.]+)\s*(?:#.*)?$"
TOML_SECTIONS = ("model", "training", "parallelism", "experimental", "activation_checkpoint")


def fact_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """One row (line, key, value) per fact the chunk's lines state."""
    text = pl.col("text")
    parts: list[pl.DataFrame] = []
    for pattern, keys in FACT_PATTERNS:
        found = lines.select("line", m=text.str.extract_groups(pattern)).filter(
            pl.col("m").struct.field("1").is_not_null()
        )
        parts.extend(
            found.select(
                "line",
                key=pl.lit(key),
                value=pl.col("m").struct.field(str(index + 1)).str.strip_chars(),
            )
            for index, key in enumerate(keys)
        )
    arguments = (
        lines.select("line", args=text.str.extract(MODEL_ARGS))
        .filter(pl.col("args").is_not_null())
        .select("line", pair=pl.col("args").str.extract_all(ARGUMENT))
        .explode("pair")
        .filter(pl.col("pair").is_not_null())
        .select(
            "line",
            key=pl.lit("model_args.") + pl.col("pair").str.extract(r"^(\w+)="),
            value=pl.col("pair").str.extract(r"=(.*)$").str.strip_chars().str.strip_chars("'\""),
        )
    )
    parts.append(arguments)
    return pl.concat(parts)


def toml_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows (line, key, value) of a job-config TOML echoed into the chunk: `section.key`.
    Read over the chunk's whole text (a TOML line holds no marker); a section's keys are
    those below its header within the chunk."""
    text = pl.col("text")
    marked = frame.select(
        "line",
        section=text.str.extract(TOML_SECTION),
        m=text.str.extract_groups(TOML_KEY),
    ).filter(pl.col("section").is_not_null() | pl.col("m").struct.field("1").is_not_null())
    if marked.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "key": pl.String, "value": pl.String})
    keyed = marked.with_columns(pl.col("section").forward_fill()).filter(
        pl.col("section").is_in(TOML_SECTIONS) & pl.col("m").struct.field("1").is_not_null()
    )
    return keyed.select(
        "line",
        key=pl.lit("toml.") + pl.col("section") + pl.lit(".") + pl.col("m").struct.field("1"),
        value=pl.col("m").struct.field("2").str.strip_chars("'\""),
    )
