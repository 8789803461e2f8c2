"""Which runs a command reports when its sources hold several (`loganalyzer.identity`):
every one with `--split-runs`, the N-th listed with `--run N`, else the one there must be;
and the file each run's output goes to."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from loganalyzer.errors import SeveralRunsError
from loganalyzer.render.numbers import plural

if TYPE_CHECKING:  # polars loads with the command, not with `--help`
    from loganalyzer.load import Loaded

T = TypeVar("T", bound="Loaded")


def choose_runs(
    runs: list[T],
    sources: Sequence[str],
    split_runs: bool = False,
    run_number: int | None = None,
    hint: str | None = None,
) -> list[T]:
    """All runs with `split_runs`, the N-th with `run_number`; else the one run there must be
    (several are refused with the runs listed, and `hint` if given instead of the options)."""
    if split_runs and run_number is not None:
        raise click.UsageError("give --split-runs or --run N, not both")
    if run_number is not None:
        if run_number > len(runs):
            raise click.BadParameter(
                f"{run_number}: the sources hold {plural(len(runs), 'run')}", param_hint="--run"
            )
        return [runs[run_number - 1]]
    if len(runs) > 1 and not split_runs:
        from loganalyzer.identity import describe_runs

        listed = describe_runs([loaded.run for loaded in runs])
        raise SeveralRunsError(listed, ", ".join(sources), *([hint] if hint else []))
    return runs


def run_output(output: Path, number: int, count: int) -> Path:
    """Where run `number` of `count` goes: OUTPUT itself for one run, else OUTPUT's name with
    `-runN` before its extension (report-run2.html, steps-run2.csv)."""
    if count == 1:
        return output
    return output.with_name(f"{output.stem}-run{number}{output.suffix}")
