"""The data model every parser produces: a `Run` (config with provenance, per-iteration table,
long metrics table). See the project's data-model contract; `validate_run` enforces it.

Parsers extract only. Derived figures (FLOPs, MFU, slow steps) belong to the analysis layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import polars as pl

from loganalyzer.errors import SchemaError

UTC_MICROS = pl.Datetime("us", "UTC")

# Columns of the per-iteration table, in their fixed order, with their fixed dtypes.
ITERATION_SCHEMA: Mapping[str, pl.DataType] = {
    "iteration": pl.Int64(),
    "interval": pl.Int64(),
    "step_time_s": pl.Float64(),
    "timestamp": UTC_MICROS,
    "loss": pl.Float64(),
    "lr": pl.Float64(),
    "grad_norm": pl.Float64(),
    "loss_scale": pl.Float64(),
    "global_batch_size": pl.Int64(),
    "tokens": pl.Int64(),
    "samples_per_s": pl.Float64(),
    "tokens_per_s": pl.Float64(),
    "reported_tflops_per_gpu": pl.Float64(),
    "skipped_iterations": pl.Int64(),
    "nan_iterations": pl.Int64(),
    "mem_allocated_gb": pl.Float64(),
    "mem_max_allocated_gb": pl.Float64(),
    "segment": pl.Int32(),
    "rank": pl.Int32(),
    "source": pl.String(),
    "line": pl.Int64(),
}

# The long table of every other metric a source carries, so that nothing is dropped.
# `rank` and `line` extend the contract's (iteration, name, value, source) for traceability.
# `name` and `source` repeat a few values over millions of rows: categorical keeps each once.
METRICS_SCHEMA: Mapping[str, pl.DataType] = {
    "iteration": pl.Int64(),
    "name": pl.Categorical(),
    "value": pl.Float64(),
    "source": pl.Categorical(),
    "rank": pl.Int32(),
    "line": pl.Int64(),
}

# The long table as a run holds it: in memory, or, once it outgrew the memory budget, a lazy
# scan of the files it was written to (`loganalyzer.spill`; read it through `spill.collect`).
Metrics = pl.DataFrame | pl.LazyFrame

# The facts, named like Megatron-LM arguments, that FLOPs and the summary rest on: the model's
# shape, and the run's batch, parallelism and precision.
MODEL_FACTS = (
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "seq_length",
    "padded_vocab_size",
    "swiglu",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
)
PARALLELISM_FACTS = {
    "tensor": "tensor_model_parallel_size",
    "pipeline": "pipeline_model_parallel_size",
    "data": "data_parallel_size",
    "context": "context_parallel_size",
    "expert": "expert_model_parallel_size",
}
RUN_FACTS = (
    "global_batch_size",
    "micro_batch_size",
    "num_gpus",
    "world_size",
    *PARALLELISM_FACTS.values(),
    "dtype",
    "recompute",
    "gpu_name",
)

ProvenanceKind = Literal["log", "flag", "preset", "config", "wandb", "tensorboard", "derived"]


@dataclass(frozen=True)
class Provenance:
    """Where a config value came from, precise enough for a user to go and check it."""

    kind: ProvenanceKind
    source: str
    line: int | None = None

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.source}:{self.line}"
        return self.source if self.kind in ("log", "config") else f"{self.kind} {self.source}"


@dataclass(frozen=True)
class ConfigValue:
    """One fact about the run and where it came from."""

    value: object
    provenance: Provenance


@dataclass(frozen=True)
class SourceInfo:
    """A file (or folder, or W&B run) a run was read from."""

    path: str
    format: str
    records: int
    # The resolution, in seconds, of the clock this source's step times were read from, when
    # it is coarse enough to matter (tqdm's elapsed time prints whole seconds: 1.0); None when
    # the source states step times finely (milliseconds or better). No record is slower than
    # its pace by less than this, and the pace of such a source comes from its cumulative
    # clock over many steps rather than from the median of quantised differences.
    clock_resolution_s: float | None = None
    # What the `line` of this source's records counts: the lines of a text log, or the
    # records of a binary store (a TensorBoard event file, a W&B transaction log), which have
    # no lines to quote; there a record is found by its index, its tag and its step.
    unit: Literal["line", "record"] = "line"
    # In a binary store, the tag each column of the per-iteration table was read from
    # (`step_time_s` -> `iteration-time`), for the evidence to name it.
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EndingFact:
    """A line that says something about how a run ended, as printed: a traceback, an
    exception, an NCCL watchdog, a launcher's or scheduler's report, a framework's own end
    or stop. `kind` names the line's shape (see `loganalyzer.endings`), not the outcome,
    which the analysis decides from all of them."""

    source: str
    line: int
    kind: str
    text: str  # the line without colour codes, at most `endings.TEXT_LIMIT` characters
    rank: int | None = None  # the global rank the line (or its launcher label) names
    host: str | None = None
    at: datetime | None = None  # the time the line prints, UTC (no zone printed: read as UTC)
    # what else the line states: exception class, signal, exit code, NCCL op/seq/timeout,
    # the slurm reason, the minutes or iteration of a stop, torchrun's root-cause fields
    detail: Mapping[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True)
class Endings:
    """The ending facts a run's text holds: the first and last few of each kind per file
    (every rank prints the same lines), and how many of each kind there were in all."""

    facts: tuple[EndingFact, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Endings) -> Endings:
        counts = dict(self.counts)
        for kind, count in other.counts.items():
            counts[kind] = counts.get(kind, 0) + count
        return Endings((*self.facts, *other.facts), counts)


@dataclass
class Run:
    """Everything a run left behind, extracted but not interpreted.

    `config` keys are named like Megatron-LM arguments (num_layers, hidden_size, ...) plus
    framework, framework_version, gpu_name, num_gpus, dtype, recompute, params.
    """

    framework: str
    config: dict[str, ConfigValue]
    table: pl.DataFrame
    metrics: Metrics
    sources: list[SourceInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Facts a later launch in the same source stated otherwise than `config`, by the segment
    # its records start: `loganalyzer.identity` tells from them whether it is the same run.
    segment_config: dict[int, dict[str, ConfigValue]] = field(default_factory=dict)
    # What the text says about how the run ended (`loganalyzer.endings`), for the analysis.
    endings: Endings = field(default_factory=Endings)

    def get(self, name: str) -> object | None:
        """The config value `name`, or None when the run does not say."""
        found = self.config.get(name)
        return None if found is None else found.value

    def get_int(self, name: str) -> int | None:
        """The config value `name` when it is a whole number (not a flag), else None."""
        value = self.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def empty_metrics() -> pl.DataFrame:
    """A long metrics table with no rows."""
    return pl.DataFrame(schema=dict(METRICS_SCHEMA))


def _conform(frame: pl.DataFrame, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Columns already right are reused, never copied; missing ones become null literals,
    which polars keeps as a scalar instead of a column of nulls."""
    unknown = set(frame.columns) - set(schema)
    if unknown:
        raise SchemaError(
            f"unexpected columns {sorted(unknown)}: extra metrics go to the long table"
        )
    missing = [pl.lit(None, dtype=t).alias(n) for n, t in schema.items() if n not in frame.columns]
    casts = [
        pl.col(n).cast(t, strict=True)
        for n, t in schema.items()
        if n in frame.columns and frame.schema[n] != t
    ]
    return frame.with_columns(*missing, *casts).select(list(schema))


def conform_table(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the columns a parser did not fill (as nulls); cast and order them as fixed."""
    return _conform(frame, ITERATION_SCHEMA)


# Columns of the per-iteration table that often hold one value throughout a run: its
# interval, the batch size without ramp-up, the skipped and nan counts, the launcher's rank
# label, the file it came from. Not the segment: a group-by on a literal sums its one group
# as a whole column rather than row by row in log order, and totals would move in their
# last digits.
ONE_VALUE_COLUMNS = (
    "interval",
    "global_batch_size",
    "skipped_iterations",
    "nan_iterations",
    "rank",
    "source",
)


def compact_table(table: pl.DataFrame) -> pl.DataFrame:
    """The per-iteration table with a column no record filled as one null literal (as
    `conform_table` gives a column the format lacks) and a `ONE_VALUE_COLUMNS` column of one
    value throughout as that value: polars keeps a literal once, where a column costs 4 to
    8 bytes a record (a path as text, 20 more). A table sent between processes comes back
    with its literals written out as columns; this takes them back.

    Only whole columns are replaced, on a table whose columns are all cut into the same
    pieces: a literal in some pieces and not in others would leave them cut differently,
    and polars then copies the whole table to line them up at the next `with_columns`.

    A literal stays one value only while it is read through expressions (`select`): asked
    for as a `Series` (`get_column`, `table[name]`), polars writes it out in full and keeps
    that copy in the table for as long as the table lives. Code that reads columns which
    can be literals (these, and any column of nulls) reads them through `select`."""
    single = single_values(table)
    literals = [pl.lit(value, dtype=table.schema[n]).alias(n) for n, value in single.items()]
    return table.with_columns(literals) if literals else table


def single_values(frame: pl.DataFrame) -> dict[str, Any]:
    """The columns of `frame` (those of the per-iteration table's schema) that
    `compact_table` holds as one value: each that no record filled (None), and each of
    `ONE_VALUE_COLUMNS` with one value in every record (that value). Read through
    expressions, so a literal among them stays one."""
    if not frame.height:
        return {}
    names = [name for name in frame.columns if name in ITERATION_SCHEMA]
    nulls = frame.select(pl.col(names).null_count()).row(0, named=True)
    candidates = [n for n in ONE_VALUE_COLUMNS if n in names and not nulls[n]]
    found = (
        frame.select(
            pl.struct(pl.col(n).n_unique().alias("count"), pl.col(n).first().alias("value")).alias(
                n
            )
            for n in candidates
        ).row(0, named=True)
        if candidates
        else {}
    )
    single: dict[str, Any] = {n: None for n in names if nulls[n] == frame.height}
    single.update((n, found[n]["value"]) for n in candidates if found[n]["count"] == 1)
    return single


def conform_metrics(frame: pl.DataFrame) -> pl.DataFrame:
    """The long-table counterpart of `conform_table`."""
    return _conform(frame, METRICS_SCHEMA)


def validate_run(run: Run) -> None:
    """Raise SchemaError unless both tables have exactly the contract's columns and dtypes."""
    for label, frame, schema in (
        ("per-iteration table", run.table, ITERATION_SCHEMA),
        ("metrics table", run.metrics, METRICS_SCHEMA),
    ):
        actual = list(frame.collect_schema().items())
        expected = list(schema.items())
        if actual != expected:
            raise SchemaError(f"{label} schema {actual} differs from the contract {expected}")
    # through expressions, not `table[name]`, which writes a literal out (`compact_table`)
    unnumbered, unsegmented, below_one = run.table.select(
        pl.col("iteration").null_count(),
        pl.col("segment").null_count(),
        (pl.col("interval") < 1).any(),
    ).row(0)
    if unnumbered:
        raise SchemaError("per-iteration table has records without an iteration number")
    if unsegmented:
        raise SchemaError("per-iteration table has records without a segment number")
    if below_one:
        raise SchemaError("per-iteration table has an interval below 1")
