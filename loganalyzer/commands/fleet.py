"""`loganalyzer fleet`: the report across every run of a dataset built by `index`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from loganalyzer.errors import InputError
from loganalyzer.terminal import echo

_FLEET_HELP = """Report across every run of DATASET (built by `loganalyzer index`).

How the runs ended (counted by ending and reason, with the GPU-hours they held and the
GPU-hours hung runs held before their ending), the ranks and hosts failures recur on, the
failed runs with their error line, one row per run (worst first), runs grouped by
configuration (model shape, parallelism, GPUs and device, precision, batch) with regressions
flagged (a run slower than its group's recent median beyond the group's noise, with the
config change that came with it), and the GPU-hours lost by cause across the fleet. Read
with polars lazy scans of the runs table.

\b
Examples:
  loganalyzer fleet fleet-index/
  loganalyzer fleet fleet-index/ -o fleet.html
  loganalyzer fleet fleet-index/ --json > fleet.json
  loganalyzer fleet s3://bucket/fleet-index --json
"""


@click.command("fleet", help=_FLEET_HELP)
@click.argument("dataset")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the HTML report here.")
@click.option("--json", "as_json", is_flag=True, help="Print loganalyzer.fleet/3 JSON.")
def fleet_command(dataset: str, output: str | None, as_json: bool) -> None:
    from loganalyzer.fleet.report import build_fleet, report_links
    from loganalyzer.render.fleet_html import render_fleet_html
    from loganalyzer.render.fleet_text import render_fleet_text
    from loganalyzer.render.fleet_view import build_view
    from loganalyzer.secrets import mask_secrets

    # masked here too: a dataset an older version wrote holds the config as logged
    document = mask_secrets(build_fleet(dataset))
    if output is not None:
        html = render_fleet_html(build_view(document, report_links(document, output)), dataset)
        try:
            Path(output).write_text(html, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{output}: cannot write ({exc.strerror or exc})") from exc
        echo(f"wrote {output}", err=True)
    if as_json:
        echo(json.dumps(document, indent=2, allow_nan=False, default=str))
    elif output is None:
        echo(render_fleet_text(document))
