"""`loganalyzer report`: the self-contained HTML report of one run (or of each run)."""

from __future__ import annotations

from pathlib import Path

import click

from loganalyzer.commands.analysed import Settings, analysis_options, summarise
from loganalyzer.commands.options import run_option, split_runs_option
from loganalyzer.commands.runs import run_output
from loganalyzer.errors import InputError
from loganalyzer.terminal import echo


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write.",
)
@click.option(
    "--generated-at",
    metavar="TEXT",
    help="A date to print in the footer (none by default, so the same input gives the same bytes).",
)
@split_runs_option("write a report for each, to OUTPUT's name + -runN")
@run_option
@analysis_options
def report(
    sources: tuple[str, ...],
    output: Path,
    generated_at: str | None,
    split_runs: bool,
    run_number: int | None,
    settings: Settings,
) -> None:
    """Write the HTML report of a run: one file, readable offline, for a postmortem.

    SOURCES and the options are those of `summary`; every figure in the report is the one
    `summary --json` gives. Charts are interactive (zoom, pan, hover) and downsampled to
    a few thousand points that keep every slow step, restart and the first and last record.
    Sources that hold several runs are refused with the runs listed (exit 1): pick one with
    --run N, or write a report for each with --split-runs.

    \b
    Examples:
      loganalyzer report slurm-1234.out --gpu h100-sxm -o report.html
      loganalyzer report logs/ --gpu h100-sxm -o postmortem.html --generated-at 2024-05-01
      loganalyzer report benchmarks/ --split-runs -o bench.html   # bench-run1.html, ...
      loganalyzer report wandb:my-team/llm/3x7k2p9q --refresh -o llm.html
    """
    from loganalyzer.identity import describe_runs
    from loganalyzer.render.html import render_html  # jinja2 and plotly.js: only here
    from loganalyzer.render.view import build_view

    summarised = summarise(
        sources,
        settings,
        split_runs,
        run_number,
        hint="Pick one with --run N, or write a report for each with --split-runs.",
    )
    described = describe_runs([loaded.run for loaded, _ in summarised])
    for number, (loaded, document) in enumerate(summarised, 1):
        line = described[number - 1]
        page = render_html(build_view(document, loaded.run, generated_at=generated_at))
        path = run_output(output, number, len(summarised))
        try:
            path.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot write the report ({exc.strerror or exc})") from exc
        if not settings.quiet:
            size = f"{len(page.encode()) / 1e6:.1f} MB"
            which = f": run {number} of {len(summarised)}, {line}" if split_runs else ""
            echo(f"wrote {path} ({size}){which}", err=True)
