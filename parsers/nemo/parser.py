"""The plugin: detection, and the assembly of a log's NeMo lines into one Run."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import (
    ConfigValue,
    Provenance,
    Run,
    SourceInfo,
    compact_table,
    conform_metrics,
    conform_table,
)
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.parsers.nemo import config as nemo_config
from loganalyzer.parsers.nemo import lines
from loganalyzer.sources import text_head
from loganalyzer.textlog import scanned_chunks, timestamps

# What detection looks for in a file's head, and how sure each makes it. A Megatron-Bridge
# log holds Megatron-LM's iteration lines (the Megatron parser claims them at 0.95) and its
# own config dump, which only this parser reads: it claims such a log above Megatron's.
PROGRESS_LINE = re.compile(r"Training epoch \d{1,9}, iteration \d{1,18}/\d{1,18} \|")
BAR_LINE = re.compile(r"Epoch \d{1,9}: [^\n]{0,400}?(?:reduced_train_loss|train_step_timing in s)=")
BRIDGE_DUMP = "------- Task Configuration -------"
BRIDGE_TARGET = "megatron.bridge.training.config.ConfigContainer"
NEMO1_DUMP = "Experiment configuration ***"
NEMO_LOGGER = re.compile(r"\[NeMo [IWE] \d{4}-\d\d-\d\d ")

# Megatron-LM's iteration line, as Megatron-Bridge prints it.
MEGATRON_STEP_FIELD = "elapsed time per iteration"

NO_TIMING = (
    "the Lightning bars carry no `train_step_timing in s` (exp_manager.log_step_timing off):"
    " step times unknown; tqdm's s/it is a smoothed rate over redraws and is not used"
)
BAR_PRECISION = (
    "values are read from Lightning's progress bar, which prints 3 to 4 significant digits"
    " (`train_step_timing in s=49.50`, `global_step=2e+3`); a step whose global_step is"
    " printed inexactly is numbered by the bar's count of steps done"
)
NO_DUMP = (
    "no config dump (NeMo 1's `Experiment configuration`, Megatron-Bridge's `Task"
    " Configuration`): model shape, batch and parallelism come only from the options given"
)
GLOO_WORLD = (
    "GPU count from gloo's `[Gloo] Rank N is connected to K peer ranks` lines (the largest"
    " group, K + 1 ranks, is the world); neither the config dump nor Lightning states it"
)


class NemoParser:
    """NeMo 1, NeMo 2 and Megatron-Bridge stdout (the plugin API is in loganalyzer.plugin)."""

    name = "nemo"
    description = (
        "NeMo 1 (Lightning bars) and NeMo 2 (ProgressPrinter) stdout, Megatron-Bridge stdout"
        " with its config dump"
    )
    tested_on = (
        "NeMo 1.x megatron_gpt (Lightning progress bars, hydra config)",
        "NeMo 2.x BioNeMo recipes",
        "NeMo 2.5.0rc0 performance scripts",
        "Megatron-Bridge 0.2.0rc7",
    )

    def detect(self, path: Path) -> float:
        head = text_head(path)
        if head is None:
            return 0.0
        if BRIDGE_DUMP in head and BRIDGE_TARGET in head:
            return 0.97
        if "Training epoch " in head and PROGRESS_LINE.search(head):
            return 0.95
        if "Epoch " in head and BAR_LINE.search(head):
            return 0.9
        if NEMO1_DUMP in head:
            return 0.6
        return 0.3 if NEMO_LOGGER.search(head) else 0.0

    def parse(self, path: Path) -> Run:
        source = str(path)
        parts: dict[str, list[pl.DataFrame]] = {}
        for chunk in scanned_chunks(path, _scan):
            for key, part in chunk.items():
                parts.setdefault(key, []).append(part)
        if not parts:  # an empty file
            raise NothingReadError(f"{source}: no NeMo progress lines, bars or config dump")
        found = {key: pl.concat(frames, how="diagonal_relaxed") for key, frames in parts.items()}
        config, warnings = _config(found, source)
        progress = found["progress"]
        bars = found["bars"]
        if progress.height or bars.height:
            if progress.height:
                table, metrics, totals = _progress_table(progress, found["progress_fields"])
                framework = "nemo2"
            else:
                table, metrics, totals = _bar_table(bars, found["bar_fields"], warnings, source)
                framework = "nemo1"
            if totals is not None and "train_iters" not in config:
                line, total = totals
                config["train_iters"] = ConfigValue(total, Provenance("log", source, line))
            table = conform_table(table.with_columns(source=pl.lit(source)))
            metrics = conform_metrics(metrics.with_columns(source=pl.lit(source)))
            endings = read_endings([found["endings"]], source)
        elif found["megatron_lines"].height:
            return _bridge(path, config, warnings, found)
        elif config:
            table, metrics = conform_table(pl.DataFrame()), conform_metrics(pl.DataFrame())
            framework = "nemo"
            endings = read_endings([found["endings"]], source)
            warnings.append(f"{source}: no training steps logged (the run may have died early)")
        else:
            raise NothingReadError(f"{source}: no NeMo progress lines, bars or config dump")
        config["framework"] = ConfigValue(framework, Provenance("log", source))
        return Run(
            framework=framework,
            config=config,
            table=compact_table(table),
            metrics=metrics,
            sources=[SourceInfo(source, self.name, table.height)],
            warnings=warnings,
            endings=endings,
        )


def _scan(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Every kind of line one chunk holds."""
    text = pl.col("text")
    progress = lines.progress_lines(frame)
    bars = lines.bar_frames(frame)
    # A dump's YAML lines are looked for only in a chunk that holds a dump's marker, or that
    # starts inside one (its first line YAML-shaped): the pattern is not run over the log.
    first = frame.head(1).select(text.str.contains(nemo_config.YAML_LINE)).to_series()
    has_mark = frame.select(text.str.contains_any(list(nemo_config.DUMP_MARKS)).any()).item()
    dump = (
        nemo_config.dump_lines(frame)
        if has_mark or (first.len() and bool(first[0]))
        else nemo_config.dump_lines(frame.head(0))
    )
    return {
        "progress": progress.drop("rest"),
        "progress_fields": lines.progress_fields(progress),
        "bars": bars.drop("postfix"),
        "bar_fields": lines.bar_fields(bars),
        "dump": dump,
        "startup": nemo_config.startup_rows(frame),
        "megatron_lines": frame.filter(text.str.contains(MEGATRON_STEP_FIELD, literal=True))
        .select("line")
        .head(1),
        "endings": ending_candidates(frame),
    }


def _config(
    found: dict[str, pl.DataFrame], source: str
) -> tuple[dict[str, ConfigValue], list[str]]:
    """The first dump's config, then the start-up lines' facts it lacks."""
    warnings: list[str] = []
    config: dict[str, ConfigValue] = {}
    printed = nemo_config.dumps(found["dump"])
    if printed:
        config, notes = nemo_config.dump_config(nemo_config.dotted(printed[0]), source)
        warnings.extend(f"{source}: {note}" for note in notes)
    else:
        warnings.append(f"{source}: {NO_DUMP}")
    startup = found["startup"].sort("line")
    first = startup.unique("key", keep="first", maintain_order=True)
    stated = {key: (value, line) for line, key, value in first.iter_rows()}
    for key in ("padded_vocab_size", "vocab_size"):
        if key in stated and key not in config:
            value, line = stated[key]
            config[key] = ConfigValue(int(value), Provenance("log", source, line))
    if "num_gpus" not in config:
        if "lightning_world_size" in stated:
            value, line = stated["lightning_world_size"]
            config["num_gpus"] = ConfigValue(int(value), Provenance("log", source, line))
        elif "gloo_peers" in stated:
            peers = startup.filter(pl.col("key") == "gloo_peers").with_columns(
                pl.col("value").cast(pl.Int64)
            )
            line, _, most = peers.sort("value", descending=True, maintain_order=True).row(0)
            config["num_gpus"] = ConfigValue(int(most) + 1, Provenance("log", source, line))
            warnings.append(f"{source}: {GLOO_WORLD}")
    if "num_gpus" in config:
        config["world_size"] = config["num_gpus"]
    return config, warnings


def _wide(fields: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The fields that have a column, one column each, keyed by `keys`."""
    columns = list(dict.fromkeys(lines.FIELD_COLUMNS.values()))
    divisor = pl.col("key").replace_strict(lines.FIELD_DIVISORS, default=1.0)
    known = fields.with_columns(
        column=pl.col("key").replace_strict(lines.FIELD_COLUMNS, default=None),
        value=pl.col("value") / divisor,
    ).drop_nulls("column")
    return known.unique([*keys, "column"], keep="first", maintain_order=True).pivot(
        on="column", index=keys, values="value", on_columns=columns
    )


def _segmented(records: pl.DataFrame) -> pl.DataFrame:
    """Segments (a step counter that goes back is a relaunch) and intervals (the step from
    the record before, at most the segment's usual step; 1 for a segment's first)."""
    new_segment = pl.col("iteration") <= pl.col("iteration").shift(1)
    records = records.with_columns(segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32))
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    interval = pl.coalesce(pl.min_horizontal(step, typical), step, pl.lit(1))
    return records.with_columns(interval=interval.clip(lower_bound=1).cast(pl.Int64))


def _long(fields: pl.DataFrame, records: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The fields without a column, in the long table at their record's iteration."""
    other = fields.filter(~pl.col("key").is_in(list(lines.FIELD_COLUMNS))).drop_nulls("value")
    return other.join(records.select(*keys, "iteration", "rank"), on=keys).select(
        "line",
        "iteration",
        name=pl.col("printed").cast(pl.Categorical),
        value="value",
        rank="rank",
    )


def _progress_table(
    progress: pl.DataFrame, fields: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, tuple[int, int] | None]:
    """NeMo 2's records: numbered by the printed `global_step` + 1 (the printer's `iteration`
    counts within an epoch), copies printed by several ranks dropped; and the first line
    with the run's step count (`iteration i/N-1`: N steps)."""
    progress = progress.sort("line")
    step_field = fields.filter(pl.col("key") == "global_step").select(
        "line", global_step=pl.col("value").cast(pl.Int64, strict=False)
    )
    wide = _wide(fields, ["line"])
    records = (
        progress.join(step_field, on="line", how="left")
        .join(wide, on="line", how="left")
        .with_columns(iteration=pl.coalesce("global_step", "step") + 1)
    )
    # several ranks print the same line: the first copy of each (iteration, fields) is kept
    signature = pl.struct(pl.exclude("line", "rank", "stamp")).hash()
    records = records.filter(signature.is_first_distinct())
    records = _segmented(records)
    if records.select(pl.col("stamp").is_not_null().any()).item():
        records = records.with_columns(timestamps(records.get_column("stamp")).alias("timestamp"))
    first = records.drop_nulls("total").head(1)
    totals = (first.item(0, "line"), first.item(0, "total") + 1) if first.height else None
    metrics = _long(fields, records, ["line"])
    keep = [c for c in records.columns if c in _TABLE]
    return records.select(keep), metrics, totals


def _bar_table(
    bars: pl.DataFrame, fields: pl.DataFrame, warnings: list[str], source: str
) -> tuple[pl.DataFrame, pl.DataFrame, tuple[int, int] | None]:
    """NeMo 1's records: the last frame drawn for each step (a bar is redrawn many times a
    step; its postfix holds the step's logged values), numbered by the printed `global_step`
    + 1 where it is exact, else by the bar's count (the steps done: global_step + 1)."""
    keys = ["line", "piece"]
    step_field = fields.filter(pl.col("key") == "global_step").select(
        *keys, global_step=pl.col("value"), exact="exact"
    )
    wide = _wide(fields, keys)
    loss = fields.filter(pl.col("key") == lines.BAR_LOSS).select(*keys, bar_loss="value")
    frames = (
        bars.sort(keys)
        .join(step_field, on=keys, how="left")
        .join(wide, on=keys, how="left")
        .join(loss, on=keys, how="left")
        .with_columns(
            iteration=pl.when(pl.col("exact"))
            .then(pl.col("global_step").cast(pl.Int64, strict=False) + 1)
            .otherwise(pl.col("count")),
            loss=pl.coalesce("loss", "bar_loss"),
        )
    )
    records = frames.filter(pl.col("iteration").is_last_distinct())
    if records.select(pl.col("step_time_s").is_null().all()).item():
        warnings.append(f"{source}: {NO_TIMING}")
    warnings.append(f"{source}: {BAR_PRECISION}")
    records = _segmented(records)
    first = records.drop_nulls("total").head(1)
    totals = (first.item(0, "line"), first.item(0, "total")) if first.height else None
    metrics = _long(fields.filter(pl.col("key") != lines.BAR_LOSS), records, keys)
    keep = [c for c in records.columns if c in _TABLE]
    return records.select(keep), metrics, totals


_TABLE = {
    "iteration",
    "interval",
    "step_time_s",
    "timestamp",
    "loss",
    "lr",
    "grad_norm",
    "global_batch_size",
    "reported_tflops_per_gpu",
    "mem_max_allocated_gb",
    "segment",
    "rank",
    "line",
}


def _bridge(
    path: Path, config: dict[str, ConfigValue], warnings: list[str], found: dict[str, pl.DataFrame]
) -> Run:
    """A Megatron-Bridge log: Megatron-LM's iteration lines, read by the Megatron parser,
    with the config Bridge dumped (which outranks what the Megatron parser gathered) and
    Bridge's `Step Time : ... TFLOP/s/GPU` figure as the reported TFLOPS of the record
    nearest it (rank 0 prints it, the last rank the iteration line: their order varies)."""
    run: Run = MegatronParser().parse(path)
    source = str(path)
    merged = {k: v for k, v in run.config.items() if k not in config} | config
    merged["framework"] = ConfigValue("megatron-bridge", Provenance("log", source))
    reported = found["startup"].filter(pl.col("key") == "bridge_tflops_per_gpu")
    table = run.table
    if reported.height and table.height:
        stated = reported.select(
            pl.col("line").cast(pl.Int64), stated=pl.col("value").cast(pl.Float64, strict=False)
        ).sort("line")
        records = table.select(record=pl.col("line")).drop_nulls().sort("record")
        placed = (
            stated.join_asof(records, left_on="line", right_on="record", strategy="nearest")
            .unique("record", keep="first", maintain_order=True)
            .select(line="record", stated="stated")
        )
        table = compact_table(
            table.join(placed, on="line", how="left", maintain_order="left")
            .with_columns(reported_tflops_per_gpu=pl.coalesce("reported_tflops_per_gpu", "stated"))
            .select(table.columns)
        )
    run.framework = "megatron-bridge"
    run.config = merged
    run.table = table
    run.sources = [SourceInfo(source, NemoParser.name, table.height)]
    run.warnings = [*warnings, *run.warnings]
    return run
