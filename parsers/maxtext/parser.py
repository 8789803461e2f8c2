"""The plugin: detection, and the assembly of a MaxText log's lines into one Run."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import Run, SourceInfo, conform_metrics, conform_table
from loganalyzer.parsers.maxtext import lines
from loganalyzer.parsers.maxtext.config import run_config
from loganalyzer.sources import text_head
from loganalyzer.textlog import scanned_chunks

# A step line, whatever precedes it on its line.
STEP_LINE = re.compile(r"\bcompleted step: \d+, seconds: ")
# A start-up without steps (a run that died compiling): the dump with MaxText's own lines.
START_UP = re.compile(r"\bSystem Information: Jax Version: |\bNum_devices: \d+, shape \(")


class MaxTextParser:
    """MaxText stdout logs, TPU and GPU (the plugin API is in loganalyzer.plugin)."""

    name = "maxtext"
    description = (
        "MaxText stdout (2023 to today, with or without absl prefixes): completed step lines,"
        " config dump, devices"
    )
    tested_on = (
        "MaxText 2023-10 (TFLOP/s wording; TPU v5e)",
        "MaxText 2024-03 (JAX 0.4.25; GPU)",
        "MaxText 2025-08 (JAX 0.7.2; TPU v5p)",
        "MaxText 2026-03 (JAX 0.9.1, absl prefixes; TPU v6e)",
    )

    def detect(self, path: Path) -> float:
        head = text_head(path)
        if head is None or ("completed step: " not in head and "Config param " not in head):
            return 0.0
        if STEP_LINE.search(head):
            return 0.9
        return 0.5 if "Config param " in head and START_UP.search(head) else 0.0

    def parse(self, path: Path) -> Run:
        source = str(path)
        found: dict[str, list[pl.DataFrame]] = {k: [] for k in ("steps", "pairs", "config")}
        endings: list[pl.DataFrame] = []
        for chunk, ending in scanned_chunks(path, _scan):
            for key, part in chunk.items():
                found[key].append(part)
            endings.append(ending)
        steps, pairs, rows = (pl.concat(found[key]) for key in ("steps", "pairs", "config"))
        config, notes = run_config(rows, source)
        table = _table(steps, pairs, source)
        if table.height == 0 and rows.height == 0:
            raise NothingReadError(f"{source}: no MaxText step or config lines found")
        warnings = [f"{source}: {note}" for note in notes]
        if table.height == 0:
            warnings.append(f"{source}: no training steps logged (the run may have died early)")
        return Run(
            framework="maxtext",
            config=config,
            table=table,
            metrics=_metrics(steps, pairs, source),
            sources=[SourceInfo(source, self.name, table.height)],
            warnings=warnings,
            endings=read_endings(endings, source),
        )


def _scan(frame: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    """Every kind of line one chunk holds, and its ending lines."""
    found = lines.candidates(frame)
    steps, pairs = lines.step_fields(found)
    parts = {"steps": steps, "pairs": pairs, "config": lines.config_rows(found)}
    return parts, ending_candidates(frame)


def _table(steps: pl.DataFrame, pairs: pl.DataFrame, source: str) -> pl.DataFrame:
    """One record a step line, in the contract's schema: a step line covers one step; a
    step number that does not increase starts a segment (a restart); a line that repeats the
    one before it, step and figures (the copies several hosts print), is kept once."""
    columns = sorted(set(lines.COLUMNS.values()))
    known = pairs.filter(pl.col("name").is_in(list(lines.COLUMNS))).with_columns(
        column=pl.col("name").replace_strict(lines.COLUMNS, return_dtype=pl.String)
    )
    wide = (
        known.unique(["line", "column"], keep="first", maintain_order=True)
        .pivot(on="column", index="line", values="value", on_columns=columns)
        .select("line", *columns)
    )
    records = steps.drop_nulls("iteration").join(wide, on="line", how="left").sort("line")
    printed = pl.struct("iteration", *columns)
    records = records.filter(~printed.eq_missing(printed.shift(1)))
    iteration = pl.col("iteration")
    return conform_table(
        records.with_columns(
            segment=(iteration <= iteration.shift(1)).fill_null(False).cum_sum().cast(pl.Int32),
            interval=pl.lit(1, dtype=pl.Int64),
            source=pl.lit(source),
        )
    )


def _metrics(steps: pl.DataFrame, pairs: pl.DataFrame, source: str) -> pl.DataFrame:
    """The step lines' other fields (`Tokens/s/device`, `total_weights`, `perplexity`, MoE and
    MTP losses...), long, as printed."""
    other = pairs.filter(~pl.col("name").is_in(list(lines.COLUMNS)))
    return conform_metrics(
        other.join(steps, on="line", how="inner").select(
            "iteration",
            pl.col("name").cast(pl.Categorical),
            "value",
            pl.lit(source).cast(pl.Categorical).alias("source"),
            "rank",
            "line",
        )
    )
