"""`loganalyzer compare`: two or more runs side by side."""

from __future__ import annotations

import json
from pathlib import Path

import click

from loganalyzer.commands.analysed import Settings, analysis_options, summarise
from loganalyzer.errors import InputError, UsageProblem
from loganalyzer.terminal import echo

# What to do with a SOURCE that holds several runs.
ONE_RUN_EACH = "compare takes one run per SOURCE: name each run's files as a SOURCE of its own."


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--label",
    multiple=True,
    help="A name for each run, in order (default: the file or directory name).",
)
@click.option(
    "--x",
    "x_axis",
    type=click.Choice(["iteration", "tokens", "time"]),
    default="iteration",
    show_default=True,
    help="The charts' shared axis.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the comparison as an HTML file too.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--all",
    "every_config",
    is_flag=True,
    help="List every config difference, not only those that change FLOPs or parallelism.",
)
@click.option("--generated-at", metavar="TEXT", help="A date for the HTML file's footer.")
@analysis_options
def compare(
    sources: tuple[str, ...],
    label: tuple[str, ...],
    x_axis: str,
    output: Path | None,
    as_json: bool,
    every_config: bool,
    generated_at: str | None,
    settings: Settings,
) -> None:
    """Compare runs: the largest difference and the facts that likely explain it, each run's
    identity with what differs marked, the iterations logged and the headline figures side
    by side (per iteration where the logs differ in length) with differences and ratios
    against the first run, the config values that differ (those that change FLOPs or
    parallelism first; --all lists the rest), which run is faster and which lost the most
    time. Each SOURCE is one run (a log file, a run directory or a W&B run); one that holds
    several runs is refused with the runs listed (exit 1). The model and hardware options
    apply to every run.

    \b
    Examples:
      loganalyzer compare before/ after/ --gpu h100-sxm
      loganalyzer compare a.log b.log --label baseline --label fused-adam -o compare.html
      loganalyzer compare a.log b.log --json
      loganalyzer compare wandb:team/llm/run1 wandb:team/llm/run2 --refresh
    """
    from loganalyzer.render.compare import (
        RunInput,
        build_compare,
        compare_json,
        render_compare_text,
    )

    if len(sources) < 2:
        raise UsageProblem("compare needs at least two runs")
    if label and len(label) != len(sources):
        raise UsageProblem(f"{len(label)} --label given for {len(sources)} runs; give one per run")
    names = label or tuple(Path(s).name or s for s in sources)
    runs = []
    for name, source in zip(names, sources, strict=True):
        [(loaded, document)] = summarise([source], settings, hint=ONE_RUN_EACH)
        runs.append(RunInput(name, document, loaded.run))
    view = build_compare(runs, x_axis=x_axis, generated_at=generated_at)  # type: ignore[arg-type]
    if as_json:
        echo(json.dumps(compare_json(view), indent=2, allow_nan=False))
    else:
        echo(render_compare_text(view, every_config=every_config))
    if output is not None:
        from loganalyzer.render.html import render_compare_html

        page = render_compare_html(view)
        try:
            output.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{output}: cannot write ({exc.strerror or exc})") from exc
        if not settings.quiet:
            echo(f"wrote {output} ({len(page.encode()) / 1e6:.1f} MB)", err=True)
