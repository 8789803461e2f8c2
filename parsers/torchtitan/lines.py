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
    "Running with args",
    " capacity: ",
    "Peak FLOPS used for computing MFU",
    "#words",
    "total parameters",
    "activation checkpointing",
    "torchtitan version",
    "Starting job",
    "the checkpoint",
    "checkpoint at last step",
    "Saving a model only checkpoint",
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


# The validator's line (metrics.py: `validate step: {step:2}  loss: {loss:7.4f}  memory: ...`)
# and the checkpointer's (`Saving the checkpoint.`, `Staging the checkpoint.` when async;
# before 2025 `Saving the checkpoint (or staging if async is enabled).`; at the last step
# `Saving a full checkpoint at last step, step N.` or `Saving a model only checkpoint in ...`).
VALIDATION = r"(?:^|\s-\s|\]\s?)validate step:\s*(\d+)\s+loss:\s*([-+\w.]+)"
CHECKPOINT_SAVE = (
    r"(?:Saving|Staging) the checkpoint\b|Saving a full checkpoint at last step"
    r"|Saving a model only checkpoint"
)
SAVE_EVENT = "event/checkpoint_save"


def event_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Rows (line, rank, iteration, name, value) of validation and checkpoint-save lines: a
    validation names its step; a save's is the step line's before it (null here)."""
    text = pl.col("text")
    validated = (
        lines.filter(text.str.contains("validate step:", literal=True))
        .with_columns(m=text.str.extract_groups(VALIDATION))
        .filter(pl.col("m").struct.field("1").is_not_null())
        .select(
            "line",
            "rank",
            iteration=pl.col("m").struct.field("1").cast(pl.Int64, strict=False),
            name=pl.lit("validation/loss"),
            value=as_number(pl.col("m").struct.field("2")),
        )
    )
    saved = lines.filter(text.str.contains(CHECKPOINT_SAVE)).select(
        "line",
        "rank",
        iteration=pl.lit(None, dtype=pl.Int64),
        name=pl.lit(SAVE_EVENT),
        value=pl.lit(1.0),
    )
    return pl.concat([validated, saved])


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
    (r"[A-Z]+ capacity: (.+?) with [\d.]+GiB memory", ("gpu_name",)),
    (r"\b(\d+) tokens per train step", ("tokens_per_step",)),
    (r"\bmaximum context length (\d+)", ("seq_length",)),
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

# The job config echoed into the log: a TOML file (`cat train.toml`), the JSON of
# `--debug.print_config` (`Running with configs: {` then one `"key": value,` a line, since
# October 2025) or the dict of `--job.print_args` (`Running with args: {'job': {...}, ...}`,
# December 2024 to 2025). Section headers (`[training]`, `"training": {`) and `key = value` /
# `"key": value` lines, the sections read only.
SECTION = r"^\s*(?:\[([a-z_][\w.]*)\]|\"([a-z_]\w*)\": \{)\s*(?:#.*)?$"
KEY = (
    r"^\s*(?:([a-z_]\w*)\s*=\s*|\"([a-z_]\w*)\":\s*)"
    r"(\"[^\"]*\"|'[^']*'|[-\w.]+),?\s*(?:#.*)?$"
)
ARGS_ECHO = r"Running with args: \{(.*)\}\s*$"
ARGS_SECTION = r"'(\w+)': \{([^{}]*)\}"
ARGS_PAIR = r"'(\w+)': ('[^']*'|[^,]+)"
CONFIG_SECTIONS = (
    "model",
    "model_spec",
    "training",
    "parallelism",
    "experimental",
    "activation_checkpoint",
)
CONFIG_SCHEMA = pl.Schema({"line": pl.Int64(), "key": pl.String(), "value": pl.String()})


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


def config_echo_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows (line, key, value) of a job config echoed into the chunk, keyed
    `cfg.<section>.<key>`. Read over the chunk's whole text (a TOML or JSON line holds no
    marker); a section's keys are those below its header within the chunk."""
    text = pl.col("text")
    marked = frame.select(
        "line",
        section=pl.coalesce(text.str.extract(SECTION, 1), text.str.extract(SECTION, 2)),
        m=text.str.extract_groups(KEY),
    )
    key = pl.coalesce(pl.col("m").struct.field("1"), pl.col("m").struct.field("2"))
    marked = marked.filter(pl.col("section").is_not_null() | key.is_not_null())
    keyed = marked.with_columns(pl.col("section").forward_fill()).filter(
        pl.col("section").is_in(CONFIG_SECTIONS) & key.is_not_null()
    )
    echoed = keyed.select(
        "line",
        key=pl.lit("cfg.") + pl.col("section") + pl.lit(".") + key,
        value=pl.col("m").struct.field("3").str.strip_chars("'\""),
    )
    return pl.concat([echoed.cast(CONFIG_SCHEMA), _args_echo(frame)])


def _args_echo(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of `Running with args: {'job': {...}, 'training': {...}, ...}` lines."""
    echoed = frame.filter(pl.col("text").str.contains("Running with args: {", literal=True))
    if echoed.height == 0:
        return pl.DataFrame(schema=CONFIG_SCHEMA)
    sections = (
        echoed.select("line", part=pl.col("text").str.extract_all(ARGS_SECTION))
        .explode("part")
        .filter(pl.col("part").is_not_null())
        .select(
            "line",
            section=pl.col("part").str.extract(r"^'(\w+)'"),
            pair=pl.col("part").str.extract(r"\{(.*)\}").str.extract_all(ARGS_PAIR),
        )
        .filter(pl.col("section").is_in(CONFIG_SECTIONS))
        .explode("pair")
        .filter(pl.col("pair").is_not_null())
    )
    return sections.select(
        "line",
        key=pl.lit("cfg.")
        + pl.col("section")
        + pl.lit(".")
        + pl.col("pair").str.extract(r"^'(\w+)'"),
        value=pl.col("pair").str.extract(r": (.*)$").str.strip_chars().str.strip_chars("'"),
    ).cast(CONFIG_SCHEMA)
