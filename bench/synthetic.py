"""The synthetic runs of the analysis and report stages, written once per harness run as Arrow
IPC files: each measured child reads them in a fraction of a second instead of building them
again (seconds for 1,000,000 records, in every run of every command: time that measures
nothing)."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def save(folder: Path, table: pl.DataFrame, metrics: pl.DataFrame) -> Path:
    """Write a run's per-iteration table and long metrics table under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    table.write_ipc(folder / "table.arrow")
    metrics.write_ipc(folder / "metrics.arrow")
    return folder


def load(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tables `save` wrote."""
    return pl.read_ipc(folder / "table.arrow"), pl.read_ipc(folder / "metrics.arrow")
