"""`loganalyzer export`: the run's tidy tables for other tools, with the config beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from loganalyzer.commands.options import format_option
from loganalyzer.errors import InputError, UsageProblem
from loganalyzer.registry import load_registry
from loganalyzer.render.escape import terminal_safe

if TYPE_CHECKING:  # polars loads with the command, not with `--help`
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
@format_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def export(
    sources: tuple[str, ...],
    output: Path,
    to: str | None,
    metrics: bool,
    forced_format: str | None,
    quiet: bool,
) -> None:
    """Write a run's per-iteration table (or, with --metrics, its long metrics table) to
    Parquet, CSV or JSON lines, with the data model's columns in order; the config, each
    value with its provenance, goes beside it as OUTPUT's name + .config.json.

    \b
    Examples:
      loganalyzer export logs/ -o run.parquet
      loganalyzer export slurm-1234.out -o steps.csv
      loganalyzer export logs/ --metrics -o metrics.jsonl
    """
    kind = to or FORMATS.get(output.suffix.lower())
    if kind is None:
        raise UsageProblem(
            f"{output}: cannot tell the format from the extension; name it .parquet, .csv or "
            ".jsonl, or pass --to"
        )
    from loganalyzer.load import load_run

    progress = None if quiet else (lambda message: click.echo(message, err=True))
    run = load_run(list(sources), load_registry(), forced_format, progress=progress).run
    frame = run.metrics if metrics else run.table
    config_path = output.with_name(output.name + ".config.json")
    try:
        if kind == "parquet":
            frame.write_parquet(output)
        elif kind == "csv":
            frame.write_csv(output)
        else:
            frame.write_ndjson(output)
        config_path.write_text(json.dumps(config_document(run), indent=2, default=str) + "\n")
    except OSError as exc:
        raise InputError(f"{output}: cannot write ({exc.strerror or exc})") from exc
    if not quiet:
        for warning in dict.fromkeys(run.warnings):  # what was skipped or assumed reading it
            click.echo(terminal_safe(f"warning: {warning}"), err=True)
        click.echo(f"wrote {output} ({frame.height} rows) and {config_path}", err=True)


def config_document(run: Run) -> dict[str, object]:
    """The config as JSON: every value with the kind, file and line it came from; credentials
    masked (`loganalyzer.secrets`)."""
    from loganalyzer.secrets import mask_value, planted_secrets

    planted = planted_secrets({name: value.value for name, value in run.config.items()})
    return {
        "framework": run.framework,
        "sources": [
            {"path": s.path, "format": s.format, "records": s.records} for s in run.sources
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
