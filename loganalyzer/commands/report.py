"""`loganalyzer report`: the self-contained HTML report of one run."""

from __future__ import annotations

from pathlib import Path

import click

from loganalyzer.commands.analysed import Settings, analysis_options, summarise
from loganalyzer.errors import InputError


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
@analysis_options
def report(
    sources: tuple[str, ...], output: Path, generated_at: str | None, settings: Settings
) -> None:
    """Write the HTML report of a run: one file, readable offline, for a postmortem.

    SOURCES and the options are those of `summary`; every figure in the report is the one
    `summary --json` gives. Charts are interactive (zoom, pan, hover) and downsampled to
    a few thousand points that keep every slow step, restart and the first and last record.

    \b
    Examples:
      loganalyzer report slurm-1234.out --gpu h100-sxm -o report.html
      loganalyzer report logs/ --gpu h100-sxm -o postmortem.html --generated-at 2024-05-01
    """
    from loganalyzer.render.html import render_html  # jinja2 and plotly.js: only here
    from loganalyzer.render.view import build_view

    loaded, document = summarise(sources, settings)
    page = render_html(build_view(document, loaded.run, generated_at=generated_at))
    try:
        output.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{output}: cannot write the report ({exc.strerror or exc})") from exc
    if not settings.quiet:
        click.echo(f"wrote {output} ({len(page.encode()) / 1e6:.1f} MB)", err=True)
