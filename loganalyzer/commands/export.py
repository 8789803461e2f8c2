"""`loganalyzer export`: the run's tidy tables for other tools, with the config beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from loganalyzer.commands.analysed import Settings, analysis_options, summarise
from loganalyzer.commands.options import run_option, split_runs_option
from loganalyzer.commands.runs import run_output
from loganalyzer.errors import InputError, UsageProblem
from loganalyzer.secrets import mask_frame, mask_text, mask_value, run_secrets
from loganalyzer.terminal import echo

if TYPE_CHECKING:  # polars loads with the command, not with `--help`
    import polars as pl

    from loganalyzer.model import Run

FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The file to write; its extension (.parquet, .csv, .jsonl) picks the format.",
)
@click.option(
    "--to", type=click.Choice(sorted(set(FORMATS.values()))), help="The format, whatever the name."
)
@click.option(
    "--metrics",
    is_flag=True,
    help="Write the long metrics table (iteration, name, value, source, rank, line) instead "
    "of the per-iteration table.",
)
@split_runs_option("export each, to OUTPUT's name + -runN (steps-run2.csv)")
@run_option
@analysis_options
def export(
    sources: tuple[str, ...],
    output: Path,
    to: str | None,
    metrics: bool,
    split_runs: bool,
    run_number: int | None,
    settings: Settings,
) -> None:
    """Write a run's per-iteration table (or, with --metrics, its long metrics table) to
    Parquet, CSV or JSON lines, with the data model's columns in order; the config, each
    value with its provenance, goes beside it as OUTPUT's name + .config.json. The
    per-iteration table ends with what the report draws of each record, as the summary
    works it out (the model and hardware options as for `summary`): tflops_per_gpu and mfu
    at the record's own step time, slow_kind and cause of the slow step it is in, warmup.
    Sources that hold several runs are refused with the runs listed (exit 1): pick one with
    --run N, or export each with --split-runs.

    \b
    Examples:
      loganalyzer export logs/ -o run.parquet
      loganalyzer export slurm-1234.out -o steps.csv
      loganalyzer export logs/ --metrics -o metrics.jsonl
      loganalyzer export benchmarks/ --split-runs -o steps.csv   # steps-run1.csv, ...
    """
    kind = to or FORMATS.get(output.suffix.lower())
    if kind is None:
        raise UsageProblem(
            f"{output}: cannot tell the format from the extension; name it .parquet, .csv or "
            ".jsonl, or pass --to"
        )
    from loganalyzer.analysis.per_record import per_record
    from loganalyzer.identity import describe_runs

    summarised = summarise(
        sources,
        settings,
        split_runs,
        run_number,
        hint="Pick one with --run N, or export each with --split-runs.",
    )
    described = describe_runs([loaded.run for loaded, _ in summarised])
    for number, (loaded, document) in enumerate(summarised, 1):
        path = run_output(output, number, len(summarised))
        run = loaded.run
        frame = run.metrics.lazy() if metrics else per_record(run.table.lazy(), document)
        rows, config_path = _write(run, frame, path, kind)
        if not settings.quiet:
            which = f": run {number} of {len(summarised)}, {described[number - 1]}"
            echo(
                f"wrote {path} ({rows} rows) and {config_path}{which if split_runs else ''}",
                err=True,
            )


def _write(run: Run, frame: pl.LazyFrame, output: Path, kind: str) -> tuple[int, Path]:
    """`frame` (the run's table or metrics table) as `kind`, the run's config beside it; the
    rows written and the config's path."""
    config_path = output.with_name(output.name + ".config.json")
    import polars as pl

    planted = run_secrets(run)
    try:
        # streamed: a spilled table is never held; its paths and metric names masked
        rows = _sink(mask_frame(frame, planted).lazy(), output, kind)
        config_path.write_text(json.dumps(config_document(run), indent=2, default=str) + "\n")
    except OSError as exc:
        raise InputError(f"{output}: cannot write ({exc.strerror or exc})") from exc
    except pl.exceptions.ComputeError as exc:  # how polars' parquet sink reports a full disk
        raise InputError(f"{output}: cannot write ({_os_reason(output) or exc})") from exc
    return rows, config_path


def _os_reason(output: Path) -> str | None:
    """Why the system refused a write to `output`, where polars names only the part of the
    file it was writing (a full device met at the Parquet footer reads "Invalid thrift:
    transport error"): one byte appended to the file the table left unfinished, and the
    error the system gives, if any."""
    try:
        with output.open("ab") as file:
            file.write(b"\0")
            file.flush()
    except OSError as exc:
        return exc.strerror
    return None


def _sink(frame: pl.LazyFrame, output: Path, kind: str) -> int:
    """Write a lazily scanned table as `kind` a batch at a time; the rows written."""
    import polars as pl

    if kind == "parquet":
        frame.sink_parquet(output)
    elif kind == "csv":
        frame.sink_csv(output)
    else:
        frame.sink_ndjson(output)
    return int(frame.select(pl.len()).collect(engine="streaming").item())


def config_document(run: Run) -> dict[str, object]:
    """The config as JSON: every value with the kind, file and line it came from; credentials
    masked (`loganalyzer.secrets`)."""
    planted = run_secrets(run)
    return {
        "framework": run.framework,
        "sources": [
            {"path": mask_text(s.path, planted), "format": s.format, "records": s.records}
            for s in run.sources
        ],
        "config": {
            name: {
                "value": mask_value(name, value.value, planted),
                "provenance": {
                    "kind": value.provenance.kind,
                    "source": value.provenance.source,
                    "line": value.provenance.line,
                },
            }
            for name, value in sorted(run.config.items())
        },
    }
