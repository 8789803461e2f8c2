"""Combine the Runs read from several files of one run (restarts, ranks, nodes) into one.

Files are put in the order the run wrote them (first timestamp where every file has one,
else first iteration, then path); a record that several files carry (each node's copy of
the same line) is kept once; every file starts a new segment, and segments are renumbered
0, 1, 2, ... over the records that remain.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from loganalyzer.model import MODEL_FACTS, RUN_FACTS, ConfigValue, Endings, Run, single_values
from loganalyzer.render.escape import terminal_safe
from loganalyzer.spill import budget_bytes, concat


def shown(value: object) -> str:
    """A log's value as a warning quotes it: control characters escaped (`\\x1b`), so that no
    output (the JSON's strings, the page, the terminal) carries a byte that acts on a screen."""
    return terminal_safe(str(value))


# A record is the same record when all of these agree (copies printed by several ranks).
RECORD_IDENTITY = ["iteration", "step_time_s", "loss", "lr", "timestamp", "reported_tflops_per_gpu"]
# What polars holds a record to tell first copies from the rest (measured: 638 MB for 2.5 M
# records of generated logs, 693 MB for those of the benchmark's 64 rank logs).
IDENTITY_BYTES = 256
# The most groups `first_copies` takes records in: 64 passes over 2.5 M iterations take
# about 0.2 s; 64 groups of 2.5 M records hold about 10 MB each.
MAX_GROUPS = 64


def first_copies(table: pl.DataFrame) -> pl.Series:
    """Whether each record is the first of the records whose `RECORD_IDENTITY` fields all
    agree, the fields compared as they are. polars holds about `IDENTITY_BYTES` a record to
    find them (693 MB for the 2.5 M records of 64 rank logs), so the records are taken in
    groups by a hash of their iteration (copies share it), in log order within each: as
    many groups as put about a spill budget's worth in each, at most `MAX_GROUPS` (each
    group is one more pass over the table's iterations)."""
    needed = -(-table.height * IDENTITY_BYTES // max(budget_bytes(), 1))
    groups = min(needed, MAX_GROUPS)
    identity = pl.struct(RECORD_IDENTITY).is_first_distinct()
    if groups <= 1:
        return table.select(identity).to_series()
    group = table.select(pl.col("iteration").hash(seed=0) % groups).to_series()
    first = pl.repeat(False, table.height, eager=True)
    for number in range(groups):
        rows = (group == number).arg_true()
        members = table.select(RECORD_IDENTITY)[rows]
        first = first.scatter(rows.filter(members.select(identity).to_series()), True)
    return first


def order_key(run: Run) -> tuple[int, object, int, str]:
    """Where a file's Run goes among others: by first timestamp where it has one, else by
    first iteration, then path."""
    # through expressions: `table[name]` would write a literal out (`model.compact_table`)
    first_stamp, first_iteration = run.table.select(
        pl.col("timestamp").min(), pl.col("iteration").min()
    ).row(0)
    path = run.sources[0].path if run.sources else ""
    has_stamp = 0 if first_stamp is not None else 1
    return (
        has_stamp,
        first_stamp if first_stamp is not None else 0,
        int(first_iteration) if isinstance(first_iteration, int) else 0,
        path,
    )


def merge_runs(runs: Sequence[Run]) -> Run:
    """One Run from several; a single run is returned unchanged."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=order_key)
    table = merged_table([run.table for run in ordered])
    config: dict[str, ConfigValue] = {}
    warnings: list[str] = []
    for run in ordered:
        warnings.extend(run.warnings)
        for key, value in run.config.items():
            if key not in config:
                config[key] = value
            elif config[key].value != value.value and key in (*MODEL_FACTS, *RUN_FACTS):
                warnings.append(
                    f"{value.provenance}: {key} = {shown(value.value)} differs from "
                    f"{shown(config[key].value)} ({config[key].provenance}); the first is used"
                )
    frameworks = sorted({run.framework for run in ordered})
    return Run(
        framework=frameworks[0] if len(frameworks) == 1 else "+".join(frameworks),
        config=config,
        table=table,
        metrics=concat([run.metrics for run in ordered]),
        sources=[source for run in ordered for source in run.sources],
        warnings=warnings,
        endings=sum((run.endings for run in ordered), Endings()),
    )


_VARIES = object()  # a table's records came from several files (or it has none)


def merged_table(tables: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """The files' tables (in file order; at least one) as one: the first copy of each
    record kept, each file's segments numbered after the files' before it.

    Each file's path is one value in its table (`model.compact_table`), which the
    concatenation would write out for every record (16 bytes each); it is carried as the
    file's position (4 bytes) until the copies are gone, and the path then put back by
    position. (polars keeps a value shared by every table, such as the interval, as one.)
    """
    paths = [single_values(t).get("source", _VARIES) for t in tables]
    by_position = all(p is not _VARIES for p, t in zip(paths, tables, strict=True) if t.height)
    pieces = []
    offset = 0
    for position, table in enumerate(tables):
        pieces.append(
            table.drop("source" if by_position else []).with_columns(
                _file=pl.lit(position, dtype=pl.UInt32), _seg=pl.col("segment") + offset
            )
        )
        offset += int(table.select(pl.col("segment").max()).item() or 0) + 1
    merged = pl.concat(pieces, rechunk=False)  # the tables' columns, not copied
    first = first_copies(merged)
    if not first.all():  # a copy of the whole table, unless there is nothing to remove
        merged = merged.filter(first)
    merged = merged.with_columns(segment=pl.col("_seg").rank("dense").cast(pl.Int32) - 1)
    if by_position:
        known = [None if path is _VARIES else path for path in paths]
        source = pl.lit(pl.Series(known, dtype=pl.String)).gather(pl.col("_file"))
        merged = merged.with_columns(source=source)
    return merged.select(tables[0].columns)
