"""The plugin: detection, and the assembly of a whole file's chunks into one Run."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import (
    Run,
    SourceInfo,
    conform_metrics,
)
from loganalyzer.parsers.megatron.assembly import (
    HeldRecords,
    held,
    iteration_table,
    lone_record_warnings,
    long_part,
    with_reported_tflops,
)
from loganalyzer.parsers.megatron.config import (
    changes_only,
    counted_to,
    run_config,
    segment_config,
    with_totals,
)
from loganalyzer.parsers.megatron.metrics import (
    ANCHOR_SCHEMA,
    EFFECTIVE_TFLOPS_METRIC,
    anchored,
    row_key,
)
from loganalyzer.parsers.megatron.scan import Chunk, scan_chunk, stateful_frames
from loganalyzer.sources import text_head
from loganalyzer.spill import SpillingTable
from loganalyzer.textlog import scanned_in_flight

# An iteration line: `iteration N/ M |` at most this many characters before its step time.
ITERATION_HEAD_BEFORE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|")
STEP_TIME_FIELD = "elapsed time per iteration"
STEP_TIME_WITHIN = 300
DETECT_MARKERS = (
    (re.compile(r"^-+ arguments -+$", re.M), 0.6),
    (re.compile(r"using world size: \d+"), 0.6),
    (re.compile(r"megatron", re.I), 0.3),
)


class MegatronParser:
    """Megatron-LM and Megatron-DeepSpeed stdout logs (the plugin API is in loganalyzer.plugin)."""

    name = "megatron"
    description = "Megatron-LM (2021 to today) and Megatron-DeepSpeed stdout logs"
    # the releases whose real stdout the tests read (fixtures/megatron*, fixtures/corpus,
    # the shared BigScience logs)
    tested_on = (
        "Megatron-LM of 2021 (BigScience)",
        "Megatron-LM of 2022 (BERT)",
        "Megatron-LLM (2023 fork)",
        "Megatron-core ~0.6 (2024)",
        "Megatron-core ~0.8 (ms-swift, 2024)",
        "Megatron-core of Oct 2024",
        "Megatron-core of Nov 2025",
        "Megatron-Bridge (2026)",
        "BigScience Megatron-DeepSpeed (2021-2023)",
        "microsoft/Megatron-DeepSpeed (2022, 2025, 2026)",
        "argonne-lcf/Megatron-DeepSpeed",
        "DeepSpeedExamples Megatron-LM-v1.1.5-ZeRO3 (2021)",
    )

    def detect(self, path: Path) -> float:
        # a JSON file (PEFT's adapter_config.json names "megatron.core") is never a stdout log
        head = text_head(path)
        if head is None:
            return 0.0
        if _has_iteration_line(head):
            return 0.95
        return max((score for marker, score in DETECT_MARKERS if marker.search(head)), default=0.0)

    def parse(self, path: Path) -> Run:
        chunks: list[Chunk] = []
        records: list[HeldRecords] = []  # apart: released as soon as the table is built
        longs = SpillingTable()  # the long table outgrows memory on big logs: see spill.py
        last = NO_ANCHOR
        previous_keys = pl.Series("copy_key", [], dtype=pl.UInt64)
        reported: list[pl.DataFrame] = []  # TFLOPS lines below iteration lines: to the table
        endings_found: list[pl.DataFrame] = []
        for chunk, placed in _scanned(path):
            long = _continued(placed, last)
            last = _last_anchor(chunk, last)
            stated = pl.col("name") == EFFECTIVE_TFLOPS_METRIC
            if long.select(stated.any()).item():
                reported.append(long.filter(stated).select("line", "value"))
                long = long.filter(~stated)
            longs.add(long_part(long, previous_keys, str(path)))
            previous_keys = long.get_column("copy_key")
            records.append(held(chunk.records))
            endings_found.append(chunk.endings)
            chunks.append(
                dataclasses.replace(chunk, records=_NOTHING, extras=_NOTHING, metrics=_NOTHING)
            )
        facts = changes_only(pl.concat([c.facts for c in chunks], how="diagonal_relaxed"))
        if not any(r.frame.height for r in records) and facts.height == 0:
            raise NothingReadError(f"{path}: no Megatron iteration lines or arguments found")
        keys = frozenset().union(*(c.keys for c in chunks))
        config, framework, warnings = run_config(facts, keys, str(path))
        table, totals = iteration_table(records, config, str(path))
        warnings.extend(lone_record_warnings(table, config, str(path)))
        if reported:
            table = with_reported_tflops(table, pl.concat(reported))
        del chunks, records  # what of them the table does not hold: keys, launches
        facts = with_totals(facts, totals)
        config = counted_to(config, totals, str(path))
        later_launches = segment_config(facts, config, table, str(path))
        metrics = longs.finish(conform_metrics(pl.DataFrame()))
        if table.height == 0:
            warnings.append(f"{path}: no iteration lines (the run may have died before logging)")
        endings = read_endings(endings_found, str(path))
        return Run(
            framework=framework,
            config=config,
            table=table,
            metrics=metrics,
            sources=[SourceInfo(str(path), self.name, table.height)],
            warnings=warnings,
            segment_config=later_launches,
            endings=endings,
        )


def _has_iteration_line(head: str) -> bool:
    """Searched from the literal step-time field backwards: a pattern run forwards from every
    `iteration` to a field later on the line takes quadratic time on a long line of
    near-matches (a 1 MB line took minutes)."""
    at = head.find(STEP_TIME_FIELD)
    while at >= 0:
        if ITERATION_HEAD_BEFORE.search(head, max(0, at - STEP_TIME_WITHIN), at):
            return True
        at = head.find(STEP_TIME_FIELD, at + 1)
    return False


NO_ANCHOR = pl.DataFrame(schema=ANCHOR_SCHEMA)


_NOTHING = pl.DataFrame()


def _scanned(path: Path) -> Iterator[tuple[Chunk, pl.DataFrame]]:
    """The file's chunks scanned and their long-table rows placed (`_placed`), in order, on
    a thread pool."""
    return scanned_in_flight(stateful_frames(path), _placed)


def _placed(frame: pl.DataFrame) -> tuple[Chunk, pl.DataFrame]:
    """A chunk scanned, and its long-table rows, each tied to its iteration line within the
    chunk, in line order (with `launch`). Done on the pool: only the rows above the chunk's
    first iteration line are left for `_continued`, in file order."""
    chunk = scan_chunk(frame)
    placed = anchored(chunk.metrics, _anchors(chunk.records))  # in line order
    # the piece of a glued line is only needed within the chunk: not kept for the whole run
    chunk = dataclasses.replace(chunk, records=chunk.records.drop("piece"))
    if chunk.extras.height == 0:
        return chunk, placed
    long = pl.concat([chunk.extras, placed], how="diagonal_relaxed").sort(
        "line", maintain_order=True
    )
    return chunk, long


def _continued(long: pl.DataFrame, last_anchor: pl.DataFrame) -> pl.DataFrame:
    """A chunk's placed rows with those its own iteration lines could not place (above the
    first of them, in the launch the chunks before ended in) tied to the last iteration line
    of the chunks before; `launch` dropped."""
    if last_anchor.height:
        _, launch, iteration = last_anchor.row(0)
        lost = pl.col("iteration").is_null() & (pl.col("launch") == launch)
        if long.select(lost.any()).item():
            long = long.with_columns(
                iteration=pl.when(lost)
                .then(pl.lit(iteration, dtype=pl.Int64))
                .otherwise("iteration")
            ).with_columns(
                copy_key=pl.when(lost).then(row_key(pl.col("name"))).otherwise("copy_key")
            )
    continued: pl.DataFrame = long.drop("launch")
    return continued


def _last_anchor(chunk: Chunk, last_anchor: pl.DataFrame) -> pl.DataFrame:
    """The last iteration line read so far: the next chunk's first timer lines belong to it."""
    return _anchors(chunk.records.tail(1)) if chunk.records.height else last_anchor


def _anchors(records: pl.DataFrame) -> pl.DataFrame:
    """Iteration records as the anchors of the timer and memory lines below them."""
    anchors: pl.DataFrame = records.select(
        anchor_line="line", launch=pl.col("launch").cast(pl.Int32), iteration="iteration"
    )
    return anchors
