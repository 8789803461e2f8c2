"""The plugin: detection, and the assembly of a log's nanotron lines into one Run."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import Run, SourceInfo, conform_metrics
from loganalyzer.parsers.nanotron import lines
from loganalyzer.parsers.nanotron.config import run_config
from loganalyzer.parsers.steps import launches, one_copy, step_table
from loganalyzer.sources import text_head
from loganalyzer.textlog import scanned_chunks

# An iteration line: the counter, then nanotron's own field names.
ITERATION_LINE = re.compile(
    r"iteration: \d+ / \d+ \| (?:consumed_tokens|elapsed_time_per_iteration_ms): "
)
# nanotron's logger prefix, and the Config it prints at start (a run that died early).
START_MARKERS = re.compile(
    r"\[[A-Z]+\|DP=\d+\|PP=\d+\|TP=\d+[^\]]*\]: (?:Config|\[Start training\])"
)
ITERATION_SCORE = 0.9
START_SCORE = 0.5

SAVE_EVENT = "event/checkpoint_save"

# What nanotron's human_format does to every figure, said once per run.
PRECISION_NOTE = (
    "nanotron prints every figure to 3 significant digits (`11.5K` ms): step times and"
    " figures are exact to within 0.5%"
)


class NanotronParser:
    """nanotron stdout logs (the plugin API is in loganalyzer.plugin)."""

    name = "nanotron"
    description = (
        "nanotron stdout (2024 to today): iteration lines with K/M/G figures (both wordings),"
        " the printed Config (model, tokens, parallelism) or its YAML, checkpoint saves"
    )
    tested_on = ("nanotron 2024-01", "nanotron 2024-08 (0.4)", "nanotron 2025-10")

    def detect(self, path: Path) -> float:
        head = text_head(path)
        if head is None or ("iteration: " not in head and "|DP=" not in head):
            return 0.0
        if ITERATION_LINE.search(head):
            return ITERATION_SCORE
        return START_SCORE if START_MARKERS.search(head) else 0.0

    def parse(self, path: Path) -> Run:
        source = str(path)
        found: dict[str, list[pl.DataFrame]] = {
            "fields": [],
            "facts": [],
            "saves": [],
            "endings": [],
        }
        for chunk in scanned_chunks(path, _scan):
            for key, part in chunk.items():
                found[key].append(part)
        fields = pl.concat(found["fields"])
        facts = pl.concat(found["facts"])
        if fields.height == 0 and facts.height == 0:
            raise NothingReadError(f"{source}: no nanotron iteration lines or config found")
        config, warnings = run_config(facts, source)
        records = _records(fields)
        records, copies = one_copy(records)
        starts = facts.filter(pl.col("key") == "start.mbs").select("line")
        table = step_table(launches(records, starts), source, clock_times=False)
        if table.height:
            warnings.append(f"{source}: {PRECISION_NOTE}")
        if copies:
            warnings.append(
                f"{source}: {copies} copies of iteration lines printed by other ranks were set"
                " aside"
            )
        if table.height == 0:
            warnings.append(f"{source}: no iteration lines (the run may have died before logging)")
        return Run(
            framework="nanotron",
            config=config,
            table=table,
            metrics=_metrics(fields, table, pl.concat(found["saves"]), source),
            sources=[SourceInfo(source, self.name, table.height)],
            warnings=warnings,
            endings=read_endings(found["endings"], source),
        )


def _scan(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Every kind of line one chunk holds."""
    candidates = lines.candidates(frame)
    return {
        "fields": lines.iteration_fields(candidates),
        "facts": lines.config_lines(candidates),
        "saves": lines.save_lines(candidates),
        "endings": ending_candidates(frame),
    }


def _records(fields: pl.DataFrame) -> pl.DataFrame:
    """One row per iteration line, the table's fields as its columns, in line order. The
    printed global batch is a column only where exact: in sequences (before March 2025) and
    below 1000 (human_format keeps 3 significant digits: 1024 prints `1.02K`)."""
    keys = fields.select("line", "rank", "stamp", "iteration").unique("line").sort("line")
    batch = pl.col("name") == "global_batch_size"
    inexact = batch & (_in_tokens() | (pl.col("value") >= 1000))
    table_fields = fields.filter(
        pl.col("name").is_in(list(lines.TABLE_FIELDS)) & ~inexact.fill_null(False)
    )
    if table_fields.height == 0:
        return keys
    scaled = table_fields.with_columns(
        column=pl.col("name").replace_strict({k: v[0] for k, v in lines.TABLE_FIELDS.items()}),
        value=pl.col("value")
        * pl.col("name").replace_strict({k: v[1] for k, v in lines.TABLE_FIELDS.items()}),
    )
    wide = scaled.pivot(on="column", index="line", values="value", aggregate_function="first")
    return keys.join(wide, on="line", how="left").sort("line")


def _in_tokens() -> pl.Expr:
    """Whether a field's line is of the wording whose `global_batch_size` counts tokens."""
    found: pl.Expr = (pl.col("name") == lines.BATCH_IN_TOKENS).any().over("line")
    return found


def _metrics(
    fields: pl.DataFrame, table: pl.DataFrame, saves: pl.DataFrame, source: str
) -> pl.DataFrame:
    """The long table: each kept iteration line's fields that are not the table's columns,
    the printed global batch (`global_batch_tokens` where it counts tokens), and checkpoint
    saves tied to the iteration line before them."""
    kept = table.select("line")
    batch = pl.col("name") == "global_batch_size"
    name = pl.when(batch & _in_tokens()).then(pl.lit("global_batch_tokens")).otherwise("name")
    long = (
        fields.join(kept, on="line", how="semi")
        .with_columns(name=name)
        .filter(
            (~pl.col("name").is_in(list(lines.TABLE_FIELDS)) | batch)
            & pl.col("value").is_not_null()
        )
        .select(
            "iteration",
            pl.col("name").cast(pl.Categorical),
            "value",
            source=pl.lit(source).cast(pl.Categorical),
            rank="rank",
            line="line",
        )
    )
    placed = (
        saves.sort("line")
        .join_asof(table.select("line", "iteration").sort("line"), on="line")
        .drop_nulls("iteration")
        .unique("iteration", keep="first", maintain_order=True)
        .select(
            "iteration",
            name=pl.lit(SAVE_EVENT).cast(pl.Categorical),
            value=pl.lit(1.0),
            source=pl.lit(source).cast(pl.Categorical),
            rank=pl.col("rank"),
            line=pl.col("line"),
        )
    )
    return conform_metrics(pl.concat([long, placed]).sort("line", "name"))
