"""Megatron-LM and Megatron-DeepSpeed stdout logs, every version since 2021.

What it reads (the formats are quoted in the project's FORMATS reference):
- iteration lines, ``iteration N/ M | key: value | ...`` with or without the leading
  ``[YYYY-mm-dd HH:MM:SS(.ffffff)]``; elapsed time in ms, or in s (bigscience fork); any
  field order; unknown fields kept in the long table;
- the ``arguments`` dump → run config (every argument, with its file and line);
  ``using world size: ...``, ``> padded vocab ... (new size: N)``, ``using torch.X for parameters``;
- timers: one-line ``time (ms) | name: v | ...`` and the ``(min, max) time across ranks (ms):``
  / ``max time across ranks (ms):`` blocks; ``[Rank N] (after K iterations) memory (MB) | ...``;
  ``saving checkpoint at iteration N`` — all to the long table, tied to the last iteration seen;
- launcher prefixes, ANSI codes, ``\\r``, records glued without a newline, and the copies that
  several ranks or nodes print of one line (de-duplicated within each launch).

Each launch (an ``arguments`` dump) or a step back of the iteration counter starts a segment.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from loganalyzer.errors import InputError
from loganalyzer.model import (
    ITERATION_SCHEMA,
    ConfigValue,
    Provenance,
    Run,
    SourceInfo,
    conform_metrics,
    conform_table,
)
from loganalyzer.sources import is_probably_binary, read_head
from loganalyzer.textlog import (
    clean,
    kubelet_timestamp,
    launcher_rank,
    line_frames,
    numbers,
    split_glued,
    strip_launcher,
    to_number,
    to_timestamp,
)

ITERATION_START = r"iteration\s+\d+\s*/\s*\d+\s*\|"
ITERATION_HEAD = r"^iteration\s+(\d+)\s*/\s*(\d+)"
# Where a record starts, for splitting glued lines: an iteration line (with its timestamp),
# a per-rank memory line, a one-line timer report.
RECORD_START = (
    r"(?:\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\]\s*)?iteration\s+\d+\s*/\s*\d+\s*\|"
    r"|\[Rank \d+\] \(after|time \(ms\) \|"
)
# The bracketed timestamp Megatron-LM prints before "iteration" (core >= 0.6).
TIMESTAMP_BEFORE_ITERATION = r"\[(\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?)\]\s*$"
ARG_LINE = r"^  ([A-Za-z_]\w*) (?:\.+ |\s+)(.*?)\s*$"
TIMER_MINMAX = r"^\s+(\S.*?)\s*\.*:\s*\(\s*(" + r"[\d.]+" + r"),\s*([\d.]+)\)\s*$"
TIMER_MAX = r"^\s{3,}(\S.*?)\s*\.{2,}:\s*([\d.]+)\s*$"
MEMORY = r"(?:\[Rank (\d+)\] )?\(?after (\d+) iterations\)? memory \(MB\)(.*)$"
CHECKPOINT_SAVE = r"saving checkpoint at iteration\s+(\d+)"
VALIDATION = r"validation(?: loss)? at iteration (\d+) \|(.*)$"

# Iteration-line fields that have a column of their own; every other field goes to the long
# table under its printed name. Keys are lower-cased and stripped of spaces around them.
FIELD_COLUMNS: dict[str, str] = {
    "lm loss": "loss",
    "lm-loss": "loss",
    "loss": "loss",
    "learning rate": "lr",
    "grad norm": "grad_norm",
    "loss scale": "loss_scale",
    "global batch size": "global_batch_size",
    "samples per second": "samples_per_s",
    "throughput per gpu (tflop/s/gpu)": "reported_tflops_per_gpu",
    "compute per gpu (tflop/s/gpu)": "reported_tflops_per_gpu",
    "tflops": "reported_tflops_per_gpu",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
}
# Divisors to seconds (a division keeps 150471.3 ms exactly 150.4713 s).
STEP_TIME_FIELDS = {
    "elapsed time per iteration (ms)": 1000.0,
    "elapsed time per iteration (s)": 1.0,
}
# Fields only Megatron-DeepSpeed prints.
DEEPSPEED_FIELDS = {
    "consumed tokens",
    "tflops",
    "samples per second",
    "tokens per gpu per second (tgs)",
    "tokens per gpu per second(tgs)",
    "actual seqlen",
    "elapsed time per iteration (s)",
    "curriculum seqlen",
}

# The DeepSpeed engine's config printout (`  train_batch_size ............. 1024`).
DEEPSPEED_BATCH_KEYS = (
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
)
# Names 2021-era Megatron(-DeepSpeed) arguments used for what is now called otherwise.
RENAMED_ARGUMENTS = {
    "model_parallel_size": "tensor_model_parallel_size",
    "pipe_parallel_size": "pipeline_model_parallel_size",
    "deepspeed_train_batch_size": "global_batch_size",
    "deepspeed_train_micro_batch_size_per_gpu": "micro_batch_size",
}

DETECT_MARKERS = (
    (re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*elapsed time per iteration"), 0.95),
    (re.compile(r"^-+ arguments -+$", re.M), 0.6),
    (re.compile(r"using world size: \d+"), 0.6),
    (re.compile(r"megatron", re.I), 0.3),
)


class MegatronParser:
    """Megatron-LM and Megatron-DeepSpeed stdout logs (the plugin API is in loganalyzer.plugin)."""

    name = "megatron"
    description = "Megatron-LM (2021 to today) and Megatron-DeepSpeed stdout logs"

    def detect(self, path: Path) -> float:
        if not path.is_file():
            return 0.0
        head = read_head(path)
        if not head or is_probably_binary(head):
            return 0.0
        return max((score for marker, score in DETECT_MARKERS if marker.search(head)), default=0.0)

    def parse(self, path: Path) -> Run:
        chunks: list[_Chunk] = []
        longs: list[pl.DataFrame] = []
        last = _NO_ANCHOR
        previous_keys = pl.Series("copy_key", [], dtype=pl.UInt64)
        for chunk in _scanned(path):
            long, last = _placed(chunk, last)
            longs.append(_long_part(long, previous_keys, str(path)))
            previous_keys = long.get_column("copy_key")
            chunks.append(dataclasses.replace(chunk, extras=_NOTHING, metrics=_NOTHING))
        facts = pl.concat([c.facts for c in chunks]).unique(
            ["key", "value"], keep="first", maintain_order=True
        )
        if not any(c.records.height for c in chunks) and facts.height == 0:
            raise InputError(f"{path}: no Megatron iteration lines or arguments found")
        keys = frozenset().union(*(c.keys for c in chunks))
        config, framework, warnings = _config(facts, keys, str(path))
        naive_stamps = any(c.naive_stamps for c in chunks)
        table = _table([c.records for c in chunks], config, str(path))
        long = pl.concat(longs, rechunk=False) if longs else conform_metrics(pl.DataFrame())
        del chunks
        if table.height == 0:
            warnings.append(f"{path}: no iteration lines (the run may have died before logging)")
        if naive_stamps:
            warnings.append(
                f"{path}: timestamps carry no time zone; read as UTC (intervals are unaffected)"
            )
        return Run(
            framework=framework,
            config=config,
            table=table,
            metrics=long,
            sources=[SourceInfo(str(path), self.name, table.height)],
            warnings=warnings,
        )


@dataclass(frozen=True)
class _Chunk:
    """What one chunk of lines yielded, before the file-level assembly."""

    records: pl.DataFrame  # one row per iteration line (copies not yet removed)
    extras: pl.DataFrame  # iteration-line fields without a column, with their iteration
    metrics: pl.DataFrame  # timers, memory, events: not yet tied to their iteration
    facts: pl.DataFrame  # arguments and start-up facts: (line, launch, key, value)
    keys: frozenset[str]  # every iteration-line field name seen
    naive_stamps: bool  # some timestamps carry no time zone


# An iteration line's position, the anchor of the timer and memory lines below it.
_ANCHOR_SCHEMA = {"anchor_line": pl.Int64, "launch": pl.Int32, "iteration": pl.Int64}
_NO_ANCHOR = pl.DataFrame(schema=_ANCHOR_SCHEMA)
_NOTHING = pl.DataFrame()
# Chunks scanned at once: polars releases the GIL, so two use both cores of a small machine;
# more would only hold more chunks in memory.
_IN_FLIGHT = 2


# Literal markers of the lines this parser reads; everything else is skipped unparsed.
CANDIDATES = (
    "iteration",
    "memory (MB)",
    "time (ms)",
    "across ranks",
    ".:",
    "world size",
    "padded vocab",
    "for parameters",
    "batch_size",
    "gradient_accumulation_steps",
    "saving checkpoint",
    "validation",
)


def _stateful_frames(path: Path) -> Iterator[pl.DataFrame]:
    """Line chunks with the candidate lines only, tagged with the launch and arguments state.

    The state (which launch, inside an arguments dump or not) is carried across chunks so
    a dump split between two chunks is still read whole. Cheap literal tests pick the
    candidate lines; the regular expressions only ever see those.
    """
    launch_offset = 0
    in_args = 0
    for frame in line_frames(path):
        text = frame["text"]
        start = text.str.contains("-- arguments --", literal=True)
        end = text.str.contains("-- end of arguments --", literal=True)
        depth = (start.cast(pl.Int32) - end.cast(pl.Int32)).cum_sum() + in_args
        launch = start.cast(pl.Int32).cum_sum() + launch_offset
        inside = (depth > 0) & ~start
        candidate = inside | text.str.contains_any(list(CANDIDATES))
        if frame.height:
            launch_offset = int(launch[-1])
            in_args = max(int(depth[-1]), 0)
        yield (
            frame.with_columns(launch=launch, in_args=inside)
            .filter(candidate)
            .with_columns(
                launcher_rank(pl.col("text")),
                kubelet_timestamp(pl.col("text")).alias("line_stamp"),
                clean(strip_launcher(pl.col("text"))).alias("text"),
            )
        )


def _scanned(path: Path) -> Iterator[_Chunk]:
    """The file's chunks scanned, in order, `_IN_FLIGHT` at a time on a thread pool."""
    with ThreadPoolExecutor(max_workers=_IN_FLIGHT) as pool:
        pending: deque[Future[_Chunk]] = deque()
        for frame in _stateful_frames(path):
            pending.append(pool.submit(_scan_chunk, frame))
            if len(pending) >= _IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _placed(chunk: _Chunk, last_anchor: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The chunk's long-table rows, each tied to its iteration, in line order; and the anchor
    (last iteration line) the next chunk's first timer lines belong to."""
    anchors = pl.concat(
        [
            last_anchor,
            chunk.records.select(
                anchor_line="line", launch=pl.col("launch").cast(pl.Int32), iteration="iteration"
            ),
        ]
    )
    long = pl.concat([chunk.extras, _anchored(chunk.metrics, anchors)])
    return long.sort("line", maintain_order=True), anchors.tail(1)


def _scan_chunk(frame: pl.DataFrame) -> _Chunk:
    args = (
        frame.filter(pl.col("in_args"))
        .with_columns(m=pl.col("text").str.extract_groups(ARG_LINE))
        .select(
            "line",
            "launch",
            key=pl.col("m").struct.field("1"),
            value=pl.col("m").struct.field("2"),
        )
        .drop_nulls("key")
    )
    other = frame.filter(~pl.col("in_args"))
    # Relaunches print the same arguments again: one row per distinct value is all the
    # config needs.
    startup = _having(other, "world size", "padded vocab", "parameters", *DEEPSPEED_BATCH_KEYS)
    facts = (
        pl.concat([args, _facts(startup)])
        .sort("line")
        .unique(["key", "value"], keep="first", maintain_order=True)
    )
    pieces = split_glued(other, RECORD_START)
    records = _iteration_records(_having(pieces, "iteration"))
    fields = _fields(records)
    wide = _wide_fields(fields)
    extras = (
        fields.filter(pl.col("column").is_null() & pl.col("value").is_not_null())
        .join(
            records.select("line", "piece", "launch", "iteration", record_key="key"),
            on=["line", "piece"],
        )
        .select(
            "line",
            "iteration",
            name=pl.col("printed").cast(pl.Categorical),
            value="value",
            rank=pl.lit(None, dtype=pl.Int32),
            copy_key=pl.struct("record_key", "printed").hash(),
        )
    )
    metrics = pl.concat(
        [
            _timers(_having(pieces, "time (ms)", ".:")),
            _memory(_having(pieces, "memory (MB)")),
            _checkpoints(_having(pieces, "saving checkpoint")),
            _validation(_having(pieces, "validation")),
        ],
        how="diagonal_relaxed",
    )
    return _Chunk(
        records=records.drop("rest", "naive_stamp").join(wide, on=["line", "piece"], how="left"),
        extras=extras,
        metrics=metrics,
        facts=facts,
        keys=frozenset(fields["key"].unique().to_list()),
        naive_stamps=bool(records["naive_stamp"].any()),
    )


def _anchored(metrics: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """Timer, memory and event rows with the iteration they belong to and a copy key.

    A row states its own iteration (`after K iterations`, `at iteration N`) or belongs to
    the last iteration line above it in the same launch. Copies printed by several ranks
    share `copy_key`.
    """
    if metrics.height == 0:
        return pl.DataFrame(
            schema={
                "line": pl.Int64,
                "iteration": pl.Int64,
                "name": pl.Categorical,
                "value": pl.Float64,
                "rank": pl.Int32,
                "copy_key": pl.UInt64,
            }
        )
    placed = (
        metrics.with_columns(pl.col("launch").cast(pl.Int32))
        .sort("line")
        .join_asof(
            anchors,
            left_on="line",
            right_on="anchor_line",
            by="launch",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(iteration=pl.coalesce("after", "iteration"))
    )
    return placed.select(
        "line",
        "iteration",
        pl.col("name").cast(pl.Categorical),
        "value",
        "rank",
        copy_key=pl.struct("launch", "name", "rank", "value", "iteration").hash(),
    )


def _having(frame: pl.DataFrame, *markers: str) -> pl.DataFrame:
    """The rows whose text contains any of the literal markers."""
    return frame.filter(pl.col("text").str.contains_any(list(markers)))


def _facts(frame: pl.DataFrame) -> pl.DataFrame:
    """Start-up lines outside the arguments dump that state the world size, vocab, dtype."""
    text = pl.col("text")
    world = text.str.extract_groups(
        r"using world size: (\d+)(?:,? and model-parallel size: (\d+))?"
        r"(?:, data-parallel[- ]size: (\d+))?"
        r"(?:, context-parallel size: (\d+))?"
        r"(?:, hierarchical context-parallel sizes: [^,]*)?"
        r"(?:, tensor-model-parallel size: (\d+))?"
        r"(?:, pipeline-model-parallel size: (\d+))?"
    )
    names = [
        ("1", "world_size"),
        ("2", "tensor_model_parallel_size"),
        ("3", "data_parallel_size"),
        ("4", "context_parallel_size"),
        ("5", "tensor_model_parallel_size"),
        ("6", "pipeline_model_parallel_size"),
    ]
    found = [
        frame.select("line", "launch", key=pl.lit(key), value=world.struct.field(group)).drop_nulls(
            "value"
        )
        for group, key in names
    ]
    found.append(
        frame.select(
            "line",
            "launch",
            key=pl.lit("padded_vocab_size"),
            value=text.str.extract(
                r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)"
            ),
        ).drop_nulls("value")
    )
    found.append(
        frame.select(
            "line",
            "launch",
            key=pl.lit("params_dtype"),
            value=text.str.extract(r"^using (torch\.\w+) for parameters"),
        ).drop_nulls("value")
    )
    # Megatron-DeepSpeed: the engine's config printout holds the global batch size that
    # 2021-era arguments (batch_size = micro batch) do not.
    for name in DEEPSPEED_BATCH_KEYS:
        found.append(
            frame.select(
                "line",
                "launch",
                key=pl.lit(f"deepspeed_{name}"),
                value=text.str.extract(rf"\b{name}\s+\.*\s*(\d+)\s*$"),
            ).drop_nulls("value")
        )
    return pl.concat(found)


def _iteration_records(pieces: pl.DataFrame) -> pl.DataFrame:
    """One row per iteration line: its number, its fields' text, its timestamp, its copy key.

    The match is located with a capture-free search and the pieces are sliced around it:
    capturing the whole line with a regular expression costs several times more.
    """
    text = pl.col("text")
    located = pieces.with_columns(at=text.str.find(ITERATION_START)).drop_nulls("at")
    head = text.str.slice(pl.col("at"), 48).str.extract_groups(ITERATION_HEAD)
    stamp = pl.coalesce(
        text.str.slice(0, pl.col("at")).str.extract(TIMESTAMP_BEFORE_ITERATION),
        pl.col("line_stamp"),
    )
    rest = text.str.slice(pl.col("at")).str.splitn("|", 2).struct.field("field_1")
    return located.select(
        "line",
        "piece",
        "launch",
        "rank",
        iteration=head.struct.field("1").cast(pl.Int64),
        rest=rest,
        timestamp=to_timestamp(stamp),
        naive_stamp=stamp.is_not_null() & ~stamp.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$"),
        # copies of one line printed by several ranks or nodes share this key
        key=pl.struct("launch", head.struct.field("1"), rest).hash(),
    )


def _fields(records: pl.DataFrame) -> pl.DataFrame:
    """Every `key: value` field of every iteration line, long: (line, piece, key, value),
    with `column` naming the table column it fills (null for fields kept in the long table).
    """
    pairs = (
        records.select("line", "piece", field=pl.col("rest").str.split("|"))
        .explode("field")
        .with_columns(kv=pl.col("field").str.splitn(":", 2))
        .select(
            "line",
            "piece",
            printed=pl.col("kv").struct.field("field_0").str.strip_chars(),
            raw=pl.col("kv").struct.field("field_1"),
        )
        .filter(pl.col("raw").is_not_null())
        .with_columns(key=pl.col("printed").str.to_lowercase())
    )
    step_divisor = pl.col("key").replace_strict(
        STEP_TIME_FIELDS, default=None, return_dtype=pl.Float64
    )
    return numbers(pairs, "raw", "value").with_columns(
        column=pl.when(step_divisor.is_not_null())
        .then(pl.lit("step_time_s"))
        .otherwise(pl.col("key").replace_strict(FIELD_COLUMNS, default=None)),
        value=pl.col("value") / step_divisor.fill_null(1.0),
    )


def _key_values(frame: pl.DataFrame, fields: pl.Expr, name: pl.Expr) -> pl.DataFrame:
    """One metric row per `key: value` of `fields` (a '|'-separated text): `name` builds the
    metric's name from the key (`pl.col("key")`). Keeps line, launch, rank and `after`."""
    return (
        frame.with_columns(field=fields.str.split("|"))
        .explode("field")
        .with_columns(m=pl.col("field").str.extract_groups(r"^\s*(.*?[^\s])\s*:\s*(\S+)\s*$"))
        .with_columns(key=pl.col("m").struct.field("1"))
        .select(
            "line",
            "launch",
            "rank",
            "after",
            name=name,
            value=to_number(pl.col("m").struct.field("2")),
        )
        .drop_nulls(["name", "value"])
    )


def _timers(pieces: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text")
    one_line = _key_values(
        pieces.filter(text.str.contains(r"time \(ms\) \|")).with_columns(
            after=pl.lit(None, dtype=pl.Int64)
        ),
        text.str.replace(r"^.*?time \(ms\) \|", ""),
        pl.lit("timer/") + pl.col("key"),
    )
    minmax = pieces.with_columns(m=text.str.extract_groups(TIMER_MINMAX)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    mins = minmax.select(
        "line",
        "launch",
        "rank",
        name=pl.lit("timer/") + pl.col("m").struct.field("1") + "/min",
        value=pl.col("m").struct.field("2").cast(pl.Float64, strict=False),
    )
    maxs = minmax.select(
        "line",
        "launch",
        "rank",
        name=pl.lit("timer/") + pl.col("m").struct.field("1") + "/max",
        value=pl.col("m").struct.field("3").cast(pl.Float64, strict=False),
    )
    max_only = (
        pieces.with_columns(m=text.str.extract_groups(TIMER_MAX))
        .filter(pl.col("m").struct.field("1").is_not_null())
        .select(
            "line",
            "launch",
            "rank",
            name=pl.lit("timer/") + pl.col("m").struct.field("1") + "/max",
            value=pl.col("m").struct.field("2").cast(pl.Float64, strict=False),
        )
    )
    blocks = (
        pl.concat([mins, maxs, max_only])
        .drop_nulls(["name", "value"])
        .with_columns(after=pl.lit(None, dtype=pl.Int64))
    )
    return pl.concat([one_line, blocks], how="diagonal")


def _memory(pieces: pl.DataFrame) -> pl.DataFrame:
    """`[Rank N] (after K iterations) memory (MB) | allocated: v | ...` → memory/<key>_mb."""
    found = pieces.with_columns(m=pl.col("text").str.extract_groups(MEMORY)).filter(
        pl.col("m").struct.field("2").is_not_null()
    )
    return _key_values(
        found.with_columns(
            rank=pl.coalesce(pl.col("m").struct.field("1").cast(pl.Int32), pl.col("rank")),
            after=pl.col("m").struct.field("2").cast(pl.Int64),
        ),
        pl.col("m").struct.field("3"),
        pl.lit("memory/") + pl.col("key").str.replace_all(" ", "_") + pl.lit("_mb"),
    )


def _checkpoints(pieces: pl.DataFrame) -> pl.DataFrame:
    return (
        pieces.with_columns(after=pl.col("text").str.extract(CHECKPOINT_SAVE).cast(pl.Int64))
        .drop_nulls("after")
        .select(
            "line",
            "launch",
            "rank",
            "after",
            name=pl.lit("event/checkpoint_save"),
            value=pl.lit(1.0),
        )
    )


def _validation(pieces: pl.DataFrame) -> pl.DataFrame:
    """`validation loss at iteration N | lm loss value: v | lm loss PPL: v |` → validation/<key>."""
    found = pieces.with_columns(m=pl.col("text").str.extract_groups(VALIDATION)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    return _key_values(
        found.with_columns(after=pl.col("m").struct.field("1").cast(pl.Int64)),
        pl.col("m").struct.field("2"),
        pl.lit("validation/") + pl.col("key"),
    )


def _typed(raw: str) -> object:
    """An argument's printed value as Python: None, bool, int, float, or the string."""
    if raw == "None":
        return None
    if raw in ("True", "False"):
        return raw == "True"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _config(
    facts: pl.DataFrame, printed_keys: frozenset[str], source: str
) -> tuple[dict[str, ConfigValue], str, list[str]]:
    """The run config: every argument of the first dump, then the start-up facts it lacks."""
    warnings: list[str] = []
    config: dict[str, ConfigValue] = {}
    first = facts.sort("line").unique("key", keep="first", maintain_order=True)
    for key, value, line in first.select("key", "value", "line").iter_rows():
        # `None` is kept: "recompute_granularity ... None" says there was no recomputation
        config[key] = ConfigValue(_typed(value), Provenance("log", source, line))
    later = facts.join(first.select("key", first_value="value"), on="key").filter(
        pl.col("value") != pl.col("first_value")
    )
    for key, value, first_value, line in (
        later.unique("key", keep="first", maintain_order=True)
        .select("key", "value", "first_value", "line")
        .iter_rows()
    ):
        warnings.append(
            f"{source}:{line}: {key} changed from {first_value} to {value} in a later launch; "
            "the first value is used"
        )
    _derive_config(config)
    # Only Megatron-DeepSpeed has a `deepspeed` argument (False when run without the engine).
    deepspeed_fork = "deepspeed" in config or bool(printed_keys & DEEPSPEED_FIELDS)
    framework = "megatron-deepspeed" if deepspeed_fork else "megatron-lm"
    return config, framework, warnings


def _derive_config(config: dict[str, ConfigValue]) -> None:
    """Name the facts the data model asks for (dtype, recompute, num_gpus) from Megatron args."""

    def flag(name: str) -> ConfigValue | None:
        found = config.get(name)
        return found if found is not None and found.value not in (False, None) else None

    if "dtype" not in config:
        for arg, dtype in (("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "fp16")):
            if (found := flag(arg)) is not None:
                config["dtype"] = ConfigValue(dtype, found.provenance)
                break
        else:
            torch_dtype = config.get("params_dtype")
            names = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}
            if torch_dtype is not None and str(torch_dtype.value) in names:
                config["dtype"] = ConfigValue(names[str(torch_dtype.value)], torch_dtype.provenance)
    granularity = flag("recompute_granularity")
    checkpointing = flag("checkpoint_activations") or flag("recompute_activations")
    if granularity is not None:
        config["recompute"] = ConfigValue(str(granularity.value), granularity.provenance)
    elif checkpointing is not None:
        kind = "selective" if checkpointing is config.get("recompute_activations") else "full"
        config["recompute"] = ConfigValue(kind, checkpointing.provenance)
    elif "recompute_granularity" in config or "checkpoint_activations" in config:
        source = (
            config.get("recompute_granularity") or config["checkpoint_activations"]
        ).provenance
        config["recompute"] = ConfigValue("none", source)
    for old, new in RENAMED_ARGUMENTS.items():
        if flag(old) is not None and flag(new) is None:
            config[new] = config[old]
    if flag("world_size") is not None:
        config["num_gpus"] = config["world_size"]


def _first_copies(frames: list[pl.DataFrame], key: str) -> list[pl.Series]:
    """Per frame, which rows are the first of their `key` over all frames: the one copy kept
    of a line that several ranks or nodes printed."""
    first = pl.concat([f.select(key) for f in frames]).get_column(key).is_first_distinct()
    masks = []
    offset = 0
    for frame in frames:
        masks.append(first.slice(offset, frame.height))
        offset += frame.height
    return masks


def _table(frames: list[pl.DataFrame], config: dict[str, ConfigValue], source: str) -> pl.DataFrame:
    """The per-iteration table from the chunks' records (in line order, as chunks are read in
    order): copies removed, segments and intervals added, in the contract's schema.

    Everything is done chunk by chunk and the chunks are concatenated without copying; only
    segments and intervals, which need the whole run, are computed on the two columns they
    read.
    """
    masks = _first_copies(frames, "key")
    kept = [f if m.all() else f.filter(m) for f, m in zip(frames, masks, strict=True)]
    new_segment = (pl.col("launch") != pl.col("launch").shift(1)) | (
        pl.col("iteration") <= pl.col("iteration").shift(1)
    )
    log_interval = config.get("log_interval")
    derived = (
        pl.concat([f.select("launch", "iteration") for f in kept])
        .with_columns(segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32))
        .select("segment", interval=_interval(log_interval.value if log_interval else None))
    )
    tables = []
    offset = 0
    for frame in kept:
        columns = [c for c in frame.columns if c in ITERATION_SCHEMA]
        part = frame.select(columns).hstack(derived.slice(offset, frame.height))
        tables.append(conform_table(part.with_columns(source=pl.lit(source))))
        offset += frame.height
    return pl.concat(tables, rechunk=False) if tables else conform_table(pl.DataFrame())


def _long_part(frame: pl.DataFrame, previous_keys: pl.Series, source: str) -> pl.DataFrame:
    """One chunk's rows of the long table, in the contract's schema, copies removed.

    The copies several ranks print of a timer or memory line sit next to each other, so
    they are recognised within the chunk and against the chunk before it; the keys need
    not be kept for the whole file.
    """
    key = frame.get_column("copy_key")
    first = key.is_first_distinct() & ~key.is_in(previous_keys.implode())
    kept = frame if first.all() else frame.filter(first)
    return conform_metrics(kept.drop("copy_key").with_columns(source=pl.lit(source)))


def _wide_fields(fields: pl.DataFrame) -> pl.DataFrame:
    """The iteration-line fields that have a column, one column each, keyed by (line, piece)."""
    known = fields.drop_nulls("column")
    columns = list(dict.fromkeys([*FIELD_COLUMNS.values(), "step_time_s"]))
    wide = known.unique(["line", "piece", "column"], keep="first", maintain_order=True).pivot(
        on="column", index=["line", "piece"], values="value", on_columns=columns
    )
    return wide


def _interval(log_interval: object) -> pl.Expr:
    """Iterations each record covers: the step from the previous record, at most the log interval.

    The log interval is the `log_interval` argument when the log has it, else the segment's
    most common step. A larger step means records are missing (a cut log), not a longer
    average; a segment's first record covers the log interval (or its iteration number, if
    smaller).
    """
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = (
        pl.lit(log_interval, dtype=pl.Int64)
        if isinstance(log_interval, int) and log_interval > 0
        else step.drop_nulls().mode().min().over("segment")
    )
    first = pl.min_horizontal(typical, pl.col("iteration"))
    return (
        pl.coalesce(pl.min_horizontal(step, typical), first, pl.lit(1))
        .clip(lower_bound=1)
        .cast(pl.Int64)
    )
