"""The plugin: detection, and the assembly of a log's torchtitan lines into one Run."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import Run, SourceInfo, conform_metrics
from loganalyzer.parsers.steps import launches, one_copy, step_table
from loganalyzer.parsers.torchtitan import lines
from loganalyzer.parsers.torchtitan.config import run_config
from loganalyzer.sources import text_head
from loganalyzer.textlog import scanned_chunks

# A step line: the counter and loss, then one of the fields only torchtitan prints together.
ANSI_CODE = r"(?:\x1b\[[0-9;]*m)?"
STEP_LINE = re.compile(
    rf"(?:^|\s-\s|\]\s?){ANSI_CODE}step:\s*\d+\s+{ANSI_CODE}loss:\s*\S+"
    rf".{{0,200}}?\s{ANSI_CODE}(?:[tw]ps|mfu):",
    re.M,
)
# torchtitan's own start-up lines, without a step line yet (a run that died early).
START_MARKERS = re.compile(
    r"\[titan\] \d{4}-|torchtitan version: |Building \w+ \w+ with \w*ModelArgs\("
)
STEP_SCORE = 0.9
START_SCORE = 0.5

# How the step times are read, said once per run.
CLOCK_NOTE = (
    "step times from the logger timestamps of consecutive step lines over the steps between"
    " them (torchtitan prints no step time; the first step line of each launch has none)"
)


class TorchtitanParser:
    """torchtitan stdout logs (the plugin API is in loganalyzer.plugin)."""

    name = "torchtitan"
    description = (
        "torchtitan stdout (2024 to 2026): step lines (wps/tps, tflops, mfu, grad_norm),"
        " ModelArgs and flavor presets, device mesh, batch, the job config echoed (TOML, JSON,"
        " dict), validation and checkpoint lines"
    )
    tested_on = (
        "torchtitan 2024-10 (wps:, no [titan] prefix)",
        "torchtitan 2025-02 (tps:, mfu without tflops)",
        "torchtitan 2025-06 (tflops:)",
        "torchtitan 2025-10 to 2026-05 (grad_norm:, [titan] prefix)",
    )

    def detect(self, path: Path) -> float:
        head = text_head(path)
        if head is None or ("step:" not in head and "titan" not in head):
            return 0.0
        if "step:" in head and STEP_LINE.search(head):
            return STEP_SCORE
        return START_SCORE if START_MARKERS.search(head) else 0.0

    def parse(self, path: Path) -> Run:
        source = str(path)
        found: dict[str, list[pl.DataFrame]] = {
            "steps": [],
            "facts": [],
            "events": [],
            "endings": [],
        }
        for chunk in scanned_chunks(path, _scan):
            for key, part in chunk.items():
                found[key].append(part)
        steps = pl.concat(found["steps"])
        facts = pl.concat(found["facts"])
        if steps.height == 0 and facts.filter(~pl.col("key").str.starts_with("cfg.")).height == 0:
            raise NothingReadError(f"{source}: no torchtitan step lines or start-up lines found")
        config, warnings = run_config(facts, source)
        steps, copies = one_copy(steps.sort("line"))
        starts = facts.filter(pl.col("key") == "run_start").select("line")
        records = launches(_values(steps), starts)
        table = step_table(records, source, clock_times=True)
        if table.height:
            warnings.append(f"{source}: {CLOCK_NOTE}")
        if copies:
            warnings.append(
                f"{source}: {copies} copies of step lines printed by other ranks were set aside"
            )
        if table.height == 0:
            warnings.append(f"{source}: no step lines (the run may have died before logging)")
        return Run(
            framework="torchtitan",
            config=config,
            table=table,
            metrics=_metrics(steps, pl.concat(found["events"]), source),
            sources=[SourceInfo(source, self.name, table.height)],
            warnings=warnings,
            endings=read_endings(found["endings"], source),
        )


def _scan(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Every kind of line one chunk holds."""
    candidates = lines.candidates(frame)
    starts = candidates.filter(
        pl.col("text").str.contains("Training starts at step", literal=True)
    ).select("line", key=pl.lit("run_start"), value=pl.lit(""))
    return {
        "steps": lines.step_lines(candidates),
        "events": lines.event_lines(candidates),
        "facts": pl.concat([lines.fact_lines(candidates), lines.config_echo_lines(frame), starts]),
        "endings": ending_candidates(frame),
    }


def _values(steps: pl.DataFrame) -> pl.DataFrame:
    """Step rows with their figures as the table's columns (numbers)."""
    return steps.select(
        "line",
        "rank",
        "stamp",
        "iteration",
        loss=lines.as_number(pl.col("loss")),
        grad_norm=lines.as_number(pl.col("grad_norm")),
        lr=lines.as_number(pl.col("lr")),
        reported_tflops_per_gpu=lines.as_number(pl.col("tflops")),
    )


def _metrics(steps: pl.DataFrame, events: pl.DataFrame, source: str) -> pl.DataFrame:
    """The long table: what each step line prints beside the table's columns, validation
    losses, and checkpoint saves tied to the step line before them."""
    names = list(lines.LONG_NAMES)
    printed = (
        steps.select("iteration", "rank", "line", *names)
        .unpivot(index=["iteration", "rank", "line"], on=names, variable_name="name")
        .with_columns(
            value=lines.as_number(pl.col("value")),
            name=pl.col("name").replace_strict(lines.LONG_NAMES),
        )
    )
    before = steps.select("line", step="iteration").sort("line")
    placed = (
        events.sort("line")
        .join_asof(before, on="line", strategy="backward")
        .with_columns(iteration=pl.coalesce("iteration", "step"))
        .drop("step")
        .unique(["iteration", "name"], keep="first", maintain_order=True)  # ranks' copies
    )
    long = (
        pl.concat([printed, placed.select(printed.columns)])
        .filter(pl.col("value").is_not_null() & pl.col("iteration").is_not_null())
        .with_columns(source=pl.lit(source))
        .sort("line", "name")
    )
    return conform_metrics(
        long.with_columns(
            pl.col("name").cast(pl.Categorical), pl.col("source").cast(pl.Categorical)
        )
    )
